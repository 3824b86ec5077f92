"""Small hand-built Kineto traces, healthy or with one known fault each, for the trace-health checks.

``healthy_job(ranks)`` returns ``{rank: trace document}``: per rank, ``steps`` ProfilerSteps of
1000 µs; in each, a GEMM launched onto stream 7, an NCCL all-reduce onto stream 20 (at the same
times on every rank, so the ranks' clocks agree) and a pinned host-to-device copy, each with its
``cudaLaunchKernel``/``cudaMemcpyAsync`` call and its ac2g flow events; ``distributedInfo`` and
device properties as torch.profiler writes them. Every check of ``analysis.metrics.health.trace_health``
finds nothing in it.

``FAULTS[check](ranks)`` is the same job with one fault that the check named ``check`` must report
(``faulty_job(check)``); ``write_job`` writes a job as ``rank-N.pt.trace.json`` files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

T0_US = 1_732_000_000_000_000  # epoch µs, as torch.profiler writes them
STEP_US = 1000
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
COPY = "Memcpy HtoD (Pinned -> Device)"
CPU_PID, GPU_PID, CPU_TID = 100, 0, 100

Job = dict[int, dict[str, Any]]


def _launch(events, ts, corr, runtime, name, cat, stream, dur, args=None, flows=True):
    events.append({"ph": "X", "cat": "cuda_runtime", "name": runtime, "pid": CPU_PID,
                   "tid": CPU_TID, "ts": ts, "dur": 5, "args": {"correlation": corr}})
    events.append({"ph": "X", "cat": cat, "name": name, "pid": GPU_PID, "tid": stream,
                   "ts": ts + 10 + (stream == 20) * 200, "dur": dur,
                   "args": {"stream": stream, "correlation": corr, "device": 0, **(args or {})}})
    if flows:
        events.append({"ph": "s", "id": corr, "pid": CPU_PID, "tid": CPU_TID, "ts": ts,
                       "cat": "ac2g", "name": "ac2g"})
        events.append({"ph": "f", "id": corr, "pid": GPU_PID, "tid": stream,
                       "ts": events[-2]["ts"], "cat": "ac2g", "name": "ac2g", "bp": "e"})


def rank_document(rank: int, ranks: int, steps: int = 4, first_step: int = 1) -> dict[str, Any]:
    """One healthy rank (see the module docstring)."""
    events: list[dict[str, Any]] = []
    corr = 1000
    for k in range(steps):
        start = T0_US + k * STEP_US
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{first_step + k}",
                       "pid": CPU_PID, "tid": CPU_TID, "ts": start, "dur": STEP_US - 10})
        _launch(events, start + 10, corr + 1, "cudaLaunchKernel", GEMM, "kernel", 7, 200)
        _launch(events, start + 30, corr + 2, "cudaLaunchKernel", ALLREDUCE, "kernel", 20, 100)
        _launch(events, start + 300, corr + 3, "cudaMemcpyAsync", COPY, "gpu_memcpy", 7, 50,
                {"bytes": 1_000_000, "memory bandwidth (GB/s)": 20.0})
        corr += 10
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": ranks},
        "traceEvents": events,
        "traceName": f"rank-{rank}.pt.trace.json",
        "displayTimeUnit": "ms",
    }


def healthy_job(ranks: int = 2, steps: int = 4) -> Job:
    return {r: rank_document(r, ranks, steps) for r in range(ranks)}


def _events(doc, pred=lambda e: True):
    return [e for e in doc["traceEvents"] if pred(e)]


def _negative_duration(job: Job) -> Job:
    next(e for e in job[0]["traceEvents"] if e["name"] == GEMM)["dur"] = -5
    return job


def _zero_duration(job: Job) -> Job:
    next(e for e in job[0]["traceEvents"] if e["name"] == GEMM)["dur"] = 0
    return job


def _stream_overlap(job: Job) -> Job:
    first = next(e for e in job[0]["traceEvents"] if e["name"] == GEMM)
    _launch(job[0]["traceEvents"], first["ts"] + 50 - 10, 1, "cudaLaunchKernel", GEMM, "kernel",
            7, 10)  # starts 50 µs into a 200 µs kernel on the same stream
    return job


def _unclassified_communication(job: Job) -> Job:
    for e in _events(job[0], lambda e: e["name"] == GEMM):
        e["name"] = "fused_all_gather_matmul_kernel"
    return job


def _unclassified_kernels(job: Job) -> Job:
    _launch(job[0]["traceEvents"], T0_US + 700, 2, "cudaLaunchKernel", "Stream Wait Event",
            "kernel", 7, 1)
    return job


def _kernels_without_launch(job: Job) -> Job:
    job[0]["traceEvents"] = _events(
        job[0], lambda e: not (e["name"] == "cudaLaunchKernel" and e["args"]["correlation"] % 10 == 1)
    )
    return job


def _launches_without_kernels(job: Job) -> Job:
    job[0]["traceEvents"] = _events(job[0], lambda e: e["name"] != COPY)
    return job


def _missing_flows(job: Job) -> Job:
    job[0]["traceEvents"] = _events(job[0], lambda e: e.get("cat") != "ac2g")
    # and on rank 1, the arrows of the copies only
    copies = {e["args"]["correlation"] for e in job[1]["traceEvents"] if e["name"] == COPY}
    job[1]["traceEvents"] = _events(
        job[1], lambda e: not (e.get("cat") == "ac2g" and e["id"] in copies)
    )
    return job


def _gpu_stops_early(job: Job) -> Job:
    # the all-reduces of the last two steps (stream 20) are lost; the CPU still launches them
    cut = T0_US + 2 * STEP_US
    job[0]["traceEvents"] = _events(
        job[0], lambda e: not (e["name"] == ALLREDUCE and e["ts"] >= cut)
    )
    for i in range(10):  # and a burst of small all-reduce launches whose kernels are lost too
        job[0]["traceEvents"].append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                                      "pid": CPU_PID, "tid": CPU_TID, "ts": cut + 500 + 10 * i,
                                      "dur": 5, "args": {"correlation": 5000 + i}})
    return job


def _kineto_warnings(job: Job) -> Job:
    job[0]["WARNING"] = ["WARNING:2026-11-23 10:00:00 1:1 CuptiActivityProfiler.cpp:300] "
                         "CUPTI activity buffer is full: activities dropped"]
    job[0]["INFO"] = ["INFO:2026-11-23 10:00:01 1:1 CuptiActivityProfiler.cpp:407] Record counts: "
                      "Out-of-range = 7, Blocklisted runtime = 3, Invalid ext correlations = 12, "
                      "CPU GPU out-of-order = 0, Unexpected CUDA events = 0, CUPTI stopped early? 0"]
    return job


def _truncated_last_step(job: Job) -> Job:
    last = [e for e in job[0]["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep")][-1]
    last["dur"] = 100
    return job


def _timestamp_resolution(job: Job) -> Job:
    job[0]["traceEvents"][0]["ts"] += 0.25  # one ts with a fraction: ns resolution
    return job


def _rank_origin(job: Job) -> Job:
    for doc in job.values():
        del doc["distributedInfo"]
    return job


def _no_gpu_events(job: Job) -> Job:
    job[1]["traceEvents"] = _events(job[1], lambda e: e["cat"] == "user_annotation")
    return job


def _world_size(job: Job) -> Job:
    job[1]["distributedInfo"]["world_size"] = 4
    return job


def _steps_mismatch(job: Job) -> Job:
    for e in job[1]["traceEvents"]:
        if str(e.get("name", "")).startswith("ProfilerStep#"):
            e["name"] = f"ProfilerStep#{int(e['name'].split('#')[1]) + 5}"
    return job


def _clock_skew(job: Job) -> Job:
    for e in job[1]["traceEvents"]:  # rank 1's clock runs 5 ms ahead
        e["ts"] += 5000
    return job


FAULTS: dict[str, Callable[[Job], Job]] = {
    "negative_duration": _negative_duration,
    "zero_duration": _zero_duration,
    "stream_overlap": _stream_overlap,
    "unclassified_communication": _unclassified_communication,
    "unclassified_kernels": _unclassified_kernels,
    "kernels_without_launch": _kernels_without_launch,
    "launches_without_kernels": _launches_without_kernels,
    "missing_flows": _missing_flows,
    "gpu_stops_early": _gpu_stops_early,
    "kineto_warnings": _kineto_warnings,
    "truncated_last_step": _truncated_last_step,
    "timestamp_resolution": _timestamp_resolution,
    "rank_origin": _rank_origin,
    "missing_distributed_info": _rank_origin,
    "no_gpu_events": _no_gpu_events,
    "world_size": _world_size,
    "steps_mismatch": _steps_mismatch,
    "clock_skew": _clock_skew,
}


def faulty_job(check: str, ranks: int = 2, steps: int = 4) -> Job:
    """The healthy job with the fault that ``check`` must find."""
    return FAULTS[check](healthy_job(ranks, steps))


def write_job(job: Job, out_dir) -> list[Path]:
    """Write ``rank-N.pt.trace.json`` per rank (``json.dumps`` spacing, so HTA finds the rank)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank, doc in job.items():
        path = out / f"rank-{rank}.pt.trace.json"
        path.write_text(json.dumps(doc))
        paths.append(path)
    return paths
