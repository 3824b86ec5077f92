"""The window of a trace that the analyses look at: complete profiler steps (or a serving engine's
steady-state iterations), and which GPU events.

**Window source** (``window``): ``"steps"`` cuts at profiler steps as below; ``"iterations"`` cuts
at the serving engine's steady-state iterations (``analysis.kineto.iterations``): per rank, CPU
events are kept if they start inside ``[start of the first steady iteration, end of the last]``
(warm-up left out), and a rank without iterations keeps all its CPU events, as a rank without
steps does; ``"auto"`` (the default) is ``"steps"`` when any rank has a profiler step, else
``"iterations"`` (an inference trace has no ProfilerStep; its analyses then describe the
engine's iterations, not the gaps around them). The iteration window always ends with the last iteration
(``include_last_profiler_step`` is about profiler steps only). The GPU events are chosen by the same rule
(below) in both cases, the iterations counting as the steps.

**Steps.** The last ``ProfilerStep`` of a trace is usually cut off when the profiler stops, so HTA
(0.5.0) drops it by default and so do we, with the same rule. Step boundaries are the CPU-side
``ProfilerStep#N`` annotations (``analysis.kineto.steps``; the GPU-side copies never count):

- when the traces contain at most one distinct profiler step, no CPU event is dropped;
- otherwise, per rank, CPU events are kept if they start before the last profiler step starts
  (``include_last_profiler_step=True``: if they start no later than the last step ends).

Under ``gpu_events="hta"`` (the HTA preset) "the last profiler step" is HTA's: the latest start
(end) over every event HTA reads as a CPU event whose name contains ``ProfilerStep``. Recent
PyTorch versions also write a GPU-side copy of each step annotation (``gpu_user_annotation``,
no stream arg, so a CPU event to HTA), which starts when the GPU reaches the step, after the
CPU-side one: HTA then keeps the CPU events of the last step launched before the GPU got there,
their GPU work, and the step's number (``get_profiler_steps()`` lists it). The default preset
keeps complete steps only (``docs/deviations.md``).

**GPU events** (``gpu_events``) -- a GPU event is *launched in the window* when a kept CPU event
(the runtime/driver call) carries its correlation id. A trace that starts mid-iteration begins with
GPU work whose launching calls happened before the profiler started: the tail of an uncaptured
iteration, with correlation ids that match no call in the trace (*unlaunched*).

- ``"launched"`` (the default preset's choice): only GPU events launched in the window, whatever
  the number of steps. TraceLens's view; the analysed time then starts at the first captured launch.
- ``"all"``: GPU events launched in the window plus every unlaunched one.
- ``"hta"`` (the ``kernel_patterns="hta"`` preset's choice): HTA 0.5.0's rule exactly -- with at
  most one distinct step everything is kept (unlaunched events included), otherwise only GPU events
  launched in the window (so the same events count or not depending on the number of steps).

Other profilers' files (``analysis.formats``: nsys, XPlane, rocprofv3) record the GPU work of the
capture range, and some record no launch calls at all (a rocprofv3 kernel-trace-only run): for
them ``"launched"`` means ``"all"``, every GPU event counts (TraceLens's rule for XPlane too).

GPU events are linked to their launches by correlation id, not by flow (``ac2g``) markers: some
ROCm memsets carry a correlation id and an ``f`` flow marker but no ``s`` marker (TraceLens, which
follows flows, loses them). Deliberate differences from HTA: a rank that has no ProfilerStep at all
(while others do) keeps all its CPU events, where HTA empties it; and a GPU event is kept once even
if several CPU events share its correlation id, where HTA's join would duplicate it. Kept rows stay
in file order with their original index labels (``collectives.event`` still points at them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from analysis.errors import ConfigError
from analysis.kineto.events import gpu_mask, name_mask
from analysis.kineto.iterations import steady_window
from analysis.kineto.model import RankTrace, Trace
from analysis.kineto.steps import profiler_steps, step_numbers

GpuEvents = Literal["launched", "all", "hta"]
WindowSource = Literal["auto", "steps", "iterations"]
WINDOW_SOURCES = ("auto", "steps", "iterations")
# What a per-rank step runs over: the analysed window (complete profiler steps, chosen GPU events)
# or the whole trace.
Window = Literal["steps", "full"]
GPU_EVENT_CHOICES = ("launched", "all", "hta")


def check_gpu_events(gpu_events: str) -> GpuEvents:
    if gpu_events not in GPU_EVENT_CHOICES:
        raise ConfigError(f"gpu_events must be one of {GPU_EVENT_CHOICES}, not {gpu_events!r}")
    return gpu_events  # type: ignore[return-value]


def check_window(window: str) -> WindowSource:
    if window not in WINDOW_SOURCES:
        raise ConfigError(f"window must be one of {WINDOW_SOURCES}, not {window!r}")
    return window  # type: ignore[return-value]


def uses_iterations(window: WindowSource, n_steps: int) -> bool:
    """Whether the window is cut at serving iterations: ``window`` given, ``n_steps`` the number of
    distinct profiler steps over all ranks (see the module docstring)."""
    return window == "iterations" or (window == "auto" and n_steps == 0)


def rank_window(
    rt: RankTrace, n_steps: int, include_last_profiler_step: bool, gpu_events: GpuEvents = "hta",
    window: WindowSource = "auto",
) -> RankTrace:
    """One rank restricted to the analysed window (see the module docstring). ``n_steps`` is the
    number of distinct profiler steps over *all* ranks."""
    return apply_window(
        rt, window_rows(rt, n_steps, include_last_profiler_step, gpu_events, window)
    )


def window_rows(
    rt: RankTrace, n_steps: int, include_last_profiler_step: bool, gpu_events: GpuEvents = "hta",
    window: WindowSource = "auto",
) -> np.ndarray | None:
    """The rows of ``rt.events`` that :func:`rank_window` keeps, as a boolean mask; None when it
    keeps the whole rank as it is."""
    check_gpu_events(gpu_events)
    check_window(window)
    if gpu_events == "launched" and rt.meta.source_format != "kineto":
        gpu_events = "all"  # see the module docstring
    ev = rt.events
    cpu = ~gpu_mask(ev)
    if uses_iterations(window, n_steps):
        span = steady_window(rt)
        windowed = span is not None
        if not windowed:
            return _with_gpu_events(rt, cpu, False, gpu_events)
        ts = ev["ts"].to_numpy()
        return _with_gpu_events(rt, cpu & (ts >= span[0]) & (ts <= span[1]), True, gpu_events)
    steps = profiler_steps(rt)
    windowed = n_steps > 1 and len(steps) > 0
    if not windowed:
        return _with_gpu_events(rt, cpu, False, gpu_events)
    ts = ev["ts"].to_numpy()
    last_start, last_end = (
        _hta_step_bounds(rt) if gpu_events == "hta"
        else (int(steps["ts"].max()), int((steps["ts"] + steps["dur"]).max()))
    )
    if include_last_profiler_step:
        keep_cpu = cpu & (ts <= last_end)
    else:
        keep_cpu = cpu & (ts < last_start)
    return _with_gpu_events(rt, keep_cpu, True, gpu_events)


def _hta_step_bounds(rt: RankTrace) -> tuple[int, int]:
    """HTA 0.5.0's cut: the latest start and the latest end over the events it reads as CPU
    events (not :func:`~analysis.kineto.events.gpu_mask`) whose name contains ``ProfilerStep``.
    Kineto's GPU-side copy of each step (``gpu_user_annotation``, written without a stream arg)
    is one of them, and it starts later than the CPU-side step: see the module docstring."""
    ev = rt.events
    rows = ~gpu_mask(ev) & name_mask(ev, lambda s: s.str.contains("ProfilerStep", regex=False))
    ts = ev["ts"].to_numpy()[rows]
    end = ts + ev["dur"].to_numpy()[rows]
    return int(ts.max()), int(end.max())


def _with_gpu_events(
    rt: RankTrace, keep_cpu: np.ndarray, windowed: bool, gpu_events: GpuEvents
) -> np.ndarray | None:
    """The rows to keep: the CPU events ``keep_cpu`` and the GPU events the ``gpu_events`` rule
    picks for them (``windowed``: the window cut CPU events; see the module docstring); None
    when that is the whole rank."""
    if not windowed and gpu_events in ("hta", "all"):
        return None
    ev = rt.events
    gpu = gpu_mask(ev)
    corr = ev["correlation"].to_numpy()
    if gpu_events == "hta":
        keep_gpu = gpu & np.isin(corr, corr[keep_cpu])  # HTA's join, -1 included
    else:
        keep_gpu = gpu & (corr >= 0) & np.isin(corr, corr[keep_cpu & (corr >= 0)])
        if gpu_events == "all":
            keep_gpu |= gpu & unlaunched_mask(rt)
    return np.asarray(keep_cpu | keep_gpu, dtype=bool)


def apply_window(rt: RankTrace, rows: np.ndarray | None) -> RankTrace:
    """``rt`` restricted to the ``rows`` that :func:`window_rows` gave (None: ``rt`` itself)."""
    return rt if rows is None else replace(rt, events=rt.events.loc[rows])


def unlaunched_mask(rt: RankTrace) -> np.ndarray:
    """GPU events of ``rt`` whose correlation id matches no CPU-side event anywhere in the trace."""
    ev = rt.events
    gpu = gpu_mask(ev)
    corr = ev["correlation"].to_numpy()
    cpu_corr = corr[~gpu & (corr >= 0)]
    return gpu & ~np.isin(corr, cpu_corr)


@dataclass(frozen=True)
class WindowStats:
    """What the window did to one rank's GPU events (counts, and GPU time in ns)."""

    rank: int
    source: str
    gpu_events: int  # in the whole trace
    analysed_gpu_events: int  # in the window
    unlaunched: int  # no launching call anywhere in the trace
    unlaunched_ns: int  # their summed duration
    unlaunched_kept: int  # of those, how many the window keeps
    source_format: str = "kineto"
    steps: tuple[int, ...] = ()  # the profiler step numbers in the window (HTA's analysed steps)
    # a rank without profiler steps whose window is its steady-state serving iterations: the
    # launched GPU events left outside it (warm-up, before the first and after the last
    # steady iteration) and their GPU time
    outside_iterations: int = 0
    outside_iterations_ns: int = 0

    def note(self, gpu_events: str) -> str | None:
        """A one-line account of the unlaunched events, or None when there are none (or the file
        is not a Kineto trace: see the module docstring)."""
        if not self.unlaunched or self.source_format != "kineto":
            return None
        fate = "excluded" if not self.unlaunched_kept else "kept"
        return (
            f"{self.source}: rank {self.rank}: {self.unlaunched:,} GPU events "
            f"({self.unlaunched_ns / 1e6:.2f} ms of GPU time) have no launching call in the trace "
            f"(the tail of an iteration the profiler did not capture); {fate} "
            f"(gpu_events={gpu_events!r})"
        )


def window_stats(full: RankTrace, window: RankTrace) -> WindowStats:
    """Counts of ``full``'s GPU events: all, in ``window``, unlaunched, and unlaunched kept; and
    the profiler steps ``window`` keeps."""
    unlaunched = unlaunched_mask(full)
    kept = np.isin(full.events.index.to_numpy(), window.events.index.to_numpy())
    gpu = gpu_mask(full.events)
    outside = np.zeros(len(kept), bool)
    # CPU events cut from a rank without profiler steps: its window is its steady-state serving
    # iterations (with steps, or nothing cut, the launched GPU events are all in the window)
    if (~gpu & ~kept).any() and not len(profiler_steps(full)):
        outside = gpu & ~kept & ~unlaunched
    return WindowStats(
        rank=full.rank,
        source=full.meta.source,
        gpu_events=int(gpu_mask(full.events).sum()),
        analysed_gpu_events=int(gpu_mask(window.events).sum()),
        unlaunched=int(unlaunched.sum()),
        unlaunched_ns=int(full.events["dur"].to_numpy()[unlaunched].sum()),
        unlaunched_kept=int((unlaunched & kept).sum()),
        source_format=full.meta.source_format,
        steps=tuple(int(s) for s in profiler_steps(window)["step"]),
        outside_iterations=int(outside.sum()),
        outside_iterations_ns=int(full.events["dur"].to_numpy()[outside].sum()),
    )


def count_steps(traces) -> int:
    """Distinct profiler step numbers over ``traces`` (RankTraces)."""
    numbers: set[int] = set()
    for rt in traces:
        numbers |= step_numbers(rt)
    return len(numbers)


def profiler_step_window(
    trace: Trace, include_last_profiler_step: bool = False, gpu_events: GpuEvents = "hta",
    window: WindowSource = "steps",
) -> Trace:
    """The trace restricted to its complete profiler steps (or steady-state iterations, with
    ``window="iterations"`` or ``"auto"``) and the chosen GPU events; by default HTA 0.5.0's
    window (``gpu_events="hta"``, ``window="steps"``: a trace without steps is kept whole)."""
    n_steps = count_steps(trace.values())
    return Trace(
        {r: rank_window(rt, n_steps, include_last_profiler_step, gpu_events, window)
         for r, rt in trace.items()},
        source=trace.source,
        skipped=trace.skipped,
    )
