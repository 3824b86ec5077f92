"""XPlane reader: an XSpace encoded here by a tiny wire-format encoder, every answer known."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis import TraceAnalysis
from analysis.errors import CorruptTraceError, InputFileError
from analysis.formats import detect
from analysis.testing.foreign import XEvent, XLine, xplane, xspace_bytes

BASE = 1_000_000  # line timestamps, ns

SPACE = xspace_bytes([
    xplane("/host:metadata", []),
    xplane("/device:GPU:0", []),  # a GPU that ran nothing: no rank
    xplane("/device:GPU:3", [
        XLine(1, "Stream #1(Kernel)", timestamp_ns=BASE, events=[
            XEvent("fusion_1", BASE + 100, 400, {"correlation_id": 11}),
            XEvent("Cijk_gemm", BASE + 300, 500, {"correlation_id": 12}),
        ]),
        XLine(2, "Stream #2(MemcpyOther)", timestamp_ns=BASE, events=[
            XEvent("CopyHostToDevice", BASE + 1000, 200,
                   {"correlation_id": 13, "memcpy_details": "kind:HtoD size:65536 dest:2 async:1"}),
            XEvent("custom_kernel", BASE + 1400, 100),  # no correlation id
        ]),
    ], plane_id=4),
    xplane("/host:CPU", [
        XLine(7, "python", timestamp_ns=BASE, events=[
            XEvent("$train.py:10 step", BASE, 900),
            XEvent("hipModuleLaunchKernel", BASE + 10, 20, {"correlation_id": 11}),
            XEvent("Cijk_gemm", BASE + 40, 20, {"correlation_id": 12}),  # XLA's launch name
            XEvent("hipMemcpyHtoDAsync", BASE + 70, 30, {"correlation_id": 13}),
            XEvent("ExecuteOnStream", BASE + 5, 800),
        ]),
    ], plane_id=5),
])


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "run.xplane.pb"
    p.write_bytes(SPACE)
    return p


@pytest.fixture
def ta(path):
    return TraceAnalysis(trace_dir=str(path), use_cache=False, progress=False)


def test_detected_by_content(path):
    assert detect(path.read_bytes()[:4096]) == "xplane"


def test_ranks_are_the_gpu_planes_with_events(ta):
    meta = ta.get_trace_metadata()
    assert meta["rank"].tolist() == [3]
    assert meta["format"].tolist() == ["xplane"]
    assert meta["gpu_events"].tolist() == [4]
    assert meta["world_size"].tolist() == [4]  # GPU planes 0..3 at least


def test_health_check_has_no_errors(ta):
    health = ta.check()
    assert "error" not in set(health["severity"])
    assert "missing_flows" not in set(health["check"])  # XPlane has no flows to miss


def test_rows(ta):
    ev = ta.trace[3].events
    kernels = ev[ev["cat"] == "kernel"]
    assert kernels["name"].astype(str).tolist() == ["fusion_1", "Cijk_gemm", "custom_kernel"]
    assert kernels["ts"].tolist() == [BASE + 100, BASE + 300, BASE + 1400]
    assert kernels["stream"].tolist() == [1, 1, 2]
    memcpy = ev[ev["cat"] == "gpu_memcpy"]
    assert memcpy["name"].astype(str).tolist() == ["Memcpy HtoD (Host -> Device)"]
    assert ta.trace[3].extra("memory_ops").loc[memcpy.index, "bytes"].tolist() == [65536]
    runtime = ev[ev["cat"] == "cuda_runtime"]
    assert runtime["correlation"].tolist() == [11, 12, 13]
    assert set(ev.loc[ev["cat"] == "python_function", "name"].astype(str)) == {"$train.py:10 step"}
    assert set(ev.loc[ev["cat"] == "user_annotation", "name"].astype(str)) == {"ExecuteOnStream"}


def test_busy_idle_and_memcpy(ta):
    row = ta.get_temporal_breakdown(visualize=False).iloc[0]
    # GPU intervals [100, 800) ∪ [1000, 1200) ∪ [1400, 1500): span 1400 ns, busy 1000 ns
    assert row["kernel_time(us)"] == pytest.approx(1.4)
    assert row["idle_time(us)"] == pytest.approx(0.4)
    types, _ = ta.get_gpu_kernel_breakdown(visualize=False)
    assert types.set_index("kernel_type").loc["MEMORY", "sum"] == pytest.approx(0.2)


def test_launch_stats_join_host_calls_by_correlation_id(ta):
    stats = ta.get_cuda_kernel_launch_stats(ranks=[3], visualize=False)[3].set_index("correlation")
    assert stats.loc[11, "launch_delay"] == pytest.approx(0.07)  # 100 - 10 - 20 ns
    assert stats.loc[12, "gpu_duration"] == pytest.approx(0.5)
    runtime = ta.trace[3].events.query("cat == 'cuda_runtime'")["name"].astype(str).tolist()
    # a launch named after its kernel becomes the driver's call (no device_vendor here: CUDA's)
    assert runtime == ["hipModuleLaunchKernel", "cuLaunchKernel", "hipMemcpyHtoDAsync"]


@pytest.mark.parametrize("data", [
    b"\x0a\x05\x12\x03ab",  # a plane announcing more bytes than the file has
    b"\x0a\x04\x12\x02\xff\xfe",  # a name that is not UTF-8
    SPACE[: len(SPACE) // 2],
])
def test_wrong_protobuf_names_the_file(tmp_path, data):
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(data)
    with pytest.raises(InputFileError, match="bad.xplane.pb") as info:
        TraceAnalysis(trace_dir=str(bad), use_cache=False, progress=False)
    assert isinstance(info.value, CorruptTraceError)


def test_summary_names_the_format_and_hta_is_refused(ta):
    from analysis.errors import FormatNotSupportedError

    assert "(xplane: docs/formats.md)" in repr(ta)
    with pytest.raises(FormatNotSupportedError, match="XPlane profiles"):
        ta.hta  # noqa: B018


def test_eight_gpu_planes_are_eight_ranks(tmp_path):
    planes = [xplane(f"/device:GPU:{g}", [
        XLine(1, "Stream #1(Kernel)", [XEvent("k", BASE, 100 * (g + 1)),
                                       XEvent("k", BASE + 2000, 100)], timestamp_ns=BASE),
        XLine(2, "Stream #2(MemcpyD2D)", [XEvent("MemcpyD2D", BASE + 50, 1000)], timestamp_ns=BASE),
    ]) for g in range(8)]
    path = tmp_path / "eight.xplane.pb"
    path.write_bytes(xspace_bytes(planes))
    ta = TraceAnalysis(trace_dir=str(path), use_cache=False, progress=False)
    assert ta.ranks == list(range(8))
    temporal = ta.get_temporal_breakdown(visualize=False).set_index("rank")
    for g in range(8):
        busy = max(100 * (g + 1), 1050) + 100  # [0, max(100(g+1), 1050)) ∪ [2000, 2100)
        assert temporal.loc[g, "kernel_time(us)"] == pytest.approx(2.1)
        assert temporal.loc[g, "idle_time(us)"] == pytest.approx((2100 - busy) / 1000)
    names = ta.trace[0].events.query("cat == 'gpu_memcpy'")["name"].astype(str).tolist()
    assert names == ["Memcpy DtoD (Device -> Device)"]


def test_tensorflow_gpu_planes_read_streams_and_launches_go_to_their_gpu(tmp_path):
    """As TensorFlow's profiler writes a two-GPU worker (tensorflow/profiler's demo
    ``GPU-multi-worker`` profile): GPU planes carry, besides their ``Stream #`` lines, lines
    derived from them (``TensorFlow Ops``, ``TensorFlow Name Scope``, ``Steps``) that repeat
    the kernels' time under op and scope names; the host plane launches for both GPUs. A TPU
    plane is not read, and a warning says so."""
    def stream_and_derived(kernels):
        derived = [XEvent(name, start, dur) for name, start, dur, _ in kernels]
        return [
            XLine(1, "Stream #134(Compute)", timestamp_ns=BASE, events=[
                XEvent(name, start, dur, {"correlation_id": c}) for name, start, dur, c in kernels]),
            XLine(2, "TensorFlow Ops", timestamp_ns=BASE, events=derived),
            XLine(3, "TensorFlow Name Scope", timestamp_ns=BASE,
                  events=[XEvent("bert_encoder_1", BASE, 2000), *derived]),
            XLine(4, "Steps", timestamp_ns=BASE, events=[XEvent("0", BASE, 3000)]),
        ]
    space = xspace_bytes([
        xplane("/host:CPU", [XLine(7, "python3", timestamp_ns=BASE, events=[
            XEvent("train_step", BASE, 2500),
            XEvent("cuLaunchKernel", BASE + 10, 20, {"correlation_id": 1}),
            XEvent("cuLaunchKernel", BASE + 40, 20, {"correlation_id": 2}),
            XEvent("cuLaunchKernel", BASE + 70, 20, {"correlation_id": 3}),
            XEvent("cuLaunchKernel", BASE + 90, 5, {"correlation_id": 4}),  # no GPU event
        ])]),
        xplane("/device:GPU:4", stream_and_derived([("gemm", BASE + 100, 400, 1),
                                                    ("softmax", BASE + 600, 100, 2)])),
        xplane("/device:GPU:6", stream_and_derived([("gemm", BASE + 150, 300, 3)])),
        xplane("/device:TPU:0", [XLine(1, "XLA Ops", timestamp_ns=BASE,
                                       events=[XEvent("fusion", BASE, 10)])]),
    ])
    path = tmp_path / "worker.xplane.pb"
    path.write_bytes(space)
    with pytest.warns(UserWarning, match=r"worker.xplane.pb.*/device:TPU:0 \(1 events\)"):
        ta = TraceAnalysis(trace_dir=str(path), use_cache=False, progress=False)
    assert ta.ranks == [4, 6]
    for rank, kernels, launched in ((4, ["gemm", "softmax"], [1, 2, 4]), (6, ["gemm"], [3, 4])):
        ev = ta.trace[rank].events
        assert ev.loc[ev["cat"] == "kernel", "name"].astype(str).tolist() == kernels
        assert ev.loc[ev["cat"] == "cuda_runtime", "correlation"].tolist() == launched
        assert ev.loc[ev["cat"] == "user_annotation", "name"].astype(str).tolist() == ["train_step"]
    temporal = ta.get_temporal_breakdown(visualize=False).set_index("rank")
    assert temporal.loc[4, "kernel_time(us)"] == pytest.approx(0.6)  # [100, 700): 500 ns busy
    assert temporal.loc[4, "idle_time(us)"] == pytest.approx(0.1)
    assert temporal.loc[6, "kernel_time(us)"] == pytest.approx(0.3)
    kernels = ta.get_gpu_kernel_breakdown(visualize=False)[1]
    assert set(kernels.loc[kernels["rank"] == 4, "name"].astype(str)) == {"gemm", "softmax"}
    # the one call no GPU event answers, on each rank (which GPU it launched for is unknown);
    # before, every rank also had the other GPU's calls: 3 of 4 (75 %) without a GPU event
    health = ta.check().query("check == 'launches_without_kernels'")
    assert health["rank"].tolist() == [4, 6]
    assert health["message"].str.startswith("1 launch calls").all()


def _jax_chrome_trace() -> bytes:
    """The trace viewer's JSON that JAX's profiler writes beside the XPlane (``vm.trace.json.gz``
    in ``plugins/profile/<run>/``, jax 0.10.2): Chrome trace events without a ``cat``."""
    import gzip
    import json

    events = [
        {"ph": "M", "pid": 701, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "X", "pid": 701, "tid": 1, "ts": 12.698, "dur": 79.256,
         "name": "$contextlib.py:132 __enter__"},
        {"ph": "X", "pid": 701, "tid": 1, "ts": 12.698, "dur": 76.773,
         "name": "$profiler.py:307 trace"},
    ]
    return gzip.compress(json.dumps({"displayTimeUnit": "ns", "metadata": {"highres-ticks": True},
                                     "traceEvents": events}).encode())


def test_a_jax_profile_folder_reads_the_xplane_and_skips_the_trace_viewers_json(tmp_path):
    """jax.profiler.trace(dir) writes vm.xplane.pb and vm.trace.json.gz side by side: the folder
    gave 'rank 0 is claimed by both', and the JSON alone loaded as an empty Kineto trace."""
    from analysis.errors import NotATraceError

    run = tmp_path / "plugins" / "profile" / "2026_11_28_14_22_00"
    run.mkdir(parents=True)
    (run / "vm.xplane.pb").write_bytes(SPACE)
    (run / "vm.trace.json.gz").write_bytes(_jax_chrome_trace())
    with pytest.warns(UserWarning, match=r"vm.trace.json.gz.*Chrome trace, not a Kineto one"):
        ta = TraceAnalysis(trace_dir=str(run), use_cache=False, progress=False)
    assert ta.get_trace_metadata()["format"].tolist() == ["xplane"]
    with pytest.raises(NotATraceError, match=r"none of its 2 complete events has a 'cat'.*"
                                             r"read the \.xplane\.pb"):
        TraceAnalysis(trace_dir=str(run / "vm.trace.json.gz"), use_cache=False, progress=False)


def test_a_gzipped_xplane_is_read_as_the_plain_one(tmp_path, ta):
    """xprof keeps profiles as .xplane.pb.gz: it was taken for JSON ('invalid JSON')."""
    import gzip

    packed = tmp_path / "run2.xplane.pb.gz"
    packed.write_bytes(gzip.compress(SPACE))
    assert detect(packed.read_bytes()[:4096]) == "xplane"
    other = TraceAnalysis(trace_dir=str(packed), use_cache=False, progress=False)
    pd.testing.assert_frame_equal(other.trace[3].events, ta.trace[3].events)
