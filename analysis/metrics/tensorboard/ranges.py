"""Interval sets as the plugin combines them: merged, sorted, disjoint ``(starts, ends)`` arrays,
their union and their length inside windows; and times in the plugin's unit.

The plugin computes in µs exactly as ``json.loads`` reads them: ints, or float64 when the trace
writes fractions, with ``end = ts + dur`` rounded as a float. :func:`plugin_us` gives the same
values from the model's exact ns, so sums over thousands of ranges agree with the plugin's to
well under 1 µs on nanosecond-resolution traces (exact ns would differ by several µs there).
"""

from __future__ import annotations

import numpy as np

Ranges = tuple[np.ndarray, np.ndarray]


def plugin_us(ns) -> np.ndarray:
    """Int ns → float64 µs as the plugin holds them (the nearest double to the µs written): the
    whole µs and the ns left over, both exact integers, then one float sum."""
    ns = np.asarray(ns, dtype=np.int64)
    if ns.ndim and ns.size:
        base = int(ns.min()) // 1000 * 1000
        if int(ns.max()) - base < 1 << 50:
            # the same two exact integers without an integer division (slow in numpy), in
            # place (each new array of a large trace costs its page faults): the offsets from
            # ``base`` are exact doubles whose quotient by 1000 rounds by less than 0.001 below
            # 2**50, so its floor is the whole µs
            scratch = ns - base
            offset = scratch.astype(np.float64)
            part = scratch.view(np.float64)
            whole = np.divide(offset, 1000)
            np.floor(whole, out=whole)
            np.multiply(whole, 1000, out=part)
            np.subtract(offset, part, out=part)
            np.divide(part, 1000, out=part)
            np.add(whole, base // 1000, out=whole)
            np.add(whole, part, out=whole)
            return whole
    whole = ns // 1000
    part = ns - whole * 1000
    return whole.astype(np.float64) + part / 1000


def merge(starts, ends, by_start: bool = False) -> Ranges:
    """The union of ``[start, end)`` intervals as sorted disjoint ranges (touching ones joined);
    ``by_start``: the intervals come sorted by start already (no sort)."""
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    if not len(starts):
        return starts[:0], ends[:0]
    if by_start:
        s, e = starts, ends
    else:
        order = np.argsort(starts, kind="stable")
        s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    out_s = s[first]
    # a group's end: the running maximum at its last interval (the groups before it end earlier)
    out_e = np.maximum(reach[np.r_[first[1:] - 1, len(s) - 1]], out_s)
    return out_s, out_e


def length_within(r: Ranges, start: float, end: float) -> float:
    """Total length of ``r`` inside ``[start, end)``."""
    if end <= start or not len(r[0]):
        return 0.0
    return float(np.clip(np.minimum(r[1], end) - np.maximum(r[0], start), 0, None).sum())


def union(a: Ranges, b: Ranges) -> Ranges:
    """The union of two sets of sorted disjoint ranges (a merge of two sorted runs, no sort)."""
    if not len(a[0]):
        return b
    if not len(b[0]):
        return a
    n = len(a[0]) + len(b[0])
    at_b = np.searchsorted(a[0], b[0], side="right") + np.arange(len(b[0]))  # a's first at ties
    at_a = np.ones(n, bool)
    at_a[at_b] = False
    starts, ends = np.empty(n), np.empty(n)
    starts[at_a], ends[at_a] = a
    starts[at_b], ends[at_b] = b
    return merge(starts, ends, by_start=True)


def lengths_within(r: Ranges, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per window ``[starts[i], ends[i])``: the total length of the sorted disjoint ranges ``r``
    inside it (prefix sums of the lengths, the two partly covered ranges clipped)."""
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    s, e = r
    out = np.zeros(len(starts))
    if not len(s) or not len(starts):
        return out
    cum = np.concatenate([[0.0], np.cumsum(e - s)])
    first = np.searchsorted(e, starts, side="right")  # the first range ending after the start
    stop = np.searchsorted(s, ends, side="left")  # past the last range starting before the end
    some = (first < stop) & (ends > starts)
    i, j = first[some], stop[some]
    total = cum[j] - cum[i]
    total -= np.clip(starts[some] - s[i], 0, None)
    total -= np.clip(e[j - 1] - ends[some], 0, None)
    out[some] = total
    return out
