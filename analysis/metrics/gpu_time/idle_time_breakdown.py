"""Idle time breakdown: why each CUDA stream sat idle between consecutive GPU events.

Per rank and stream, over the stream's kernels, memcpys and memsets (sync events excluded) sorted
by start time, the **idle interval** before an event is ``event start − previous event's end``
(µs). Each interval gets the category of the event that follows it:

- ``host_wait``: the runtime call that launched the event started after the previous event had
  ended, so the GPU waited for the CPU to enqueue work;
- ``kernel_wait``: otherwise, if the interval is shorter than ``consecutive_kernel_delay`` (µs),
  the usual overhead between back-to-back kernels;
- ``other``: otherwise (e.g. the event waited for another stream). The first event of a stream has
  no interval; it still makes the ``other`` row exist, with 0 µs (as in HTA).

``idle_time`` is the sum of a category's intervals (µs) and ``idle_time_ratio`` its share of the
stream's idle time. With ``show_idle_interval_stats`` a second table gives, per rank, stream and
category, ``count, mean, std, min, 25%, 50%, 75%, max`` of the intervals (µs). The launching call is
the last non-GPU event in the trace with the event's correlation id (HTA's rule); an event without
one is never ``host_wait``.

Columns, row order, index and rounding (2 decimals) are HTA 0.5.0's ``get_idle_time_breakdown``.
HTA documents ``consecutive_kernel_delay`` as ns but compares it with µs intervals: it is µs, here too.

The default preset deliberately differs from HTA 0.5.0 in places (kernel selection and
classification, exact ns, ...): docs/deviations.md, “Idle time breakdown”, lists each with its test.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from analysis.errors import NoGPUEventsError
from analysis.kineto.events import BUSY_CATS, gpu_mask
from analysis.kineto.model import RankTrace
from analysis.metrics.kernel_types import KernelPatterns, resolve_patterns
from analysis.metrics.timebase import Rounding, event_bounds_ns

# HTA's idle categories, in its order (IdleTimeType values 0, 1, 2).
CATEGORIES = ("host_wait", "kernel_wait", "other")
HOST_WAIT, KERNEL_WAIT, OTHER = range(3)
# Default of HTA's ``consecutive_kernel_delay`` (µs).
CONSECUTIVE_KERNEL_DELAY_US = 30
COLUMNS = ["rank", "stream", "idle_category", "idle_time", "idle_time_ratio"]
STATS_COLUMNS = ["count", "mean", "std", "min", "25%", "50%", "75%", "max"]


def _launch_start_ns(ev: pd.DataFrame, corr: np.ndarray, rt: RankTrace, rounding: Rounding,
                     hta: bool = False):
    """Start (int ns) of the call that launched each GPU event of correlation ``corr``, and whether
    there is one: the last non-GPU event in file order with that correlation id (HTA's
    ``index_correlation``).

    ``hta``: HTA 0.5.0's fallback for a GPU event whose launching call is not in the trace
    (``index_correlation`` starts as ``min(correlation, 0)``, so it stays 0 and HTA joins the
    event with row 0 of the file): the start of the trace's first event. HTA's row 0 is the
    first entry of ``traceEvents`` when that is a complete event, as Kineto writes it (68 of
    the 69 traces checked; the other is a CPU-only trace): here, the event of index label 0."""
    cand = ~gpu_mask(ev) & (ev["correlation"].to_numpy() != -1)
    c_corr = ev["correlation"].to_numpy()[cand]
    c_start, _ = event_bounds_ns(
        ev["ts"].to_numpy()[cand], ev["dur"].to_numpy()[cand], rounding,
        float_timestamps=rt.meta.float_timestamps,
    )
    last = ~pd.Series(c_corr).duplicated(keep="last").to_numpy()
    pos = pd.Index(c_corr[last]).get_indexer(corr)
    found = (pos >= 0) & (corr >= 0)
    start = np.zeros(corr.size, dtype=np.int64)
    start[found] = c_start[last][pos[found]]
    if hta and 0 in ev.index:
        orphan = ~found & (corr >= 0)
        if orphan.any():
            first = ev.loc[[0]]
            first_start, _ = event_bounds_ns(
                first["ts"].to_numpy(), first["dur"].to_numpy(), rounding,
                float_timestamps=rt.meta.float_timestamps)
            start[orphan] = first_start[0]
            found = found | orphan
    return start, found


def idle_intervals(
    rt: RankTrace,
    *,
    consecutive_kernel_delay: float = CONSECUTIVE_KERNEL_DELAY_US,
    patterns: str | KernelPatterns = "default",
    rounding: Rounding = "exact",
) -> pd.DataFrame:
    """Every GPU event of a rank with the idle interval before it on its stream.

    Columns: ``stream``, ``start`` and ``end`` (ns), ``launch_start`` (ns, ``<NA>`` when no launching
    call is in the trace), ``gap_ns`` (the idle interval in ns, ``<NA>`` for a stream's first event),
    ``idle_interval`` (the same in µs, NaN) and
    ``idle_category`` (0 host wait, 1 kernel wait, 2 other). Rows sorted by stream (in order of first
    appearance) and start time.
    """
    hta = resolve_patterns(patterns).hta_quirks
    ev = rt.events
    busy = (ev["stream"].to_numpy() != -1) & ev["cat"].isin(BUSY_CATS).to_numpy()
    rows = ev.loc[busy]
    start, end = event_bounds_ns(
        rows["ts"].to_numpy(), rows["dur"].to_numpy(), rounding,
        float_timestamps=rt.meta.float_timestamps,
    )
    launch, has_launch = _launch_start_ns(ev, rows["correlation"].to_numpy(), rt, rounding,
                                          hta=hta)
    stream = rows["stream"].to_numpy()
    # streams numbered by first appearance, events by start within a stream (ties: file order)
    stream_codes, _ = pd.factorize(stream)
    order = np.lexsort((start, stream_codes))
    stream, start, end = stream[order], start[order], end[order]
    launch, has_launch, codes = launch[order], has_launch[order], stream_codes[order]
    # integer ns throughout: epoch ns do not fit a float64 exactly
    has_prev = np.r_[False, codes[1:] == codes[:-1]] if codes.size else np.zeros(0, dtype=bool)
    if hta:
        prev_end = np.r_[np.int64(0), end[:-1]] if end.size else end
    else:
        # latest end so far on the stream, so that overlapping events do not count as idle
        group = np.cumsum(~has_prev)
        running = pd.Series(end).groupby(group).cummax().to_numpy()
        prev_end = np.r_[np.int64(0), running[:-1]] if end.size else end
    gap_ns = start - prev_end
    if not hta:
        gap_ns = np.maximum(gap_ns, 0)
    # no previous event or no launching call: the comparison is False, as with HTA's NaN
    host_wait = has_prev & has_launch & (launch > prev_end)
    kernel_wait = ~host_wait & has_prev & (gap_ns < consecutive_kernel_delay * 1000.0)
    category = np.where(host_wait, HOST_WAIT, np.where(kernel_wait, KERNEL_WAIT, OTHER))
    interval_us = np.where(has_prev, gap_ns / 1000.0, np.nan)
    launch_start = pd.array(launch, dtype="Int64")
    launch_start[~has_launch] = pd.NA
    gap = pd.array(gap_ns, dtype="Int64")
    gap[~has_prev] = pd.NA
    return pd.DataFrame(
        {
            "stream": stream.astype(np.int64),
            "start": start,
            "end": end,
            "launch_start": launch_start,
            "gap_ns": gap,
            "idle_interval": interval_us,
            "idle_category": category.astype(np.int64),
        }
    )


def idle_time_breakdown_rank(
    rt: RankTrace,
    *,
    streams: Iterable[int] | None = None,
    consecutive_kernel_delay: float = CONSECUTIVE_KERNEL_DELAY_US,
    show_idle_interval_stats: bool = False,
    patterns: str | KernelPatterns = "default",
    rounding: Rounding = "exact",
) -> pd.DataFrame:
    """One rank's idle time per (stream, category), unrounded, ratio not yet computed.

    Columns ``rank, stream, idle_category, idle_time`` (µs), plus the interval statistics columns
    (``count ... max``) when ``show_idle_interval_stats``. Raises ``NoGPUEventsError`` when the rank
    has no kernel, memcpy or memset.
    """
    gaps = idle_intervals(
        rt, consecutive_kernel_delay=consecutive_kernel_delay, patterns=patterns, rounding=rounding
    )
    if gaps.empty:
        raise NoGPUEventsError([rt.rank], "the idle time breakdown")
    stream_order = list(pd.unique(gaps["stream"])) if not streams else [int(s) for s in streams]
    gaps = gaps[gaps["stream"].isin(stream_order)]
    grouped = gaps.groupby(["stream", "idle_category"], sort=False)
    # summed in integer ns: exact, where a sum of µs floats drifts in the last digits
    out = (grouped["gap_ns"].sum().astype("int64") / 1000.0).rename("idle_time").to_frame()
    if show_idle_interval_stats:
        out = out.join(grouped["idle_interval"].describe()[STATS_COLUMNS])
    out = out.reset_index()
    # HTA's row order: streams as listed (or first appearance), categories in enum order
    out["_s"] = out["stream"].map({s: i for i, s in enumerate(stream_order)})
    out = out.sort_values(["_s", "idle_category"], kind="stable").drop(columns="_s")
    out["idle_category"] = np.asarray(CATEGORIES, dtype=object)[out["idle_category"].to_numpy()]
    out.insert(0, "rank", np.int64(rt.rank))
    return out.reset_index(drop=True)


def combine(
    frames: Mapping[int, pd.DataFrame],
    *,
    show_idle_interval_stats: bool = False,
    patterns: str | KernelPatterns = "default",
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Per-rank frames (in the order given) → HTA's ``(breakdown, interval_stats or None)``.

    As in HTA, each rank's rows are numbered from 0 (the concatenated index repeats), the stats
    table is indexed by ``idle_category``, and the ``"hta"`` preset rounds to 2 decimals.
    """
    hta = resolve_patterns(patterns).hta_quirks
    parts, stats_parts = [], []
    for df in frames.values():
        total = df.groupby("stream", sort=False)["idle_time"].transform("sum")
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = df["idle_time"] / total  # 0/0 → NaN, as HTA
        part = df[["rank", "stream", "idle_category", "idle_time"]].assign(idle_time_ratio=ratio)
        parts.append(part.round(2) if hta else part)
        if show_idle_interval_stats:
            s = df.set_index("idle_category")[["rank", "stream", *STATS_COLUMNS]]
            stats_parts.append(s.round(2) if hta else s)
    empty = pd.DataFrame(
        {"rank": pd.Series(dtype="int64"), "stream": pd.Series(dtype="int64"),
         "idle_category": pd.Series(dtype=object), "idle_time": pd.Series(dtype="float64"),
         "idle_time_ratio": pd.Series(dtype="float64")}
    )
    result = pd.concat(parts) if parts else empty
    stats = None
    if show_idle_interval_stats:
        stats = pd.concat(stats_parts) if stats_parts else None
    return result[COLUMNS], stats
