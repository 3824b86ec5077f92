"""Vectorised interval arithmetic on integer (ns) intervals: merge, union length, intersection.

Intervals are half-open ``[start, end)`` given as two equal-length integer arrays. Empty and
inverted intervals (``end <= start``) cover nothing.
"""

from __future__ import annotations

import numpy as np


def merge(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint, sorted intervals covering exactly the union of the input intervals.

    Touching intervals (one ends where the next starts) are merged into one.
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


def union_length(starts, ends) -> int:
    """Total length covered by at least one interval."""
    s, e = merge(starts, ends)
    return int((e - s).sum())


def intersection_length(a_starts, a_ends, b_starts, b_ends) -> int:
    """Length covered by both the union of set A and the union of set B."""
    a_s, a_e = merge(a_starts, a_ends)
    b_s, b_e = merge(b_starts, b_ends)
    if a_s.size == 0 or b_s.size == 0:
        return 0
    # |A ∩ B| = |A| + |B| - |A ∪ B|, all on merged (disjoint) sets
    both_s = np.concatenate([a_s, b_s])
    both_e = np.concatenate([a_e, b_e])
    return int((a_e - a_s).sum() + (b_e - b_s).sum() - union_length(both_s, both_e))


def coverage_segments(starts, ends, labels, n_labels: int):
    """Sweep: split the time line into segments labelled by which label sets are active.

    Returns ``(seg_start, seg_end, mask)`` where ``mask`` is an int bitmask (bit ``k`` set when an
    interval with label ``k`` covers the segment). Segments where nothing is active are omitted.
    ``labels`` are small integers in ``[0, n_labels)``, ``n_labels <= 62``.
    """
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    lab = np.asarray(labels, dtype=np.int64)
    keep = e > s
    s, e, lab = s[keep], e[keep], lab[keep]
    if s.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty
    times = np.concatenate([s, e])
    delta = np.concatenate([np.ones_like(s), -np.ones_like(e)])
    lab2 = np.concatenate([lab, lab])
    order = np.argsort(times, kind="stable")
    times, delta, lab2 = times[order], delta[order], lab2[order]
    # running count of active intervals per label
    counts = np.zeros((times.size, n_labels), dtype=np.int64)
    counts[np.arange(times.size), lab2] = delta
    counts = np.cumsum(counts, axis=0)
    # state after each distinct time point
    last_at_time = np.r_[times[1:] != times[:-1], True]
    t = times[last_at_time]
    active = counts[last_at_time] > 0
    mask = (active * (1 << np.arange(n_labels, dtype=np.int64))).sum(axis=1)
    seg_s, seg_e, seg_m = t[:-1], t[1:], mask[:-1]
    nz = (seg_m != 0) & (seg_e > seg_s)
    return seg_s[nz], seg_e[nz], seg_m[nz]
