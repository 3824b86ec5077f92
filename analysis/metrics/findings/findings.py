"""Findings: what the analyses say is wrong, in plain words, each with its number and evidence.

A *rule* is a small pure function over the results of other analyses (``results[name]`` is that
analysis's result, or the ``TraceAnalysisError`` it raised). It returns the findings it makes
(possibly none: the rule ran and found the job healthy on that count), or raises :class:`Silent`
with the reason it could not run (e.g. no shapes recorded, a CPU-only trace): nothing is said
without evidence. Thresholds are named constants here; ``docs/findings.md`` lists every rule.

Each finding: ``severity`` ("error" > "warning" > "info"), ``title``, ``detail`` (the number in a
sentence), ``metric``, ``value``, ``threshold`` (same unit as ``value``), ``evidence`` (which
table or figure, ranks, steps, kernels), ``suggestion`` (what usually fixes it). The table is
sorted by severity, then by how far the value is past its threshold. Rules that could not run are
listed in ``table.attrs["not_run"]`` (``{rule: reason}``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.errors import TraceAnalysisError
from analysis.metrics.gpu_time.kernel_launch_stats import RUNTIME_CUTOFF_US, classify
from analysis.metrics.roofline.operator_roofline import MFU_MIN_COVERAGE_PCT
from analysis.metrics.tensorboard.operator_table import TC_ELIGIBLE_OPS

COLUMNS = ["severity", "title", "detail", "metric", "value", "threshold", "evidence", "suggestion"]
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}

# --------------------------------------------------------------------------------- thresholds
# GPU idle share of the analysed span (%) above which idle time is worth a finding, and the share
# of that idle time that must be host_wait for the CPU to be the cause. 20 %: below it a training
# job's idle time is usually the step boundary and collectives; 50 %: the largest cause.
IDLE_SHARE_PCT = 20.0
HOST_WAIT_SHARE_PCT = 50.0
# Exposed communication (communication time not overlapped by computation) as a share of the
# GPU span (%): above 10 % a tuned data-parallel job usually still has room.
EXPOSED_COMM_PCT = 10.0
# Host-to-device copies as a share of the GPU span (%), and any pageable copy at all (a warning
# from PAGEABLE_WARN_PCT of the GPU span on, information below: a few bytes of pageable copies
# cost nothing).
HTOD_SHARE_PCT = 5.0
PAGEABLE_WARN_PCT = 1.0
# Step time variation: coefficient of variation of step durations over the steps of a rank (%),
# and the slowest rank's step over the median rank's (%), above which steps are not steady.
STEP_CV_PCT = 10.0
RANK_SPREAD_PCT = 10.0
# Roofline: a compute-heavy op group (GEMM, attention, convolution) below this % of its roofline
# bound is "far below"; the finding fires when such groups lose more than LOST_SHARE_PCT of the
# GPU kernel time. MFU below MFU_PCT is reported as information (dense training typically
# reaches 30-50 %; inference and small models less), when the operators with a perf model run at
# least MFU_MIN_COVERAGE_PCT of the GPU kernel time (the roofline's: MFU counts only their FLOPs).
ROOFLINE_PCT = 50.0
LOST_SHARE_PCT = 10.0
MFU_PCT = 30.0
COMPUTE_FAMILIES = ("gemm", "attention", "conv")
# Stragglers: the last-arriving rank is late, on average, by more than this % of the median step
# time, in more than half of the collectives it takes part in.
STRAGGLER_LATENESS_PCT = 5.0
# Bus bandwidth: collectives of at least LARGE_MESSAGE_BYTES whose median bus bandwidth is below
# BUSBW_FRACTION of what an intra-node NVLink/Infinity Fabric all-reduce reaches on that GPU in
# nccl-tests / rccl-tests (EXPECTED_BUSBW_GBPS; groups larger than a node go over the network,
# whose speed the trace does not say: those are left out).
LARGE_MESSAGE_BYTES = 1 << 20
BUSBW_FRACTION = 0.5
NODE_SIZE = 8
# H800: NVLink cut to 400 GB/s (NVIDIA H800 datasheet) of H100's 900, so ~0.45 of its all-reduce
# bus bandwidth; H20 keeps 900 GB/s NVLink (HGX H20 brief); GB200 has B200's NVLink 5 (1.8 TB/s,
# GB200 NVL72 datasheet); MI325X MI300X's xGMI (AMD MI325X datasheet). First match wins: H200
# before H20.
EXPECTED_BUSBW_GBPS = {"H200": 400.0, "H100": 360.0, "H800": 160.0, "H20": 360.0, "B200": 700.0,
                       "A100": 230.0, "V100": 130.0, "MI300": 300.0, "MI325": 300.0, "MI250": 150.0,
                       "MI355": 400.0}
# Data loading: the median step spends more than this share (%) on the CPU before its first launch.
DATA_LOADING_GAP_PCT = 10.0
# The TensorBoard plugin's recommendations: DataLoader share of the step time above 5 % (its
# threshold), GPU utilization below 50 % (its threshold); tensor-core-eligible operators whose
# kernels use no tensor cores above 10 % of the kernel time (the plugin fires at any share when no
# kernel at all uses them; a share makes the finding rank-able); CUDA launch calls above 20 % of the
# step time (launch overhead a CUDA graph removes; our threshold).
TB_DATALOADER_PCT = 5.0
TB_GPU_UTILIZATION_PCT = 50.0
TC_ELIGIBLE_PCT = 10.0
RUNTIME_SHARE_PCT = 20.0
# Kernel-name markers of tensor-core kernels for the finding: the plugin's list (2021, PyProf) misses
# today's CUTLASS (``tensorop``, ``wmma``), cuBLAS Hopper (``xmma``/``gmma``/``nvjet``) and flash
# attention kernels, which would make the finding say "no tensor cores" about kernels that use them.
TC_KERNEL_MARKERS = ("tensorop", "wmma", "hmma", "gmma", "xmma", "imma", "nvjet", "flash_fwd",
                     "flash_bwd", "16816", "1688", "884", "conv1x1", "implicit_gemm")


@dataclass
class Finding:
    severity: str
    title: str
    detail: str
    metric: str
    value: float
    threshold: float
    evidence: str
    suggestion: str


class Silent(Exception):
    """A rule that cannot run on these traces; the message says why."""


def _need(results: Mapping[str, Any], name: str) -> Any:
    """The result of analysis ``name``, or :class:`Silent` with why it is missing."""
    if name not in results:
        raise Silent(f"needs the {name} analysis")
    value = results[name]
    if isinstance(value, TraceAnalysisError):
        raise Silent(f"{name} could not run: {value}")
    return value


def _ranks(values: pd.Series, ranks: pd.Series, top: int = 5) -> str:
    """The ``top`` ranks by ``values`` (%), highest first; ranks without a value (no GPU event
    in the window: NaN) are not listed."""
    numbers = values.to_numpy(dtype=float)
    order = [i for i in np.argsort(-numbers, kind="stable").tolist() if not np.isnan(numbers[i])]
    return ", ".join(f"rank {int(ranks.iloc[i])} ({numbers[i]:.1f} %)" for i in order[:top])


def _loaded_ranks(results: Mapping[str, Any], default: int) -> int:
    """The number of ranks loaded (the trace metadata's rows), ``default`` without it."""
    meta = results.get("trace_metadata")
    if isinstance(meta, pd.DataFrame) and "rank" in meta:
        return int(meta["rank"].nunique())
    return default


# ------------------------------------------------------------------------------------- rules
def gpu_idle_host_bound(results: Mapping[str, Any]) -> list[Finding]:
    """GPU idle share high and mostly host_wait: the CPU does not launch work fast enough."""
    temporal = _need(results, "temporal_breakdown")
    idle_df, _ = _need(results, "idle_time_breakdown")
    idle = temporal["idle_time_pctg"].astype(float)
    if not idle.notna().any():
        raise Silent("no rank has GPU events")
    mean_idle = float(idle.mean())
    per_cat = idle_df.groupby("idle_category")["idle_time"].sum()
    total = float(per_cat.sum())
    host = 100.0 * float(per_cat.get("host_wait", 0.0)) / total if total > 0 else 0.0
    if mean_idle <= IDLE_SHARE_PCT or host <= HOST_WAIT_SHARE_PCT:
        return []
    evidence = [f"temporal_breakdown: idle {_ranks(idle, temporal['rank'])}",
                f"idle_time_breakdown: host_wait is {host:.0f} % of the idle time"]
    launches = results.get("cuda_kernel_launch_stats")
    if isinstance(launches, Mapping) and launches:
        frame = pd.concat(list(launches.values()), ignore_index=True)
        if len(frame):
            short = 100.0 * float((frame["gpu_duration"] < frame["cpu_duration"]).mean())
            evidence.append(
                f"kernel_launch_stats: median launch call {frame['cpu_duration'].median():.1f} µs "
                f"vs median kernel {frame['gpu_duration'].median():.1f} µs; {short:.0f} % of "
                "kernels run shorter than their own launch call")
    queues = results.get("queue_length_stream_summary")
    if isinstance(queues, pd.DataFrame) and len(queues) and "empty_idle" in queues:
        empty = 100.0 * float(queues["empty_idle"].sum()) / max(float(queues["span"].sum()), 1.0)
        evidence.append(f"queue_length: the launch queue was empty while its stream sat idle "
                        f"{empty:.0f} % of the streams' time")
    return [Finding(
        "warning", "The GPU waits for the CPU (launch- or CPU-bound)",
        f"The GPU is idle {mean_idle:.1f} % of the analysed time on average, and {host:.0f} % of "
        "that idle time is host_wait: the next kernel was launched only after the previous one "
        "had finished.",
        "gpu_idle_pct", round(mean_idle, 2), IDLE_SHARE_PCT, "; ".join(evidence),
        "Launch less often or earlier: CUDA graphs, torch.compile (fuses small kernels), larger "
        "batches, fewer small kernels; move CPU work (data loading, logging, .item() syncs) off "
        "the training loop's critical path.",
    )]


def exposed_communication(results: Mapping[str, Any]) -> list[Finding]:
    """Communication not hidden behind computation takes a large share of the step time."""
    steps = _need(results, "step_breakdown")
    if steps.empty:  # a serving trace (no ProfilerStep): say so, not that nothing is exposed
        raise Silent("needs complete profiler steps (comm_comp_overlap shows how much of the "
                     "communication any computation overlaps)")
    if not steps["exposed_comm_us"].any():
        raise Silent("no exposed communication kernels in the profiler steps")
    per_rank = steps.groupby("rank")[["exposed_comm_us", "step_time_us"]].sum()
    share = 100.0 * per_rank["exposed_comm_us"] / per_rank["step_time_us"]
    worst = float(share.max())
    if not worst > EXPOSED_COMM_PCT:
        return []
    evidence = f"step_breakdown: exposed communication {_ranks(share, share.index.to_series())}"
    summary = results.get("collective_summary")
    if isinstance(summary, pd.DataFrame) and len(summary):
        top = summary.nlargest(3, "exposed_us")
        evidence += "; collective_summary: " + ", ".join(
            f"{r.type} {r.bucket} ({r.count}×, {r.exposed_us / 1000:.1f} ms exposed)"
            for r in top.itertuples())
    return [Finding(
        "warning", "Communication is exposed (not overlapped with computation)",
        f"Up to {worst:.1f} % of a rank's step time is communication that no computation kernel "
        "overlaps.",
        "exposed_comm_pct", round(worst, 2), EXPOSED_COMM_PCT, evidence,
        "Overlap collectives with compute: tune DDP bucket sizes (bucket_cap_mb), enable FSDP "
        "forward/backward prefetch, reorder so gradients are ready earlier; check the "
        "interconnect if the collectives themselves are slow (see bus bandwidth).",
    )]


def straggler_rank(results: Mapping[str, Any]) -> list[Finding]:
    """One rank arrives last at most collectives and keeps the others waiting."""
    table = _need(results, "stragglers")
    steps = _need(results, "step_breakdown")
    if len(table) and table["times_last"].isna().all():
        loaded = _loaded_ranks(results, len(table))
        raise Silent("one rank loaded: no collective to compare across ranks" if loaded == 1
                     else f"no collective matched across the {loaded} ranks loaded (their "
                     "collectives differ: ranks of different jobs, or of different steps)")
    if table.empty:
        raise Silent("no collectives matched across two or more ranks")
    if steps.empty:
        raise Silent("no profiler steps: a rank's lateness is judged against the step time")
    top = table.iloc[0]
    step_us = float(steps.groupby("step")["step_time_us"].median().median())
    lateness = 100.0 * float(top["mean_lateness_us"]) / step_us if step_us > 0 else 0.0
    last_share = float(top["times_last"]) / max(float(top["instances"]), 1.0)
    if last_share <= 0.5 or lateness <= STRAGGLER_LATENESS_PCT:
        return []
    rank = int(top["rank"])
    return [Finding(
        "warning", f"Rank {rank} is a straggler: the others wait for it",
        f"Rank {rank} arrives last at {int(top['times_last'])} of {int(top['instances'])} "
        f"collectives, {top['mean_lateness_us'] / 1000:.1f} ms late on average ({lateness:.1f} % "
        f"of the median step); why: {_why(top['why'], results)}."
        + (f" Caveat: {top['clock_caveat']}." if top.get("clock_caveat") else ""),
        "straggler_lateness_pct", round(lateness, 2), STRAGGLER_LATENESS_PCT,
        f"stragglers: rank {rank} caused {top['wait_caused_per_step_us'] / 1000:.1f} ms of "
        f"waiting per step ({top['wait_caused_pct_of_step']:.1f} % of the median step; "
        f"{top['wait_caused_us'] / 1000:.1f} ms over the window; per collective it was last at: "
        f"late from host {top['late_host_us'] / 1000:.1f} ms, busy "
        f"{top['late_busy_us'] / 1000:.1f} ms); "
        "step_breakdown: slowest rank per step",
        "Late from its CPU (host): look at that rank's data loading and CPU work before the "
        "collective. Late because busy: it has more work (imbalanced batches or shards) or a "
        + ("slower/throttled GPU; compare its kernel breakdown with a typical rank's."
           if _has_gpu_kernels(results) is None else
           "slower or busier CPU; compare its operators with a typical rank's."),
    )]


def _why(why: str, results: Mapping[str, Any]) -> str:
    """The stragglers table's cause, without the GPU on a trace that has none."""
    if not why:
        return "not determined"
    return why if _has_gpu_kernels(results) is None else why.replace(" or a slower GPU", "")


def low_bus_bandwidth(results: Mapping[str, Any]) -> list[Finding]:
    """Large collectives inside a node reach well below the link's expected bus bandwidth."""
    summary = _need(results, "collective_summary")
    meta = _need(results, "trace_metadata")
    if summary.empty:
        raise Silent("no collectives matched across ranks")
    gpus = " ".join(str(g) for g in meta["gpu"] if isinstance(g, str) and g.strip() not in ("", "-"))
    expected = next((v for k, v in EXPECTED_BUSBW_GBPS.items() if k in gpus), None)
    if expected is None:
        raise Silent(f"no expected bus bandwidth for this GPU ({gpus or 'unknown'})")
    if not (summary["ranks"] >= 2).any():
        loaded = _loaded_ranks(results, 1)
        raise Silent("one rank loaded: a collective's time there includes waiting for the ranks "
                     "not loaded, so its bandwidth is unknown" if loaded == 1 else
                     f"no collective matched across the {loaded} ranks loaded: a collective's "
                     "time on one rank includes waiting for the others, so its bandwidth is "
                     "unknown")
    large = summary[(summary["bucket_bytes"] >= LARGE_MESSAGE_BYTES) & (summary["ranks"] >= 2)
                    & (summary["ranks"] <= NODE_SIZE) & summary["busbw_median_gbps"].notna()]
    if large.empty:
        raise Silent("no collective of 1 MiB or more within a node")
    slow = large[large["busbw_median_gbps"] < BUSBW_FRACTION * expected]
    if slow.empty:
        return []
    worst = slow.nsmallest(1, "busbw_median_gbps").iloc[0]
    return [Finding(
        "warning", "Collectives reach a low bus bandwidth",
        f"{worst['type']} of {worst['bucket']} reaches a median {worst['busbw_median_gbps']:.0f} "
        f"GB/s bus bandwidth, below {BUSBW_FRACTION:.0%} of the ~{expected:.0f} GB/s an "
        "intra-node all-reduce typically reaches on this GPU.",
        "busbw_median_gbps", round(float(worst["busbw_median_gbps"]), 2),
        BUSBW_FRACTION * expected,
        "collective_summary: " + ", ".join(
            f"{r.type} {r.bucket}: {r.busbw_median_gbps:.0f} GB/s ({r.count}×)"
            for r in slow.head(4).itertuples()),
        "Check the topology (NVLink vs PCIe, NCCL_P2P/NCCL_IB settings), that the collective "
        "is not waiting on a straggler (skew), and larger buckets for small messages.",
    )]


def host_to_device_copies(results: Mapping[str, Any]) -> list[Finding]:
    """Host-to-device copies take time on the GPU, or come from pageable memory."""
    temporal = _need(results, "temporal_breakdown")
    try:
        copies = _need(results, "memcpy_summary")
    except Silent:  # no bytes (the copy args are read from the trace file): names and times only
        copies = _copies_from_kernel_names(_need(results, "gpu_kernel_breakdown")[1])
    htod = copies[(copies["kind"] == "Memcpy") & (copies["direction"] == "HtoD")]
    if htod.empty:
        return []
    span = float(temporal["kernel_time(us)"].sum())
    share = 100.0 * float(htod["busy"].sum()) / span if span > 0 else 0.0
    pageable = htod[htod["src"] == "Pageable"]
    out = []
    if not pageable.empty:
        ms = float(pageable["time"].sum()) / 1000
        of_span = 100.0 * ms * 1000 / span if span > 0 else 0.0
        out.append(Finding(
            "warning" if of_span >= PAGEABLE_WARN_PCT else "info",
            "Host-to-device copies from pageable memory",
            f"HtoD copies read pageable host memory on {pageable['rank'].nunique()} rank(s), "
            f"{ms:.2f} ms in all ({of_span:.2f} % of the summed GPU span). A pageable copy is "
            "staged and synchronous, so it cannot overlap with compute.",
            "pageable_htod_ms", round(ms, 3), 0.0,
            "memcpy_summary (memory copies): " + ", ".join(
                f"rank {r.rank}: {r.time / 1000:.2f} ms" + (
                    f", {r.count} copies, {_size(r.bytes)} at {r.achieved_gbps:.2f} GB/s"
                    if r.bytes == r.bytes else "") for r in pageable.head(4).itertuples()),
            "Pin host memory (DataLoader(pin_memory=True), tensor.pin_memory()) and copy with "
            "non_blocking=True.",
        ))
    if share > HTOD_SHARE_PCT:
        out.append(Finding(
            "warning", "Host-to-device copies take a large share of GPU time",
            f"HtoD copies are {share:.1f} % of the summed GPU span.",
            "htod_share_pct", round(share, 2), HTOD_SHARE_PCT,
            f"memcpy_summary (memory copies): {htod['busy'].sum() / 1000:.2f} ms of HtoD copies, "
            f"{_size(htod['bytes'].sum())}",
            "Prefetch the next batch on a side stream, keep data on the GPU between steps, "
            "avoid re-uploading constants every step.",
        ))
    return out


def _size(n: float) -> str:
    """Bytes as B / KiB / MiB / GiB, or "? bytes" when unknown."""
    if n != n:
        return "? bytes"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def _copies_from_kernel_names(kernels: pd.DataFrame) -> pd.DataFrame:
    """The memory copy summary's columns from the kernel breakdown's names and times alone
    (``Memcpy HtoD (Pageable -> Device)``); bytes and bandwidth unknown (NaN)."""
    rows = kernels[kernels["kernel_type"] == "MEMORY"]
    names = rows["name"].astype(str)
    parts = names.str.extract(r"^(Memcpy|Memset)\s*(\w+)?(?:\s*\((\w+)\s*->\s*(\w+)\))?")
    return pd.DataFrame({
        "rank": rows["rank"].to_numpy(), "kind": parts[0].to_numpy(),
        "direction": parts[1].fillna("").to_numpy(), "src": parts[2].to_numpy(),
        "dst": parts[3].to_numpy(), "count": np.ones(len(rows), dtype=np.int64),
        "bytes": np.nan, "time": rows["sum (us)"].to_numpy(), "busy": rows["sum (us)"].to_numpy(),
        "achieved_gbps": np.nan,
    })


def trace_health_errors(results: Mapping[str, Any]) -> list[Finding]:
    """Errors in the trace itself (dropped events, broken clocks...) make the other numbers
    untrustworthy: they come first."""
    health = _need(results, "trace_health")
    errors = health[health["severity"] == "error"]
    if errors.empty:
        return []
    checks = ", ".join(sorted(set(errors["check"].astype(str))))
    return [Finding(
        "error", "The trace itself has errors: read the other findings with care",
        f"{len(errors)} trace health error(s) ({checks}): " + " | ".join(
            str(m) for m in errors["message"].head(3)),
        "trace_health_errors", float(len(errors)), 0.0,
        "trace_health: " + "; ".join(
            f"rank {r.rank}: {r.check}" for r in errors.head(6).itertuples()),
        "Fix the capture first (see the Trace health section: each error says what is wrong "
        "and how to record the trace again).",
    )]


def step_time_variance(results: Mapping[str, Any]) -> list[Finding]:
    """Step durations vary across steps of a rank, or one rank's steps are slower than the rest."""
    steps = _need(results, "profiler_step_table")
    analysed = set(_need(results, "profiler_steps"))
    steps = steps[steps["step"].isin(analysed)]
    if steps["step"].nunique() < 2:
        raise Silent("needs at least two complete profiler steps")
    out = []
    per_rank = steps.groupby("rank")["duration(us)"]
    cv = 100.0 * per_rank.std(ddof=0) / per_rank.mean()
    if float(cv.max()) > STEP_CV_PCT:
        rank = int(cv.idxmax())
        durations = steps[steps["rank"] == rank].set_index("step")["duration(us)"] / 1000
        out.append(Finding(
            "warning", "Step times are not steady",
            f"Rank {rank}'s step durations vary by {cv.max():.1f} % (coefficient of variation): "
            + ", ".join(f"step {s}: {d:.1f} ms" for s, d in durations.items()),
            "step_time_cv_pct", round(float(cv.max()), 2), STEP_CV_PCT,
            "profiler_step_table: duration(us) per rank and step",
            "Look for periodic work (checkpointing, evaluation, logging, garbage collection) or "
            "data loading stalls in the slow steps; compare a slow and a fast step.",
        ))
    if steps["rank"].nunique() > 1:
        mean = per_rank.mean()
        spread = 100.0 * (mean.max() / mean.median() - 1.0)
        if spread > RANK_SPREAD_PCT:
            rank = int(mean.idxmax())
            out.append(Finding(
                "warning", f"Rank {rank} is slower than the others",
                f"Rank {rank}'s mean step takes {mean.max() / 1000:.1f} ms, {spread:.1f} % more "
                f"than the median rank's {mean.median() / 1000:.1f} ms.",
                "rank_step_spread_pct", round(float(spread), 2), RANK_SPREAD_PCT,
                "profiler_step_table: mean duration(us) per rank",
                "Compare that rank's temporal and kernel breakdowns with a typical rank's: more "
                "work (imbalanced data or sharding), a slower or throttled GPU, or a busy host.",
            ))
    return out


def data_loading_stall(results: Mapping[str, Any]) -> list[Finding]:
    """Steps start with a long CPU-only stretch before the first launch: input pipeline stalls."""
    gaps = _need(results, "step_start_gaps")
    analysed = set(_need(results, "profiler_steps"))
    gaps = gaps[gaps["step"].isin(analysed)]
    if gaps.empty:
        raise Silent("needs complete profiler steps")
    per_rank = gaps.groupby("rank")["first_launch_pct"].median()
    worst = float(per_rank.max())
    if not worst > DATA_LOADING_GAP_PCT:
        return []
    rank = int(per_rank.idxmax())
    mine = gaps[gaps["rank"] == rank]
    loader = float(mine["dataloader_us"].sum())
    evidence = (f"step_start_gap: rank {rank}, first launch after "
                + ", ".join(f"{g / 1000:.1f} ms (step {s})"
                            for s, g in zip(mine["step"], mine["first_launch_us"], strict=True)))
    if loader > 0:
        evidence += f"; {loader / 1000:.1f} ms in DataLoader events"
    return [Finding(
        "warning", "Steps start with a data loading stall",
        f"On rank {rank} the median step runs {worst:.1f} % of its time on the CPU before it "
        "launches any GPU work.",
        "step_start_gap_pct", round(worst, 2), DATA_LOADING_GAP_PCT, evidence,
        "Load data ahead: DataLoader(num_workers>0, pin_memory=True, prefetch_factor, "
        "persistent_workers=True); move augmentation to the GPU; keep per-step CPU work "
        "(logging, metrics) after the launches.",
    )]


def far_from_roofline(results: Mapping[str, Any]) -> list[Finding]:
    """GEMMs / attention / convolutions far below their roofline bound; MFU per step when the
    modelled operators run at least ``MFU_MIN_COVERAGE_PCT`` of the GPU kernel time."""
    roof = _need(results, "operator_roofline")
    if roof.gpu is None:
        raise Silent("unknown GPU: no peak numbers for a roofline (pass gpu= to the roofline)")
    ops = roof.ops[roof.ops["innermost"].astype(bool)]
    total = float(roof.coverage["gpu_kernel_time_us"].sum())
    slow = ops[ops["family"].isin(COMPUTE_FAMILIES) & (ops["pct_of_peak"] < ROOFLINE_PCT)]
    out = []
    lost = float(slow["time_lost_us"].sum())
    share = 100.0 * lost / total if total > 0 else 0.0
    if share > LOST_SHARE_PCT:
        top = slow.nlargest(3, "time_lost_us")
        out.append(Finding(
            "warning", "GEMMs / attention run far below their roofline",
            f"Compute-heavy operators below {ROOFLINE_PCT:.0f} % of their roofline bound lose "
            f"{lost / 1000:.2f} ms, {share:.1f} % of the GPU kernel time, against running at it.",
            "roofline_time_lost_pct", round(share, 2), LOST_SHARE_PCT,
            "operator_roofline: " + "; ".join(
                f"{r.name} {r.input_dims} at {r.pct_of_peak:.0f} % of peak ({r.bound}-bound), "
                f"{r.time_lost_us / 1000:.2f} ms lost" for r in top.itertuples()),
            "Check the dtypes (bf16/fp8 instead of fp32), shapes that tile badly (dimensions not "
            "multiples of 8/64), fused attention kernels (SDPA flash/efficient backends), and "
            "batching small GEMMs together.",
        ))
    modelled = float(roof.coverage["modelled_kernel_time_us"].sum())
    coverage = 100.0 * modelled / total if total > 0 else 0.0
    if len(roof.steps) and coverage >= MFU_MIN_COVERAGE_PCT:
        mfu = float(roof.steps["mfu_pct"].median())
        stepped = bool((roof.steps["step"] >= 0).any())
        if mfu < MFU_PCT:
            out.append(Finding(
                "info", "Model FLOPs utilisation is low",
                f"The modelled operators (their kernels {coverage:.0f} % of the GPU kernel time) "
                f"reach a median {mfu:.1f} % of the GPU's {roof.steps['precision'].iloc[0]} peak "
                + ("over the profiler steps." if stepped else "over the trace (no profiler steps)."),
                "mfu_pct", round(mfu, 2), MFU_PCT,
                "operator_roofline: MFU per rank and step (" + ", ".join(
                    f"rank {r.rank} " + (f"step {r.step}" if r.step >= 0 else "whole trace")
                    + f": {r.mfu_pct:.1f} %" for r in roof.steps.head(6).itertuples()) + ")",
                "MFU is bounded by everything else in this list (idle GPU, exposed communication, "
                "slow kernels); fix those first, then larger batches or fused kernels.",
            ))
    return out


def dataloader_share(results: Mapping[str, Any]) -> list[Finding]:
    """The TensorBoard plugin's rule: the steps spend over 5 % of their time in DataLoader."""
    steps = _need(results, "step_time_breakdown")
    sums = steps.groupby("rank")[["dataloader_us", "total_us"]].sum()
    if not (sums["dataloader_us"] > 0).any():
        raise Silent("no enumerate(DataLoader) operator inside the profiler steps")
    share = 100 * sums["dataloader_us"] / sums["total_us"].where(sums["total_us"] > 0)
    worst = float(share.max())
    if not worst > TB_DATALOADER_PCT:
        return []
    rank = int(share.idxmax())
    return [Finding(
        "warning", "Input data loading takes a large share of the steps",
        f"{worst:.1f} % of rank {rank}'s step time is in DataLoader (enumerate(DataLoader)"
        "...__next__), as the TensorBoard plugin's overview counts it.",
        "dataloader_share_pct", round(worst, 2), TB_DATALOADER_PCT,
        "step_time_breakdown: " + _ranks(share.reset_index(drop=True), share.index.to_series()),
        "Load data in worker processes: DataLoader(num_workers>0, pin_memory=True, "
        "persistent_workers=True, prefetch_factor); see "
        "https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading",
    )]


def low_gpu_utilization(results: Mapping[str, Any]) -> list[Finding]:
    """The TensorBoard plugin's rule: a GPU busy under 50 % of the steps."""
    summary = _need(results, "gpu_summary")
    if summary.empty:
        raise Silent("no GPU kernels")
    low = summary[summary["gpu_utilization_pct"] < TB_GPU_UTILIZATION_PCT]
    if low.empty:
        return []
    worst = low.loc[low["gpu_utilization_pct"].idxmin()]
    return [Finding(
        "info", "Low GPU utilization",
        f"Rank {int(worst['rank'])}'s GPU {int(worst['gpu'])} runs a kernel "
        f"{worst['gpu_utilization_pct']:.2f} % of the profiler steps' time "
        f"({len(low)} GPU(s) under {TB_GPU_UTILIZATION_PCT:.0f} %).",
        "gpu_utilization_pct", round(float(worst["gpu_utilization_pct"]), 2),
        TB_GPU_UTILIZATION_PCT,
        "gpu_summary: " + ", ".join(f"rank {int(r.rank)} GPU {int(r.gpu)} "
                                    f"{r.gpu_utilization_pct:.2f} %"
                                    for r in low.head(6).itertuples()),
        "Give the GPU more work per launch (a larger batch, if convergence allows) and find what "
        "it waits for in the idle time breakdown and the step time breakdown.",
    )]


def tensor_cores_unused(results: Mapping[str, Any]) -> list[Finding]:
    """Tensor-core-eligible operators (matmul, conv...) whose kernels use no tensor cores."""
    meta = _need(results, "trace_metadata")
    tables = _need(results, "kernel_table")
    gpus = " ".join(str(g) for g in meta["gpu"].dropna())
    if not any(m in gpus for m in ("V100", "T4", "A100", "A10", "A30", "A40", "H100", "H200",
                                   "H800", "B200", "L4", "L40", "RTX")):
        raise Silent("tensor cores are identified by NVIDIA kernel names: no NVIDIA GPU of "
                     "compute capability 7 or more named in the trace")
    k = tables.by_operator
    total = k.groupby("rank")["total_us"].sum()
    names = k["name"].astype(str)
    on_tc = k["tensor_cores_used"].astype(bool) | names.map(
        lambda n: any(m in n for m in TC_KERNEL_MARKERS)).astype(bool)
    eligible = k[k["operator"].isin(TC_ELIGIBLE_OPS) & ~on_tc]
    if eligible.empty:
        return []
    lost = eligible.groupby("rank")["total_us"].sum()
    share = (100 * lost / total.reindex(lost.index)).dropna()
    worst = float(share.max())
    if not worst > TC_ELIGIBLE_PCT:
        return []
    rank = int(share.idxmax())
    top = eligible[eligible["rank"] == rank].groupby("operator")["total_us"].sum().nlargest(3)
    return [Finding(
        "warning", "Tensor-core-eligible operators run without tensor cores",
        f"On rank {rank}, {worst:.1f} % of the kernel time is in kernels launched by operators "
        "that can use tensor cores (matmul, linear, convolution...) but whose kernels do not.",
        "tc_eligible_no_tc_pct", round(worst, 2), TC_ELIGIBLE_PCT,
        "kernel_table (by operator): " + ", ".join(f"{op} {us / 1000:.2f} ms"
                                                  for op, us in top.items()),
        "Run them in lower precision: torch.autocast (bf16/fp16) for mixed precision, or allow "
        "TF32 for fp32 matmuls (torch.backends.cuda.matmul.allow_tf32 = True, "
        "torch.backends.cudnn.allow_tf32 = True); see https://pytorch.org/docs/stable/amp.html",
    )]


def launch_overhead(results: Mapping[str, Any]) -> list[Finding]:
    """CUDA launch calls take a large share of the steps (the plugin's Runtime category)."""
    launches = _need(results, "cuda_kernel_launch_stats")
    steps = _need(results, "profiler_step_table")
    analysed = set(_need(results, "profiler_steps"))
    steps = steps[steps["step"].isin(analysed)]
    if steps.empty:
        raise Silent("needs complete profiler steps")
    rows = []
    for rank, frame in launches.items():
        span = float(steps.loc[steps["rank"] == rank, "duration(us)"].sum())
        # runtime outliers (calls over the cut-off) block, e.g. a synchronous copy waiting for the
        # GPU: they are not launch overhead
        calls = classify(frame)
        short = calls.loc[~calls["runtime_outlier"], "cpu_duration"]
        if span > 0 and len(short):
            rows.append((rank, 100 * float(short.sum()) / span, len(short)))
    if not rows:
        raise Silent("no CUDA launch calls inside the profiler steps")
    rank, worst, count = max(rows, key=lambda r: r[1])
    if not worst > RUNTIME_SHARE_PCT:
        return []
    return [Finding(
        "warning", "Kernel launch overhead takes a large share of the steps",
        f"Rank {rank} spends {worst:.1f} % of its step time inside {count:,} CUDA launch calls "
        f"(cudaLaunchKernel, cudaMemcpyAsync...; calls over {RUNTIME_CUTOFF_US:.0f} µs, which "
        "block, left out).",
        "launch_time_pct", round(worst, 2), RUNTIME_SHARE_PCT,
        "kernel_launch_stats: " + ", ".join(f"rank {r} {v:.1f} % ({n:,} launches)"
                                            for r, v, n in sorted(rows, key=lambda r: -r[1])[:5]),
        "Launch fewer, larger kernels: capture the step in a CUDA graph (torch.cuda.graphs, "
        "torch.compile(mode='reduce-overhead')) or fuse small operators (torch.compile).",
    )]


# Serving: the GPU idles more than this share (%) of the steady-state iterations' span between
# iterations (scheduler / host time), or inside decode iterations (launch-bound decode).
SERVING_IDLE_PCT = 20.0


def _steady_iterations(results: Mapping[str, Any]) -> pd.DataFrame:
    table = _need(results, "inference_iterations")
    steady = table[table["steady"].astype(bool) & (table["kernels"] > 0)]
    return steady


def idle_between_iterations(results: Mapping[str, Any]) -> list[Finding]:
    """Serving traces: the GPU waits between the engine's iterations (scheduler, host work).
    Returns nothing on traces without serving iterations (training traces)."""
    steady = _steady_iterations(results)
    gaps = steady["idle_before_us"].astype(float)
    if gaps.notna().sum() == 0:
        return []
    span = float((steady["gpu_end_us"] - steady["gpu_start_us"]).sum())
    idle = float(gaps.sum())
    share = 100.0 * idle / (idle + span) if idle + span > 0 else 0.0
    if share <= SERVING_IDLE_PCT:
        return []
    return [Finding(
        "warning", "The GPU idles between serving iterations",
        f"Between the {len(steady)} steady-state iterations the GPU is idle {idle / 1000:.2f} ms "
        f"({share:.1f} % of their time): the engine's scheduler and host work between forward "
        "passes are not overlapped with the GPU.",
        "idle_between_iterations_pct", round(share, 2), SERVING_IDLE_PCT,
        f"inference_iterations: median gap {gaps.median():.1f} µs, median GPU busy "
        f"{steady['gpu_busy_us'].median():.1f} µs per iteration",
        "Overlap scheduling with the GPU (vLLM async scheduling, SGLang overlap scheduler), "
        "larger batches, or fewer host syncs between iterations.",
    )]


def launch_bound_decode(results: Mapping[str, Any]) -> list[Finding]:
    """Serving traces: decode iterations whose GPU waits between its own kernels (small kernels
    launched one by one, gaps between graph launches). Nothing on traces without decode."""
    steady = _steady_iterations(results)
    decode = steady[steady["phase"] == "decode"]
    if decode.empty:
        return []
    span = float((decode["gpu_end_us"] - decode["gpu_start_us"]).sum())
    inside = float(decode["idle_inside_us"].sum())
    share = 100.0 * inside / span if span > 0 else 0.0
    if share <= SERVING_IDLE_PCT:
        return []
    mean_kernel = float(decode["gpu_busy_us"].sum()) / max(int(decode["kernels"].sum()), 1)
    return [Finding(
        "warning", "Decode is launch-bound",
        f"Inside the {len(decode)} steady-state decode iterations the GPU is idle {share:.1f} % "
        "of the time between their first and last kernel: it waits for the next launch.",
        "decode_idle_inside_pct", round(share, 2), SERVING_IDLE_PCT,
        f"inference_iterations: {int(decode['kernels'].sum()):,} kernels of {mean_kernel:.1f} µs "
        f"on average; {inside / 1000:.2f} ms idle inside decode iterations",
        "Replay decode as a CUDA graph for every batch size served (vLLM/SGLang cuda graph "
        "capture sizes), fuse small kernels, keep host work out of the forward pass.",
    )]


# Prefill: one operator family (attention, GEMM) takes at least this share (%) of the steady
# prefill iterations' GPU time; the split is said only when operators account for at least
# ATTRIBUTED_PCT of that time (graph replays without their capture traces do not).
PREFILL_DOMINANT_PCT = 50.0
ATTRIBUTED_PCT = 50.0
_UNATTRIBUTED = ("(no operator)", "CUDA graph (")


def prefill_attention_vs_gemm(results: Mapping[str, Any]) -> list[Finding]:
    """Serving traces: whether attention or GEMM operators dominate the steady prefill
    iterations' GPU time (``inference_iterations``' operator split; families as TraceLens's
    categories). Nothing on traces without serving iterations; silent (with the reason) when
    there is no steady prefill or its GPU time is not attributed to operators."""
    table = _need(results, "inference_iterations")
    if table.empty:
        return []
    prefill = table[table["steady"].astype(bool) & (table["phase"] == "prefill")
                    & (table["kernels"] > 0)]
    if prefill.empty:
        raise Silent("no steady-state prefill iterations in the trace (decode only)")
    ops = table.attrs.get("operators")
    if ops is None:
        raise Silent("inference_iterations carries no operator split")
    ops = ops.merge(prefill[["rank", "iteration"]], on=["rank", "iteration"])
    total = float(ops["gpu_us"].sum())
    named = ~ops["name"].astype(str).str.startswith(_UNATTRIBUTED)
    attributed = 100.0 * float(ops.loc[named, "gpu_us"].sum()) / total if total > 0 else 0.0
    if attributed < ATTRIBUTED_PCT:
        raise Silent(f"only {attributed:.1f} % of the prefill GPU time is attributed to operators "
                     "(graph replays: load them with their capture traces)")
    share = ops.groupby("family")["gpu_us"].sum() * 100.0 / total
    attention, gemm = float(share.get("attention", 0.0)), float(share.get("gemm", 0.0))
    family, value = ("attention", attention) if attention >= gemm else ("GEMM", gemm)
    if value < PREFILL_DOMINANT_PCT:
        return []
    top = (ops[ops["family"] == family.lower()].groupby("name")["gpu_us"].sum()
           .sort_values(ascending=False).head(3))
    suggestion = (
        "Long prompts make attention quadratic: use the fastest attention backend for the GPU "
        "(FlashAttention / FlashInfer / AITER), chunked prefill, and prefix caching to skip "
        "recomputing shared prefixes." if family == "attention" else
        "Prefill is compute-bound in its GEMMs, as expected: lower-precision GEMMs (FP8), tuned "
        "GEMM kernels for these shapes (hipBLASLt / cuBLASLt tuning), and batching prefills "
        "raise throughput; see the operator roofline for how close they run to peak.")
    return [Finding(
        "info", f"Prefill is dominated by {family}",
        f"In the {len(prefill)} steady-state prefill iterations {value:.1f} % of the GPU time is "
        f"in {family} operators (attention {attention:.1f} %, GEMM {gemm:.1f} %, MoE "
        f"{float(share.get('moe', 0.0)):.1f} %).",
        f"prefill_{family.lower()}_pct", round(value, 2), PREFILL_DOMINANT_PCT,
        "inference_iterations (operator split): " + ", ".join(
            f"{n} {v / 1000:.2f} ms" for n, v in top.items())
        + f"; {attributed:.1f} % of prefill GPU time attributed to operators",
        suggestion,
    )]


RULES: dict[str, Callable[[Mapping[str, Any]], list[Finding]]] = {
    "trace_health_errors": trace_health_errors,
    "gpu_idle_host_bound": gpu_idle_host_bound,
    "exposed_communication": exposed_communication,
    "straggler_rank": straggler_rank,
    "low_bus_bandwidth": low_bus_bandwidth,
    "host_to_device_copies": host_to_device_copies,
    "step_time_variance": step_time_variance,
    "data_loading_stall": data_loading_stall,
    "far_from_roofline": far_from_roofline,
    "dataloader_share": dataloader_share,
    "tensor_cores_unused": tensor_cores_unused,
    "launch_overhead": launch_overhead,
    "low_gpu_utilization": low_gpu_utilization,
    "idle_between_iterations": idle_between_iterations,
    "launch_bound_decode": launch_bound_decode,
    "prefill_attention_vs_gemm": prefill_attention_vs_gemm,
}

# What the rules read, with the options they need (the registry runs these first).
REQUIRES: dict[str, dict[str, Any]] = {
    "temporal_breakdown": {},
    "idle_time_breakdown": {},
    "cuda_kernel_launch_stats": {},
    "comm_comp_overlap": {},
    "gpu_kernel_breakdown": {},
    "memcpy_summary": {},
    "trace_health": {},
    "queue_length_stream_summary": {},
    "profiler_step_table": {},
    "profiler_steps": {},
    "step_start_gaps": {},
    "operator_roofline": {},
    "step_breakdown": {},
    "stragglers": {},
    "collective_summary": {},
    "trace_metadata": {},
    "step_time_breakdown": {},
    "gpu_summary": {},
    "kernel_table": {},
    "inference_iterations": {},
}


def _has_gpu_kernels(results: Mapping[str, Any]) -> str | None:
    temporal = results.get("temporal_breakdown")
    if (temporal is None or isinstance(temporal, TraceAnalysisError)
            or not temporal["kernel_time(us)"].notna().any()):  # CPU-only ranks give NaN rows
        return "the analysed window has no GPU kernels (a CPU-only trace, or none in the steps)"
    return None


def _has_collectives(results: Mapping[str, Any]) -> str | None:
    summary = results.get("collective_summary")
    if summary is None or isinstance(summary, TraceAnalysisError) or summary.empty:
        return "no collectives matched across two or more ranks"
    return None


def _has_profiler_steps(results: Mapping[str, Any]) -> str | None:
    meta = results.get("trace_metadata")
    if meta is None or isinstance(meta, TraceAnalysisError):
        return "needs the trace_metadata analysis"
    if not (meta["steps"].astype(str) != "-").any():
        return ("no profiler steps (ProfilerStep#N): the TensorBoard plugin's window is then the "
                "span of the CPU events, which GPU work may run past")
    return None


def _has_gpu_model(results: Mapping[str, Any]) -> str | None:
    meta = results.get("trace_metadata")
    names = [] if meta is None or isinstance(meta, TraceAnalysisError) else [
        str(g) for g in meta["gpu"] if isinstance(g, str) and g.strip() not in ("", "-")]
    return None if names else "the trace does not name the GPU model (no deviceProperties)"


# What each rule needs from the trace, checked before it runs: a rule whose need is not met is
# listed in ``not_run`` with the reason, and says nothing (no GPU finding on a CPU-only trace).
NEEDS: dict[str, Callable[[Mapping[str, Any]], str | None]] = {
    "gpu_kernels": _has_gpu_kernels,
    "collectives": _has_collectives,
    "gpu_model": _has_gpu_model,
    "profiler_steps": _has_profiler_steps,
}
RULE_NEEDS: dict[str, tuple[str, ...]] = {
    "trace_health_errors": (),
    "gpu_idle_host_bound": ("gpu_kernels",),
    "exposed_communication": ("gpu_kernels",),
    "straggler_rank": ("collectives",),
    "low_bus_bandwidth": ("gpu_kernels", "collectives", "gpu_model"),
    "host_to_device_copies": ("gpu_kernels",),
    "step_time_variance": (),
    "data_loading_stall": ("gpu_kernels",),
    "far_from_roofline": ("gpu_kernels",),  # shapes and the GPU: operator_roofline says why
    # the TensorBoard plugin's rules: about the GPU (DataLoader time as the GPU's starvation)
    "dataloader_share": ("gpu_kernels", "profiler_steps"),
    "tensor_cores_unused": ("gpu_kernels",),
    "launch_overhead": ("gpu_kernels",),
    "low_gpu_utilization": ("gpu_kernels", "profiler_steps"),
}


def findings(results: Mapping[str, Any]) -> pd.DataFrame:
    """Run every rule over ``results`` → the findings table (see the module doc). A rule runs
    only where the trace has what it needs (``RULE_NEEDS``); otherwise it is in ``not_run``."""
    rows: list[Finding] = []
    not_run: dict[str, str] = {}
    for name, rule in RULES.items():
        missing = next((why for need in RULE_NEEDS.get(name, ())
                        if (why := NEEDS[need](results)) is not None), None)
        if missing is not None:
            not_run[name] = missing
            continue
        try:
            rows += rule(results)
        except Silent as why:
            not_run[name] = str(why)
    table = FindingsTable([asdict(f) for f in rows], columns=COLUMNS)
    if len(table):
        # within a severity, by how far the value passes its threshold; a rule whose threshold is
        # 0 (any amount is worth saying) has no such ratio and comes after the others
        excess = table["value"].astype(float) / table["threshold"].replace(0, np.nan).astype(float)
        table = table.assign(_s=table["severity"].map(SEVERITY_ORDER), _x=-excess.fillna(0.0))
        table = table.sort_values(["_s", "_x"], kind="stable").drop(columns=["_s", "_x"])
    table = FindingsTable(table.reset_index(drop=True))
    table.attrs["not_run"] = not_run
    return table


_COLOURS = {"error": "#b00020", "warning": "#b35900", "info": "#0b5394"}


class FindingsTable(pd.DataFrame):
    """The findings as a DataFrame that a notebook shows as a ranked list (text escaped)."""

    _metadata = ["attrs"]

    @property
    def _constructor(self):
        return FindingsTable

    def _repr_html_(self) -> str:
        from html import escape

        items = []
        for r in self.itertuples():
            colour = _COLOURS.get(r.severity, "#444")
            items.append(
                f'<li style="margin-bottom:8px"><strong style="color:{colour}">{escape(r.severity)}'
                f"</strong> <strong>{escape(r.title)}</strong><br>{escape(r.detail)}<br>"
                f'<small>Evidence: {escape(r.evidence)}<br>Usually fixes it: '
                f"{escape(r.suggestion)}</small></li>"
            )
        if not items:
            items.append("<li>No finding: nothing the rules check for is wrong in these traces.</li>")
        not_run = self.attrs.get("not_run") or {}
        skipped = "".join(f"<li>{escape(k)}: {escape(v)}</li>" for k, v in not_run.items())
        extra = f"<details><summary>Checks that could not run ({len(not_run)})</summary><ul>{skipped}</ul></details>" if not_run else ""
        return f"<div><strong>Findings</strong><ol>{''.join(items)}</ol>{extra}</div>"


def headline_text(table: pd.DataFrame) -> list[str]:
    """One line per finding (severity, title, number), for terminals."""
    return [f"[{r.severity}] {r.title}: {r.detail}" for r in table.itertuples()]
