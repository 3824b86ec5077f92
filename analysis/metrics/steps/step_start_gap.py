"""Step start gaps: how long each profiler step runs on the CPU before it launches any GPU work.

Per rank and profiler step (CPU-side ``ProfilerStep#N`` annotations, ``analysis.kineto.steps``;
the whole trace, last step included):

- ``step``, ``duration_us``: the step annotation's duration (µs);
- ``first_launch_us``: time from the step's start to the first CUDA runtime/driver call that
  starts inside it (µs); the whole step when it launches nothing;
- ``first_launch_pct``: that gap as a % of the step;
- ``dataloader_us``: time inside the step covered by events whose name mentions ``DataLoader``
  (``enumerate(DataLoader)#...__next__``, recorded by ``torch.profiler``), 0 when there are none.

A long gap at the start of every step, with the GPU idle meanwhile, is the signature of a data
loading stall: the CPU is fetching or preparing the batch before it can launch the step's work.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.kineto.events import gpu_mask, name_mask, runtime_mask
from analysis.kineto.model import RankTrace
from analysis.kineto.steps import profiler_steps
from analysis.metrics.intervals import merge

COLUMNS = ["rank", "step", "duration_us", "first_launch_us", "first_launch_pct", "dataloader_us"]


def step_start_gap_rank(rt: RankTrace) -> pd.DataFrame:
    """One rank's rows (see the module doc)."""
    steps = profiler_steps(rt)
    ev = rt.events
    ts = ev["ts"].to_numpy()
    calls = np.sort(ts[runtime_mask(ev) & ~gpu_mask(ev)])
    loader = name_mask(ev, lambda s: s.str.contains("DataLoader", regex=False)) & ~gpu_mask(ev)
    l_start, l_end = merge(ts[loader], ts[loader] + ev["dur"].to_numpy()[loader])
    rows = []
    for step, start, dur in zip(steps["step"], steps["ts"], steps["dur"], strict=True):
        end = start + dur
        i = np.searchsorted(calls, start, side="left")
        first = calls[i] - start if i < len(calls) and calls[i] < end else dur
        covered = np.clip(np.minimum(l_end, end) - np.maximum(l_start, start), 0, None).sum()
        rows.append((rt.rank, int(step), dur / 1000.0, first / 1000.0,
                     100.0 * first / dur if dur > 0 else np.nan, covered / 1000.0))
    return pd.DataFrame(rows, columns=COLUMNS).astype({"rank": "int64", "step": "int64"})


def combine(parts: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Per-rank rows → one table, ranks in the order asked."""
    frames = [df for df in parts.values() if len(df)]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="int64" if c in ("rank", "step") else "float64")
                             for c in COLUMNS})
    return pd.concat(frames, ignore_index=True)[COLUMNS]
