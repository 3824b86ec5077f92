"""Trace health: the problems in a trace that silently make every other analysis wrong.

``check`` table (``combine``): one row per finding, columns ``rank`` (-1 for the whole trace),
``severity`` (``"error"``: the numbers are wrong; ``"warning"``: they may be; ``"info"``: worth
knowing), ``check`` (the check's name, below), ``message`` (plain words) and ``evidence`` (counts,
names, times in µs). Errors first. Window: the **whole** trace of every rank (not only the analysed
profiler steps: dropped events and a truncated last step live outside them).

Per rank (each a small pure function ``RankTrace → findings``):

- ``no_gpu_events``, ``rank_origin`` (rank guessed, or read from the file name),
  ``missing_distributed_info``;
- ``unclassified_communication``: kernels that look like communication (NCCL/RCCL/HCCL, DeepEP,
  NVSHMEM, custom all-reduce... by ``COMM_LIKE``) that the active kernel patterns do not classify as
  COMMUNICATION; ``unclassified_kernels``: kernels classified as OTHER;
- ``kernels_without_launch``: GPU events whose correlation id no CPU event carries (info when
  they were launched before the profiler started: ids below the first CPU call's);
  ``launches_without_kernels``: launch calls whose correlation id no GPU event carries;
  ``missing_flows``: no CPU→GPU flow events, or launches without one;
- ``gpu_stops_early``: a stream falls silent while the thread(s) launching onto it go on launching
  calls that have no GPU event (dropped events, a full activity buffer); ``kineto_warnings``:
  Kineto's own warnings/errors and non-zero record counts;
  ``truncated_last_step``: the last ProfilerStep is much shorter than the others;
  ``graph_capture``: CUDA/HIP graph launches without their capture traces, or not matched to them;
- ``stream_overlap``: events on one stream that overlap (a stream runs one at a time);
  ``negative_duration`` (error), ``zero_duration``; ``timestamp_resolution`` (ns fractions).

Across ranks (``combine``): ``world_size`` (ranks disagree, or a rank ≥ world size: error),
``steps_mismatch`` (ranks recorded different ProfilerSteps), ``clock_skew``: a collective that some
rank finished before another rank started it violates causality (every rank's NCCL kernel waits
for all the others), so the ranks' clocks disagree by at least that much. Collectives are paired by
name and order of occurrence (a simple matching, used only when every rank ran the same number of
that kernel; point-to-point kernels are left out).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.kineto.events import (
    KERNEL_CATS,
    MEMCPY_CATS,
    MEMSET_CATS,
    cat_mask,
    gpu_mask,
    kernel_like_mask,
    runtime_mask,
)
from analysis.kineto.model import RankTrace
from analysis.metrics.health import trace_health_checks as hc
from analysis.metrics.kernel_types import KernelPatterns, resolve_patterns

COLUMNS = ["rank", "severity", "check", "message", "evidence"]
SEVERITIES = ("error", "warning", "info")
# Names that look like communication whatever the active patterns say. Not a bare "broadcast":
# a broadcast collective's kernel carries its library's name (ncclDevKernel_Broadcast_RING_LL),
# and elsewhere the word names computation (Eigen's TensorBroadcastingOp in TensorFlow's
# kernels, XLA's broadcast fusions).
COMM_LIKE = re.compile(
    r"(?i)nccl|rccl|hccl|msccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|alltoall"
    r"|send_?recv|nvshmem|multimem|cross_device_reduce|ep::\w+::\w*(?:dispatch|combine|notify)"
    r"|deep_?ep"
)
# Point-to-point kernels involve two ranks, not all of them: no causality test across all ranks.
_P2P = re.compile(r"(?i)send|recv")


@dataclass
class RankHealth:
    """One rank's findings and what the cross-rank checks need from it."""

    rank: int
    findings: list[tuple] = field(default_factory=list)  # (severity, check, message, evidence)
    steps: tuple[int, ...] = ()
    world_size: int | None = None
    has_distributed_info: bool = False
    collectives: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


def trace_health_rank(
    rt: RankTrace, *, patterns: str | KernelPatterns = "default"
) -> RankHealth:
    """Run every per-rank check on one rank's whole trace."""
    pat = resolve_patterns(patterns)
    ev = rt.events
    health = RankHealth(
        rank=rt.rank,
        steps=tuple(int(s) for s in rt.profiler_steps()["step"]),
        world_size=rt.meta.world_size,
        # other profilers' files have no distributedInfo; their reader says which rank is which
        has_distributed_info=bool(rt.meta.distributed_info) or rt.meta.source_format != "kineto",
    )
    gpu = gpu_mask(ev) & ~runtime_mask(ev)
    for check in (
        hc.rank_origin, hc.kineto_warnings, hc.negative_duration, hc.timestamp_resolution,
        hc.truncated_last_step, hc.graph_capture,
    ):
        health.findings += check(rt)
    if not gpu.any():
        unseen = int(cat_mask(ev, KERNEL_CATS + MEMCPY_CATS + MEMSET_CATS).sum())
        why = (f"its {unseen:,} kernel / memcpy / memset events have no 'stream' or "
               "'correlation' arg (an edited trace?)" if unseen else
               "CPU-only trace, or CUDA activities not recorded")
        health.findings.append(
            ("warning", "no_gpu_events", "this rank has no GPU events: every GPU analysis skips "
             f"or fails on it ({why})", f"{len(ev)} events")
        )
        return health
    kinds = np.asarray(pat.classify(ev["name"]))
    for check in (hc.zero_duration, hc.stream_overlap, hc.correlation_links, hc.missing_flows,
                  hc.gpu_stops_early):
        health.findings += check(rt)
    health.findings += hc.classification(ev, kinds, gpu, pat.name, COMM_LIKE)
    health.collectives = _collective_kernels(ev, kinds)
    return health


def _collective_kernels(ev, kinds) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Communication kernels by name (point-to-point left out): (starts, ends) in time order, ns."""
    comm = kernel_like_mask(ev) & (kinds == "COMMUNICATION")
    if not comm.any():
        return {}
    ts = ev["ts"].to_numpy()[comm]
    end = ts + ev["dur"].to_numpy()[comm]
    out = {}
    frame = pd.DataFrame({"name": hc.names_of(ev, comm), "ts": ts, "end": end})
    for name, df in frame.groupby("name", sort=True):
        if _P2P.search(name):
            continue
        df = df.sort_values("ts", kind="stable")
        out[str(name)] = (df["ts"].to_numpy(), df["end"].to_numpy())
    return out


def combine(parts: Mapping[int, RankHealth]) -> pd.DataFrame:
    """The findings of every rank plus the cross-rank checks, errors first."""
    rows = [(r, *f) for r, p in parts.items() for f in p.findings]
    if len(parts) > 1:
        for r, p in parts.items():
            if not p.has_distributed_info:
                rows.append((r, "warning", "missing_distributed_info",
                             "no distributedInfo in a multi-rank trace: the rank comes from the "
                             "file name or a guess, and process groups are unknown", ""))
        rows += [(-1, *f) for f in hc.world_size(parts)]
        rows += [(-1, *f) for f in hc.steps_mismatch(parts)]
        rows += [(-1, *f) for f in hc.clock_skew(parts)]
    table = pd.DataFrame(rows, columns=COLUMNS)
    order = table["severity"].map({s: i for i, s in enumerate(SEVERITIES)})
    table = table.assign(_o=order).sort_values(["_o", "rank", "check"], kind="stable")
    table = table.drop(columns="_o").reset_index(drop=True)
    table.attrs["ranks"] = [int(r) for r in parts]
    return table


def headline(findings: pd.DataFrame) -> pd.DataFrame:
    """Per rank: ``health_errors`` and ``health_warnings`` (trace-wide findings count for every
    rank), for the ``summary`` table."""
    ranks = findings.attrs.get("ranks") or sorted(set(findings["rank"]) - {-1})
    rows = []
    for r in ranks:
        mine = findings[findings["rank"].isin([r, -1])]
        rows.append({"rank": r, "health_errors": int((mine["severity"] == "error").sum()),
                     "health_warnings": int((mine["severity"] == "warning").sum())})
    return pd.DataFrame(rows, columns=["rank", "health_errors", "health_warnings"])


def exit_code(findings: pd.DataFrame) -> int:
    """The ``check`` command's exit status: 1 when any finding is an error, else 0."""
    return int((findings["severity"] == "error").any())
