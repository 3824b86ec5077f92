"""Interval sets as the plugin combines them: merged, sorted, disjoint ``(starts, ends)`` arrays,
their intersection and difference; and times in the plugin's unit.

The plugin computes in µs exactly as ``json.loads`` reads them: ints, or float64 when the trace
writes fractions, with ``end = ts + dur`` rounded as a float. :func:`plugin_us` gives the same
values from the model's exact ns, so sums over thousands of ranges agree with the plugin's to
well under 1 µs on nanosecond-resolution traces (exact ns would differ by several µs there).
"""

from __future__ import annotations

import numpy as np

Ranges = tuple[np.ndarray, np.ndarray]


def plugin_us(ns) -> np.ndarray:
    """Int ns → float64 µs as the plugin holds them (the nearest double to the µs written)."""
    ns = np.asarray(ns, dtype=np.int64)
    return (ns // 1000).astype(np.float64) + (ns % 1000) / 1000


def merge(starts, ends) -> Ranges:
    """The union of ``[start, end)`` intervals as sorted disjoint ranges (touching ones joined)."""
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    if not len(starts):
        return starts[:0], ends[:0]
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]
    group = np.cumsum(new) - 1
    out_s = s[new]
    out_e = np.full(len(out_s), -np.inf)
    np.maximum.at(out_e, group, e)
    out_e = np.maximum(out_e, out_s)
    return out_s, out_e


def _inside(points: np.ndarray, r: Ranges) -> np.ndarray:
    k = np.searchsorted(r[0], points, side="right") - 1
    ok = k >= 0
    out = np.zeros(len(points), bool)
    out[ok] = points[ok] < r[1][k[ok]]
    return out


def _combine(a: Ranges, b: Ranges, keep) -> Ranges:
    points = np.unique(np.concatenate([a[0], a[1], b[0], b[1]]))
    if len(points) < 2:
        return points[:0], points[:0]
    left = points[:-1]
    chosen = keep(_inside(left, a), _inside(left, b))
    return merge(left[chosen], points[1:][chosen])


def intersect(a: Ranges, b: Ranges) -> Ranges:
    return _combine(a, b, lambda x, y: x & y)


def subtract(a: Ranges, b: Ranges) -> Ranges:
    return _combine(a, b, lambda x, y: x & ~y)


def length_within(r: Ranges, start: float, end: float) -> float:
    """Total length of ``r`` inside ``[start, end)``."""
    if end <= start or not len(r[0]):
        return 0.0
    return float(np.clip(np.minimum(r[1], end) - np.maximum(r[0], start), 0, None).sum())
