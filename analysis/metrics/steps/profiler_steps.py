"""Profiler steps: the ``ProfilerStep#N`` annotations that ``torch.profiler`` writes per iteration.

What a step is (CPU-side annotations only, ``#N`` required, earliest kept) is defined once in
``analysis.kineto.steps``. Per rank, one row per step:

- ``rank``, ``step`` (N);
- ``start(us)``, ``end(us)``: the annotation's bounds in the trace's own clock (absolute epoch µs as
  written, for joins with other tables);
- ``start_ms``, ``end_ms``: the same bounds in ms from the job's first profiler step start (the
  earliest step start over the ranks in the table), readable at a glance;
- ``duration(us)``.

HTA 0.5.0's ``get_profiler_steps()`` returns only the sorted step numbers of the analysed window
(every rank, last step dropped): ``combine_step_ids``. A rank recorded without a profiler schedule
has no rows.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.kineto.model import RankTrace
from analysis.kineto.steps import profiler_steps
from analysis.metrics.timebase import Rounding, event_bounds_ns, ns_to_us

COLUMNS = ["rank", "step", "start(us)", "end(us)", "start_ms", "end_ms", "duration(us)"]


def profiler_steps_rank(rt: RankTrace, *, rounding: Rounding = "exact") -> pd.DataFrame:
    """One rank's profiler steps, sorted by step number, bounds in int ns (``start``, ``end``)."""
    steps = profiler_steps(rt)
    start, end = event_bounds_ns(
        steps["ts"].to_numpy(), steps["dur"].to_numpy(), rounding,
        float_timestamps=rt.meta.float_timestamps,
    )
    return pd.DataFrame(
        {"rank": np.full(len(steps), rt.rank, dtype=np.int64),
         "step": steps["step"].to_numpy(dtype=np.int64), "start": start, "end": end}
    )


def combine(frames: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Per-rank steps → one table (ranks in the order given), times as in the module doc."""
    parts = [frames[r] for r in frames if len(frames[r])]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="int64" if c in ("rank", "step") else "float64")
                             for c in COLUMNS})
    df = pd.concat(parts, ignore_index=True)
    origin = int(df["start"].min())
    return pd.DataFrame(
        {
            "rank": df["rank"].to_numpy(dtype=np.int64),
            "step": df["step"].to_numpy(dtype=np.int64),
            "start(us)": ns_to_us(df["start"].to_numpy()),
            "end(us)": ns_to_us(df["end"].to_numpy()),
            "start_ms": (df["start"].to_numpy() - origin) / 1e6,
            "end_ms": (df["end"].to_numpy() - origin) / 1e6,
            "duration(us)": ns_to_us(df["end"].to_numpy() - df["start"].to_numpy()),
        }
    )[COLUMNS]


def combine_step_ids(frames: Mapping[int, pd.DataFrame]) -> list[int]:
    """HTA's ``get_profiler_steps()`` form: the sorted distinct step numbers over the ranks."""
    return sorted({int(s) for df in frames.values() for s in df["step"]})


def key_numbers(result: pd.DataFrame) -> list[tuple[str, str]]:
    """How many distinct profiler steps the trace holds, as a report card."""
    return [("profiler steps", str(result["step"].nunique()) if len(result) else "–")]
