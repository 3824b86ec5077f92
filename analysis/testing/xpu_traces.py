"""Intel GPU (XPU) Kineto traces written the way ``torch.profiler`` writes them, answer known.

No real XPU trace could be read here (the public ones found, ALCF's Aurora workshop traces, are
larger than the repository snapshots keep), so these follow the writer itself, event by event:
Kineto's XPU plugin (``libkineto/src/plugin/xpupti/XpuptiActivityHandlers.cpp``) and a real
kernel record quoted from an Aurora trace (PyTorch 2.10, PTI 0.17):

- a kernel: ``cat "kernel"``, ``pid`` the device index, ``tid`` its SYCL queue id, and args
  ``External id`` (the launching operator's), ``kernel_id``, ``l0 queue``, ``sycl queue``,
  ``context``, ``correlation``, ``device``, ``submitted``, ``appended``: **no** ``stream``, no
  grid or block, no occupancy;
- a copy / set: ``cat "gpu_memcpy"`` / ``"gpu_memset"``, named from PTI's types
  (``Memcpy M2D (MEMORY(Unknown) -> DEVICE)``, ``Memset (0 -> DEVICE)``), with ``l0 call``,
  ``memory opration id`` (sic), ``bytes`` and ``memory bandwidth (GB/s)``;
- the launch: ``cat "xpu_runtime"`` on the host thread (``urEnqueueKernelLaunch``,
  ``urEnqueueUSMMemcpy``...) with ``correlation`` and ``External id``; inside it the Level Zero
  call (``cat "xpu_driver"``, ``zeCommandListAppendLaunchKernel``) with the same correlation id;
  an ``ac2g`` flow from the launch to the GPU event; the device's threads named ``Stream <queue>``;
  ``deviceProperties`` empty (Kineto writes no XPU device properties).

``legacy=True`` writes the earlier XPU plugin's shape (Intel's ``c10::kineto_plugin::xpu``): a
kernel's queue as ``args.queue``, a copy's as ``args.stream``.

:func:`xpu_job` per rank and step (``STEP_US`` long, from ``T0_US + step * STEP_US``): an
``aten::mm`` launching ``gemm_kernel`` (``GEMM_US``) on queue ``QUEUE``, an ``aten::copy_`` whose
``urEnqueueUSMMemcpy`` copies ``COPY_BYTES`` host to device (``COPY_US``) on the same queue, and
a ``urQueueFinish`` (``torch.xpu.synchronize()``) waiting for both. Per step: kernel time
``GEMM_US``, memory time ``COPY_US``, idle the rest of the step on the GPU.
"""

from __future__ import annotations

from typing import Any

T0_US = 1_000_000.0
STEP_US = 1_000.0
GEMM_US = 300.0
COPY_US = 50.0
COPY_BYTES = 4 << 20
QUEUE = 64  # a SYCL queue id as PTI numbers them
HOST_PID = 4242
HOST_TID = 4242
DEVICE = 0


def _x(cat: str, name: str, ts: float, dur: float, pid: int, tid: int, **args: Any) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(ts, 3),
            "dur": round(dur, 3), "args": args}


def _flow(ph: str, corr: int, ts: float, pid: int, tid: int) -> dict:
    flow = {"ph": ph, "id": corr, "pid": pid, "tid": tid, "ts": round(ts, 3), "cat": "ac2g",
            "name": "ac2g"}
    if ph == "f":
        flow["bp"] = "e"
    return flow


def _device_args(ext: int, corr: int, legacy: bool, kernel: bool) -> dict[str, Any]:
    if legacy:  # the earlier XPU plugin: "queue" on kernels, "stream" on copies
        return {"External id": ext, "appended": 0, "submitted": 0, "device": DEVICE,
                "context": 94000000000000, ("queue" if kernel else "stream"): QUEUE,
                "correlation": corr}
    return {"External id": ext, "l0 queue": "0x000055d08b8fc138", "sycl queue": QUEUE,
            "context": "0x000055d08918fc78", "correlation": corr, "device": DEVICE,
            "submitted": 1790952812114058336, "appended": 1790952812114058336}


def xpu_trace(rank: int = 0, world: int = 1, steps: int = 3, legacy: bool = False) -> dict:
    """One rank's trace document (see the module docstring)."""
    events: list[dict] = []
    ext, corr = 0, 4000
    for step in range(steps):
        t = T0_US + step * STEP_US
        ext += 1
        events.append(_x("user_annotation", f"ProfilerStep#{step}", t, STEP_US - 10, HOST_PID,
                         HOST_TID, **{"External id": ext}))
        # aten::mm → urEnqueueKernelLaunch (→ zeCommandListAppendLaunchKernel) → gemm_kernel
        ext += 1
        corr += 1
        events.append(_x("cpu_op", "aten::mm", t + 10, 60, HOST_PID, HOST_TID,
                         **{"External id": ext, "Sequence number": step}))
        events.append(_x("xpu_runtime", "urEnqueueKernelLaunch", t + 20, 40, HOST_PID, HOST_TID,
                         **{"External id": ext, "correlation": corr}))
        if not legacy:
            events.append(_x("xpu_driver", "zeCommandListAppendLaunchKernel", t + 30, 20,
                             HOST_PID, HOST_TID, **{"External id": ext, "correlation": corr}))
        kernel = _device_args(ext, corr, legacy, kernel=True)
        if not legacy:
            kernel["kernel_id"] = step + 1
        events.append(_x("kernel", "gemm_kernel", t + 100, GEMM_US, DEVICE, QUEUE, **kernel))
        events += [_flow("s", corr, t + 20, HOST_PID, HOST_TID),
                   _flow("f", corr, t + 100, DEVICE, QUEUE)]
        # aten::copy_ → urEnqueueUSMMemcpy → a host-to-device copy after the kernel
        ext += 1
        corr += 1
        events.append(_x("cpu_op", "aten::copy_", t + 80, 40, HOST_PID, HOST_TID,
                         **{"External id": ext, "Sequence number": step}))
        events.append(_x("xpu_runtime", "urEnqueueUSMMemcpy", t + 90, 20, HOST_PID, HOST_TID,
                         **{"External id": ext, "correlation": corr}))
        copy = _device_args(ext, corr, legacy, kernel=False)
        if not legacy:
            copy |= {"l0 call": "zeCommandListAppendMemoryCopy", "memory opration id": step + 1}
        copy |= {"bytes": COPY_BYTES, "memory bandwidth (GB/s)": COPY_BYTES / (COPY_US * 1000)}
        events.append(_x("gpu_memcpy", "Memcpy M2D (MEMORY(Unknown) -> DEVICE)",
                         t + 100 + GEMM_US, COPY_US, DEVICE, QUEUE, **copy))
        events += [_flow("s", corr, t + 90, HOST_PID, HOST_TID),
                   _flow("f", corr, t + 100 + GEMM_US, DEVICE, QUEUE)]
        # torch.xpu.synchronize(): waits until the copy ends
        end = t + 100 + GEMM_US + COPY_US
        events.append(_x("xpu_runtime", "urQueueFinish", t + 130, end - (t + 130), HOST_PID,
                         HOST_TID, correlation=corr + 1000))
    events += [
        {"name": "process_name", "ph": "M", "pid": HOST_PID, "tid": 0, "args": {"name": "python"}},
        {"name": "process_name", "ph": "M", "pid": DEVICE, "tid": 0,
         "args": {"name": f"Device {DEVICE}"}},
        {"name": "thread_name", "ph": "M", "pid": DEVICE, "tid": QUEUE,
         "args": {"name": f"Stream {QUEUE}"}},
    ]
    doc: dict[str, Any] = {
        "schemaVersion": 1,
        "deviceProperties": [],
        "traceEvents": events,
        "traceName": f"xpu_rank{rank}.pt.trace.json",
    }
    if world > 1:
        doc["distributedInfo"] = {"backend": "xccl", "rank": rank, "world_size": world}
    return doc


def xpu_job(ranks: int = 1, steps: int = 3, legacy: bool = False) -> dict[int, dict]:
    """``{rank: trace document}``: :func:`xpu_trace` per rank."""
    return {r: xpu_trace(r, ranks, steps, legacy) for r in range(ranks)}
