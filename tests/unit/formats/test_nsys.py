"""Nsight Systems SQLite reader: a tiny export written here, every answer known."""

from __future__ import annotations

import numpy as np
import pytest

from analysis import TraceAnalysis, compare
from analysis.errors import CorruptTraceError, FormatNotSupportedError, InputFileError
from analysis.formats import detect
from analysis.testing.foreign import NsysCall, NsysGpuOp, NsysReport, write_nsys_sqlite

# process 10 runs GPUs 0 and 1, process 20 runs GPU 0: three ranks, in (process, GPU) order
REPORT = NsysReport(
    gpu=[
        NsysGpuOp(1000, 3000, device=0, stream=7, correlation=1, pid=10, name="gemm_kernel"),
        NsysGpuOp(2000, 5000, device=0, stream=8, correlation=2, pid=10, name="relu_kernel"),
        NsysGpuOp(6000, 7000, device=0, stream=7, correlation=3, pid=10, nbytes=4096,
                  copy_kind=1, src_kind=1, dst_kind=2),
        NsysGpuOp(1000, 2000, device=1, stream=9, correlation=4, pid=10, name="gemm_kernel"),
        NsysGpuOp(1500, 1600, device=1, stream=9, correlation=5, pid=10, nbytes=64, mem_kind=2),
        NsysGpuOp(500, 1500, device=0, stream=3, correlation=1, pid=20,
                  name="ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long)"),
    ],
    cpu=[
        NsysCall(100, 200, pid=10, tid=11, name="cudaLaunchKernel_v7000", correlation=1),
        NsysCall(300, 400, pid=10, tid=11, name="cudaLaunchKernel_v7000", correlation=2),
        NsysCall(500, 600, pid=10, tid=11, name="cudaMemcpyAsync_v3020", correlation=3),
        NsysCall(700, 800, pid=10, tid=11, name="cudaLaunchKernel_v7000", correlation=4),
        NsysCall(850, 870, pid=10, tid=11, name="cudaMemsetAsync_v3020", correlation=5),
        NsysCall(50, 100, pid=20, tid=21, name="cudaLaunchKernel_v7000", correlation=1),
        NsysCall(0, 900, pid=10, tid=11, name="forward", nvtx=True),
    ],
)


@pytest.fixture
def report_path(tmp_path):
    path = tmp_path / "run.sqlite"
    write_nsys_sqlite(path, REPORT)
    return path


@pytest.fixture
def ta(report_path, tmp_path):
    return TraceAnalysis(trace_dir=str(report_path), cache_dir=tmp_path / "cache", progress=False)


def test_detected_by_content(report_path):
    assert detect(report_path.read_bytes()[:4096]) == "nsys"


def test_one_rank_per_process_and_gpu(ta):
    meta = ta.get_trace_metadata()
    assert meta["rank"].tolist() == [0, 1, 2]
    assert set(meta["format"]) == {"nsys"}
    assert meta["rank_from"].tolist() == [
        "nsys: process 10, GPU 0", "nsys: process 10, GPU 1", "nsys: process 20, GPU 0"]
    assert meta["gpu_events"].tolist() == [3, 2, 1]


def test_rows_and_names(ta):
    ev = ta.trace[0].events
    assert sorted(ev.loc[ev["cat"] == "cuda_runtime", "name"].astype(str).unique()) == [
        "cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync"]
    memcpy = ev[ev["cat"] == "gpu_memcpy"]
    assert memcpy["name"].astype(str).tolist() == ["Memcpy HtoD (Pinned -> Device)"]
    assert ta.trace[0].extra("memory_ops").loc[memcpy.index, "bytes"].tolist() == [4096]
    assert ta.trace[1].events.query("cat == 'gpu_memset'")["name"].astype(str).tolist() == [
        "Memset (Device)"]
    # NVTX ranges go to every rank of their process only
    assert [int((t.events["name"] == "forward").sum()) for t in ta.trace.values()] == [1, 1, 0]
    kernel = ev[ev["name"] == "gemm_kernel"].iloc[0]
    assert (kernel["ts"], kernel["dur"], kernel["stream"], kernel["device"]) == (1000, 2000, 7, 0)


def test_temporal_breakdown_is_the_union_of_gpu_intervals(ta):
    df = ta.get_temporal_breakdown(visualize=False).set_index("rank")
    # rank 0: [1000, 5000) ∪ [6000, 7000) in a 6000 ns span
    assert df.loc[0, "kernel_time(us)"] == pytest.approx(6.0)
    assert df.loc[0, "idle_time(us)"] == pytest.approx(1.0)
    assert df.loc[1, "kernel_time(us)"] == pytest.approx(1.0)
    assert df.loc[1, "idle_time(us)"] == pytest.approx(0.0)


def test_launch_stats_join_runtime_calls_by_correlation(ta):
    stats = ta.get_cuda_kernel_launch_stats(ranks=[0], visualize=False)[0].set_index("correlation")
    assert stats.loc[1, "cpu_duration"] == pytest.approx(0.1)
    assert stats.loc[1, "gpu_duration"] == pytest.approx(2.0)
    assert stats.loc[1, "launch_delay"] == pytest.approx(0.8)  # 1000 - 100 - 100 ns
    assert stats.loc[2, "launch_delay"] == pytest.approx(1.6)


def test_nccl_kernels_are_communication(ta):
    types, _ = ta.get_gpu_kernel_breakdown(visualize=False)
    assert "COMMUNICATION" in set(types["kernel_type"])


def test_operator_analyses_say_not_available(ta):
    with pytest.raises(FormatNotSupportedError, match="not available for nsys reports"):
        ta.get_operator_summary()


def test_cached_load_is_identical(report_path, tmp_path):
    first = TraceAnalysis(trace_dir=str(report_path), cache_dir=tmp_path / "c", progress=False)
    again = TraceAnalysis(trace_dir=str(report_path), cache_dir=tmp_path / "c", progress=False)
    for rank in first.ranks:
        assert again.trace[rank].meta.from_cache
        assert again.trace[rank].meta.source_format == "nsys"
        assert again.trace[rank].events.equals(first.trace[rank].events)
    # the memcpy sizes of a cached rank are read from the report again, then cached per rank
    for _ in range(2):
        reopened = TraceAnalysis(trace_dir=str(report_path), cache_dir=tmp_path / "c",
                                 progress=False)
        summary = reopened.get_memcpy_summary(ranks="all", visualize=False)
        assert summary.groupby("rank")["bytes"].sum().to_dict() == {0: 4096, 1: 64}
    assert len(list((tmp_path / "c").glob("*/extras/memory_ops-*-part*.arrow"))) == 3


def test_compare_names_the_kernel_that_changed(report_path, tmp_path):
    import sqlite3

    slower = tmp_path / "after" / "run.sqlite"
    slower.parent.mkdir()
    slower.write_bytes(report_path.read_bytes())
    with sqlite3.connect(slower) as conn:
        conn.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start + 2 * (end - start) "
                     "WHERE demangledName = (SELECT id FROM StringIds WHERE value = 'relu_kernel')")
    base = TraceAnalysis(trace_dir=str(report_path), use_cache=False, progress=False)
    test = TraceAnalysis(trace_dir=str(slower), use_cache=False, progress=False)
    kernels = compare(base, test).kernels()
    changed = kernels[kernels["change"] != "unchanged"]
    assert changed["name"].astype(str).tolist() == ["relu_kernel"]
    assert changed["diff_time_us"].iloc[0] == pytest.approx(3.0)


@pytest.mark.parametrize("cut", [50, 1000, -512])
def test_truncated_report_names_the_file(report_path, tmp_path, cut):
    bad = tmp_path / "cut.sqlite"
    bad.write_bytes(report_path.read_bytes()[:cut])
    with pytest.raises(CorruptTraceError, match="cut.sqlite.*truncated") as info:
        TraceAnalysis(trace_dir=str(bad), use_cache=False, progress=False)
    assert isinstance(info.value, InputFileError)


def test_sqlite_without_nsys_tables_is_not_a_trace(tmp_path):
    import sqlite3

    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
    with pytest.raises(InputFileError, match="not an Nsight Systems export"):
        TraceAnalysis(trace_dir=str(other), use_cache=False, progress=False)


def test_ranks_are_exact_ns(ta):
    ev = ta.trace[2].events
    assert ev["ts"].dtype == np.int64
    assert ev.loc[ev["cat"] == "kernel", "dur"].tolist() == [1000]


def test_negative_duration_is_zero_and_reported(tmp_path):
    path = tmp_path / "neg.sqlite"
    write_nsys_sqlite(path, NsysReport(gpu=[
        NsysGpuOp(1000, 900, device=0, stream=1, correlation=1, pid=5, name="backwards"),
        NsysGpuOp(2000, 2500, device=0, stream=1, correlation=2, pid=5, name="fine"),
    ]))
    with pytest.warns(UserWarning, match="negative duration"):
        ta = TraceAnalysis(trace_dir=str(path), use_cache=False, progress=False)
    ev = ta.trace[0].events
    assert ev.set_index(ev["name"].astype(str)).loc["backwards", "dur"] == 0
    assert ta.trace[0].meta.negative_durations == {"backwards": 1}


def test_emit_nvtx_ranges_are_pytorch_operators(tmp_path):
    path = tmp_path / "ops.sqlite"
    write_nsys_sqlite(path, NsysReport(
        gpu=[NsysGpuOp(1000, 4000, device=0, stream=7, correlation=1, pid=10, name="gemm")],
        cpu=[NsysCall(0, 500, pid=10, tid=11, name="aten::linear, seq = 3, op_id = 7", nvtx=True),
             NsysCall(10, 400, pid=10, tid=11, name="aten::mm, op_id = 8", nvtx=True),
             NsysCall(20, 30, pid=10, tid=11, name="cudaLaunchKernel_v7000", correlation=1)]))
    ta = TraceAnalysis(trace_dir=str(path), use_cache=False, progress=False)
    ops = ta.get_operator_summary().set_index("name")
    assert ops.loc["aten::mm", "gpu_self_us"] == pytest.approx(3.0)
    assert ops.loc["aten::linear", "gpu_total_us"] == pytest.approx(3.0)
    assert ops.loc["aten::linear", "cpu_self_us"] == pytest.approx(0.11)
    with pytest.raises(FormatNotSupportedError, match="no recorded operator input shapes"):
        ta.get_operator_roofline()


def test_report_without_gpu_activity_is_refused(tmp_path):
    path = tmp_path / "cpu.sqlite"
    write_nsys_sqlite(path, NsysReport(cpu=[NsysCall(0, 5, pid=1, tid=1, name="x", nvtx=True)]))
    with pytest.raises(InputFileError, match="without GPU activity"):
        TraceAnalysis(trace_dir=str(path), use_cache=False, progress=False)


def test_driver_api_copies_are_launches_and_older_gpu_tables_name_the_gpu(tmp_path):
    """Two things public nsys exports showed (2026-11-28, 154 files from 26 repositories):
    ``cuMemcpyHtoDAsync_v2`` lost its ``_v2`` with nsys's API-version suffix, so no async copy
    launched through the driver API was a launch (24,010 copies in 28 files); and an older
    ``TARGET_INFO_GPU`` keys its rows by ``deviceId``, not ``id``, so the GPU had no name."""
    import sqlite3

    path = tmp_path / "driver.sqlite"
    write_nsys_sqlite(path, NsysReport(
        gpu=[NsysGpuOp(1000, 2000, device=0, stream=7, correlation=1, pid=10, name="k"),
             NsysGpuOp(3000, 3500, device=0, stream=7, correlation=2, pid=10, nbytes=4096,
                       copy_kind=1, src_kind=1, dst_kind=2)],
        cpu=[NsysCall(100, 200, pid=10, tid=11, name="cuLaunchKernel", correlation=1),
             NsysCall(300, 400, pid=10, tid=11, name="cuMemcpyHtoDAsync_v2", correlation=2),
             NsysCall(500, 600, pid=10, tid=11, name="cudaDeviceSynchronize_v3020")]))
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, deviceId INTEGER, name TEXT, "
                 "busLocation TEXT, isDiscrete INTEGER)")
    conn.execute("INSERT INTO TARGET_INFO_GPU VALUES "
                 "(281474976710656, 0, 'NVIDIA GeForce RTX 3080', '0000:02:00.0', 1)")
    conn.commit()
    conn.close()
    ta = TraceAnalysis(str(path), use_cache=False, progress=False)
    assert ta.get_trace_metadata()["gpu"].tolist() == ["NVIDIA GeForce RTX 3080"]
    runtime = ta.trace[0].events.query("cat == 'cuda_runtime'")["name"].astype(str).tolist()
    assert runtime == ["cuLaunchKernel", "cuMemcpyHtoDAsync_v2", "cudaDeviceSynchronize"]
    stats = ta.get_cuda_kernel_launch_stats(visualize=False)[0]
    assert sorted(stats["correlation"]) == [1, 2]
