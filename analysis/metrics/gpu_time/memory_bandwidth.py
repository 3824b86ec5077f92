"""Memory bandwidth of GPU memcpy/memset operations, and a per-direction copy summary.

Window: the analysed profiler steps; default ranks: the first rank (HTA's default).

**Bandwidth time series** (HTA 0.5.0's ``get_memory_bw_time_series``): each GPU event of kernel type
MEMORY (``^Memcpy``, ``^Memset``, ``^dma`` in both presets) contributes Kineto's own
``args["memory bandwidth (GB/s)"]`` (0 when absent) from its start to its end; per operation kind
(``name``: ``"Memcpy HtoD"``, ``"Memcpy DtoH"``, ``"Memcpy DtoD"``, ``"Memcpy PtoP"``, ``"Memset"``,
``"Memcpy Unknown"``) the series is the running sum at each start and end: columns ``ts`` (µs),
``pid``, ``name``, ``memory_bw_gbps`` (GB/s). With the ``"hta"`` preset a zero-duration operation
lasts 1 µs and equal times keep HTA's (unstable quicksort) order, exactly as HTA; otherwise
zero-duration operations are left out (with a warning: they move no bytes in no time) and at equal
times an operation's end sorts before the next one's start.

**Summary** (``get_memory_bw_summary``): ``describe()`` of the positive series values per
``(rank, name)``, HTA's columns ``("memory_bw_gbps", count/mean/...)``. Like HTA's, these are
statistics over change points, not over time.

**Copy summary** (``copy_summary``, not in HTA): per rank, operation kind, direction and host-memory
kind (``Pinned``/``Pageable``/``Device``... as Kineto names it, e.g. ``Memcpy HtoD (Pinned ->
Device)``): ``count``, ``bytes`` (sum of ``args.bytes``), ``time`` (µs, sum of durations), ``busy``
(µs, union of the operations' intervals) and ``achieved_gbps`` = bytes / time (GB/s = bytes/ns),
the duration-weighted average bandwidth. Intel GPUs' copy types are given CUDA's direction names
(:func:`copy_direction`: ``M2D`` → ``HtoD``), their memory types kept as written (``src``
``MEMORY(Unknown)``, ``dst`` ``DEVICE``).

Where the default preset differs from HTA 0.5.0: docs/deviations.md.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.kineto.model import RankTrace
from analysis.metrics.intervals import merge
from analysis.metrics.kernel_types import KernelPatterns, classified_gpu_events, resolve_patterns
from analysis.metrics.timebase import Rounding, ns_to_us

SERIES_COLUMNS = ["ts", "pid", "name", "memory_bw_gbps"]
COPY_COLUMNS = [
    "rank", "kind", "direction", "src", "dst", "count", "bytes", "time", "busy", "achieved_gbps",
]
# "Memcpy HtoD (Pinned -> Device)", "Memset (Device)", "Memcpy DtoD (Device -> Device)"; Intel
# GPUs (Kineto's XPU plugin, PTI's names): "Memcpy M2D (MEMORY(Unknown) -> DEVICE)",
# "Memcpy D2D - P2P (DEVICE -> DEVICE)", "Memset (0 -> DEVICE)"
_MEMORY = r"[\w. ]+?(?:\([\w ]*\))?"
_COPY_NAME = re.compile(
    rf"^(Memcpy|Memset)\s*(\w+(?: - P2P)?)?\s*(?:\(({_MEMORY})(?:\s*->\s*({_MEMORY}))?\))?")
# PTI's copy types: M(emory: host memory the runtime did not allocate), H(ost USM), D(evice),
# S(hared USM), as source2destination; the CUDA direction names for those with one
_PTI_COPY = re.compile(r"([MHDS])2([MHDS])( - P2P)?")
_PTI_SIDE = {"M": "H", "H": "H", "D": "D"}


def copy_direction(code: str) -> str:
    """A copy's direction as CUDA's names give it (``HtoD``, ``DtoH``, ``DtoD``, ``HtoH``,
    ``PtoP``): CUDA's as written, Intel GPUs' PTI types mapped (``M2D`` → ``HtoD``, ``D2D - P2P``
    → ``PtoP``); a type with shared USM (``S2D``...) is neither side and stays as written."""
    m = _PTI_COPY.fullmatch(code)
    if m is None:
        return code
    if m.group(3):
        return "PtoP"
    if m.group(1) in _PTI_SIDE and m.group(2) in _PTI_SIDE:
        return f"{_PTI_SIDE[m.group(1)]}to{_PTI_SIDE[m.group(2)]}"
    return code


@dataclass(frozen=True)
class MemoryBandwidthRank:
    rank: int
    series: pd.DataFrame  # SERIES_COLUMNS
    copies: pd.DataFrame  # COPY_COLUMNS


def memory_kind(name: str) -> str:
    """HTA's ``get_memory_kernel_type``: ``"Memset"``, ``"Memcpy XtoY"`` or ``"Memcpy Unknown"``;
    an Intel GPU's copy (``Memcpy M2D (...)``) by its :func:`copy_direction` (HTA reads no
    Intel GPU event: they have no ``stream``)."""
    if name[:6] == "Memset":
        return "Memset"
    if name[:6] != "Memcpy":
        return "Memcpy Unknown"
    m = _COPY_NAME.match(name)
    if m is not None and m.group(2) and _PTI_COPY.fullmatch(m.group(2)):  # an Intel GPU's copy
        return f"Memcpy {copy_direction(m.group(2))}"
    return name[:11]  # len("Memcpy DtoH")


def memory_bandwidth_rank(
    rt: RankTrace, *, patterns: str | KernelPatterns = "default", rounding: Rounding = "exact"
) -> MemoryBandwidthRank:
    """One rank's bandwidth series and copy summary (see the module docstring)."""
    hta = resolve_patterns(patterns).hta_quirks
    gpu = classified_gpu_events(rt, patterns, rounding)
    mem = gpu[gpu["kernel_type"] == "MEMORY"]
    ops = rt.extra("memory_ops")  # bytes and Kineto's bandwidth (analysis.kineto.extras)
    bw = ops["bandwidth_gbps"].reindex(mem.index).fillna(0.0).to_numpy()
    nbytes = ops["bytes"].reindex(mem.index).fillna(-1).to_numpy(dtype=np.int64)
    start, end = mem["start"].to_numpy(), mem["end"].to_numpy()
    names = mem["name"].astype(str).to_numpy()
    pid = rt.events.loc[mem.index, "pid"].to_numpy()
    copies = _copy_summary(rt.rank, names, start, end, nbytes)
    dur = end - start
    if hta:
        end = np.where(dur == 0, start + 1000, end)  # HTA: "round 0 µs up to 1 µs" (its #20)
        keep = np.ones(len(start), dtype=bool)
    else:
        keep = dur > 0
        if (~keep).any():
            warnings.warn(
                f"rank {rt.rank}: {int((~keep).sum())} memory operations of zero (or negative) "
                "duration left out of the bandwidth time series",
                stacklevel=2,
            )
    kinds = np.array([memory_kind(n) for n in names[keep]], dtype=object)
    n = int(keep.sum())
    ts = np.r_[start[keep], end[keep]]
    frame = pd.DataFrame(
        {
            "ts": ts,
            "pid": np.r_[pid[keep], pid[keep]],
            "name": np.r_[kinds, kinds],
            "memory_bw_gbps": np.r_[bw[keep], -bw[keep]],
        }
    )
    if hta:
        # HTA sorts float64 µs (its ends are ts + a float dur); the same values sort the same way
        order = np.argsort((ts - ts.min(initial=0)).astype(np.float64), kind="quicksort")
    else:
        order = np.lexsort((np.r_[np.ones(n), np.zeros(n)], ts))  # ends first at equal times
    frame = frame.iloc[order]
    frame = frame.iloc[np.argsort(frame["name"].to_numpy().astype(str), kind="stable")]
    if hta:  # HTA's plain running sum per kind, float residues (1e-16 "bandwidths") included
        values = frame["memory_bw_gbps"].to_numpy().copy()
        for idx in frame.groupby("name", sort=False).indices.values():
            values[idx] = np.cumsum(values[idx])
        frame["memory_bw_gbps"] = values
    else:  # pandas' grouped cumsum is compensated: back-to-back copies return to exactly 0
        frame["memory_bw_gbps"] = frame.groupby("name", sort=False)["memory_bw_gbps"].cumsum()
    frame["ts"] = ns_to_us(frame["ts"].to_numpy())
    return MemoryBandwidthRank(rank=rt.rank, series=frame[SERIES_COLUMNS], copies=copies)


def _copy_summary(rank, names, start, end, nbytes) -> pd.DataFrame:
    rows = []
    parsed = [_COPY_NAME.match(n) for n in names]
    keys = [
        (m.group(1), copy_direction(m.group(2) or ""), m.group(3) or "", m.group(4) or "") if m
        else
        ("dma", "", "", "")
        for m in parsed
    ]
    if not keys:
        return pd.DataFrame(columns=COPY_COLUMNS)
    key_frame = pd.DataFrame(keys, columns=["kind", "direction", "src", "dst"])
    for key, idx in key_frame.groupby(["kind", "direction", "src", "dst"], sort=True).indices.items():
        s, e, b = start[idx], end[idx], nbytes[idx]
        time_ns = int((e - s).sum())
        known = b >= 0
        total = int(b[known].sum())
        bs, be = merge(s, e)
        rows.append(
            {
                "rank": rank,
                "kind": key[0],
                "direction": key[1] if key[0] == "Memcpy" else "",
                "src": key[2],
                "dst": key[3],
                "count": len(idx),
                "bytes": total,
                "time": time_ns / 1000.0,
                "busy": int((be - bs).sum()) / 1000.0,
                # bytes per ns = GB/s; only over the operations whose size the trace gives
                "achieved_gbps": total / int((e - s)[known].sum())
                if known.any() and (e - s)[known].sum() > 0 else float("nan"),
            }
        )
    return pd.DataFrame(rows, columns=COPY_COLUMNS)


def time_series(parts: Mapping[int, MemoryBandwidthRank]) -> dict[int, pd.DataFrame]:
    """HTA's ``get_memory_bw_time_series``: ``{rank: series}``, ranks without memory ops left out."""
    return {int(r): p.series for r, p in parts.items() if len(p.series)}


def combine(parts: Mapping[int, MemoryBandwidthRank]) -> pd.DataFrame | None:
    """HTA's ``get_memory_bw_summary``: describe() of the positive values per (rank, name)."""
    frames = []
    for r, p in parts.items():
        s = p.series[p.series["memory_bw_gbps"] > 0]
        if len(p.series):
            frames.append(
                s[["name", "memory_bw_gbps"]].assign(rank=int(r))[["rank", "name", "memory_bw_gbps"]]
                .groupby(["rank", "name"]).describe()
            )
    return pd.concat(frames) if frames else None


def copy_summary(parts: Mapping[int, MemoryBandwidthRank]) -> pd.DataFrame:
    """Bytes, time and achieved GB/s per rank, direction and host-memory kind (module docstring)."""
    frames = [p.copies for p in parts.values() if len(p.copies)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COPY_COLUMNS)
