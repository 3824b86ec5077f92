"""The TensorBoard plugin's overview: each profiler step split into seven categories (µs).

Per rank and plugin step (:mod:`.plugin_steps`: every ``ProfilerStep#N``, the last included,
device-side on 2021-schema traces), the step's span ``[start, end)`` is partitioned by priority:
time covered by a GPU kernel is ``kernel_us``; of the rest, time covered by a memcpy is
``memcpy_us``, then memset (``memset_us``), collectives (``communication_us``: NCCL/gloo kernels and
annotations), runtime calls (``runtime_us``; 2021 schema only, see :mod:`.plugin_steps`), DataLoader
``__next__`` (``dataloader_us``), CPU operators (``cpu_exec_us``), and whatever no such event covers
(``other_us``). ``total_us`` = end − start = the sum of the eight. All events on the rank count
(every GPU and stream, every thread). Window: every profiler step of the trace (HTA's
``include_last_profiler_step=True``); steps are those of the plugin, so a trace whose step
annotations are copied onto the GPU timeline has two rows per step number, as the plugin shows.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.kineto.model import RankTrace
from analysis.metrics.tensorboard.plugin_steps import ROLES, concat_parts, plugin_view
from analysis.metrics.tensorboard.ranges import lengths_within, union

COLUMNS = ["rank", "step", "kernel_us", "memcpy_us", "memset_us", "runtime_us", "dataloader_us",
           "cpu_exec_us", "other_us", "total_us", "communication_us"]


def step_time_breakdown_rank(rt: RankTrace) -> pd.DataFrame:
    view = plugin_view(rt)
    steps = view.steps
    starts, ends = steps["start"].to_numpy(float), steps["end"].to_numpy(float)
    # by priority: role i's time in a step is |roles 0..i| - |roles 0..i-1| inside the step
    covered = (np.zeros(0), np.zeros(0))
    before = np.zeros(len(steps))
    columns = {"rank": np.full(len(steps), rt.rank, dtype=np.int64),
               "step": steps["name"].astype(int).to_numpy(np.int64)}
    for role in ROLES:
        covered = union(covered, view.roles[role])
        now = lengths_within(covered, starts, ends)
        columns[f"{role}_us"] = now - before
        before = now
    columns["other_us"] = (ends - starts) - before
    columns["total_us"] = ends - starts
    return pd.DataFrame(columns, columns=COLUMNS)


def combine(parts: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    return concat_parts(parts, COLUMNS)


def shares(result: pd.DataFrame) -> pd.DataFrame:
    """Per rank: each category's share of all steps' time (%), the plugin's "average step" pie."""
    cols = [c for c in COLUMNS if c.endswith("_us") and c != "total_us"]
    sums = result.groupby("rank")[cols + ["total_us"]].sum()
    out = sums[cols].div(sums["total_us"].where(sums["total_us"] > 0), axis=0) * 100
    return out.rename(columns=lambda c: c.replace("_us", "_pct")).reset_index()


def headline(result: pd.DataFrame) -> pd.DataFrame:
    s = shares(result)
    return s[["rank", "dataloader_pct", "runtime_pct"]].rename(
        columns={"dataloader_pct": "tb_dataloader_pct", "runtime_pct": "tb_runtime_pct"})
