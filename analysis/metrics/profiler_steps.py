"""Profiler steps: the ``ProfilerStep#N`` annotations that ``torch.profiler`` writes per iteration.

Per rank, one row per step: ``rank``, ``step`` (N), ``start(us)`` and ``end(us)`` (the CPU-side
annotation, µs in the trace's own clock, as written) and ``duration(us)``. Steps come from the CPU
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
from analysis.kineto.model import STEP_PATTERN, RankTrace, Trace
from analysis.metrics.timebase import Rounding, event_bounds_ns, ns_to_us

COLUMNS = ["rank", "step", "start(us)", "end(us)", "duration(us)"]
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
    return pd.DataFrame(
        {
            "rank": np.full(len(df), rt.rank, dtype=np.int64),
            "step": df["step"].to_numpy(dtype=np.int64),
            "start(us)": ns_to_us(df["start"].to_numpy()),
            "end(us)": ns_to_us(df["end"].to_numpy()),
            "duration(us)": ns_to_us(df["end"].to_numpy() - df["start"].to_numpy()),
        }
    )


def combine(frames: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Per-rank tables → one table, ranks in the order given."""
    parts = [frames[r] for r in frames]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="int64" if c in ("rank", "step") else "float64")
                             for c in COLUMNS})
    return pd.concat(parts, ignore_index=True)[COLUMNS]


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
