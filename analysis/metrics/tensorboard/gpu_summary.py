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

from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.kineto.model import RankTrace
from analysis.metrics.tensorboard.plugin_steps import KERNEL_ARGS, concat_parts, plugin_view
from analysis.metrics.tensorboard.ranges import length_within, merge, plugin_us

COLUMNS = ["rank", "gpu", "gpu_utilization_pct", "sm_efficiency_pct", "achieved_occupancy_pct",
           "tensor_core_pct"]
# Kernel-name markers of tensor-core kernels: the plugin's list (from NVIDIA PyProf's tc.py).
TC_MARKERS = ("h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816",
              "dgrad_1x1_stride_2x2", "first_layer_wgrad_kernel", "conv1x1",
              "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm",
              "xmma_sparse_conv", "xmma_warp_specialized_implicit_gemm",
              "xmma_gemm", "xmma_sparse_gemm", "c1688")


def uses_tensor_cores(names: pd.Series) -> np.ndarray:
    """Per kernel name: does it contain one of :data:`TC_MARKERS`."""
    names = names.astype(str)
    distinct = pd.Series(names.unique())
    flags = {n: any(m in n for m in TC_MARKERS) for n in distinct}
    return names.map(flags).to_numpy(bool)


def kernels_with_args(rt: RankTrace) -> pd.DataFrame:
    """The plugin's kernel rows with ``blocks_per_sm``, ``occupancy_pct``, launch config (memoised)."""
    def compute():
        kernels = plugin_view(rt).kernels
        args = rt.extra(KERNEL_ARGS).reindex(kernels.index)
        return pd.concat([kernels[["ts", "dur", "name", "device", "external_id", "correlation"]],
                          args.drop(columns="raw_cat")], axis=1)
    return rt.memoised("tensorboard_kernels", compute)


def _sm_efficiency_us(ts, end, blocks, w0, w1) -> float:
    """∫ min(Σ blocks per SM of running kernels, 1) dt over [w0, w1), in µs (the plugin's sweep)."""
    if not len(ts):
        return 0.0
    times = np.concatenate([ts, end])
    kinds = np.concatenate([np.zeros(len(ts), np.int8), np.ones(len(end), np.int8)])
    delta = np.concatenate([blocks, -blocks])
    order = np.lexsort((kinds, times))  # a start before an end at the same time
    times, delta = times[order], delta[order]
    level = np.cumsum(delta)  # the value after each endpoint, summed in the plugin's order
    seg_s, seg_e, value = times[:-1], times[1:], level[:-1]
    ok = (seg_e > seg_s) & (value > 0)
    seg_s, seg_e, value = seg_s[ok], seg_e[ok], np.minimum(value[ok], 1.0)
    inside = np.clip(np.minimum(seg_e, w1) - np.maximum(seg_s, w0), 0, None)
    return float((value * inside).sum())


def gpu_summary_rank(rt: RankTrace) -> pd.DataFrame:
    view = plugin_view(rt)
    k = kernels_with_args(rt)
    w0, w1 = float(view.steps["start"].iloc[0]), float(view.steps["end"].iloc[-1])
    span = w1 - w0
    rows = []
    k = k[k["device"] >= 0]
    tc = uses_tensor_cores(k["name"])
    for gpu in sorted(k["device"].unique().tolist()):
        on = (k["device"] == gpu).to_numpy()
        g = k[on]
        ts = plugin_us(g["ts"].to_numpy(np.int64))
        end = ts + plugin_us(g["dur"].to_numpy(np.int64))
        busy = merge(ts, end)
        util = length_within(busy, w0, w1) / span if span else np.nan
        blocks = g["blocks_per_sm"].to_numpy(float)
        has_blocks = blocks > 0  # NaN compares False: no arg
        sm = (_sm_efficiency_us(ts[has_blocks], end[has_blocks], blocks[has_blocks], w0, w1) / span
              if has_blocks.any() and span else np.nan)
        occ = g["occupancy_pct"].to_numpy(float)
        has_occ = occ >= 0
        clipped = np.clip(np.minimum(end, w1) - np.maximum(ts, w0), 0, None)[has_occ]
        occupancy = (float((occ[has_occ] * clipped).sum() / clipped.sum())
                     if clipped.sum() > 0 else np.nan)
        dur = g["dur"].to_numpy(np.int64)
        total = dur.sum()
        tc_pct = 100 * dur[tc[on]].sum() / total if total > 0 else np.nan
        rows.append({"rank": rt.rank, "gpu": int(gpu), "gpu_utilization_pct": 100 * util,
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
    if result.empty:
        return []
    return [("GPU utilization (TensorBoard)", f"{result['gpu_utilization_pct'].mean():.1f} %"),
            ("Est. SM efficiency", f"{result['sm_efficiency_pct'].mean():.1f} %")]


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


def gpu_utilization_timeline_rank(rt: RankTrace) -> pd.DataFrame:
    """Per GPU and bucket of the whole trace (the profiler's span, else every event's): the share
    of the bucket with a kernel running (``gpu_utilization_pct``) and the est. SM efficiency over
    the bucket (``sm_efficiency_pct``: ∫ min(Σ blocks per SM, 1) dt / bucket width). The plugin
    draws the first as counters in its trace view, the second per kernel interval."""
    k = kernels_with_args(rt)
    k = k[k["device"] >= 0]
    ev = rt.events
    if rt.meta.profiler_span is not None:
        s0, d0 = rt.meta.profiler_span
        start, end = plugin_us(s0), plugin_us(s0) + plugin_us(d0)
    elif len(ev):
        ts = plugin_us(ev["ts"].to_numpy(np.int64))
        start, end = float(ts.min()), float((ts + plugin_us(ev["dur"].to_numpy(np.int64))).max())
    else:
        return pd.DataFrame(columns=TIMELINE_COLUMNS)
    edges = bucket_edges(float(start), float(end))
    rows = []
    for gpu in sorted(k["device"].unique().tolist()):
        g = k[(k["device"] == gpu).to_numpy()]
        ts = plugin_us(g["ts"].to_numpy(np.int64))
        stop = ts + plugin_us(g["dur"].to_numpy(np.int64))
        busy = merge(ts, stop)
        blocks = g["blocks_per_sm"].to_numpy(float)
        has = blocks > 0
        for a, b in zip(edges[:-1], edges[1:], strict=True):
            width = b - a
            sm = (_sm_efficiency_us(ts[has], stop[has], blocks[has], a, b) / width
                  if has.any() else np.nan)
            rows.append({"rank": rt.rank, "gpu": int(gpu), "start_us": a, "end_us": b,
                         "gpu_utilization_pct": 100 * length_within(busy, a, b) / width,
                         "sm_efficiency_pct": 100 * sm})
    return pd.DataFrame(rows, columns=TIMELINE_COLUMNS)


def combine_timeline(parts: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    return concat_parts(parts, TIMELINE_COLUMNS)
