"""The TensorBoard plugin's GPU summary: utilization, est. SM efficiency, est. achieved occupancy,
tensor-core share, per rank and GPU.

Over the plugin's steps window ``[W0, W1)`` (first plugin step's start to the last one's end, every
profiler step included; :mod:`.plugin_steps`), for the kernels of each GPU (``args.device``):

- ``gpu_utilization_pct`` = 100 × |union of kernel intervals ∩ window| / (W1 − W0);
- ``sm_efficiency_pct`` (est. SM efficiency) = 100 × ∫ min(Σ blocks per SM of the kernels
  running, 1) dt over the window / (W1 − W0), from each kernel's ``blocks per SM`` arg (kernels
  without it, or with a value ≤ 0, count as idle); NaN when no kernel has it;
- ``achieved_occupancy_pct`` (est. achieved occupancy) = the kernels' ``est. achieved occupancy
  %`` averaged, weighted by each kernel's time inside the window; NaN when no kernel has it;
- ``tensor_core_pct`` = 100 × time of kernels that use tensor cores / time of all kernels of the
  GPU, over the whole trace. A kernel uses tensor cores when its name contains one of the plugin's
  markers (:data:`TC_MARKERS`, from NVIDIA PyProf: ``h884``, ``1688``, ``hmma``, ``xmma_gemm``...).

Memcpy / memset do not count as busy (the plugin's definition). See ``docs/deviations.md`` for the
tensor-core share.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.kineto.model import RankTrace
from analysis.metrics.tensorboard.plugin_steps import (
    KERNEL_ARGS,
    coded,
    column_codes,
    concat_parts,
    flags_of,
    plugin_view,
    rows_of,
)
from analysis.metrics.tensorboard.ranges import length_within, lengths_within, merge, plugin_us

COLUMNS = ["rank", "gpu", "gpu_utilization_pct", "sm_efficiency_pct", "achieved_occupancy_pct",
           "tensor_core_pct"]
# Kernel-name markers of tensor-core kernels: the plugin's list (from NVIDIA PyProf's tc.py).
TC_MARKERS = ("h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816",
              "dgrad_1x1_stride_2x2", "first_layer_wgrad_kernel", "conv1x1",
              "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm",
              "xmma_sparse_conv", "xmma_warp_specialized_implicit_gemm",
              "xmma_gemm", "xmma_sparse_gemm", "c1688")


_TC_PATTERN = re.compile("|".join(map(re.escape, TC_MARKERS)))


def uses_tensor_core(name: str) -> bool:
    """Does the kernel name contain one of :data:`TC_MARKERS`."""
    return _TC_PATTERN.search(name) is not None


def uses_tensor_cores(names: pd.Series) -> np.ndarray:
    """Per kernel name: does it contain one of :data:`TC_MARKERS` (each distinct name tested
    once; a missing name has no marker)."""
    return flags_of(names, uses_tensor_core)


@dataclass(frozen=True)
class PluginKernels:
    """The plugin's Kernel events of one rank (:attr:`.PluginView.kernel_rows`, in row order) as
    arrays, with their launch args (NaN, or code -1, where a kernel has none): what the GPU
    summary, the utilization timeline and the kernel table read, built once per rank."""

    dur_ns: np.ndarray  # int64
    ts: np.ndarray  # µs as the plugin holds them (plugin_us)
    end: np.ndarray
    device: np.ndarray  # int64, -1: none
    name_codes: np.ndarray  # int64 into ``names``, -1: missing
    names: list[str]
    tensor_cores: np.ndarray  # per name code, a trailing False for code -1
    external_id: np.ndarray  # the id the plugin reads (:attr:`.PluginView.external_ids`)
    args: dict[str, np.ndarray]  # blocks_per_sm, occupancy_pct, registers_per_thread, shared_memory
    grid: tuple[np.ndarray, list]  # (codes, values), as :func:`.plugin_steps.coded`
    block: tuple[np.ndarray, list]
    by_start: np.ndarray  # positions in these arrays by start (row order among equal starts)


FLOAT_ARGS = ("blocks_per_sm", "occupancy_pct", "registers_per_thread", "shared_memory")


def plugin_kernels(rt: RankTrace) -> PluginKernels:
    """The rank's :class:`PluginKernels` (memoised; needs the ``kernel_args`` extra)."""
    return rt.memoised("tensorboard_kernels", lambda: _plugin_kernels(rt))


def _plugin_kernels(rt: RankTrace) -> PluginKernels:
    view = plugin_view(rt)
    rows = view.kernel_rows
    ev = rt.events
    args = rt.extra(KERNEL_ARGS)
    at = np.full(len(ev), -1, dtype=np.int64)  # per event row: its row in ``args``, -1: none
    at[rows_of(ev.index, args.index)] = np.arange(len(args))
    at = at[rows]
    has = at >= 0

    def arg(col: str) -> np.ndarray:
        out = np.full(len(rows), np.nan)
        out[has] = args[col].to_numpy(np.float64)[at[has]]
        return out

    def arg_codes(col: str) -> tuple[np.ndarray, list]:
        codes, values = coded(args[col])
        out = np.full(len(rows), -1, dtype=np.int64)
        out[has] = codes[at[has]]
        return out, values

    codes, names = column_codes(rt, "name")
    position = np.full(len(ev), -1, dtype=np.int64)
    position[rows] = np.arange(len(rows))
    return PluginKernels(
        dur_ns=ev["dur"].to_numpy(np.int64)[rows],
        ts=view.ts[rows],
        end=view.end[rows],
        device=ev["device"].to_numpy(np.int64)[rows],
        name_codes=codes[rows],
        names=[str(v) for v in names],
        tensor_cores=_tensor_core_flags(names, codes[rows]),
        external_id=view.external_ids[rows],
        args={c: arg(c) for c in FLOAT_ARGS},
        grid=arg_codes("grid"),
        block=arg_codes("block"),
        by_start=position[view.kernel_by_start],
    )


def _tensor_core_flags(names: list, kernel_codes: np.ndarray) -> np.ndarray:
    """:func:`uses_tensor_core` per distinct name (a last False for a missing one), tested for
    the names of kernels only (the others are never read: a trace's names are mostly
    operators')."""
    flags = np.zeros(len(names) + 1, dtype=bool)
    for code in np.unique(kernel_codes).tolist():
        if code >= 0:
            flags[code] = uses_tensor_core(str(names[code]))
    return flags


@dataclass(frozen=True)
class GpuActivity:
    """One GPU's kernels as both views of the GPU summary read them: the union of their
    intervals (busy) and the segments of the SM-efficiency sweep (None: no kernel has a
    ``blocks per SM`` arg)."""

    busy: tuple[np.ndarray, np.ndarray]
    segments: tuple[np.ndarray, np.ndarray, np.ndarray] | None


def gpu_activity(rt: RankTrace) -> dict[int, GpuActivity]:
    """Per GPU (``args.device`` ≥ 0, ascending) of the rank: its :class:`GpuActivity`
    (memoised: the GPU summary and the utilization timeline share it)."""
    def compute() -> dict[int, GpuActivity]:
        k = plugin_kernels(rt)
        out = {}
        for gpu in np.unique(k.device[k.device >= 0]).tolist():
            at = k.by_start[k.device[k.by_start] == gpu]  # this GPU's kernels by start
            ts, end = k.ts[at], k.end[at]
            blocks = k.args["blocks_per_sm"][at]
            has = blocks > 0  # NaN compares False: no arg
            out[int(gpu)] = GpuActivity(
                busy=merge(ts, end, by_start=True),
                segments=_sm_segments(ts[has], end[has], blocks[has]) if has.any() else None,
            )
        return out
    return rt.memoised("tensorboard_gpu_activity", compute)


def _sm_segments(ts, end, blocks) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The plugin's sweep of blocks per SM: the segments with a kernel running and the value
    min(Σ blocks per SM, 1) on each (computed once, then clipped to any window)."""
    times = np.concatenate([ts, end])
    kinds = np.concatenate([np.zeros(len(ts), np.int8), np.ones(len(end), np.int8)])
    delta = np.concatenate([blocks, -blocks])
    order = np.lexsort((kinds, times))  # a start before an end at the same time
    times, delta = times[order], delta[order]
    level = np.cumsum(delta)  # the value after each endpoint, summed in the plugin's order
    seg_s, seg_e, value = times[:-1], times[1:], level[:-1]
    ok = (seg_e > seg_s) & (value > 0)
    return seg_s[ok], seg_e[ok], np.minimum(value[ok], 1.0)


def _sm_within(segments, w0, w1) -> float:
    """∫ of the sweep's value over [w0, w1), in µs."""
    seg_s, seg_e, value = segments
    inside = np.clip(np.minimum(seg_e, w1) - np.maximum(seg_s, w0), 0, None)
    return float((value * inside).sum())


def gpu_summary_rank(rt: RankTrace) -> pd.DataFrame:
    view = plugin_view(rt)
    k = plugin_kernels(rt)
    w0, w1 = float(view.steps["start"].iloc[0]), float(view.steps["end"].iloc[-1])
    span = w1 - w0
    rows = []
    tc = k.tensor_cores[k.name_codes]
    for gpu, act in gpu_activity(rt).items():
        on = k.device == gpu
        ts, end = k.ts[on], k.end[on]
        util = length_within(act.busy, w0, w1) / span if span else np.nan
        sm = (_sm_within(act.segments, w0, w1) / span
              if act.segments is not None and span else np.nan)
        occ = k.args["occupancy_pct"][on]
        has_occ = occ >= 0
        clipped = np.clip(np.minimum(end, w1) - np.maximum(ts, w0), 0, None)[has_occ]
        occupancy = (float((occ[has_occ] * clipped).sum() / clipped.sum())
                     if clipped.sum() > 0 else np.nan)
        dur = k.dur_ns[on]
        total = dur.sum()
        tc_pct = 100 * dur[tc[on]].sum() / total if total > 0 else np.nan
        rows.append({"rank": rt.rank, "gpu": gpu, "gpu_utilization_pct": 100 * util,
                     "sm_efficiency_pct": 100 * sm, "achieved_occupancy_pct": occupancy,
                     "tensor_core_pct": tc_pct})
    return pd.DataFrame(rows, columns=COLUMNS)


def combine(parts: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    return concat_parts(parts, COLUMNS)


def headline(result: pd.DataFrame) -> pd.DataFrame:
    """Per rank (first GPU): the four percentages."""
    first = result.groupby("rank", as_index=False).first()
    return first[["rank", "gpu_utilization_pct", "sm_efficiency_pct", "achieved_occupancy_pct",
                  "tensor_core_pct"]]


def key_numbers(result: pd.DataFrame) -> list[tuple[str, str]]:
    """Report cards: the mean GPU utilization and est. SM efficiency over the ranks' GPUs, each
    where some GPU has it (no SM efficiency without ``blocks per SM`` args: AMD, older traces)."""
    cards = []
    for label, column in (("GPU utilization (TensorBoard)", "gpu_utilization_pct"),
                          ("Est. SM efficiency", "sm_efficiency_pct")):
        if result[column].notna().any():
            cards.append((label, f"{result[column].mean():.1f} %"))
    return cards


TIMELINE_COLUMNS = ["rank", "gpu", "start_us", "end_us", "gpu_utilization_pct", "sm_efficiency_pct"]
MAX_BUCKETS = 100  # the plugin's: 10**k µs buckets, at most 100 of them


def bucket_edges(start: float, end: float) -> np.ndarray:
    """The plugin's GPU-utilization buckets over ``[start, end)`` µs: width the smallest power of 10
    µs giving at most 100 buckets; the last bucket runs to ``end``."""
    width = 1.0
    while (end - start) / width > MAX_BUCKETS:
        width *= 10
    count = max(int((end - start) / width), 1)
    edges = start + width * np.arange(count + 1)
    edges[-1] = end
    return edges


def _sm_within_each(segments, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """:func:`_sm_within` per window ``[starts[i], ends[i])``, windows sorted and disjoint."""
    seg_s, seg_e, value = segments
    out = np.zeros(len(starts))
    if not len(seg_s):
        return out
    cum = np.concatenate([[0.0], np.cumsum(value * (seg_e - seg_s))])
    first = np.searchsorted(seg_e, starts, side="right")  # segments are sorted and disjoint
    stop = np.searchsorted(seg_s, ends, side="left")
    some = first < stop
    i, j = first[some], stop[some]
    total = cum[j] - cum[i]
    total -= value[i] * np.clip(starts[some] - seg_s[i], 0, None)
    total -= value[j - 1] * np.clip(seg_e[j - 1] - ends[some], 0, None)
    out[some] = total
    return out


def gpu_utilization_timeline_rank(rt: RankTrace) -> pd.DataFrame:
    """Per GPU and bucket of the whole trace (the profiler's span, else every event's): the share
    of the bucket with a kernel running (``gpu_utilization_pct``) and the est. SM efficiency over
    the bucket (``sm_efficiency_pct``: ∫ min(Σ blocks per SM, 1) dt / bucket width). The plugin
    draws the first as counters in its trace view, the second per kernel interval."""
    if rt.meta.profiler_span is not None:
        s0, d0 = rt.meta.profiler_span
        start, end = plugin_us(s0), plugin_us(s0) + plugin_us(d0)
    elif len(rt.events):
        view = plugin_view(rt)
        start, end = float(view.ts.min()), float(view.end.max())
    else:
        return pd.DataFrame(columns=TIMELINE_COLUMNS)
    edges = bucket_edges(float(start), float(end))
    lo, hi = edges[:-1], edges[1:]
    width = hi - lo
    parts = []
    for gpu, act in gpu_activity(rt).items():
        sm = (_sm_within_each(act.segments, lo, hi) / width if act.segments is not None
              else np.full(len(lo), np.nan))
        parts.append(pd.DataFrame({
            "rank": rt.rank, "gpu": gpu, "start_us": lo, "end_us": hi,
            "gpu_utilization_pct": 100 * lengths_within(act.busy, lo, hi) / width,
            "sm_efficiency_pct": 100 * sm,
        }, columns=TIMELINE_COLUMNS))
    if not parts:
        return pd.DataFrame(columns=TIMELINE_COLUMNS)
    return pd.concat(parts, ignore_index=True)


def combine_timeline(parts: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    return concat_parts(parts, TIMELINE_COLUMNS)
