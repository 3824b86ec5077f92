"""Small Kineto traces whose critical path is known by construction, for testing the critical path.

Each builder returns ``(trace, truth)``: ``trace`` is a Kineto JSON document (a dict; write it with
``json.dumps``) of one rank with ``steps`` profiler steps, and ``truth`` is a ``PathTruth`` with the
expected path length and time per ``bound_by`` category of every step, in µs, worked out by hand
from the rules in ``analysis.metrics.critical_path.critical_path_graph``.

Every step but those of ``untraced_gaps`` and ``exposed_communication`` is wrapped in one CPU
operator (``train_step``) that spans it exactly, so that the path runs from the step's start to its
end and its length equals the step time; those two leave CPU time unrecorded, which the default
analysis counts as ``cpu_untraced`` (HTA counts nothing: ``hta_length``).

- ``cpu_bound``: operators with short kernels the CPU never waits for;
- ``gpu_bound``: three queued kernels, then ``cudaDeviceSynchronize`` until the GPU is done;
- ``communication_bound``: the same with a long NCCL kernel in the middle;
- ``launch_bound``: tiny kernels that start long after their launch, each waited for with
  ``cudaStreamSynchronize``;
- ``data_loading_bound``: a ``DataLoader`` span that takes most of the step;
- ``cuda_graph``: one ``cudaGraphLaunch`` running four kernels back to back (HTA #290);
- ``rocm``: ``gpu_bound`` as an AMD trace records it: ``hip*`` calls, stream 0, no sync events;
- ``triton``: ten kernels launched with ``cuLaunchKernelEx`` (HTA #271), each after the previous one
  finished: the stream idles between them because the CPU is late, not because of GPU overhead;
- ``untraced_gaps``: three operators with untraced CPU time before, between and after them;
- ``exposed_communication``: an all-reduce the CPU waits for, between untraced CPU time;
- ``cross_thread_wait``: the main thread waits (untraced) while a second thread works: the path
  follows the second thread's operators, not the main thread's idle gap;
- ``stream_wait_on_allreduce``: an all-reduce launched from a second CPU thread (the autograd
  thread of DDP) while the main thread waits, untraced; the compute stream waits for it with
  ``cudaStreamWaitEvent`` (Kineto records the ``Stream Wait Event``), then runs one more kernel
  that the CPU synchronises on: the path goes through the all-reduce;
- ``stream_wait_on_allreduce_unrecorded``: the same as an older Kineto records it (no GPU sync
  events at all): the waits are inferred;
- ``queued_behind_earlier_work``: steps with a gap between them, in which a CPU operator launches a
  kernel that runs into the next step; the step's first kernel is queued behind it (no launch
  edge, its predecessor on the stream outside the graph): the path reaches it from its launch call
  through the earlier kernel's time (a queued edge), not from the step's start as untraced time;
- ``queued_behind_pending_work``: the same with the kernel and an all-reduce still queued behind
  it when the step launches its kernel: the wait is the all-reduce's (communication).
- ``overlapping_kernels``: two kernels of one stream that overlap by 15 µs (a profiler clock
  artefact real traces have): the kernel-kernel edge between them weighs -15 µs, which HTA counts
  as such in its breakdown (a negative share) while searching the path with it at 0;
- ``sub_microsecond_kernel``: a 0.5 µs kernel at a fractional start, then a stream
  synchronisation: HTA's rounding of each end to whole µs gives an edge of -1 µs;
- ``edgeless``: a lone ``Stream Wait Event`` in the window, no CPU event: a graph of two nodes and
  no edge (HTA fails on it; there is no path);
- ``step_operator_backward_thread``: torch ≤ 1.8's steps: ``ProfilerStep#N`` is a CPU *operator*
  spanning the step on the main thread, which waits (untraced) while the autograd thread runs the
  backward pass and launches a kernel that ends past the step: the path hands off to the autograd
  thread and reaches that kernel (its length is the step plus the overrun).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CPU_PID, CPU_TID = 100, 100
GPU_PID, STREAM = 0, 7
STEP_US = 1000  # every step lasts 1 ms
_BASE_US = 1_700_000_000_000_000  # an epoch time in µs, like a real trace


@dataclass
class PathTruth:
    """Expected per-step critical path (µs)."""

    length: float
    bound_by: dict[str, float]  # µs per category
    hta_length: float | None = None  # HTA 0.5.0's path length, where it differs (a known failure)

    @property
    def dominant(self) -> str:
        return max(self.bound_by, key=self.bound_by.get)


@dataclass
class _Builder:
    events: list[dict[str, Any]] = field(default_factory=list)
    corr: int = 0

    def cpu(self, name, ts, dur, cat="cpu_op", tid=CPU_TID, **args):
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": CPU_PID, "tid": tid,
                            "ts": _BASE_US + ts, "dur": dur, "args": args})  # fmt: skip

    def launch(self, api, ts, dur, kernels, stream=STREAM, cat="cuda_runtime", tid=CPU_TID):
        """A launch call and the GPU events it ran: ``kernels`` = [(name, ts, dur), ...]."""
        self.corr += 1
        self.cpu(api, ts, dur, cat=cat, tid=tid, correlation=self.corr)
        for name, kts, kdur in kernels:
            self.gpu(name, kts, kdur, stream=stream, correlation=self.corr)

    def gpu(self, name, ts, dur, stream=STREAM, cat="kernel", **args):
        tid = stream if stream >= 0 else -1
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": GPU_PID, "tid": tid,
                            "ts": _BASE_US + ts, "dur": dur,
                            "args": {"stream": stream, "device": 0, **args}})  # fmt: skip

    def sync(self, api, kind, ts, dur, gpu_ts, gpu_dur, stream=STREAM):
        """A blocking runtime call and its ``cuda_sync`` GPU event (``Stream``/``Context Sync``)."""
        self.corr += 1
        self.cpu(api, ts, dur, cat="cuda_runtime", correlation=self.corr)
        self.gpu(kind, gpu_ts, gpu_dur, stream=stream, cat="cuda_sync", correlation=self.corr)

    def document(self) -> dict[str, Any]:
        return {"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 1},
                "traceEvents": self.events}  # fmt: skip


def _steps(body: Callable[[_Builder, int], PathTruth], steps: int, wrap: bool = True):
    b = _Builder()
    truth = None
    for i in range(steps):
        t0 = i * STEP_US
        b.cpu(f"ProfilerStep#{i + 1}", t0, STEP_US, cat="user_annotation")
        if wrap:
            b.cpu("train_step", t0, STEP_US)
        truth = body(b, t0)
    return b.document(), truth


def cpu_bound(steps: int = 3):
    def body(b, t):
        b.cpu("aten::op1", t + 10, 390)
        b.launch("cudaLaunchKernel", t + 300, 10, [("elementwise_kernel", t + 320, 10)])
        b.cpu("aten::op2", t + 410, 580)
        b.launch("cudaLaunchKernel", t + 900, 10, [("elementwise_kernel", t + 915, 10)])
        return PathTruth(STEP_US, {"cpu_bound": STEP_US})

    return _steps(body, steps)


def _queued_then_sync(b, t, second: str, durations=(300, 300, 356)):
    """Three kernels queued back to back (2 µs apart), then cudaDeviceSynchronize until the end."""
    k1, k2, k3 = durations
    b.launch("cudaLaunchKernel", t + 10, 10, [("ampere_sgemm_128x64_tn", t + 30, k1)])
    b.launch("cudaLaunchKernel", t + 25, 10, [(second, t + 32 + k1, k2)])
    b.launch("cudaLaunchKernel", t + 40, 10, [("ampere_sgemm_128x64_tn", t + 34 + k1 + k2, k3)])
    end = t + 34 + k1 + k2 + k3  # = t + 990
    b.sync("cudaDeviceSynchronize", "Context Sync", t + 60, end - (t + 60), end - 5, 5, stream=-1)
    # path: 10 CPU, 20 launch delay, the kernels, 2 x 2 µs gaps, sync edge, 10 CPU
    return {"cpu_bound": 20, "gpu_kernel_launch_overhead": 20, "gpu_kernel_kernel_overhead": 4}


def gpu_bound(steps: int = 3):
    def body(b, t):
        truth = _queued_then_sync(b, t, "ampere_sgemm_128x64_tn")
        # HTA: no launch edge (k2 was queued before k1 started): the path starts at k1
        return PathTruth(STEP_US, {**truth, "gpu_compute_bound": 956}, hta_length=STEP_US - 30)

    return _steps(body, steps)


def communication_bound(steps: int = 3):
    def body(b, t):
        nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
        truth = _queued_then_sync(b, t, nccl, durations=(100, 756, 100))
        return PathTruth(STEP_US, {**truth, "gpu_compute_bound": 200,
                                   "gpu_communication_bound": 756},
                         hta_length=STEP_US - 30)  # fmt: skip

    return _steps(body, steps)


def launch_bound(steps: int = 3):
    def body(b, t):
        for i in range(5):
            s = t + 200 * i
            b.launch("cudaLaunchKernel", s, 5, [("tiny_kernel", s + 150, 5)])
            b.sync("cudaStreamSynchronize", "Stream Sync", s + 6, 149, s + 154, 1)
        # per 200 µs: 150 launch delay, 5 kernel, 45 CPU until the next launch (or the step's end)
        return PathTruth(STEP_US, {"gpu_kernel_launch_overhead": 750, "gpu_compute_bound": 25,
                                   "cpu_bound": 225})  # fmt: skip

    return _steps(body, steps)


def data_loading_bound(steps: int = 3):
    def body(b, t):
        b.cpu("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t + 5, 595,
              cat="user_annotation")  # fmt: skip
        b.cpu("aten::stack", t + 10, 580)
        b.cpu("aten::linear", t + 600, 390)
        b.launch("cudaLaunchKernel", t + 700, 10, [("ampere_sgemm_128x64_tn", t + 720, 10)])
        # 10 CPU (train_step until the stack), 580 stack + 10 after it inside the DataLoader span,
        # then 390 + 10 CPU
        return PathTruth(STEP_US, {"cpu_bound": 410, "data_loading": 590})

    return _steps(body, steps)


def cuda_graph(steps: int = 3):
    def body(b, t):
        kernels = [(f"graph_kernel_{i}", t + 30 + 101 * i, 100) for i in range(4)]
        b.launch("cudaGraphLaunch", t + 10, 10, kernels)
        end = t + 30 + 303 + 100  # the last kernel's end = t + 433
        b.sync("cudaStreamSynchronize", "Stream Sync", t + 25, end - (t + 25), end - 1, 1)
        b.cpu("aten::add", t + 443, STEP_US - 453)
        # 10 CPU, 20 launch delay, 4 x 100 kernels, 3 x 1 µs gaps, sync, then CPU to the end
        return PathTruth(STEP_US, {"cpu_bound": 10 + STEP_US - 433, "gpu_kernel_launch_overhead": 20,
                                   "gpu_compute_bound": 400, "gpu_kernel_kernel_overhead": 3},
                         hta_length=STEP_US - 433 + 100)  # fmt: skip

    return _steps(body, steps)


def triton(steps: int = 3):
    def body(b, t):
        for i in range(10):
            s = t + 100 * i + 10
            b.launch("cuLaunchKernelEx", s, 10, [("triton_poi_fused_add_0", s + 15, 5)],
                     cat="cuda_driver")  # fmt: skip
        return PathTruth(STEP_US, {"cpu_bound": STEP_US})

    return _steps(body, steps)


def rocm(steps: int = 3):
    """The GPU-bound step of an AMD trace: ``hip*`` calls, stream 0 and no sync events at all."""

    def body(b, t):
        hip = {"cudaLaunchKernel": "hipLaunchKernel"}
        k = [("Cijk_Alik_Bljk_SB", t + 30, 300), ("elementwise_kernel", t + 332, 300),
             ("Cijk_Alik_Bljk_SB", t + 634, 356)]  # fmt: skip
        b.launch(hip["cudaLaunchKernel"], t + 10, 10, [k[0]], stream=0)
        b.launch(hip["cudaLaunchKernel"], t + 25, 10, [k[1]], stream=0)
        b.launch(hip["cudaLaunchKernel"], t + 40, 10, [k[2]], stream=0)
        b.cpu("hipDeviceSynchronize", t + 60, 930, cat="cuda_runtime")
        # as gpu_bound; HTA: no sync edge and the call's 930 µs count as CPU time
        return PathTruth(STEP_US, {"cpu_bound": 20, "gpu_kernel_launch_overhead": 20,
                                   "gpu_kernel_kernel_overhead": 4, "gpu_compute_bound": 956})

    return _steps(body, steps)


def out_of_order_stack(steps: int = 1):
    """HTA #113: ``cudaStreamSynchronize`` ends after its parent operator (an out-of-order call
    stack), and HTA's stack pops the wrong event: the next operator becomes the sync call's sibling
    *after* it, so the sync call's end precedes, in the walk, a kernel it waits for, and the sync
    edge closes a cycle. No path is right for such a trace: the test only asks for the cycle to be
    found, reported and broken the same way every time (``truth`` is not checked)."""

    def body(b, t):
        b.cpu("aten::op_a", t + 10, 90)  # [10, 100]
        b.sync("cudaStreamSynchronize", "Stream Sync", t + 50, 100, t + 149, 1)  # [50, 150]
        b.cpu("aten::op_c", t + 105, 845)  # [105, 950]
        b.launch("cudaLaunchKernel", t + 110, 5, [("kernel", t + 120, 20)])  # kernel [120, 140]
        return PathTruth(STEP_US, {})

    return _steps(body, steps)


def untraced_gaps(steps: int = 3):
    """No operator spans the step: the CPU runs code the profiler did not record before, between
    and after three operators (no ``train_step`` wrapper)."""

    def body(b, t):
        b.cpu("aten::op1", t + 50, 100)  # untraced [0, 50), then [50, 150]
        b.cpu("aten::op2", t + 400, 100)  # untraced [150, 400)
        b.launch("cudaLaunchKernel", t + 420, 10, [("elementwise_kernel", t + 440, 10)])
        b.cpu("aten::op3", t + 900, 60)  # untraced [500, 900), then [960, 1000)
        return PathTruth(STEP_US, {"cpu_bound": 260, "cpu_untraced": 50 + 250 + 400 + 40},
                         hta_length=260)  # fmt: skip

    return _steps(body, steps, wrap=False)


NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def exposed_communication(steps: int = 3):
    """An all-reduce the CPU waits for with ``cudaStreamSynchronize``, between untraced CPU time
    (no ``train_step`` wrapper): the wait is communication, the gaps are ``cpu_untraced``."""

    def body(b, t):
        b.cpu("c10d::allreduce_", t + 10, 30)  # untraced [0, 10)
        b.launch("cudaLaunchKernel", t + 20, 10, [(NCCL_KERNEL, t + 40, 600)])  # kernel [40, 640]
        b.sync("cudaStreamSynchronize", "Stream Sync", t + 50, 595, t + 639, 1)  # returns at 645
        b.cpu("aten::mul", t + 700, 250)  # untraced [645, 700), then [950, 1000)
        # 10 CPU (c10d until the launch), 20 launch delay, 600 kernel + 5 until the sync returns
        return PathTruth(STEP_US, {"cpu_bound": 10 + 250, "cpu_untraced": 10 + 55 + 50,
                                   "gpu_kernel_launch_overhead": 20,
                                   "gpu_communication_bound": 605},
                         hta_length=10 + 20 + 600 + 250)  # fmt: skip

    return _steps(body, steps, wrap=False)


NCCL_STREAM, AUTOGRAD_TID = 20, 101


def cross_thread_wait(steps: int = 3):
    def body(b, t):
        b.cpu("aten::mse_loss", t + 0, 100)
        b.cpu("autograd::engine::evaluate_function: MseLossBackward0", t + 110, 380,
              tid=AUTOGRAD_TID)  # fmt: skip
        b.cpu("autograd::engine::evaluate_function: AddmmBackward0", t + 500, 390, tid=AUTOGRAD_TID)
        b.cpu("Optimizer.step#SGD.step", t + 900, 100)
        # main [0, 100], hand-off (10), the autograd thread's two calls (380 + 10 + 390), hand-off
        # back (10), main [900, 1000]; not the main thread's 800 µs idle gap
        # HTA (dependency edges weigh nothing): the autograd thread's two calls
        return PathTruth(STEP_US, {"cpu_bound": 970, "cpu_untraced": 30}, hta_length=380 + 390)

    return _steps(body, steps, wrap=False)


def _stream_wait_on_allreduce(steps: int, record_waits: bool):
    """See the module docstring; ``record_waits``: Kineto's ``Stream Wait Event`` and ``Stream
    Sync`` GPU events are in the trace (else only the runtime calls are)."""

    def body(b, t):
        # main thread: forward, then (untraced) waiting for backward, then the optimizer
        b.cpu("aten::linear", t + 0, 40)
        b.launch("cudaLaunchKernel", t + 10, 10, [("ampere_sgemm_128x64_tn", t + 30, 200)])
        # the autograd thread: the all-reduce on the NCCL stream, and the event it records
        b.cpu("c10d::allreduce_", t + 42, 58, tid=AUTOGRAD_TID)
        b.launch("cudaLaunchKernel", t + 45, 10, [(NCCL_KERNEL, t + 60, 600)],
                 stream=NCCL_STREAM, tid=AUTOGRAD_TID)  # kernel [60, 660]  # fmt: skip
        b.corr += 1
        record = b.corr
        b.cpu("cudaEventRecord", t + 60, 5, cat="cuda_runtime", tid=AUTOGRAD_TID,
              correlation=record)  # fmt: skip
        b.cpu("Optimizer.step#SGD.step", t + 105, 895)
        b.corr += 1
        b.cpu("cudaStreamWaitEvent", t + 110, 5, cat="cuda_runtime", correlation=b.corr)
        if record_waits:
            b.gpu("Stream Wait Event", t + 231, 1, cat="cuda_sync", correlation=b.corr,
                  wait_on_stream=NCCL_STREAM, wait_on_cuda_event_record_corr_id=record)  # fmt: skip
        b.launch("cudaLaunchKernel", t + 120, 10, [("ampere_sgemm_128x64_tn", t + 665, 300)])
        if record_waits:
            b.sync("cudaStreamSynchronize", "Stream Sync", t + 135, 835, t + 964, 1)
        else:
            b.cpu("cudaStreamSynchronize", t + 135, 835, cat="cuda_runtime")  # returns at 970
        # path: linear until its end (40), hand-off to the autograd thread (2), c10d until the
        # launch (3), launch delay (15), the all-reduce (600) and the stream's wait for it (5),
        # the second GEMM (300), the sync call's return (5), the optimizer to the end (30)
        return PathTruth(STEP_US, {"cpu_bound": 40 + 3 + 5 + 30, "cpu_untraced": 2,
                                   "gpu_kernel_launch_overhead": 15,
                                   "gpu_communication_bound": 605, "gpu_compute_bound": 300},
                         # HTA: with the Stream Wait Event, the same path without the untraced
                         # hand-off, linear, waits and the sync return (3 + 15 + 600 + 300 + 30);
                         # without it, linear until the launch, its delay, both GEMMs and the
                         # 435 µs between them as kernel-kernel overhead (10 + 20 + 200 + 435 + 300)
                         hta_length=948 if record_waits else 965)  # fmt: skip

    return _steps(body, steps, wrap=False)


def stream_wait_on_allreduce(steps: int = 3):
    return _stream_wait_on_allreduce(steps, record_waits=True)


def stream_wait_on_allreduce_unrecorded(steps: int = 3):
    return _stream_wait_on_allreduce(steps, record_waits=False)


QUEUED_GAP_US = 200  # between two steps of queued_behind_earlier_work


def _queued_behind_earlier_work(steps: int, pending: bool):
    """See the module docstring. Steps start every ``STEP_US + QUEUED_GAP_US``; each is wrapped in
    ``train_step`` and preceded, in the gap, by an operator whose GPU work runs 300 µs into it:
    one kernel, running when the step launches its own (``pending`` False), or a kernel and an
    all-reduce queued behind it, not yet started then (``pending`` True)."""
    b = _Builder()
    for i in range(steps):
        t = QUEUED_GAP_US + i * (STEP_US + QUEUED_GAP_US)
        b.cpu("aten::copy_", t - 150, 40)
        if pending:  # [t - 100, t + 100), then the all-reduce [t + 102, t + 300)
            b.launch("cudaLaunchKernel", t - 140, 10, [("elementwise_kernel", t - 100, 200)])
            b.launch("cudaLaunchKernel", t - 125, 10, [(NCCL_KERNEL, t + 102, 198)])
        else:
            b.launch("cudaLaunchKernel", t - 140, 10, [("elementwise_kernel", t - 100, 400)])
        b.cpu(f"ProfilerStep#{i + 1}", t, STEP_US, cat="user_annotation")
        b.cpu("train_step", t, STEP_US)
        # the step's kernel, launched at t + 10 while the stream is busy: it starts at t + 302
        b.launch("cudaLaunchKernel", t + 10, 10, [("ampere_sgemm_128x64_tn", t + 302, 400)])
        b.sync("cudaStreamSynchronize", "Stream Sync", t + 30, 680, t + 701, 1)  # returns at 710
        b.cpu("aten::add", t + 720, 270)
    # path: train_step until the launch (10), the queued edge to the GEMM's start (292, the time
    # of the GPU event before it on the stream: the elementwise kernel, or the all-reduce), the
    # GEMM (400), the sync call's return (8), train_step until aten::add (10), aten::add (270),
    # train_step to the end (10).
    queued = "gpu_communication_bound" if pending else "gpu_compute_bound"
    bound = {"cpu_bound": 10 + 8 + 10 + 270 + 10, "gpu_compute_bound": 400}
    bound[queued] = bound.get(queued, 0) + 292
    # HTA: a launch delay of 292 µs (the stream's queue was empty: the elementwise kernel was
    # running), or, with the all-reduce still queued, no edge into the GEMM at all: the path
    # starts at it (400 + the sync edge, 0, + 10 + 270 + 10)
    return b.document(), PathTruth(STEP_US, bound, hta_length=690 if pending else 992)


def queued_behind_earlier_work(steps: int = 3):
    return _queued_behind_earlier_work(steps, pending=False)


def queued_behind_pending_work(steps: int = 3):
    return _queued_behind_earlier_work(steps, pending=True)


SCENARIOS = {
    "cpu_bound": cpu_bound,
    "gpu_bound": gpu_bound,
    "communication_bound": communication_bound,
    "launch_bound": launch_bound,
    "data_loading_bound": data_loading_bound,
    "cuda_graph": cuda_graph,
    "triton": triton,
    "rocm": rocm,
    "untraced_gaps": untraced_gaps,
    "exposed_communication": exposed_communication,
    "cross_thread_wait": cross_thread_wait,
    "stream_wait_on_allreduce": stream_wait_on_allreduce,
    "stream_wait_on_allreduce_unrecorded": stream_wait_on_allreduce_unrecorded,
    "queued_behind_earlier_work": queued_behind_earlier_work,
    "queued_behind_pending_work": queued_behind_pending_work,
}


def overlapping_kernels(steps: int = 1):
    """Two kernels on one stream, the second starting 15 µs before the first ends: the
    kernel-kernel edge weighs -15 µs (``truth``: the default preset's; HTA's breakdown sums to
    15 µs less, ``hta_length``)."""

    def body(b, t):
        b.cpu("aten::a", t + 10, 20)
        b.launch("cudaLaunchKernel", t + 20, 2, [("kernel_a", t + 100, 100)])  # [100, 200]
        b.cpu("aten::b", t + 40, 20)
        b.launch("cudaLaunchKernel", t + 50, 2, [("kernel_b", t + 185, 50)])  # [185, 235]
        return PathTruth(STEP_US, {}, hta_length=None)

    return _steps(body, steps, wrap=False)


def sub_microsecond_kernel(steps: int = 1):
    """A 0.5 µs kernel starting at a fractional µs, then ``cudaStreamSynchronize`` and its
    ``Stream Sync`` GPU event 0.1 µs after the kernel ends (HTA's rounding: an edge of -1 µs)."""

    def body(b, t):
        b.cpu("aten::a", t + 10, 20)
        b.launch("cudaLaunchKernel", t + 20, 2, [("kernel_a", t + 100.2, 0.5)])
        b.cpu("aten::item", t + 38, 80)
        b.sync("cudaStreamSynchronize", "Stream Sync", t + 40, 70, t + 100.8, 9)
        b.cpu("aten::c", t + 130, 30)
        return PathTruth(STEP_US, {})

    return _steps(body, steps, wrap=False)


def edgeless():
    """A window holding only a ``Stream Wait Event`` (two nodes, no edge): no path."""
    b = _Builder()
    b.gpu("Stream Wait Event", 5, 3, cat="cuda_sync", correlation=200, wait_on_stream=-1,
          wait_on_cuda_event_record_corr_id=-1)
    return b.document(), PathTruth(0, {})


STEP_OPERATOR_OVERRUN_US = 140  # step_operator_backward_thread: the kernel's end past the step


def step_operator_backward_thread(steps: int = 1):
    """See the module docstring: steps 2 ms apart, each 1 ms. The main thread runs [0, 100] and
    [900, 1000]; the autograd thread [200, 300] and [500, 890], the last launching a kernel that
    runs [885, 1140]. Alone, the autograd thread's chain spans 940 µs, less than the main
    thread's 1000: only the hand-off makes the path reach the kernel (``PathTruth.length``: the
    step plus the overrun)."""
    b = _Builder()
    for i in range(steps):
        t = 2 * i * STEP_US
        b.cpu(f"ProfilerStep#{i + 1}", t, STEP_US)  # an operator (cpu_op), not an annotation
        b.cpu("aten::mse_loss", t + 0, 100)
        b.cpu("MseLossBackward", t + 200, 100, tid=AUTOGRAD_TID)
        b.cpu("AddmmBackward", t + 500, 390, tid=AUTOGRAD_TID)
        b.launch("cudaLaunchKernel", t + 880, 5, [("backward_kernel", t + 885, 255)],
                 tid=AUTOGRAD_TID)
        b.cpu("Optimizer.step#SGD.step", t + 900, 100)
    return b.document(), PathTruth(STEP_US + STEP_OPERATOR_OVERRUN_US, {})
