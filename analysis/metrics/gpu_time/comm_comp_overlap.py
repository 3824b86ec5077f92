"""Communication/computation overlap: how much of a rank's communication is hidden behind compute.

Per rank: ``comp_comm_overlap_pctg`` = 100 × |COMP ∩ COMM| / |COMM|, rounded to 2 decimals, where
COMM and COMP are the unions of the intervals of the rank's COMMUNICATION and COMPUTATION events
(``analysis.metrics.kernel_types``). A dimensionless percentage; NaN for a rank without communication
kernels or without GPU events at all (HTA gives NaN for the first and does not crash on the second).
Columns are HTA 0.5.0's ``get_comm_comp_overlap``.

The default preset deliberately differs from HTA 0.5.0 in places (kernel selection and
classification, exact ns, ...): docs/deviations.md, the kernel classification table, lists each with its test.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.kineto.model import RankTrace
from analysis.metrics.intervals import time_by_state
from analysis.metrics.kernel_types import KernelPatterns, busy_intervals
from analysis.metrics.timebase import Rounding

COLUMNS = ["rank", "comp_comm_overlap_pctg"]


def comm_comp_overlap_rank(
    rt: RankTrace,
    *,
    patterns: str | KernelPatterns = "default",
    rounding: Rounding = "exact",
) -> pd.DataFrame:
    """One rank's row: ``rank`` and ``comp_comm_overlap_ratio`` (0–1, NaN without communication)."""
    comm = busy_intervals(rt, patterns, rounding, "COMMUNICATION")
    comp = busy_intervals(rt, patterns, rounding, "COMPUTATION")
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


def headline(result: pd.DataFrame) -> pd.DataFrame:
    """Per rank: the share of communication time hidden behind computation (%), for summaries."""
    return result.rename(columns={"comp_comm_overlap_pctg": "comm_overlap_%"})


def key_numbers(result: pd.DataFrame) -> list[tuple[str, str]]:
    """Mean communication/computation overlap over the ranks (%), as a report card."""
    overlap = result["comp_comm_overlap_pctg"]
    return [("mean comm/comp overlap", f"{overlap.mean():.1f} %")] if overlap.notna().any() else []
