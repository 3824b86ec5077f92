"""A small Kineto trace whose TensorBoard-plugin numbers are known by hand (tests of
``analysis.metrics.tensorboard`` and of the findings built on them).

Times in µs. Two profiler steps, ``[1000, 2000)`` and ``[2000, 3000)``, on thread 1:

- step 1: DataLoader ``__next__`` [1000, 1100); ``aten::mm`` [1100, 1300) holding ``aten::empty``
  [1105, 1115); ``aten::add`` [1300, 1400). Kernels on GPU 0: ``sgemm_kernel`` [1200, 1500)
  (blocks per SM 0.5, occupancy 25 %, launched by aten::mm), ``elementwise_kernel`` [1500, 1600)
  (2.0, 50 %, aten::add); a memcpy [1600, 1650);
- step 2: DataLoader [2000, 2100); ``aten::mm`` [2100, 2300); kernels ``sgemm_kernel`` [2200, 2600)
  (0.5, 25 %) and the tensor-core ``ampere_h16816gemm_kernel`` [2600, 2700) (1.0, 100 %); a memset
  [2700, 2720);
- with ``memory=True``, ``[memory]`` events: GPU0 +1000 B at 1110 (addr 100, in aten::empty), +500 B
  at 1310 (addr 200, aten::add), -1000 B at 1350 (addr 100 freed, aten::add), +4000 B at 2150
  (addr 300, aten::mm); CPU +64 B at 2250 (addr 400, aten::mm). Totals allocated after each:
  1000, 1500, 500, 4500 (GPU0) and 64 (CPU); reserved 2048, 2048, 2048, 8192 and 0.

Known answers (the plugin's definitions; ``tests/unit/metrics/test_tensorboard.py``): GPU
utilization 900 / 2000 = 45 %, est. SM efficiency (150 + 100 + 200 + 100) / 2000 = 27.5 %,
occupancy 32500 / 900 = 36.11 %, tensor-core share 100 / 900 = 11.11 %; step 1 = kernel 400,
memcpy 50, DataLoader 100, CPU exec 100, other 350; step 2 = kernel 500, memset 20, DataLoader
100, CPU exec 100, other 280 (µs).

``legacy=True`` writes Kineto's 2021 category names (``Operator``, ``Runtime``, ``Kernel``,
``Memcpy``, ``Memset``, and ``external id`` on runtime and GPU events), for which the plugin
also counts runtime calls and moves steps to the device side. ``launches`` adds that many extra 40 µs ``cudaLaunchKernel`` calls to step 1 (from
1400 µs, every 29 µs), each launching a 1 µs ``tiny_kernel`` (from 1700 µs, every 2 µs);
``launch_us`` sets the other launch calls' duration. ``tail=True`` moves the tensor-core kernel to
[2950, 3050) (past step 2's end) and adds a ``ProfilerStep#3`` [3000, 3100) that launches nothing:
on 2021-schema traces the plugin then ends step 2 at 3050 (its last kernel), starts step 3 there
and drops step 3 (no GPU work); on current traces the steps stay as annotated. ``modules=True``
adds ``nn.Module`` events (``with_modules=True``): ``Net_0`` [1100, 1410) holding ``Linear_0``
[1100, 1300) (which holds aten::mm) and aten::add, and again [2100, 2310) / [2100, 2300): per
module 2 occurrences; Net_0 host total 520, self 20, 1 operator; Linear_0 400, 0, 2 operators.
``stacks=True`` gives the operators a ``Call stack`` (as PyTorch's ``with_stack=True`` wrote it
before stacks became ``python_function`` events) and ``Input Dims`` (:data:`STACKS`): the two
``aten::mm`` calls have different stacks (so the plugin's stack view has two rows for it, host
total 200 each), ``aten::add`` one, ``aten::empty`` an empty one (no row). ``shapes=True`` writes
only the ``Input Dims`` of :data:`STACKS`; ``dims_key="Input dims"`` names them as PyTorch 1.8 and
earlier did. ``steps=False`` leaves the ``ProfilerStep#N`` events out (a trace recorded with
``torch.autograd.profiler.profile``): the plugin then has one step, ``"0"``, over the CPU events
[1000, 2300), which on 2021-schema traces (``legacy=True``) it moves to the device side: it ends
at 2720, the end of the last GPU event launched in it (the memset). ``old_memory=True`` writes the
``[memory]`` events as PyTorch 1.9 and earlier did: ``Device Type``, ``Device Id`` and ``Bytes``
only (no ``Addr``, no ``Total Allocated`` / ``Total Reserved``). ``wrapper=True`` adds an operator
``my_wrapper`` [1100, 1420) around the first ``Net_0`` call: with ``modules=True`` its self host
time is 320 - 310 = 10 µs (the module is its child in the plugin's tree), without 320 - 300 = 20
(``aten::mm`` and ``aten::add``). ``module_memory=True`` adds a GPU0 allocation of 256 B at 1405
(addr 500, never freed; totals after it 756 allocated, and 4756 after the 4000 B one): inside
``Net_0`` [1100, 1410) but in none of its operators, so, with ``modules=True``, the plugin gives it
to no operator (with ``wrapper=True`` too: the module, not ``my_wrapper``, is its innermost node).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

TID, PID, GPU_PID, STREAM = 1, 1, 0, 7
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


# ``stacks=True``: the "Call stack" (innermost frame first) and "Input Dims" of each operator call
STACKS = {
    10: ("model.py(20): forward\ntrain.py(8): step", [[8, 16], [16, 4]]),
    11: ("model.py(21): forward\ntrain.py(8): step", [[8, 4], [8, 4]]),
    12: ("", [[4]]),
    20: ("model.py(30): evaluate\ntrain.py(9): step", [[8, 16], [16, 4]]),
}


def events(*, legacy: bool = False, memory: bool = True, launches: int = 0,
           launch_us: int = 10, tail: bool = False, modules: bool = False,
           stacks: bool = False, shapes: bool = False, dims_key: str = "Input Dims",
           steps: bool = True, old_memory: bool = False,
           wrapper: bool = False, module_memory: bool = False) -> list[dict[str, Any]]:
    cats = {"op": "cpu_op", "rt": "cuda_runtime", "k": "kernel", "cp": "gpu_memcpy",
            "ms": "gpu_memset"}
    if legacy:
        cats = {"op": "Operator", "rt": "Runtime", "k": "Kernel", "cp": "Memcpy", "ms": "Memset"}
    out: list[dict[str, Any]] = []
    # Kineto 2021 wrote "external id" on runtime and GPU events ("External id" on operators)
    ext_key = "external id" if legacy else "External id"

    def op(name, ts, dur, ext=-1):
        args = {"External id": ext} if ext >= 0 else {}
        if stacks and ext in STACKS:
            args["Call stack"] = STACKS[ext][0]
        if (stacks or shapes) and ext in STACKS:
            args[dims_key] = STACKS[ext][1]
        if name.startswith("ProfilerStep#") and not steps:
            return
        out.append({"ph": "X", "cat": cats["op"], "name": name, "pid": PID, "tid": TID,
                    "ts": ts, "dur": dur, "args": args})

    def gpu(cat, name, ts, dur, corr, ext, launch_ts, blocks=None, occupancy=None):
        out.append({"ph": "X", "cat": cats["rt"],
                    "name": "cudaMemcpyAsync" if cat != "k" else "cudaLaunchKernel",
                    "pid": PID, "tid": TID, "ts": launch_ts, "dur": launch_us,
                    "args": {"correlation": corr, ext_key: ext}})
        args = {"device": 0, "stream": STREAM, "correlation": corr, ext_key: ext}
        if blocks is not None:
            args |= {"blocks per SM": blocks, "est. achieved occupancy %": occupancy,
                     "warps per SM": blocks * 4, "grid": [int(blocks * 132), 1, 1], "block": [128, 1, 1],
                     "registers per thread": 32, "shared memory": 0}
        out.append({"ph": "X", "cat": cats[cat], "name": name, "pid": GPU_PID, "tid": STREAM,
                    "ts": ts, "dur": dur, "args": args})

    if modules:  # written first: at equal start and end the module encloses the operator
        for py_id, parent, name, ts, dur in ((1, None, "Net_0", 1100, 310),
                                             (2, 1, "Linear_0", 1100, 200),
                                             (3, None, "Net_0", 2100, 210),
                                             (4, 3, "Linear_0", 2100, 200)):
            out.append({"ph": "X", "cat": "python_function", "name": f"nn.Module: {name}",
                        "pid": PID, "tid": TID, "ts": ts, "dur": dur,
                        "args": {"Python id": py_id, "Python parent id": parent,
                                 "Python module id": 0}})
    if wrapper:  # an operator (a user's record_function) around the first Net_0 call
        op("my_wrapper", 1100, 320)
    op("ProfilerStep#1", 1000, 1000)
    op(LOADER, 1000, 100)
    op("aten::mm", 1100, 200, ext=10)
    op("aten::empty", 1105, 10, ext=12)
    op("aten::add", 1300, 100, ext=11)
    gpu("k", "sgemm_kernel", 1200, 300, 1, 10, 1150, 0.5, 25)
    gpu("k", "elementwise_kernel", 1500, 100, 2, 11, 1310, 2.0, 50)
    gpu("cp", "Memcpy HtoD (Pageable -> Device)", 1600, 50, 3, 11, 1320)
    op("ProfilerStep#2", 2000, 1000)
    op(LOADER, 2000, 100)
    op("aten::mm", 2100, 200, ext=20)
    gpu("k", "sgemm_kernel", 2200, 400, 4, 20, 2150, 0.5, 25)
    gpu("k", "ampere_h16816gemm_kernel", 2950 if tail else 2600, 100, 5, 20, 2170, 1.0, 100)
    if tail:
        op("ProfilerStep#3", 3000, 100)
    gpu("ms", "Memset (Device)", 2700, 20, 6, 20, 2180)
    for i in range(launches):
        out.append({"ph": "X", "cat": cats["rt"], "name": "cudaLaunchKernel", "pid": PID,
                    "tid": TID, "ts": 1400 + i * 29, "dur": 40,
                    "args": {"correlation": 100 + i, "External id": 0}})
        out.append({"ph": "X", "cat": cats["k"], "name": "tiny_kernel", "pid": GPU_PID,
                    "tid": STREAM, "ts": 1700 + 2 * i, "dur": 1,
                    "args": {"device": 0, "stream": STREAM, "correlation": 100 + i,
                             "External id": 0}})
    if memory:
        records = [
            (1110, 100, 1000, 1000, 2048, 1), (1310, 200, 500, 1500, 2048, 1),
            (1350, 100, -1000, 500, 2048, 1), (2150, 300, 4000, 4500, 8192, 1),
            (2250, 400, 64, 64, 0, 0),
        ]
        if module_memory:  # in Net_0 after aten::add ends: in no operator of that module
            records[3:4] = [(1405, 500, 256, 756, 2048, 1), (2150, 300, 4000, 4756, 8192, 1)]
        for ts, addr, nbytes, total, reserved, dtype in records:
            args = {"Addr": addr, "Bytes": nbytes, "Total Allocated": total,
                    "Total Reserved": reserved, "Device Type": dtype,
                    "Device Id": 0 if dtype == 1 else -1}
            if old_memory:  # PyTorch 1.9 and earlier: the device and the bytes only
                args = {k: args[k] for k in ("Device Type", "Device Id", "Bytes")}
            out.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                        "pid": PID, "tid": TID, "ts": ts, "args": args})
    out.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
                "tid": "PyTorch Profiler", "ts": 900, "dur": 2200})
    return out


def write(path: str | Path, **options: Any) -> Path:
    """The trace as ``path`` (``.json`` or ``.json.gz``), rank 0 of 1 on an H100."""
    doc = {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9,
                              "computeMinor": 0, "totalGlobalMem": 85031714816,
                              "numSms": 132}],
        "traceEvents": events(**options),
    }
    path = Path(path)
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path
