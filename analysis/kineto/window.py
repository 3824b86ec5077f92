"""The window of a trace that the analyses look at: complete profiler steps only.

The last ``ProfilerStep`` of a trace is usually cut off when the profiler stops, so HTA (0.5.0) drops
it by default and so do we, with the same rule:

- when the traces contain at most one distinct ``ProfilerStep#N`` name, nothing is dropped;
- otherwise, per rank, CPU events are kept if they start before the last profiler step starts
  (``include_last_profiler_step=True``: if they start no later than the last step ends), and GPU
  events are kept if a kept CPU event carries their correlation id (i.e. they were launched inside the
  window). GPU events with no launching CPU event in the trace are dropped, as in HTA.

Deliberate differences from HTA: a rank that has no ProfilerStep at all (while others do) is kept
whole, where HTA empties it; and a GPU event is kept once even if several CPU events share its
correlation id, where HTA's join would duplicate it. Kept rows stay in file order with their original
index labels (``collectives.event`` still points at them).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from analysis.kineto.events import gpu_mask
from analysis.kineto.model import RankTrace, Trace

STEP_MARKER = "ProfilerStep"


def step_names(rt: RankTrace) -> set[str]:
    names = rt.events["name"]
    cats = names.cat.categories if hasattr(names, "cat") else names.unique()
    return {c for c in cats if isinstance(c, str) and STEP_MARKER in c}


def rank_window(rt: RankTrace, step_names: set[str], include_last_profiler_step: bool) -> RankTrace:
    """One rank restricted to the analysed steps (see the module docstring)."""
    ev = rt.events
    gpu = gpu_mask(ev)
    cpu = ~gpu
    is_step = cpu & ev["name"].isin(step_names).to_numpy()
    if not is_step.any():
        return rt
    ts = ev["ts"].to_numpy()
    if include_last_profiler_step:
        last_end = (ts + ev["dur"].to_numpy())[is_step].max()
        keep_cpu = cpu & (ts <= last_end)
    else:
        last_start = ts[is_step].max()
        keep_cpu = cpu & (ts < last_start)
    corr = ev["correlation"].to_numpy()
    keep_gpu = gpu & np.isin(corr, corr[keep_cpu])
    return replace(rt, events=ev.loc[keep_cpu | keep_gpu])


def profiler_step_window(trace: Trace, include_last_profiler_step: bool = False) -> Trace:
    """The trace restricted to its complete profiler steps, HTA's default view of a trace."""
    names: set[str] = set()
    for rt in trace.values():
        names |= step_names(rt)
    if len(names) <= 1:
        return trace
    return Trace(
        {r: rank_window(rt, names, include_last_profiler_step) for r, rt in trace.items()},
        source=trace.source,
        skipped=trace.skipped,
    )
