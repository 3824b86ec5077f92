"""Profiler steps: the ``ProfilerStep#N`` annotations that ``torch.profiler`` writes per iteration.

Per rank, one row per step: ``rank``, ``step`` (N), ``start(us)`` and ``end(us)`` (the CPU-side
annotation, µs in the trace's own clock, as written: absolute epoch µs, kept for joins),
``duration(us)``, and ``start_rel(us)``/``end_rel(us)``: the same times in µs since the first event
of the job, i.e. of every rank in the table (of the rank itself in ``profiler_steps_rank``'s
own result), counted over the whole trace, not just the analysed window. Steps come from the CPU
annotations only (the GPU-side ``gpu_user_annotation`` copy of a step is not a second step); a step
annotated twice on a rank keeps its earliest annotation.

HTA 0.5.0's ``get_profiler_steps()`` returns only the sorted step numbers of the analysed window
(every rank, last step dropped): ``step_ids(profiler_steps(window))`` is that list. Names that start
with ``ProfilerStep`` but carry no ``#N`` are not steps (HTA gives them -1 and leaves them out).
A rank recorded without a profiler schedule has no rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from analysis.kineto.events import gpu_mask
from analysis.kineto.model import RankTrace, Trace
from analysis.metrics.timebase import Rounding, event_bounds_ns, ns_to_us

COLUMNS = ["rank", "step", "start(us)", "end(us)", "duration(us)", "start_rel(us)", "end_rel(us)"]
RELATIVE_COLUMNS = ["start_rel(us)", "end_rel(us)"]
# df.attrs key of a per-rank table: the rank's first event (ns, its own clock), for ``combine``.
FIRST_EVENT_NS = "first_event_ns"
# HTA's step name pattern (hta/analyzers/straggler.py), matched at the start of the name.
STEP_PATTERN = r"ProfilerStep\s*#\s*(\d+)"
GPU_ANNOTATION_CATS = ("gpu_user_annotation",)


def profiler_steps_rank(rt: RankTrace, *, rounding: Rounding = "exact") -> pd.DataFrame:
    """One rank's profiler steps, sorted by step number (see the module doc)."""
    ev = rt.events
    names = ev["name"]
    cats = names.cat.categories if isinstance(names.dtype, pd.CategoricalDtype) else names.unique()
    step_of_name = pd.Series(cats, index=cats, dtype=object).astype(str).str.match(STEP_PATTERN)
    step_names = step_of_name.index[step_of_name.to_numpy()]
    on_cpu = ~gpu_mask(ev) & ~ev["cat"].isin(GPU_ANNOTATION_CATS).to_numpy()
    rows = ev.loc[on_cpu & names.isin(step_names).to_numpy()]
    start, end = event_bounds_ns(
        rows["ts"].to_numpy(), rows["dur"].to_numpy(), rounding,
        float_timestamps=rt.meta.float_timestamps,
    )
    steps = (
        rows["name"].astype(str).str.extract(STEP_PATTERN, expand=False).astype("int64").to_numpy()
    )
    df = pd.DataFrame({"step": steps, "start": start, "end": end})
    df = df.sort_values(["step", "start"], kind="stable").drop_duplicates("step", keep="first")
    first_ns = int(ev["ts"].min()) if len(ev) else 0
    start_ns, end_ns = df["start"].to_numpy(), df["end"].to_numpy()
    out = pd.DataFrame(
        {
            "rank": np.full(len(df), rt.rank, dtype=np.int64),
            "step": df["step"].to_numpy(dtype=np.int64),
            "start(us)": ns_to_us(start_ns),
            "end(us)": ns_to_us(end_ns),
            "duration(us)": ns_to_us(end_ns - start_ns),
            # from integer ns, so exact where the absolute float µs are not
            "start_rel(us)": ns_to_us(start_ns - first_ns),
            "end_rel(us)": ns_to_us(end_ns - first_ns),
        }
    )
    out.attrs[FIRST_EVENT_NS] = first_ns if len(ev) else None
    return out


def combine(frames: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Per-rank tables → one table, ranks in the order given; relative times from the job's first event.

    The job's first event is the earliest first event of the ranks given (each rank's clock as
    written: ranks on different hosts are only as comparable as their clocks).
    """
    parts = [frames[r] for r in frames]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="int64" if c in ("rank", "step") else "float64")
                             for c in COLUMNS})
    firsts = [p.attrs.get(FIRST_EVENT_NS) for p in parts]
    job_first = min((f for f in firsts if f is not None), default=0)
    shifted = []
    for part, first in zip(parts, firsts, strict=True):
        part = part.copy()
        offset_ns = (job_first if first is None else first) - job_first
        for col in RELATIVE_COLUMNS:  # back to integer ns (exact below 2**53 ns), shift, to µs
            ns = np.rint(part[col].to_numpy(dtype=np.float64) * 1000).astype(np.int64)
            part[col] = ns_to_us(ns + offset_ns)
        part.attrs = {}
        shifted.append(part)
    return pd.concat(shifted, ignore_index=True)[COLUMNS]


def step_ids(steps: pd.DataFrame) -> list[int]:
    """HTA's ``get_profiler_steps()`` form: the sorted distinct step numbers of a step table."""
    return sorted(int(s) for s in pd.unique(steps["step"]))


def profiler_steps(
    trace: Trace,
    *,
    ranks: Iterable[int] | int | str | None = "all",
    rounding: Rounding = "exact",
) -> pd.DataFrame:
    """The profiler steps of ``ranks`` (default: all; ``None``: the first rank), see the module doc."""
    return combine(
        {r: profiler_steps_rank(trace[r], rounding=rounding) for r in trace.select(ranks, default="all")}
    )
