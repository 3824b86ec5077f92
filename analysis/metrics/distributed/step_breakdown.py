"""Per-step breakdown across ranks: where each rank's profiler step went, and which rank was slowest.

Per rank and ``ProfilerStep`` (the analysed steps), in µs, over the step's span
[step start, step end) and the rank's GPU work (``analysis.metrics.kernel_types``):

- ``step_time_us``: the ``ProfilerStep`` annotation's duration;
- ``computation_us``: time some COMPUTATION kernel ran;
- ``exposed_comm_us``: time communication ran while no computation did;
- ``memory_us``: time memory copies/sets ran while neither of those did;
- ``other_us``: time other GPU work (neither of the three kinds) ran alone;
- ``idle_us`` = step time − time any GPU work ran, split by what ended each idle gap of the rank's
  GPU (all streams merged), with HTA's idle rule applied to the whole GPU: ``idle_host_wait_us`` if
  the call that launched the work ending the gap started after the gap began (the GPU waited for the
  CPU), else ``idle_kernel_wait_us`` if the gap is shorter than ``consecutive_kernel_delay`` µs
  (HTA's 30), else ``idle_other_us``. The gap after a rank's last GPU event, and every gap of a rank
  without GPU events (CPU-only traces), is ``other``.

The six parts add up to ``step_time_us``. ``combine`` adds, per step, ``step_slowest_rank`` (the rank
with the longest step; lowest rank on ties) and ``step_margin_us`` (its step time − the median over
ranks).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.kineto.model import RankTrace
from analysis.metrics.distributed.collectives import launch_calls
from analysis.metrics.intervals import time_by_state
from analysis.metrics.kernel_types import KernelPatterns, busy_intervals, classified_gpu_events

CONSECUTIVE_KERNEL_DELAY_US = 30  # HTA's default
PARTS = ["computation_us", "exposed_comm_us", "memory_us", "other_us", "idle_host_wait_us",
         "idle_kernel_wait_us", "idle_other_us"]
RANK_COLUMNS = ["rank", "step", "step_time_us", *PARTS, "idle_us"]
COLUMNS = [*RANK_COLUMNS, "step_slowest_rank", "step_margin_us"]
_KINDS = ("COMPUTATION", "COMMUNICATION", "MEMORY", "OTHER")


def step_breakdown_rank(
    rt: RankTrace,
    *,
    consecutive_kernel_delay: float = CONSECUTIVE_KERNEL_DELAY_US,
    patterns: str | KernelPatterns = "default",
    rounding="exact",
) -> pd.DataFrame:
    """One row per profiler step of one rank (``RANK_COLUMNS``, µs)."""
    steps = rt.profiler_steps()
    gpu = classified_gpu_events(rt, patterns, rounding)
    sets = [busy_intervals(rt, patterns, rounding, kind) for kind in _KINDS]
    gaps = _idle_gaps(rt, gpu, busy_intervals(rt, patterns, rounding),
                      consecutive_kernel_delay * 1000)
    rows = []
    for step, t0, dur in zip(steps["step"], steps["ts"], steps["dur"], strict=True):
        window = (np.array([t0]), np.array([t0 + dur]))
        # bit 4: inside the step; bits 0..3: the kinds, in priority order
        states = time_by_state([*sets, window])
        busy = {k: 0 for k in range(4)}
        for state, ns in states.items():
            if state & 0b10000 and state & 0b1111:
                busy[(state & -state).bit_length() - 1] += ns  # the lowest bit wins
        row = {"rank": rt.rank, "step": int(step), "step_time_us": dur / 1e3,
               "computation_us": busy[0] / 1e3, "exposed_comm_us": busy[1] / 1e3,
               "memory_us": busy[2] / 1e3, "other_us": busy[3] / 1e3}
        idle_total = dur - sum(busy.values())
        split = [int(np.clip(np.minimum(e, t0 + dur) - np.maximum(s, t0), 0, None).sum())
                 for s, e in gaps]
        split[2] = idle_total - split[0] - split[1]  # the rest: 'other', incl. the trailing gap
        row.update(idle_host_wait_us=split[0] / 1e3, idle_kernel_wait_us=split[1] / 1e3,
                   idle_other_us=split[2] / 1e3, idle_us=idle_total / 1e3)
        rows.append(row)
    return pd.DataFrame(rows, columns=RANK_COLUMNS)


def _idle_gaps(rt: RankTrace, gpu: pd.DataFrame, busy, delay_ns: float):
    """The gaps between the rank's merged GPU busy periods ``busy``, as (starts, ends) per idle
    category (host_wait, kernel_wait, other), each categorised by the work that ends it."""
    s, e = busy
    empty = (np.empty(0, np.int64), np.empty(0, np.int64))
    if s.size < 2:
        return [empty, empty, empty]
    g0, g1 = e[:-1], s[1:]
    # the first event (file order) starting where each busy period starts
    first = gpu.reset_index().drop_duplicates("start").set_index("start")
    ending = first.loc[g1]
    launch = launch_calls(rt, rt.events.loc[ending["index"], "correlation"].to_numpy())["ts"]
    launch = launch.to_numpy(dtype=np.float64)
    host = ~np.isnan(launch) & (np.nan_to_num(launch, nan=-np.inf) >= g0)
    short = ~host & ((g1 - g0) < delay_ns)
    other = ~host & ~short
    return [(g0[m], g1[m]) for m in (host, short, other)]


def combine(parts: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Per-rank rows → one table, with each step's slowest rank and its margin over the median."""
    frames = [parts[r] for r in sorted(parts) if len(parts[r])]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in COLUMNS})
    df = pd.concat(frames, ignore_index=True)
    by_step = df.groupby("step")["step_time_us"]
    slowest = df.sort_values(["step_time_us", "rank"], ascending=[False, True], kind="stable")
    slowest = slowest.drop_duplicates("step").set_index("step")
    df["step_slowest_rank"] = df["step"].map(slowest["rank"]).astype("int64")
    df["step_margin_us"] = df["step"].map(slowest["step_time_us"] - by_step.median())
    return df.sort_values(["step", "rank"], kind="stable").reset_index(drop=True)[COLUMNS]
