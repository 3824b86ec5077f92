"""Stragglers: which rank makes the others wait at collectives, how much, and why.

Built on the matched collectives of ``analysis.metrics.distributed.collectives`` (the analysed profiler steps,
every rank). Per collective instance with at least two ranks, the **last** rank is the one that
started last (``is_last``); its **lateness** is the instance's skew and the **wait it caused** is
the sum of the other ranks' waits. Per rank, in µs:

- ``times_last``: instances (with skew > 0) where it arrived last; ``instances``: instances it was in;
- ``wait_caused_us``: time the other ranks spent waiting for it over the analysed window: each
  waiting rank's wait is cut at the end of its own collective (a rank cannot wait longer than its
  collective ran, whatever the clocks say) and counted once where its waits overlap, so it is at
  most (ranks − 1) × the window; ``wait_caused_per_step_us`` = that / the analysed steps (a
  trace without profiler steps: the whole window is one), and ``wait_caused_pct_of_step`` = that
  as % of the median step (``step_us`` of the collectives; NaN without steps);
- ``mean_lateness_us``: mean over its instances of (its start − the earliest start);
- why, over the instances where it was last: its **excess idle** is its ``idle_before_us`` (idle
  time of its GPU, or CPU thread for CPU collectives, since its previous collective or the step
  start) minus the median of the other ranks' in the instance, clipped to [0, lateness]: the part
  of its lateness it spent idle where the others were working. As means per collective it
  arrived last at (so each is at most its lateness there): ``late_host_us`` is that excess where
  the collective's launch came late (its CPU was late: data loading, Python, a sleep),
  ``late_other_us`` where the launch was already issued (waiting on another stream or event), and
  ``late_busy_us`` the rest of its lateness (it was still running work: more work or a slower GPU).
  ``why`` names the largest of the three. An instance the rank started while its previous
  collective was still running (DDP's buckets, async ops) inherits that one's lateness: it has no
  idle time of its own, and counting it would read the inherited lateness as busy; such
  instances are left out of the three means (unless the rank was last at no other).

- ``clock_skew_us``: the largest (latest start − earliest end) of its instances: a rank finished
  the collective before another started it, so the ranks' clocks disagree by at least that much;
  ``clock_caveat`` says so on a rank that was last when that exceeds its mean lateness (its
  lateness may be clock offset, not waiting).

A rank that shares no collective with another rank (one rank loaded) has every number above NaN
(unknown), not 0. Rows are sorted by ``wait_caused_us`` descending (then rank): the rank that costs
the job most first.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.metrics.distributed import collectives as _collectives
from analysis.metrics.intervals import merge

COLUMNS = [
    "rank", "times_last", "instances", "wait_caused_us", "wait_caused_per_step_us",
    "wait_caused_pct_of_step", "mean_lateness_us", "late_host_us", "late_other_us",
    "late_busy_us", "why", "clock_skew_us", "clock_caveat",
]
WHY = {
    "late_host_us": "host_wait: its CPU was late to launch the collective",
    "late_other_us": "other: idle with the collective already launched (waiting on another stream)",
    "late_busy_us": "busy: still running work (more work or a slower GPU)",
}
_UNKNOWN = ["times_last", "wait_caused_us", "wait_caused_per_step_us", "wait_caused_pct_of_step",
            "mean_lateness_us", "late_host_us", "late_other_us", "late_busy_us", "clock_skew_us"]


def stragglers(collectives: pd.DataFrame) -> pd.DataFrame:
    """Per-rank straggler table (``COLUMNS``) from ``collectives.combine``'s table."""
    if collectives.empty:
        return pd.DataFrame({c: pd.Series(dtype="object" if c in ("why", "clock_caveat")
                                          else "float64") for c in COLUMNS})
    df = collectives
    size = df.groupby("collective")["rank"].transform("size")
    lateness = df["skew_us"] - df["wait_us"]  # own start − earliest start
    last = df["is_last"] & (df["skew_us"] > 0) & (size > 1)
    idle = np.clip(df["idle_before_us"] - _others_median(df), 0, df["skew_us"])
    # the instances whose lateness is the rank's own: not started while its previous collective
    # still ran (then it inherits that one's lateness); all of them where every one overlapped
    own = last & ~_overlaps_previous(df)
    has_own = own.groupby(df["rank"]).transform("any")
    cause = own | (last & ~has_own)
    per = pd.DataFrame(
        {
            "rank": df["rank"],
            "times_last": last.astype(np.int64),
            "counted": cause.astype(np.int64),
            "instances": 1,
            "compared": (size > 1).astype(np.int64),
            "lateness": lateness.where(size > 1),
            "late_host_us": np.where(cause & df["launch_late"], idle, 0.0),
            "late_other_us": np.where(cause & ~df["launch_late"], idle, 0.0),
            "late_busy_us": np.where(cause, df["skew_us"] - idle, 0.0),
            "clock_skew_us": _clock_gap(df),
        }
    )
    out = per.groupby("rank").agg(
        times_last=("times_last", "sum"), counted=("counted", "sum"), instances=("instances", "sum"),
        compared=("compared", "sum"), mean_lateness_us=("lateness", "mean"),
        late_host_us=("late_host_us", "sum"), late_other_us=("late_other_us", "sum"),
        late_busy_us=("late_busy_us", "sum"), clock_skew_us=("clock_skew_us", "max"),
    ).reset_index()
    for col in WHY:  # a mean per collective it was last at: at most its lateness there
        out[col] = out[col] / out["counted"].where(out["counted"] > 0, 1)
    caused = _wait_caused(df, last)
    out["wait_caused_us"] = out["rank"].map(caused).fillna(0.0).astype(np.float64)
    steps = df.loc[df["step"] >= 0, ["rank", "step", "step_us"]].drop_duplicates(["rank", "step"])
    n_steps = max(int(steps["step"].nunique()), 1)  # outside every step: the window is one "step"
    median_step = float(steps["step_us"].median()) if len(steps) else np.nan
    out["wait_caused_per_step_us"] = out["wait_caused_us"] / n_steps
    out["wait_caused_pct_of_step"] = (out["wait_caused_per_step_us"] / median_step * 100
                                      if median_step > 0 else np.nan)
    out["times_last"] = out["times_last"].astype(np.float64)
    # a rank never compared with another (one rank loaded): unknown, not zero
    out.loc[out["compared"] == 0, _UNKNOWN] = np.nan
    causes = out[list(WHY)]
    has = out["times_last"] > 0
    out["why"] = ""
    if has.any():
        out.loc[has, "why"] = causes[has].idxmax(axis=1).map(WHY)
    out["clock_caveat"] = np.where(
        has & (out["clock_skew_us"] > out["mean_lateness_us"]),
        "clocks disagree by at least " + (out["clock_skew_us"] / 1000).round(1).astype(str)
        + " ms, more than its lateness: the lateness may be clock offset", "")
    out = out.sort_values(["wait_caused_us", "rank"], ascending=[False, True], kind="stable",
                          na_position="last")
    return out.reset_index(drop=True)[COLUMNS]


def _overlaps_previous(df: pd.DataFrame) -> pd.Series:
    """Per row: the rank started it before its previous collective (by start) had ended."""
    end = df["start_us"] + df["duration_us"]
    order = df.sort_values(["rank", "start_us"], kind="stable").index
    prev_end = end.loc[order].groupby(df.loc[order, "rank"]).transform(
        lambda e: e.cummax().shift(1))
    return (df.loc[order, "start_us"] < prev_end).reindex(df.index).fillna(False).astype(bool)


def _wait_caused(df: pd.DataFrame, last: pd.Series) -> dict[int, float]:
    """Per last rank, µs: the time the other ranks spent waiting for it, each waiting rank's wait
    cut at the end of its own collective (it cannot wait longer than its kernel ran, whatever the
    clocks say) and counted once where its waits overlap (a union of intervals per waiting rank)."""
    culprit = df["rank"].where(last).groupby(df["collective"]).transform("max")
    waiting = culprit.notna() & ~last & (df["wait_us"] > 0)
    w = df[waiting]
    if w.empty:
        return {}
    s = np.round(w["start_us"].to_numpy() * 1000).astype(np.int64)
    wait = np.minimum(w["wait_us"].to_numpy(), w["duration_us"].to_numpy())
    e = s + np.round(wait * 1000).astype(np.int64)
    out: dict[int, float] = {}
    keys = pd.DataFrame({"culprit": culprit[waiting].astype(np.int64).to_numpy(),
                         "rank": w["rank"].to_numpy()})
    for (c, _), pos in keys.groupby(["culprit", "rank"]).indices.items():
        ms, me = merge(s[pos], e[pos])
        out[int(c)] = out.get(int(c), 0.0) + float((me - ms).sum()) / 1000.0
    return out


def _clock_gap(df: pd.DataFrame) -> pd.Series:
    """Per row: its instance's latest start − earliest end, µs, where positive (a rank finished
    the collective before another started it: the clocks disagree by at least that); else 0."""
    end = df["start_us"] + df["duration_us"]
    gap = df["start_us"].groupby(df["collective"]).transform("max") - end.groupby(
        df["collective"]).transform("min")
    return gap.clip(lower=0)


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
    """Per rank, from the matched collectives: ``times_last`` and ``wait_caused_per_step_us`` (the
    collectives' columns of the headline table)."""
    table = stragglers(collectives)[["rank", "times_last", "wait_caused_per_step_us"]]
    return table.astype({"rank": "int64"})
