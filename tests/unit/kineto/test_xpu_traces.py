"""Intel GPU (XPU) traces: Kineto writes their kernels without a ``stream`` (the SYCL queue
instead) and their launches as ``xpu_runtime`` Unified Runtime calls. Before, the analyses saw no
GPU work in them and the parse called the trace edited. Ground truth:
``analysis.testing.xpu_traces`` (the writer's shape, event by event)."""

import warnings

import pytest

from analysis.api import TraceAnalysis
from analysis.kineto.events import gpu_mask, kernel_like_mask
from analysis.kineto.parse import parse_trace_bytes as parse_trace
from analysis.metrics.gpu_time.memory_bandwidth import copy_direction, memory_kind
from analysis.metrics.kernel_types import DEFAULT_PATTERNS
from analysis.testing import xpu_traces as X
from analysis.testing.health_traces import write_job

STEPS = 3
WINDOW = STEPS - 1  # the last ProfilerStep is not analysed (HTA's default)


def _parsed(legacy: bool):
    import json
    return parse_trace(json.dumps(X.xpu_trace(steps=STEPS, legacy=legacy)).encode(), "xpu.json")


@pytest.fixture(params=[False, True], ids=["kineto-xpu-plugin", "ipex-legacy"])
def job(request, tmp_path):
    write_job(X.xpu_job(ranks=2, steps=STEPS, legacy=request.param), tmp_path / "traces")
    return TraceAnalysis(trace_dir=str(tmp_path / "traces"), cache_dir=str(tmp_path / "cache"),
                         progress=False)


@pytest.mark.parametrize("legacy", [False, True])
def test_the_queue_is_the_stream_and_the_trace_is_not_called_edited(legacy):
    rt = _parsed(legacy)
    ev = rt.events
    device = kernel_like_mask(ev)
    assert int(device.sum()) == 2 * STEPS  # a kernel and a copy per step
    assert set(ev.loc[device, "stream"]) == {X.QUEUE}
    assert rt.meta.unseen_gpu_events == 0
    assert not any("edited" in a for a in rt.meta.anomalies)
    # the runtime calls and the Level Zero calls inside them stay CPU events
    cpu = ev["cat"].isin(["xpu_runtime", "xpu_driver", "cpu_op", "user_annotation"]).to_numpy()
    assert not (gpu_mask(ev) & cpu).any()


def test_temporal_and_idle_breakdowns_match_the_construction(job):
    t = job.get_temporal_breakdown(visualize=False).set_index("rank")
    span = (WINDOW - 1) * X.STEP_US + X.GEMM_US + X.COPY_US  # first kernel start → last copy end
    busy = WINDOW * (X.GEMM_US + X.COPY_US)
    for rank in (0, 1):
        assert t.loc[rank, "kernel_time(us)"] == pytest.approx(span)
        assert t.loc[rank, "compute_time(us)"] == pytest.approx(WINDOW * X.GEMM_US)
        assert t.loc[rank, "non_compute_time(us)"] == pytest.approx(WINDOW * X.COPY_US)
        assert t.loc[rank, "idle_time(us)"] == pytest.approx(span - busy)
    idle = job.get_idle_time_breakdown(ranks=[0], visualize=False)[0].set_index("idle_category")
    assert idle.loc["host_wait", "idle_time"] == pytest.approx(span - busy)  # waits for launches
    assert set(idle["stream"]) == {X.QUEUE}


def test_launch_stats_pair_each_unified_runtime_launch_with_its_gpu_event(job):
    stats = job.get_cuda_kernel_launch_stats(ranks=[0], visualize=False)[0]
    # per analysed step: urEnqueueKernelLaunch → gemm_kernel, urEnqueueUSMMemcpy → the copy;
    # the zeCommandListAppendLaunchKernel inside the launch (same correlation id) is no launch
    assert len(stats) == 2 * WINDOW
    gemm = stats[stats["gpu_duration"] == X.GEMM_US]
    assert len(gemm) == WINDOW
    assert (gemm["cpu_duration"] == 40.0).all() and (gemm["launch_delay"] == 40.0).all()
    assert stats["correlation"].is_unique


def test_copies_get_cuda_direction_names_and_their_bytes(job):
    copies = job.run("memcpy_summary", ranks=[0])
    row = copies.iloc[0]
    assert (row["kind"], row["direction"], row["src"], row["dst"]) == (
        "Memcpy", "HtoD", "MEMORY(Unknown)", "DEVICE")
    assert row["count"] == WINDOW and row["bytes"] == WINDOW * X.COPY_BYTES
    assert row["achieved_gbps"] == pytest.approx(X.COPY_BYTES / (X.COPY_US * 1000))
    kernels = job.get_gpu_kernel_breakdown(visualize=False)[0].set_index("kernel_type")
    assert kernels.loc["COMPUTATION", "sum"] == pytest.approx(2 * WINDOW * X.GEMM_US)  # 2 ranks
    assert kernels.loc["MEMORY", "sum"] == pytest.approx(2 * WINDOW * X.COPY_US)


def test_health_finds_nothing_wrong(job):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no load warning either
        checks = job.check()
    assert set(checks["severity"]) <= {"info"}, checks[["check", "message"]]


@pytest.mark.parametrize("code, direction", [
    ("M2D", "HtoD"), ("H2D", "HtoD"), ("D2M", "DtoH"), ("D2H", "DtoH"), ("D2D", "DtoD"),
    ("M2M", "HtoH"), ("D2D - P2P", "PtoP"), ("S2D", "S2D"), ("D2S", "D2S"),
    ("HtoD", "HtoD"), ("PtoP", "PtoP"), ("", ""),
])
def test_copy_direction(code, direction):
    assert copy_direction(code) == direction


def test_memory_kind_of_intel_and_cuda_names():
    assert memory_kind("Memcpy M2D (MEMORY(Unknown) -> DEVICE)") == "Memcpy HtoD"
    assert memory_kind("Memcpy D2D - P2P (DEVICE -> DEVICE)") == "Memcpy PtoP"
    assert memory_kind("Memcpy HtoD (Pinned -> Device)") == "Memcpy HtoD"
    assert memory_kind("Memset (0 -> DEVICE)") == "Memset"


def test_onccl_collective_kernels_are_communication():
    kind = DEFAULT_PATTERNS.kernel_type
    assert kind("allreduce_large_read_write_ipc<float, 2, 2>(void const*, void*)") == \
        "COMMUNICATION"
    assert kind("allgatherv_large_impl<float, 4, 1, false>(...)") == "COMMUNICATION"
    assert kind("gemm_kernel") == "COMPUTATION"
    assert kind("allreduce_grad") == "COMPUTATION"  # not oneCCL's naming


def test_an_hta_style_edited_trace_is_still_called_edited():
    """A kernel with neither stream nor queue (args stripped) is still not GPU work."""
    import json
    doc = X.xpu_trace(steps=1)
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["args"] = {"External id": e["args"]["External id"]}
    rt = parse_trace(json.dumps(doc).encode(), "edited.json")
    assert rt.meta.unseen_gpu_events == 1
    assert any("edited" in a for a in rt.meta.anomalies)
