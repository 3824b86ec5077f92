"""Pairs of synthetic runs with known differences, and the exact answer to ``compare(base, test)``.

A :class:`Program` is what one rank does in every profiler step: CPU operators that each launch one
GPU event (a kernel on stream 7, a memcpy, or an NCCL kernel on stream 20), optionally nested in a
parent operator that launches nothing. The layout is deterministic, in whole µs:

- each step is a ``ProfilerStep#N`` CPU annotation; steps follow each other without a gap;
- the operators run one after another on one CPU thread, 4 µs apart (parent 3 µs, operator 2 µs,
  its launch call 1 µs, all starting together);
- stream 7 runs the memcpy and compute kernels in operator order, from 10 µs into the step, with
  ``gap_us`` between them; the NCCL kernel starts ``comm_offset_us`` into the step on stream 20;
- a last, partial step (the same program) ends the trace, as in real traces; the analysed window
  drops it.

``Program.truth()`` computes the per-step answer (breakdown, kernels, operators) with plain
interval arithmetic from the layout, independently of the package's analyses.
:func:`changed_pair` returns a base and a test program that differ by one kernel 2× slower, one
operator added, one removed and more exposed communication, and the test run has more steps.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from analysis.testing.synthetic import (
    BASE_EPOCH_US,
    COMM_STREAM,
    COMPUTE_STREAM,
    _intersection_length,
    _length,
    _union,
)

_PID, _TID, _DEVICE = 100, 1, 0
_START_US = 10  # first GPU event, µs into the step
_OP_SPACING_US = 4
_TAIL_US = 10  # step end after the last GPU event


@dataclass(frozen=True)
class Op:
    """A CPU operator that launches one GPU event of ``kind`` ("kernel", "memcpy", "comm")."""

    name: str
    gpu_name: str
    gpu_us: int
    kind: str = "kernel"
    parent: str | None = None  # a wrapping operator that launches nothing itself


@dataclass(frozen=True)
class Program:
    """One rank's work per profiler step (see the module docstring)."""

    ops: tuple[Op, ...]
    steps: int = 3
    gap_us: int = 5
    comm_offset_us: int = 40
    first_step: int = 10
    gpu: str = "NVIDIA H100 80GB HBM3"

    def layout(self) -> tuple[int, list[tuple[Op, int, int, int]]]:
        """Step length (µs) and per op ``(op, cpu_start, gpu_start, gpu_end)`` µs into the step."""
        placed, t = [], _START_US
        for i, op in enumerate(self.ops):
            cpu = 1 + _OP_SPACING_US * i
            if op.kind == "comm":
                s = self.comm_offset_us
            else:
                s, t = t, t + op.gpu_us + self.gap_us
            placed.append((op, cpu, s, s + op.gpu_us))
        end = max([g_end for *_, g_end in placed] + [1 + _OP_SPACING_US * len(self.ops)])
        return end + _TAIL_US, placed

    def truth(self) -> dict[str, Any]:
        """The exact per-step answer: ``breakdown`` (µs by category), ``kernels`` ({(type, name):
        (count, µs)}), ``operators`` ({name: (count, exclusive GPU µs)})."""
        length, placed = self.layout()
        by_kind: dict[str, list[tuple[int, int]]] = {"kernel": [], "memcpy": [], "comm": []}
        for op, _, s, e in placed:
            by_kind[op.kind].append((s, e))
        comp, comm, mem = (_union(by_kind[k]) for k in ("kernel", "comm", "memcpy"))
        exposed_comm = _length(comm) - _intersection_length(comm, comp)
        comp_or_comm = _union(comp + comm)
        exposed_mem = _length(mem) - _intersection_length(mem, comp_or_comm)
        busy = _length(_union(comp + comm + mem))
        kernels: dict[tuple[str, str], tuple[int, int]] = {}
        operators: dict[str, tuple[int, int]] = {}
        kind_type = {"kernel": "COMPUTATION", "memcpy": "MEMORY", "comm": "COMMUNICATION"}
        for op, *_ in placed:
            key = (kind_type[op.kind], op.gpu_name)
            c, t = kernels.get(key, (0, 0))
            kernels[key] = (c + 1, t + op.gpu_us)
            c, t = operators.get(op.name, (0, 0))
            operators[op.name] = (c + 1, t + op.gpu_us)
            if op.parent:
                c, t = operators.get(op.parent, (0, 0))
                operators[op.parent] = (c + 1, t)
        return {
            "steps": self.steps,
            "breakdown": {"step_time": length, "computation": _length(comp),
                          "exposed_communication": exposed_comm, "exposed_memory": exposed_mem,
                          "other": 0, "idle": length - busy},
            "kernels": kernels,
            "operators": operators,
        }

    def trace(self, rank: int = 0) -> dict[str, Any]:
        """The Kineto trace document (as ``torch.profiler`` writes it) of ``steps`` + 1 steps."""
        length, placed = self.layout()
        events: list[dict[str, Any]] = []
        corr = 1000
        for k in range(self.steps + 1):
            base = BASE_EPOCH_US + k * length
            events.append(_cpu("user_annotation", f"ProfilerStep#{self.first_step + k}", base,
                               length))
            for op, cpu, s, e in placed:
                corr += 1
                if op.parent:
                    events.append(_cpu("cpu_op", op.parent, base + cpu, 3))
                events.append(_cpu("cpu_op", op.name, base + cpu, 2))
                runtime = "cudaMemcpyAsync" if op.kind == "memcpy" else "cudaLaunchKernel"
                events.append(_cpu("cuda_runtime", runtime, base + cpu, 1, correlation=corr))
                cat = "gpu_memcpy" if op.kind == "memcpy" else "kernel"
                stream = COMM_STREAM if op.kind == "comm" else COMPUTE_STREAM
                events.append({"ph": "X", "cat": cat, "name": op.gpu_name, "pid": _DEVICE,
                               "tid": stream, "ts": base + s, "dur": e - s,
                               "args": {"device": _DEVICE, "stream": stream, "correlation": corr}})
        return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": self.gpu}],
                "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 1},
                "traceEvents": events, "displayTimeUnit": "ms"}

    def write(self, out_dir, rank: int = 0) -> Path:
        """Write ``rank-N.pt.trace.json.gz`` into ``out_dir``; returns its path."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"rank-{rank}.pt.trace.json.gz"
        # json.dumps' default separators write `"rank": 0`, which HTA's rank regex needs
        path.write_bytes(gzip.compress(json.dumps(self.trace(rank)).encode(), mtime=0))
        return path


def _cpu(cat: str, name: str, ts: int, dur: int, correlation: int | None = None) -> dict:
    args = {} if correlation is None else {"correlation": correlation}
    return {"ph": "X", "cat": cat, "name": name, "pid": _PID, "tid": _TID, "ts": ts, "dur": dur,
            "args": args}


GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >"
GELU = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>"
SOFTMAX = "void (anonymous namespace)::softmax_warp_forward<float, float, float, 11>"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
HTOD = "Memcpy HtoD (Pageable -> Device)"


def base_program(steps: int = 3) -> Program:
    """The base run: a copy, a GEMM inside ``aten::linear``, add, GELU, softmax, an all-reduce
    that overlaps the compute kernels entirely."""
    return Program(steps=steps, comm_offset_us=40, ops=(
        Op("aten::copy_", HTOD, 20, kind="memcpy"),
        Op("aten::addmm", GEMM, 100, parent="aten::linear"),
        Op("aten::add", ADD, 10),
        Op("aten::gelu", GELU, 16),
        Op("aten::_softmax", SOFTMAX, 30),
        Op("c10d::allreduce_", NCCL, 50, kind="comm"),
    ))


@dataclass(frozen=True)
class ProgramPair:
    base: Program
    test: Program
    changes: dict[str, str] = field(default_factory=dict)  # what differs, in words

    def write(self, out_dir) -> tuple[Path, Path]:
        """Write ``out_dir/base`` and ``out_dir/test`` (one rank each); returns the two folders."""
        out = Path(out_dir)
        self.base.write(out / "base")
        self.test.write(out / "test")
        return out / "base", out / "test"


def identical_pair(steps: int = 3) -> ProgramPair:
    """Two identical runs: every delta is zero."""
    return ProgramPair(base_program(steps), base_program(steps))


def changed_pair() -> ProgramPair:
    """Base (3 steps) vs test (5 steps): the GEMM 2× slower, ``aten::mul`` added,
    ``aten::gelu`` removed, and the all-reduce moved past the compute kernels (more exposed)."""
    base = base_program(steps=3)
    ops = []
    for op in base.ops:
        if op.name == "aten::addmm":
            ops.append(replace(op, gpu_us=2 * op.gpu_us))
        elif op.name == "aten::gelu":
            continue
        else:
            ops.append(op)
        if op.name == "aten::add":
            ops.append(Op("aten::mul", ADD.replace("add", "mul"), 12))
    # compute kernels now end at 10 + (20+5) + (200+5) + (10+5) + (12+5) + 30 = 302 µs
    test = replace(base, steps=5, ops=tuple(ops), comm_offset_us=280)
    return ProgramPair(base, test, changes={
        "aten::addmm": "GEMM kernel 2x slower", "aten::mul": "added", "aten::gelu": "removed",
        "c10d::allreduce_": "starts after the compute, 28 of its 50 µs exposed",
    })
