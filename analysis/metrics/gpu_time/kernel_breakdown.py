"""GPU kernel breakdown: GPU time per kernel type (with overlaps) and the top kernels of each type.

Two tables, as HTA 0.5.0's ``get_gpu_kernel_breakdown`` returns them (times in µs):

- ``kernel_type_df`` [``kernel_type``, ``sum``, ``percentage``]: summed over ranks, the time during
  which exactly a given combination of kernel types runs ("COMPUTATION", "COMPUTATION overlapping
  COMMUNICATION", ...; unions of intervals, so concurrent kernels of one type count once), sorted
  by ``sum`` descending; ``percentage`` = 100 × sum / total, rounded to 1 decimal.
- ``all_kernel_df`` [``name``, ``sum (us)``, ``max (us)``, ``min (us)``, ``stddev``, ``mean (us)``,
  ``kernel_type``, ``rank``]: per rank and type, duration statistics of each kernel name; when a
  rank/type has more than ``num_kernels`` names, those past the ``duration_ratio`` quantile of the
  cumulative time or past the first ``num_kernels`` (by total time) are grouped as ``"others"``.
  ``stddev`` is the sample standard deviation (0 for a single kernel). Sorted by type, name, rank.

Types analysed: COMPUTATION, COMMUNICATION, and MEMORY when ``include_memory_kernels``.

The default preset deliberately differs from HTA 0.5.0 in places (kernel selection and
classification, exact ns, ...): docs/deviations.md, the kernel classification table, lists each with its test.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.kineto.model import RankTrace
from analysis.metrics.intervals import time_by_state
from analysis.metrics.kernel_types import (
    KernelPatterns,
    busy_intervals,
    classified_gpu_events,
    resolve_patterns,
)
from analysis.metrics.timebase import Rounding

STAT_NAMES = ["sum", "max", "min", "mean", "std"]
KERNEL_COLUMNS = ["name", "sum", "max", "min", "std", "mean", "kernel_type", "rank"]
RENAMED = {"sum": "sum (us)", "max": "max (us)", "min": "min (us)", "std": "stddev",
           "mean": "mean (us)"}


def analysed_types(include_memory_kernels: bool) -> list[str]:
    """Kernel types in HTA's order, which also orders the names of overlap combinations."""
    return ["COMPUTATION", "COMMUNICATION"] + (["MEMORY"] if include_memory_kernels else [])


def kernel_type_time(
    rt: RankTrace, patterns: KernelPatterns, types: list[str], rounding: Rounding
) -> pd.DataFrame:
    """[``kernel_type``, ``sum``] in ns: time per combination of concurrently running types; a
    combination that runs for no time has no row (kernels back to back; a type whose kernels all
    last 0 µs once rounded as HTA rounds)."""
    merged = [busy_intervals(rt, patterns, rounding, kind) for kind in types]
    by_state = {k: v for k, v in time_by_state(merged).items() if k > 0 and v > 0}
    if not by_state:
        return pd.DataFrame({"kernel_type": pd.Series(dtype="str"), "sum": pd.Series(dtype="int64")})
    # label each state by the names of the types whose bit is set, in HTA's order
    labels = [
        " overlapping ".join(k for b, k in enumerate(types) if state & (1 << b)) for state in by_state
    ]
    df = pd.DataFrame(
        {"kernel_type": pd.Series(labels, dtype="str"), "sum": np.fromiter(by_state.values(), np.int64)}
    )
    return df.groupby("kernel_type", as_index=False)["sum"].sum()


def kernel_stats(
    rows: pd.DataFrame, *, num_kernels: int, duration_ratio: float, hta_quirks: bool
) -> pd.DataFrame:
    """Per-name statistics of one rank/type's kernels (``dur`` in µs), top kernels kept."""
    stats = rows.groupby("name")["dur"].agg(STAT_NAMES).reset_index()
    stats = stats.sort_values(by=["sum"], ascending=False, ignore_index=True)
    stats = stats.fillna({"std": 0})
    if stats.shape[0] <= num_kernels:
        return stats
    cumsum = stats["sum"].cumsum()
    others = (cumsum > cumsum.quantile(duration_ratio)) | (stats.index >= num_kernels)
    if hta_quirks:
        # HTA's "keep" mask is ``sum < 0``, meant to be always false; with its whole-µs rounding
        # a name whose kernels are all sub-µs can sum below 0, and that name keeps its own row
        others &= ~(stats["sum"] < 0).to_numpy()
    group = stats["name"].where(~others, "others")
    if hta_quirks:
        # HTA's bug: statistics of the per-name sums, not of the kernels
        stats["name"] = group
        out = stats.groupby("name")["sum"].agg(STAT_NAMES).reset_index()
    else:
        keep = dict(zip(stats["name"], group, strict=True))
        relabelled = rows.assign(name=rows["name"].map(keep))
        out = relabelled.groupby("name")["dur"].agg(STAT_NAMES).reset_index()
    return out.fillna({"std": 0})


def kernel_breakdown_rank(
    rt: RankTrace,
    *,
    duration_ratio: float = 0.8,
    num_kernels: int = 10,
    include_memory_kernels: bool = True,
    patterns: str | KernelPatterns = "default",
    rounding: Rounding = "exact",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One rank's ``(kernel type times, per-kernel statistics)``, both in µs (see module doc)."""
    pat = resolve_patterns(patterns)
    gpu = classified_gpu_events(rt, pat, rounding)
    types = analysed_types(include_memory_kernels)
    type_time = kernel_type_time(rt, pat, types, rounding)
    type_time["sum"] = type_time["sum"] / 1000.0
    rows = pd.DataFrame(
        {"name": gpu["name"].astype(str).to_numpy(), "dur": (gpu["end"] - gpu["start"]) / 1000.0,
         "kernel_type": gpu["kernel_type"].to_numpy()}
    )
    per_type = []
    for kind in types:
        stats = kernel_stats(
            rows[rows["kernel_type"] == kind],
            num_kernels=num_kernels, duration_ratio=duration_ratio, hta_quirks=pat.hta_quirks,
        )
        stats["kernel_type"] = kind
        stats["rank"] = rt.rank
        per_type.append(stats)
    kernels = pd.concat(per_type, ignore_index=True) if per_type else pd.DataFrame()
    return type_time, kernels.reindex(columns=KERNEL_COLUMNS)


def combine(
    frames: Mapping[int, tuple[pd.DataFrame, pd.DataFrame]],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-rank tables → HTA's two tables (kernel types summed over ranks)."""
    ranks = sorted(frames)
    types = pd.concat([frames[r][0] for r in ranks], ignore_index=True)
    type_df = types.groupby(by=["kernel_type"])["sum"].agg(["sum"]).reset_index()
    type_df = type_df.sort_values(by=["sum"], ignore_index=True, ascending=False)
    type_df["percentage"] = (type_df["sum"] / type_df["sum"].sum()) * 100
    type_df = type_df.round({"percentage": 1})
    if (type_df["sum"] % 1 == 0).all():  # whole µs: int64, HTA's dtype on µs traces
        type_df["sum"] = type_df["sum"].astype("int64")

    kernels = pd.concat([frames[r][1] for r in ranks], ignore_index=True)
    kernels = kernels.astype(
        {"name": "str", "sum": "float64", "max": "float64", "min": "float64", "std": "float64",
         "mean": "float64", "kernel_type": "str", "rank": "int64"}
    )
    kernels = kernels.sort_values(by=["kernel_type", "name", "rank"], ignore_index=True)
    return type_df, kernels.rename(columns=RENAMED)
