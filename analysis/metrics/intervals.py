"""Vectorised interval arithmetic on integer (ns) intervals: merging and the time-line sweep.

Intervals are given as two equal-length integer arrays of starts and ends.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from analysis.metrics.timebase import Rounding


def merge(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint, sorted intervals covering exactly the union of the input intervals.

    Empty and inverted intervals (``end <= start``) cover nothing; touching intervals (one ends
    where the next starts) are merged into one.
    """
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if s.size == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    run_end = np.maximum.accumulate(e)
    # a new merged interval starts where the start is past everything seen so far
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    group_starts = s[new]
    last_of_group = np.r_[np.flatnonzero(new)[1:] - 1, s.size - 1]
    return group_starts, run_end[last_of_group]


def hta_merge(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """HTA 0.5.0's ``merge_kernel_intervals``, inverted intervals included.

    After HTA's whole-µs rounding a sub-µs event can end before it starts (``ceil(ts) >
    floor(ts + dur)``); HTA keeps such intervals, which start groups of negative length, so its
    busy time is slightly short on ns-resolution traces. Reproduced for parity.
    """
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    if s.size == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    # a row opens a new group when it starts after every end seen so far (HTA's cummax rule)
    new[1:] = s[1:] > np.maximum.accumulate(e)[:-1]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def merge_intervals(starts, ends, rounding: Rounding = "exact") -> tuple[np.ndarray, np.ndarray]:
    """Union of busy intervals as disjoint ``(start, end)`` arrays: ``merge`` for exact times,
    ``hta_merge`` with HTA's rounding (whose inverted intervals HTA counts)."""
    return hta_merge(starts, ends) if rounding == "hta" else merge(starts, ends)


def time_by_state(interval_sets: Sequence[tuple[np.ndarray, np.ndarray]]) -> dict[int, int]:
    """Sweep the time line over merged interval sets: total time (ns) spent in each state.

    Set ``k`` adds ``1 << k`` to the running state while one of its intervals is open, so state
    ``0b101`` is "sets 0 and 2 both running". Zero-length states count nothing. Inverted intervals
    (from ``hta_merge``) are swept as they are, as HTA does, and may produce states outside
    ``[0, 2**len(sets))``; callers pick the states they define.
    """
    times, deltas = [], []
    for bit, (s, e) in enumerate(interval_sets):
        times += [s, e]
        deltas += [np.full(len(s), 1 << bit), np.full(len(e), -(1 << bit))]
    if not times or sum(len(t) for t in times) == 0:
        return {}
    t = np.concatenate(times)
    order = np.argsort(t, kind="stable")
    t, running = t[order], np.cumsum(np.concatenate(deltas)[order])
    # the state after an event lasts until the next event (ties give zero-length states)
    seg, state = np.diff(t), running[:-1]
    states, which = np.unique(state, return_inverse=True)
    totals = np.zeros(states.size, dtype=np.int64)
    np.add.at(totals, which, seg)
    return {int(k): int(v) for k, v in zip(states, totals, strict=True)}
