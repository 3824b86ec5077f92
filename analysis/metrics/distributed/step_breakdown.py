"""Per-step breakdown across ranks: where each rank's profiler step went, and which rank was slowest.

Per rank and ``ProfilerStep`` (the analysed steps), in µs. A step's GPU work is the GPU work
launched in it (its launch call starts within the step's span [step start, step end); GPU work
launched outside every step, or without a launch call in the trace, belongs to the step in which
it starts), **wherever it ran**:
work launched near a step's end that runs past it counts in that step, as on the critical path
(whose ``past_step_end_us`` it matches). An instant when the work of two steps ran counts once,
for the earlier step, so the steps' busy times add up to the rank's busy time over them.

- ``step_time_us``: the ``ProfilerStep`` annotation's duration;
- ``computation_us``: time some COMPUTATION kernel of the step ran (``analysis.metrics.kernel_types``);
- ``exposed_comm_us``: time its communication ran while no computation did;
- ``memory_us``: time its memory copies/sets ran while neither of those did;
- ``other_us``: time its other GPU work (neither of the three kinds) ran alone;
- ``past_step_end_us``: how far the step's GPU work runs past the step's end (0 if it does not);
- ``step_idle_us`` = step time − time any GPU work (of any step) ran within the step's span: the
  GPU's idle time over the **whole step**, all streams merged (before its first kernel and after
  its last included; unlike ``get_idle_time_breakdown``, which counts gaps between kernels per
  stream, see docs/idle.md), split by what ended each idle gap, with HTA's idle rule applied to
  the whole GPU: ``step_idle_host_wait_us`` if the call that launched the work ending the gap
  started after the gap began (the GPU waited for the CPU), else ``step_idle_kernel_wait_us`` if
  the gap is shorter than ``consecutive_kernel_delay`` µs (HTA's 30), else
  ``step_idle_other_us``. The gap after a rank's last GPU event, and every gap of a rank without
  GPU events (CPU-only traces), is ``other``.

Where no GPU work crosses a step's boundaries, the four busy parts and the idle time add up to
``step_time_us``; otherwise the busy parts are the step's own work (the part past its end
included, earlier steps' work running in it excluded). ``combine`` adds, per step,
``step_slowest_rank`` (the rank with the longest step; lowest rank on ties) and
``step_margin_us`` (its step time − the median over ranks).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.kineto.model import RankTrace
from analysis.metrics.distributed.collectives import launch_calls
from analysis.metrics.intervals import merge_intervals, time_by_state
from analysis.metrics.kernel_types import KernelPatterns, busy_intervals, classified_gpu_events

CONSECUTIVE_KERNEL_DELAY_US = 30  # HTA's default
PARTS = ["computation_us", "exposed_comm_us", "memory_us", "other_us", "step_idle_host_wait_us",
         "step_idle_kernel_wait_us", "step_idle_other_us"]  # idle: the whole step (docs/idle.md)
RANK_COLUMNS = ["rank", "step", "step_time_us", *PARTS, "step_idle_us", "past_step_end_us"]
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
    busy_all = busy_intervals(rt, patterns, rounding)
    gaps = _idle_gaps(rt, gpu, busy_all, consecutive_kernel_delay * 1000)
    t0s = steps["ts"].to_numpy(np.int64)
    t1s = t0s + steps["dur"].to_numpy(np.int64)
    owner = _launching_step(rt, gpu, t0s, t1s)
    kinds = gpu["kernel_type"].astype(str).to_numpy()
    start, end = gpu["start"].to_numpy(), gpu["end"].to_numpy()
    claimed = (np.empty(0, np.int64), np.empty(0, np.int64))  # earlier steps' work
    rows = []
    for i, (step, t0, t1) in enumerate(zip(steps["step"], t0s, t1s, strict=True)):
        dur = int(t1 - t0)
        mine = owner == i
        sets = [merge_intervals(start[mine & (kinds == k)], end[mine & (kinds == k)], rounding)
                for k in _KINDS]  # fmt: skip
        # bits 0..3: this step's work by kind, in priority order; bit 4: earlier steps' work
        busy = {k: 0 for k in range(4)}
        for state, ns in time_by_state([*sets, claimed]).items():
            if 0 < state < 0b10000:
                busy[(state & -state).bit_length() - 1] += ns  # the lowest bit wins
        claimed = merge_intervals(np.concatenate([claimed[0], start[mine]]),
                                  np.concatenate([claimed[1], end[mine]]), rounding)  # fmt: skip
        past = max(int(end[mine].max()) - int(t1), 0) if mine.any() else 0
        row = {"rank": rt.rank, "step": int(step), "step_time_us": dur / 1e3,
               "computation_us": busy[0] / 1e3, "exposed_comm_us": busy[1] / 1e3,
               "memory_us": busy[2] / 1e3, "other_us": busy[3] / 1e3}
        in_span = int(np.clip(np.minimum(busy_all[1], t1) - np.maximum(busy_all[0], t0), 0,
                              None).sum())  # fmt: skip
        idle_total = dur - in_span
        split = [int(np.clip(np.minimum(e, t1) - np.maximum(s, t0), 0, None).sum())
                 for s, e in gaps]
        split[2] = idle_total - split[0] - split[1]  # the rest: 'other', incl. the trailing gap
        row.update(step_idle_host_wait_us=split[0] / 1e3,
                   step_idle_kernel_wait_us=split[1] / 1e3,
                   step_idle_other_us=split[2] / 1e3, step_idle_us=idle_total / 1e3,
                   past_step_end_us=past / 1e3)
        rows.append(row)
    return pd.DataFrame(rows, columns=RANK_COLUMNS)


def _launching_step(rt: RankTrace, gpu: pd.DataFrame, t0s: np.ndarray, t1s: np.ndarray):
    """Per GPU event (row of ``gpu``): the position of the step whose span [start, end) holds its
    launch call's start, else (launched outside every step, or no launch call in the trace) the
    step in which the event starts; -1 for none. Steps are disjoint and in time order."""
    if len(gpu) == 0 or len(t0s) == 0:
        return np.full(len(gpu), -1)

    def step_at(t):
        i = np.searchsorted(t0s, t, side="right") - 1
        return np.where((i >= 0) & (t < t1s[np.maximum(i, 0)]), i, -1)  # NaN: no step

    launch = launch_calls(rt, rt.events.loc[gpu.index, "correlation"].to_numpy())["ts"]
    by_launch = step_at(launch.to_numpy(dtype=np.float64))
    return np.where(by_launch >= 0, by_launch, step_at(gpu["start"].to_numpy(dtype=np.float64)))


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
