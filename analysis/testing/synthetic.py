"""Synthetic multi-rank Kineto traces with exact ground truth.

``generate(SynthConfig(...))`` simulates a data-parallel training loop on every rank and returns the
trace dicts (as ``torch.profiler`` writes them) together with the exact answer to each analysis;
``write_traces`` writes them as ``rank-N.pt.trace.json.gz`` files, streaming step by step so that
millions of events per rank fit in memory.

The model, per ``ProfilerStep#N`` (one thread launches, stream 7 computes, stream 20 communicates):

1. a dataloader stall on the CPU: nothing is launched, so the GPU waits for the host;
2. a host-to-device copy and a memset (``cudaMemcpyAsync`` / ``cudaMemsetAsync``);
3. forward compute kernels, launched faster than they run (the queue fills), with an occasional
   slow Python stretch that starves the GPU again;
4. backward compute kernels; after every bucket of them a ``record_param_comms`` op launches an
   NCCL all-reduce on stream 20 that waits for the gradients and overlaps the following kernels;
5. the optimizer, whose first kernel waits for the last all-reduce (a cross-stream wait);
6. a device-to-host copy of the loss and a ``cudaStreamSynchronize`` that blocks the CPU.

A last, partial step (stall, copy, a few kernels) ends every trace, as in real traces; HTA drops it
by default. One rank (``slow_rank``) runs its kernels and its stall ``slow_factor`` times longer.
Ranks are simulated independently (collectives do not wait for the slow rank).

Every idle gap between consecutive GPU events on a stream falls clearly in one of HTA 0.5.0's
categories: the launching runtime call starts ≥ 10 µs after the previous event ended (host wait) or
≥ 10 µs before it; otherwise the gap is ≤ 20 µs (kernel wait, threshold 30 µs) or ≥ 40 µs (other).

The ground truth (``GroundTruth``) is computed from the simulated events with plain interval
arithmetic, independently of the package's analyses. Times are µs (float, integral unless
``ns_resolution``), exact as written (no HTA rounding).
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
from isal import igzip

from analysis.errors import ConfigError

US = 1000  # ns per µs: the simulation runs in integer nanoseconds
BASE_EPOCH_US = 1_732_000_000_000_000  # absolute epoch µs, as torch.profiler writes them
COMPUTE_STREAM, COMM_STREAM = 7, 20
KERNEL_WAIT_THRESHOLD_US = 30  # HTA's default consecutive_kernel_delay
CATEGORIES = ("host_wait", "kernel_wait", "other")  # HTA's idle category names

COMPUTATION, COMMUNICATION, MEMORY = "COMPUTATION", "COMMUNICATION", "MEMORY"

# (cpu op, kernel name, base duration µs, grid, block): names as current PyTorch/cuBLAS emit them.
_COMPUTE_KERNELS = [
    ("aten::mm", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
     "execute_segment_k_off_kernel__5x_cublas", 120, [132, 1, 1], [384, 1, 1]),
    ("aten::addmm", "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_"
     "128x2_tn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)",
     60, [64, 4, 1], [128, 1, 1]),
    ("aten::add", "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add"
     "<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, "
     "std::array<char*, 3ul>)", 12, [1024, 1, 1], [128, 1, 1]),
    ("aten::gelu", "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl"
     "(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#1}"
     "::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, float, std::array<char*, "
     "2ul>)", 18, [1024, 1, 1], [128, 1, 1]),
    ("aten::native_layer_norm", "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel"
     "<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 "
     "const*, float*, float*, c10::BFloat16*)", 25, [4096, 1, 1], [256, 1, 1]),
    ("aten::_softmax", "void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, "
     "float, 11, false, false>(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, "
     "bool)", 30, [2048, 1, 1], [128, 1, 1]),
    ("aten::_flash_attention_forward", "void pytorch_flash::flash_fwd_kernel<pytorch_flash::"
     "Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, true, false, "
     "false, false, true, true, false>(pytorch_flash::Flash_fwd_params)", 150, [16, 32, 8], [128, 1, 1]),
]
_OPTIMIZER_KERNEL = (
    "aten::_foreach_add_", "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::"
    "native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::"
    "FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, float*, double, float*, float*, "
    "double, double, double, bool, float*, float*>(...)", 45, [320, 1, 1], [512, 1, 1])
_NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
_HTOD, _DTOH, _MEMSET = ("Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pageable)",
                         "Memset (Device)")
_CBID = {"cudaLaunchKernel": 211, "cudaMemcpyAsync": 41, "cudaMemsetAsync": 51,
         "cudaStreamSynchronize": 131}
# events written per launched GPU op: cpu_op, runtime call, kernel, ac2g start, ac2g finish
_EVENTS_PER_LAUNCH = 5
_WRITE_BATCH = 20_000  # events encoded per write: bounds memory at millions of events per rank


@dataclass
class SynthConfig:
    """What to simulate. ``events_per_rank`` (approximate) overrides ``kernels_per_step``."""

    ranks: int = 8
    steps: int = 4  # complete ProfilerSteps; a partial one is added at the end
    seed: int = 0
    kernels_per_step: int = 60  # compute kernels (forward + backward + optimizer)
    bucket_kernels: int = 10  # backward kernels per all-reduce bucket
    slow_rank: int | None = 1
    slow_factor: float = 1.5  # the slow rank's kernel and stall durations are multiplied by this
    ns_resolution: bool = False  # write ts/dur with 3 decimals (ns) instead of integer µs
    events_per_rank: int | None = None
    first_step: int = 10  # ProfilerStep numbers start here (a schedule with wait/warmup)

    def __post_init__(self) -> None:
        if self.ranks < 1 or self.steps < 1:
            raise ConfigError(f"SynthConfig needs ranks >= 1 and steps >= 1, got {self.ranks}, {self.steps}")
        if self.slow_rank is not None and not 0 <= self.slow_rank < self.ranks:
            raise ConfigError(f"slow_rank={self.slow_rank} is not one of the {self.ranks} ranks")
        if self.events_per_rank is not None:
            if self.events_per_rank < 1000:
                raise ConfigError(f"events_per_rank={self.events_per_rank} is too small (>= 1000)")
            # each compute kernel brings 1/bucket_kernels of an all-reduce; steps + ~half a step
            per_kernel = _EVENTS_PER_LAUNCH * (1 + 0.5 / self.bucket_kernels)
            self.kernels_per_step = max(10, round(self.events_per_rank / (self.steps + 0.1) / per_kernel))
        if self.kernels_per_step < 3:
            raise ConfigError(f"kernels_per_step={self.kernels_per_step} is too small (>= 3)")


@dataclass(frozen=True)
class GpuOp:
    """One launched GPU event and the runtime call that launched it (times in ns)."""

    kind: str  # COMPUTATION, COMMUNICATION or MEMORY
    cat: str  # kernel, gpu_memcpy, gpu_memset
    name: str
    stream: int
    correlation: int
    external_id: int
    runtime: str
    rt_ts: int
    rt_dur: int
    ts: int
    dur: int
    args: dict[str, Any]


@dataclass
class _Step:
    number: int
    ts: int
    dur: int
    cpu: list[dict[str, Any]]  # CPU events (ns times), written as they are
    ops: list[GpuOp]
    external_id: int  # of the ProfilerStep annotation


class _RankSim:
    """Simulates one rank; ``steps()`` yields each ProfilerStep's events in order."""

    def __init__(self, config: SynthConfig, rank: int):
        self.c = config
        self.rank = rank
        self.rng = random.Random(config.seed * 1_000_003 + rank)
        self.slow = config.slow_factor if rank == config.slow_rank else 1.0
        self.pid = 1000 + 17 * rank
        self.tid, self.bwd_tid = self.pid, self.pid + 3
        self.device = rank % 8
        self.cursor = (BASE_EPOCH_US + self.rng.randint(0, 2000)) * US
        self.stream_end: dict[int, int] = {}
        self.ext = 0
        self.corr = 0

    def d(self, lo: float, hi: float, scale: float = 1.0) -> int:
        """A random duration in [lo, hi] µs × scale, in ns (whole µs unless ns_resolution)."""
        lo_ns, hi_ns = int(lo * scale * US), int(hi * scale * US)
        if self.c.ns_resolution:
            return self.rng.randint(lo_ns, hi_ns)
        return self.rng.randint(lo_ns // US, hi_ns // US) * US

    def _next_ext(self) -> int:
        self.ext += 1
        return self.ext

    def _cpu(self, cat, name, ts, dur, tid=None, args=None) -> dict[str, Any]:
        ext = self._next_ext()
        return {"ph": "X", "cat": cat, "name": name, "pid": self.pid, "tid": tid or self.tid,
                "ts": ts, "dur": dur, "args": {"External id": ext, "Ev Idx": ext - 1, **(args or {})}}

    def _place(self, stream: int, r: int, rdur: int, not_before: int) -> tuple[int, int]:
        """(runtime start, GPU start) for an op whose runtime call would start at ``r``.

        Keeps every gap clear of HTA's category boundaries (see the module docstring)."""
        lat = self.d(2, 6)
        p = self.stream_end.get(stream)
        if p is None:
            return r, max(r + rdur + lat, not_before)
        if r > p - 10 * US:  # host wait: push the call ≥ 10 µs past the previous end
            r = max(r, p + 10 * US)
            return r, max(r + rdur + lat, not_before)
        # queued (r + rdur + lat ≤ p + 4 µs): a launch-overhead gap unless something else waits
        g = max(p + self.d(1, 20), r + rdur + lat, not_before)
        if 20 * US < g - p < 40 * US:
            g = p + 40 * US
        return r, g

    def _launch(self, step, kind, cat, name, op_name, dur, *, stream=COMPUTE_STREAM, tid=None,
                not_before=0, runtime="cudaLaunchKernel", op_args=None, gpu_args=None) -> GpuOp:
        pre, rdur, post = self.d(1, 3), self.d(3, 8), self.d(1, 3)
        r, g = self._place(stream, self.cursor + pre, rdur, not_before)
        op = self._cpu("cpu_op", op_name, r - pre, pre + rdur + post, tid, op_args)
        self.corr += 1
        ext = op["args"]["External id"]
        gpu = GpuOp(kind, cat, name, stream, self.corr, ext, runtime, r, rdur, g, dur, gpu_args or {})
        step.cpu.append(op)
        step.ops.append(gpu)
        self.stream_end[stream] = g + dur
        self.cursor = r + rdur + post
        return gpu

    def _compute(self, step, spec, tid=None, scale=1.0):
        op_name, name, base, grid, block = spec
        dur = self.d(0.7 * base, 1.3 * base, scale * self.slow)
        args = {"grid": grid, "block": block, "registers per thread": 128, "shared memory": 49152,
                "blocks per SM": round(grid[0] * grid[1] * grid[2] / 132, 6),
                "warps per SM": round(grid[0] * grid[1] * grid[2] * block[0] / 32 / 132, 6),
                "est. achieved occupancy %": 50}
        self._launch(step, COMPUTATION, "kernel", name, op_name, dur, tid=tid, gpu_args=args)
        self.cursor += self.d(2, 10)
        if self.rng.random() < 0.05:  # a slow Python stretch: the GPU drains and waits
            self.cursor += self.d(100, 300)

    def _memcpy(self, step, name, nbytes, dur):
        self._launch(step, MEMORY, "gpu_memcpy", name, "aten::copy_", dur, runtime="cudaMemcpyAsync",
                     gpu_args={"bytes": nbytes, "memory bandwidth (GB/s)": round(nbytes / dur, 4)})

    def _step(self, number: int, partial: bool) -> _Step:
        c, rng = self.c, self.rng
        step = _Step(number, self.cursor, 0, [], [], self._next_ext())
        stall = self.d(1500, 3000, self.slow)
        step.cpu.append(self._cpu("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter"
                                  ".__next__", self.cursor, stall))
        self.cursor += stall
        self._memcpy(step, _HTOD, 8 << 20, self.d(40, 120))
        n_fwd = max(1, c.kernels_per_step * 2 // 5)
        n_bwd = max(1, c.kernels_per_step // 2)
        n_opt = max(1, c.kernels_per_step - n_fwd - n_bwd)
        fwd_start = self.cursor
        for _ in range(min(n_fwd, 5) if partial else n_fwd):
            self._compute(step, _COMPUTE_KERNELS[rng.randrange(len(_COMPUTE_KERNELS))])
        step.cpu.append(self._cpu("user_annotation", "DistributedDataParallel.forward", fwd_start,
                                  self.cursor - fwd_start))
        if partial:
            step.dur = self.cursor + self.d(5, 20) - step.ts
            return step
        world = list(range(c.ranks))
        for i in range(n_bwd):
            self._compute(step, _COMPUTE_KERNELS[rng.randrange(len(_COMPUTE_KERNELS))], self.bwd_tid, 1.5)
            if (i + 1) % c.bucket_kernels == 0 or i == n_bwd - 1:
                nelems = rng.choice((1 << 20, 4 << 20, 25 << 18))
                coll = {"Collective name": "allreduce", "In msg nelems": nelems, "Out msg nelems": nelems,
                        "Group size": c.ranks, "dtype": "Float", "In split size": "[]",
                        "Out split size": "[]", "Process Group Name": "0",
                        "Process Group Description": "default_pg", "Process Group Ranks": str(world)}
                grad_ready = self.stream_end[COMPUTE_STREAM] + self.d(2, 5)
                self._launch(step, COMMUNICATION, "kernel", _NCCL_KERNEL, "record_param_comms",
                             self.d(150, 600, nelems / (4 << 20)) + self.d(20, 40), stream=COMM_STREAM,
                             tid=self.bwd_tid, not_before=grad_ready, op_args=coll,
                             gpu_args={"grid": [32, 1, 1], "block": [640, 1, 1], **coll})
        opt_start = self.cursor
        self._launch(step, MEMORY, "gpu_memset", _MEMSET, "aten::zero_", self.d(2, 8),
                     runtime="cudaMemsetAsync", gpu_args={"bytes": 4 << 20})
        comm_done = self.stream_end[COMM_STREAM] + self.d(5, 10)  # cudaStreamWaitEvent on stream 7
        for i in range(n_opt):
            op_name, name, base, grid, block = _OPTIMIZER_KERNEL
            self._launch(step, COMPUTATION, "kernel", name, op_name, self.d(0.7 * base, 1.3 * base, self.slow),
                         not_before=comm_done if i == 0 else 0, gpu_args={"grid": grid, "block": block})
        step.cpu.append(self._cpu("user_annotation", "Optimizer.step#AdamW.step", opt_start,
                                  self.cursor - opt_start))
        self._memcpy(step, _DTOH, 4, self.d(2, 5))
        # .item() on the loss: the CPU blocks until stream 7 drains
        sync_dur = max(self.stream_end[COMPUTE_STREAM] - self.cursor, 0) + self.d(2, 5)
        self.corr += 1
        step.cpu.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": self.pid,
                         "tid": self.tid, "ts": self.cursor, "dur": sync_dur,
                         "args": {"cbid": _CBID["cudaStreamSynchronize"], "correlation": self.corr}})
        self.cursor += sync_dur + self.d(5, 20)
        step.dur = self.cursor - step.ts
        self.cursor += self.d(1, 3)
        return step

    def steps(self) -> Iterator[_Step]:
        for i in range(self.c.steps + 1):
            yield self._step(self.c.first_step + i, partial=i == self.c.steps)


# ----------------------------------------------------------------------------- ground truth


@dataclass
class IdleGap:
    """An idle interval on one stream between two consecutive GPU events (µs)."""

    stream: int
    prev_end: float
    next_start: float
    gap: float
    category: str  # host_wait, kernel_wait, other
    runtime_ts: float  # start of the runtime call that launched the next event


@dataclass
class GroundTruth:
    """The exact answers for one rank and one window (µs; see the module docstring).

    ``kernel_stats``: name → (count, sum, max, min, mean, stddev), stddev as pandas computes it
    (sample, ddof=1; 0 for a single kernel, as HTA fills it).
    """

    rank: int
    include_last_step: bool
    kernel_time: float
    busy: float
    idle: float
    compute: float
    non_compute: float
    comm_comp_overlap_pctg: float  # 100 × |COMP ∩ COMM| / |COMM|; NaN without comm kernels
    idle_gaps: list[IdleGap]
    launches: list[tuple[int, float, float, float]]  # correlation, cpu_duration, gpu_duration, launch_delay
    kernel_type_sums: dict[str, float]
    kernel_stats: dict[str, tuple[int, float, float, float, float, float]]
    steps: list[tuple[int, float, float]]  # ProfilerStep number, start, duration
    streams: list[int] = field(default_factory=list)

    def idle_by_category(self) -> dict[tuple[int, str], tuple[float, int]]:
        """(stream, category) → (total idle µs, number of gaps) over every stream and category."""
        out = {(s, cat): (0.0, 0) for s in self.streams for cat in CATEGORIES}
        for g in self.idle_gaps:
            total, n = out[(g.stream, g.category)]
            out[(g.stream, g.category)] = (total + g.gap, n + 1)
        return out


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged]


def _length(intervals) -> int:
    return sum(e - s for s, e in intervals)


def _intersection_length(a, b) -> int:
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _us(ns: int) -> float:
    return ns / US


def ground_truth(rank: int, steps: list[_Step], include_last_step: bool) -> GroundTruth:
    """Exact metrics from the simulated events; HTA's window when ``include_last_step`` is False."""
    last_start = steps[-1].ts
    kept_steps = steps if include_last_step else [s for s in steps if s.ts < last_start]
    ops = [op for s in steps for op in s.ops if include_last_step or op.rt_ts < last_start]
    spans = [(op.ts, op.ts + op.dur) for op in ops]
    busy = _union(spans)
    kernel_time = max(e for _, e in spans) - min(s for s, _ in spans)
    idle = kernel_time - _length(busy)
    comp = _union([(op.ts, op.ts + op.dur) for op in ops if op.kind == COMPUTATION])
    comm = _union([(op.ts, op.ts + op.dur) for op in ops if op.kind == COMMUNICATION])
    compute = _length(comp)
    overlap = 100 * _intersection_length(comp, comm) / _length(comm) if comm else math.nan

    gaps: list[IdleGap] = []
    streams = sorted({op.stream for op in ops})
    for stream in streams:
        seq = sorted((op for op in ops if op.stream == stream), key=lambda o: o.ts)
        for prev, nxt in zip(seq, seq[1:], strict=False):
            prev_end, gap = prev.ts + prev.dur, nxt.ts - (prev.ts + prev.dur)
            if nxt.rt_ts > prev_end:  # HTA: the runtime call started after the previous event ended
                cat = "host_wait"
            elif gap < KERNEL_WAIT_THRESHOLD_US * US:
                cat = "kernel_wait"
            else:
                cat = "other"
            gaps.append(IdleGap(stream, _us(prev_end), _us(nxt.ts), _us(gap), cat, _us(nxt.rt_ts)))

    launches = [(op.correlation, _us(op.rt_dur), _us(op.dur), _us(max(0, op.ts - op.rt_ts - op.rt_dur)))
                for op in ops]
    type_sums = {k: _us(sum(op.dur for op in ops if op.kind == k)) for k in (COMMUNICATION, COMPUTATION, MEMORY)}
    by_name: dict[str, list[int]] = {}
    for op in ops:
        by_name.setdefault(op.name, []).append(op.dur)
    stats = {}
    for name, durs in by_name.items():
        n, mean = len(durs), sum(durs) / len(durs)
        std = math.sqrt(sum((d - mean) ** 2 for d in durs) / (n - 1)) if n > 1 else 0.0
        stats[name] = (n, _us(sum(durs)), _us(max(durs)), _us(min(durs)), mean / US, std / US)
    return GroundTruth(
        rank=rank, include_last_step=include_last_step, kernel_time=_us(kernel_time),
        busy=_us(_length(busy)), idle=_us(idle), compute=_us(compute),
        non_compute=_us(kernel_time - compute - idle), comm_comp_overlap_pctg=overlap,
        idle_gaps=gaps, launches=launches, kernel_type_sums=type_sums, kernel_stats=stats,
        steps=[(s.number, _us(s.ts), _us(s.dur)) for s in kept_steps], streams=streams,
    )


class TruthTable(Mapping[int, GroundTruth]):
    """Ground truth per rank: ``truth[rank]`` (HTA's default window) or ``truth(rank, include_last_step)``."""

    def __init__(self, by_rank: dict[int, dict[bool, GroundTruth]]):
        self._by_rank = by_rank

    def __call__(self, rank: int, include_last_step: bool = False) -> GroundTruth:
        return self._by_rank[rank][include_last_step]

    def __getitem__(self, rank: int) -> GroundTruth:
        return self._by_rank[rank][False]

    def __iter__(self):
        return iter(self._by_rank)

    def __len__(self) -> int:
        return len(self._by_rank)


@dataclass
class SyntheticJob:
    """Generated traces (``traces[rank]`` is the JSON document as a dict) and their ground truth."""

    config: SynthConfig
    traces: dict[int, dict[str, Any]]
    truth: TruthTable


# ----------------------------------------------------------------------------- trace documents


def _header(config: SynthConfig, rank: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Top-level keys before and after ``traceEvents``, in torch.profiler's order."""
    device = {"name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045526528, "computeMajor": 9,
              "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
              "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132,
              "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448,
              "sharedMemPerMultiprocessor": 233472}
    before = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": i, **device} for i in range(min(config.ranks, 8))],
        "distributedInfo": {
            "backend": "nccl", "rank": rank, "world_size": config.ranks, "pg_count": 1,
            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                           "pg_size": config.ranks, "ranks": list(range(config.ranks))}],
            "nccl_version": "2.21.5",
        },
    }
    after = {"traceName": f"rank-{rank}.pt.trace.json", "displayTimeUnit": "ms",
             "baseTimeNanoseconds": BASE_EPOCH_US * US}
    return before, after


def _time(ns: int, ns_resolution: bool):
    # Decimal keeps the 3 written decimals exact (a float cannot at epoch-µs magnitudes)
    return Decimal(ns).scaleb(-3) if ns_resolution else ns // US


def _step_events(sim: _RankSim, step: _Step) -> Iterator[dict[str, Any]]:
    """The JSON events of one step: CPU events, then per GPU op its runtime call, flows and event."""
    t = sim.c.ns_resolution
    for e in step.cpu:
        yield {**e, "ts": _time(e["ts"], t), "dur": _time(e["dur"], t)}
    yield {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step.number}", "pid": sim.pid,
                "tid": sim.tid, "ts": _time(step.ts, t), "dur": _time(step.dur, t),
                "args": {"External id": step.external_id}}
    for op in step.ops:
        tid = sim.bwd_tid if op.stream == COMM_STREAM else sim.tid
        rt_ts, ts = _time(op.rt_ts, t), _time(op.ts, t)
        yield {"ph": "X", "cat": "cuda_runtime", "name": op.runtime, "pid": sim.pid, "tid": tid,
               "ts": rt_ts, "dur": _time(op.rt_dur, t),
               "args": {"External id": op.external_id, "cbid": _CBID[op.runtime],
                        "correlation": op.correlation}}
        yield {"ph": "s", "id": op.correlation, "pid": sim.pid, "tid": tid, "ts": rt_ts,
               "cat": "ac2g", "name": "ac2g"}
        yield {"ph": "X", "cat": op.cat, "name": op.name, "pid": sim.device, "tid": op.stream,
               "ts": ts, "dur": _time(op.dur, t),
               "args": {"External id": op.external_id, "queued": 0, "device": sim.device,
                        "context": 1, "stream": op.stream, "correlation": op.correlation, **op.args}}
        yield {"ph": "f", "id": op.correlation, "pid": sim.device, "tid": op.stream, "ts": ts,
               "cat": "ac2g", "name": "ac2g", "bp": "e"}


def _closing_events(sim: _RankSim, first_ts: int) -> list[dict[str, Any]]:
    """Metadata and the profiler's own span, written after the steps."""
    t = sim.c.ns_resolution
    ts = _time(first_ts, t)
    meta = [("process_name", sim.pid, 0, {"name": "python3.11"}),
            ("process_labels", sim.pid, 0, {"labels": "CPU"}),
            ("thread_name", sim.pid, sim.tid, {"name": "thread 1 (python3.11)"}),
            ("thread_name", sim.pid, sim.bwd_tid, {"name": "thread 2 (pt_autograd_0)"}),
            ("process_name", sim.device, 0, {"name": "python3.11"}),
            ("process_labels", sim.device, 0, {"labels": f"GPU {sim.device}"})]
    meta += [("thread_name", sim.device, s, {"name": f"stream {s} "}) for s in (COMPUTE_STREAM, COMM_STREAM)]
    out = [{"name": n, "ph": "M", "ts": ts, "pid": p, "tid": tid, "args": a} for n, p, tid, a in meta]
    out.append({"ph": "X", "cat": "Trace", "ts": _time(first_ts - 50 * US, t),
                "dur": _time(sim.cursor - first_ts + 100 * US, t), "pid": "Spans",
                "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}})
    return out


def generate(config: SynthConfig) -> SyntheticJob:
    """Simulate every rank in memory: trace documents and ground truth (both windows)."""
    traces, truth = {}, {}
    for rank in range(config.ranks):
        sim = _RankSim(config, rank)
        steps = list(sim.steps())
        events = [e for s in steps for e in _step_events(sim, s)] + _closing_events(sim, steps[0].ts)
        before, after = _header(config, rank)
        traces[rank] = {**before, "traceEvents": events, **after}
        truth[rank] = {flag: ground_truth(rank, steps, flag) for flag in (False, True)}
    return SyntheticJob(config, traces, TruthTable(truth))


def trace_path(out_dir: Path, rank: int, gzip: bool = True) -> Path:
    return Path(out_dir) / f"rank-{rank}.pt.trace.json{'.gz' if gzip else ''}"


def write_traces(config: SynthConfig, out_dir, gzip: bool = True, ranks=None) -> list[Path]:
    """Write one trace per rank (``rank-N.pt.trace.json[.gz]``), step by step; returns the paths.

    ``ranks``: only these ranks of the job (default all ``config.ranks``); each file is the same as
    in a whole-job write. Byte-identical for the same config: the gzip header carries no time
    stamp or file name."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    encoder = msgspec.json.Encoder(decimal_format="number")
    paths = []
    for rank in range(config.ranks) if ranks is None else ranks:
        sim = _RankSim(config, rank)
        before, after = _header(config, rank)
        path = trace_path(out_dir, rank, gzip)
        with open(path, "wb") as raw:
            f = igzip.IGzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if gzip else raw
            # json.dumps' default separators write `"rank": 3`, which HTA's rank regex needs
            f.write((json.dumps(before)[:-1] + ', "traceEvents": [\n').encode())
            first_ts, batch = None, []
            for step in sim.steps():
                first_ts = step.ts if first_ts is None else first_ts
                for event in _step_events(sim, step):
                    batch.append(encoder.encode(event))
                    if len(batch) == _WRITE_BATCH:
                        f.write(b",\n".join(batch) + b",\n")
                        batch = []
            batch += [encoder.encode(e) for e in _closing_events(sim, first_ts)]
            f.write(b",\n".join(batch))
            f.write(("\n], " + json.dumps(after)[1:]).encode())
            if gzip:
                f.close()
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m analysis.testing.synthetic", description=__doc__.splitlines()[0])
    p.add_argument("out_dir", type=Path)
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kernels-per-step", type=int, default=SynthConfig.kernels_per_step)
    p.add_argument("--events-per-rank", type=int, default=None)
    p.add_argument("--slow-rank", type=int, default=SynthConfig.slow_rank)
    p.add_argument("--ns-resolution", action="store_true")
    p.add_argument("--no-gzip", action="store_true")
    a = p.parse_args(argv)
    config = SynthConfig(ranks=a.ranks, steps=a.steps, seed=a.seed, kernels_per_step=a.kernels_per_step,
                         events_per_rank=a.events_per_rank, slow_rank=a.slow_rank,
                         ns_resolution=a.ns_resolution)
    paths = write_traces(config, a.out_dir, gzip=not a.no_gzip)
    size = sum(p.stat().st_size for p in paths)
    print(f"wrote {len(paths)} traces ({size / 1e6:.1f} MB) to {a.out_dir}: {config.steps}+1 steps, "
          f"{config.kernels_per_step} compute kernels per step, seed {config.seed}, slow rank {config.slow_rank}")


if __name__ == "__main__":
    main()
