"""Temporal breakdown: how a rank's GPU time splits into idle, computation and other work.

Per rank, over the GPU work (``KernelPatterns.select``):

- ``kernel_time(us)``: span from the first GPU event's start to the last one's end;
- ``idle_time(us)``: part of that span where no GPU event runs (span − union of all events);
- ``compute_time(us)``: union of the COMPUTATION events' intervals;
- ``non_compute_time(us)``: busy time that is not computation (union of all − compute);
- ``*_pctg``: each of the three as a percentage of ``kernel_time``, rounded to 2 decimals (HTA).

All times in µs. Columns and rounding are HTA 0.5.0's ``get_temporal_breakdown``.

The default preset deliberately differs from HTA 0.5.0 in places (kernel selection and
classification, exact ns, ...): docs/deviations.md, the kernel classification and temporal breakdown table, lists each with its test.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.kineto.model import RankTrace
from analysis.metrics.kernel_types import KernelPatterns, busy_intervals, classified_gpu_events
from analysis.metrics.timebase import Rounding

TIME_COLUMNS = ["idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)"]
COLUMNS = ["rank", *TIME_COLUMNS, "idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"]


def temporal_breakdown_rank(
    rt: RankTrace,
    *,
    patterns: str | KernelPatterns = "default",
    rounding: Rounding = "exact",
) -> pd.DataFrame:
    """One rank's row of the temporal breakdown (times in µs, no percentages yet)."""
    gpu = classified_gpu_events(rt, patterns, rounding)
    if gpu.empty:
        return pd.DataFrame({"rank": [rt.rank], **{c: [np.nan] for c in TIME_COLUMNS}})
    all_s, all_e = busy_intervals(rt, patterns, rounding)
    if rounding == "hta":
        # HTA: end of the last merged group − start of the first
        span = int(all_e[-1] - all_s[0])
    else:
        span = int(gpu["end"].max() - gpu["start"].min())
    busy = int((all_e - all_s).sum())
    c_s, c_e = busy_intervals(rt, patterns, rounding, "COMPUTATION")
    compute = int((c_e - c_s).sum())
    values = np.array([span - busy, compute, busy - compute, span]) / 1000.0  # µs, float as HTA
    return pd.DataFrame(
        {"rank": [rt.rank], **{c: [v] for c, v in zip(TIME_COLUMNS, values, strict=True)}}
    )


def combine(frames: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Per-rank rows → HTA's table, ranks in ascending order, with the percentage columns."""
    df = pd.concat([frames[r] for r in sorted(frames)], ignore_index=True)
    df["rank"] = df["rank"].astype("int64")
    total = df["kernel_time(us)"]
    for part in ("idle_time", "compute_time", "non_compute_time"):
        # same float operations as HTA: ratio of the µs columns, then round(100 * ratio, 2)
        df[f"{part}_pctg"] = round(100 * (df[f"{part}(us)"] / total), 2)
    return df[COLUMNS]


def headline(result: pd.DataFrame) -> pd.DataFrame:
    """Per rank: GPU span (ms) and its idle / compute / non-compute shares (%), for summaries."""
    out = result[["rank", "kernel_time(us)", "idle_time_pctg", "compute_time_pctg",
                  "non_compute_time_pctg"]].copy()
    out["kernel_time(us)"] = out["kernel_time(us)"] / 1000.0
    return out.rename(columns={"kernel_time(us)": "kernel_time_ms", "idle_time_pctg": "idle_%",
                               "compute_time_pctg": "compute_%",
                               "non_compute_time_pctg": "non_compute_%"})


def key_numbers(result: pd.DataFrame) -> list[tuple[str, str]]:
    """Mean GPU idle share over the ranks and the most idle rank (%), as report cards."""
    idle = result["idle_time_pctg"]
    if not idle.notna().any():
        return []
    worst = result.loc[idle.idxmax()]
    return [("mean GPU idle", f"{idle.mean():.1f} %"),
            ("most idle rank", f"{int(worst['rank'])} ({worst['idle_time_pctg']:.1f} %)")]
