"""Hand-built Kineto traces of shapes real jobs have and the analyses must survive (issue 26).

Each builder returns a job ``{rank: trace document}`` (write it with
``analysis.testing.health_traces.write_job``) whose answer is known by construction:

- ``gloo_cpu_job(ranks=4, steps=3, slow_rank=2, delay_us=2000)``: a CPU-only data-parallel job
  on gloo, as torch.profiler records it: per ProfilerStep (``STEP_US`` long) a CPU ``aten::mm``,
  then a ``c10d::allreduce_`` op whose span holds the ``gloo:all_reduce`` annotation (float
  input of ``[1024, 256]``). Every rank arrives at ``step start + 1000 µs`` except ``slow_rank``,
  which arrives ``delay_us`` later (its ``aten::mm`` runs longer); every rank's all-reduce ends
  at the slow rank's arrival + 300 µs. No GPU, no ``deviceProperties``: the straggler is
  ``slow_rank``, and no rule about GPUs or data loading may fire.
- ``kernels_outside_steps(steps=3)``: one GPU, ``steps`` ProfilerSteps; stream 7 runs a launched
  GEMM inside each step, stream 8 runs kernels only *after* the last step, with no launching call
  (the tail of an iteration the profiler did not capture). In the analysed window, stream 8 has
  no GPU event at all.
- ``no_kernels_in_window(steps=3)``: the same without stream 7: every GPU event of the trace lies
  outside the profiler steps and none was launched (the analysed window has no kernel).
- ``single_event()``: one launched kernel, no step.
- ``one_timestamp()``: a step, its launch and its kernels all at one timestamp with zero duration.
- ``all_unlaunched()``: the healthy 1-rank job of ``health_traces`` without its runtime calls:
  every GPU event is unlaunched. ``launches_without_kernels()``: the same without its GPU events.
- ``negative_timestamps()``: the healthy 1-rank job shifted so that every timestamp is negative.
- ``cpu_rank_among_eight()``: the healthy job on 8 ranks, rank 5 without any GPU event.
"""

from __future__ import annotations

from typing import Any

from analysis.testing.health_traces import (
    CPU_PID,
    CPU_TID,
    GEMM,
    GPU_PID,
    T0_US,
    Job,
    _launch,
    healthy_job,
)

STEP_US = 10_000
GLOO_ARRIVAL_US = 1000
GLOO_TRANSFER_US = 300


def _doc(rank: int, ranks: int, events: list[dict[str, Any]], *, backend: str | None,
         gpu: str | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"schemaVersion": 1, "traceEvents": events, "displayTimeUnit": "ms",
                           "traceName": f"rank-{rank}.pt.trace.json"}
    if backend is not None:
        doc["distributedInfo"] = {"backend": backend, "rank": rank, "world_size": ranks}
    if gpu is not None:
        doc["deviceProperties"] = [{"id": 0, "name": gpu, "numSms": 132}]
    return doc


def _x(name: str, cat: str, ts: int, dur: int, args: dict | None = None, **where) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": where.get("pid", CPU_PID),
            "tid": where.get("tid", CPU_TID), "ts": ts, "dur": dur, "args": args or {}}


def gloo_cpu_job(ranks: int = 4, steps: int = 3, slow_rank: int = 2, delay_us: int = 2000) -> Job:
    """A CPU-only gloo job with one slow rank (see the module docstring)."""
    job: Job = {}
    for rank in range(ranks):
        events: list[dict[str, Any]] = []
        for k in range(steps + 1):  # the last step is partial (dropped by the default window)
            start = T0_US + k * STEP_US
            events.append(_x(f"ProfilerStep#{k + 1}", "user_annotation", start, STEP_US - 10))
            late = delay_us if rank == slow_rank else 0
            arrive = start + GLOO_ARRIVAL_US + late
            events.append(_x("aten::mm", "cpu_op", start + 10, arrive - start - 20,
                             {"Input Dims": [[512, 512], [512, 512]], "Input type": ["float", "float"]}))
            end = start + GLOO_ARRIVAL_US + delay_us + GLOO_TRANSFER_US
            events.append(_x("c10d::allreduce_", "cpu_op", arrive, end - arrive))
            events.append(_x("gloo:all_reduce", "user_annotation", arrive + 5, end - arrive - 10,
                             {"Input Dims": [[1024, 256]], "Input type": ["float"]}))
        job[rank] = _doc(rank, ranks, sorted(events, key=lambda e: e["ts"]), backend="gloo",
                         gpu=None)
    return job


def kernels_outside_steps(steps: int = 3, *, with_window_kernels: bool = True) -> Job:
    """One GPU; stream 8's kernels all after the last step, unlaunched (see the module docstring)."""
    events: list[dict[str, Any]] = []
    corr = 1000
    for k in range(steps):
        start = T0_US + k * STEP_US
        events.append(_x(f"ProfilerStep#{k + 1}", "user_annotation", start, STEP_US - 10))
        if with_window_kernels:
            _launch(events, start + 100, corr + k, "cudaLaunchKernel", GEMM, "kernel", 7, 2000)
    tail = T0_US + steps * STEP_US + 100
    for i in range(5):  # an uncaptured iteration's tail: no runtime call carries these
        events.append(_x("void at::native::vectorized_elementwise_kernel<4>", "kernel",
                         tail + 50 * i, 40, {"stream": 8, "correlation": 90_000 + i, "device": 0},
                         pid=GPU_PID, tid=8))
    return {0: _doc(0, 1, sorted(events, key=lambda e: e["ts"]), backend=None,
                    gpu="AMD Instinct MI300X")}


def no_kernels_in_window(steps: int = 3) -> Job:
    """Every GPU event outside the profiler steps and unlaunched."""
    return kernels_outside_steps(steps, with_window_kernels=False)


def single_event() -> Job:
    """One launched kernel, nothing else."""
    events: list[dict[str, Any]] = []
    _launch(events, T0_US, 7, "cudaLaunchKernel", GEMM, "kernel", 7, 100)
    return {0: _doc(0, 1, events, backend=None, gpu="NVIDIA H800")}


def one_timestamp() -> Job:
    """A step, a launch and two kernels on two streams, all at ``T0_US`` with zero duration."""
    events = [_x("ProfilerStep#1", "user_annotation", T0_US, 0)]
    for corr, stream in ((1, 7), (2, 8)):
        events.append(_x("cudaLaunchKernel", "cuda_runtime", T0_US, 0, {"correlation": corr}))
        events.append(_x(GEMM, "kernel", T0_US, 0, {"stream": stream, "correlation": corr,
                                                     "device": 0}, pid=GPU_PID, tid=stream))
    return {0: _doc(0, 1, events, backend=None, gpu="NVIDIA H20")}


def _keep(job: Job, rank: int, keep) -> Job:
    job[rank]["traceEvents"] = [e for e in job[rank]["traceEvents"] if keep(e)]
    return job


def all_unlaunched() -> Job:
    """Every GPU event without its launching call."""
    return _keep(healthy_job(1), 0, lambda e: e.get("cat") != "cuda_runtime")


def launches_without_kernels() -> Job:
    """Launch calls whose GPU events are all missing."""
    return _keep(healthy_job(1), 0, lambda e: e.get("pid") != GPU_PID)


def negative_timestamps() -> Job:
    """Every timestamp below zero (the healthy job, shifted)."""
    job = healthy_job(1)
    for e in job[0]["traceEvents"]:
        e["ts"] = e["ts"] - T0_US - 1_000_000
    return job


def cpu_rank_among_eight() -> Job:
    """Eight ranks, rank 5 with no GPU event (and no collective kernel)."""
    return _keep(healthy_job(8), 5, lambda e: e.get("cat") == "user_annotation")


EDGE_JOBS = {
    "all_unlaunched": all_unlaunched,
    "launches_without_kernels": launches_without_kernels,
    "negative_timestamps": negative_timestamps,
    "cpu_rank_among_eight": cpu_rank_among_eight,
    "gloo_cpu_4ranks": gloo_cpu_job,
    "kernels_outside_steps": kernels_outside_steps,
    "no_kernels_in_window": no_kernels_in_window,
    "single_event": single_event,
    "one_timestamp": one_timestamp,
}
