"""Communication/computation overlap: how much of a rank's communication is hidden behind compute.

Per rank: ``comp_comm_overlap_pctg`` = 100 × |COMP ∩ COMM| / |COMM|, rounded to 2 decimals, where
COMM and COMP are the unions of the intervals of the rank's COMMUNICATION and COMPUTATION events
(``analysis.metrics.kernel_types``). A dimensionless percentage; NaN for a rank without communication
kernels or without GPU events at all (HTA gives NaN for the first and does not crash on the second).
Columns are HTA 0.5.0's ``get_comm_comp_overlap``.

Deviations of the default from HTA (docs/deviations.md): ``patterns="default"`` recognises
far more communication kernels (RCCL, HCCL, DeepEP, NVSHMEM, custom all-reduce), so expert-parallel
traces no longer read as NaN/0 %; ``rounding="exact"`` keeps ns instead of whole µs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from analysis.kineto.model import RankTrace, Trace
from analysis.metrics.intervals import merge_intervals, time_by_state
from analysis.metrics.kernel_types import KernelPatterns, classified_gpu_events
from analysis.metrics.timebase import Rounding

COLUMNS = ["rank", "comp_comm_overlap_pctg"]


def comm_comp_overlap_rank(
    rt: RankTrace,
    *,
    patterns: str | KernelPatterns = "default",
    rounding: Rounding = "exact",
) -> pd.DataFrame:
    """One rank's row: ``rank`` and ``comp_comm_overlap_ratio`` (0–1, NaN without communication)."""
    gpu = classified_gpu_events(rt, patterns, rounding)

    def merged(kind: str):
        sel = gpu[gpu["kernel_type"] == kind]
        return merge_intervals(sel["start"].to_numpy(), sel["end"].to_numpy(), rounding)

    comm, comp = merged("COMMUNICATION"), merged("COMPUTATION")
    comm_time = int((comm[1] - comm[0]).sum())
    # state 0b11: a COMM interval and a COMP interval both running
    ratio = time_by_state([comm, comp]).get(0b11, 0) / comm_time if comm_time != 0 else np.nan
    return pd.DataFrame({"rank": [rt.rank], "comp_comm_overlap_ratio": [ratio]})


def combine(frames: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Per-rank rows → HTA's table (ranks ascending), the ratio as a percentage with 2 decimals."""
    df = pd.concat([frames[r] for r in sorted(frames)], ignore_index=True)
    df["rank"] = df["rank"].astype("int64")
    df["comp_comm_overlap_pctg"] = round(100 * df["comp_comm_overlap_ratio"].astype("float64"), 2)
    return df[COLUMNS]


def comm_comp_overlap(
    trace: Trace,
    *,
    ranks: Iterable[int] | str | None = None,
    patterns: str | KernelPatterns = "default",
    rounding: Rounding = "exact",
) -> pd.DataFrame:
    """Communication/computation overlap of ``ranks`` (default: all), one row per rank."""
    selected = trace.select(ranks, default="all")
    return combine(
        {r: comm_comp_overlap_rank(trace[r], patterns=patterns, rounding=rounding)
         for r in selected}
    )
