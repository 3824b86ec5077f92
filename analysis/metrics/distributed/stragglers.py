"""Stragglers: which rank makes the others wait at collectives, how much, and why.

Built on the matched collectives of ``analysis.metrics.distributed.collectives`` (the analysed profiler steps,
every rank). Per collective instance with at least two ranks, the **last** rank is the one that
started last (``is_last``); its **lateness** is the instance's skew and the **wait it caused** is
the sum of the other ranks' waits. Per rank, in µs:

- ``times_last``: instances (with skew > 0) where it arrived last; ``instances``: instances it was in;
- ``wait_caused_us``: total time the other ranks spent waiting for it;
- ``mean_lateness_us``: mean over its instances of (its start − the earliest start);
- why, over the instances where it was last: its **excess idle** is its ``idle_before_us`` (idle
  time of its GPU, or CPU thread for CPU collectives, since its previous collective or the step
  start) minus the median of the other ranks' in the instance, clipped to [0, lateness]: the part
  of its lateness it spent idle where the others were working. ``late_host_us`` sums that excess
  where the collective's launch came late (its CPU was late: data loading, Python, a sleep),
  ``late_other_us`` where the launch was already issued (waiting on another stream or event), and
  ``late_busy_us`` the rest of its lateness (it was still running work: more work or a slower GPU).
  ``why`` names the largest of the three.

Rows are sorted by ``wait_caused_us`` descending (then rank): the rank that costs the job most first.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.metrics.distributed import collectives as _collectives

COLUMNS = [
    "rank", "times_last", "instances", "wait_caused_us", "mean_lateness_us", "late_host_us",
    "late_other_us", "late_busy_us", "why",
]
WHY = {
    "late_host_us": "host_wait: its CPU was late to launch the collective",
    "late_other_us": "other: idle with the collective already launched (waiting on another stream)",
    "late_busy_us": "busy: still running work (more work or a slower GPU)",
}


def stragglers(collectives: pd.DataFrame) -> pd.DataFrame:
    """Per-rank straggler table (``COLUMNS``) from ``collectives.combine``'s table."""
    if collectives.empty:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in COLUMNS})
    df = collectives
    size = df.groupby("collective")["rank"].transform("size")
    lateness = df["skew_us"] - df["wait_us"]  # own start − earliest start
    wait_total = df.groupby("collective")["wait_us"].transform("sum")
    last = df["is_last"] & (df["skew_us"] > 0) & (size > 1)
    idle = np.clip(df["idle_before_us"] - _others_median(df), 0, df["skew_us"])
    per = pd.DataFrame(
        {
            "rank": df["rank"],
            "times_last": last.astype(np.int64),
            "instances": 1,
            "wait_caused_us": np.where(last, wait_total, 0.0),
            "lateness": lateness,
            "late_host_us": np.where(last & df["launch_late"], idle, 0.0),
            "late_other_us": np.where(last & ~df["launch_late"], idle, 0.0),
            "late_busy_us": np.where(last, df["skew_us"] - idle, 0.0),
        }
    )
    out = per.groupby("rank").agg(
        times_last=("times_last", "sum"), instances=("instances", "sum"),
        wait_caused_us=("wait_caused_us", "sum"), mean_lateness_us=("lateness", "mean"),
        late_host_us=("late_host_us", "sum"), late_other_us=("late_other_us", "sum"),
        late_busy_us=("late_busy_us", "sum"),
    ).reset_index()
    causes = out[list(WHY)]
    out["why"] = np.where(out["times_last"] > 0, causes.idxmax(axis=1).map(WHY), "")
    out = out.sort_values(["wait_caused_us", "rank"], ascending=[False, True], kind="stable")
    return out.reset_index(drop=True)[COLUMNS]


def _others_median(df: pd.DataFrame) -> pd.Series:
    """For each instance's last row, the median ``idle_before_us`` of the instance's other ranks
    (0 elsewhere: only the last rank's idle is compared)."""
    out = np.zeros(len(df))
    idle = df["idle_before_us"].to_numpy()
    members = df.groupby("collective").indices  # instance → row positions
    for pos in np.flatnonzero(df["is_last"].to_numpy()):
        others = members[df["collective"].iat[pos]]
        others = others[others != pos]
        out[pos] = np.median(idle[others]) if others.size else 0.0
    return pd.Series(out, index=df.index)


def combine(parts: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Per-rank collectives (``collectives.collectives_rank``) → the straggler table."""
    return stragglers(_collectives.combine(parts))


def headline(collectives: pd.DataFrame) -> pd.DataFrame:
    """Per rank, from the matched collectives: ``times_last`` and ``wait_caused_us`` (the
    collectives' columns of the headline table)."""
    table = stragglers(collectives)[["rank", "times_last", "wait_caused_us"]]
    return table.astype({"rank": "int64"})
