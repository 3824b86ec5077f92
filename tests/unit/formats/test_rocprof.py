"""rocprofv3 JSON reader: a document written here, every answer known."""

from __future__ import annotations

import gzip
import json

import pytest

from analysis import TraceAnalysis
from analysis.errors import CorruptTraceError, FormatNotSupportedError
from analysis.formats import detect
from analysis.testing.foreign import rocprof_json

DOC = rocprof_json(
    dispatches=[
        (1000, 2000, 0, 5, 1, 101),
        (1500, 2500, 0, 6, 2, 102),
        (3000, 3500, 0, 5, 1, 103),
        (1000, 1100, 1, 5, 2, 104),
    ],
    kernels={1: "gemm_kernel", 2: "rcclKernel_AllReduce"},
    api=[(100, 300, "hipLaunchKernel", 101), (400, 450, "hipLaunchKernel", 102)],
    copies=[(4000, 4600, "MEMORY_COPY_HOST_TO_DEVICE", 0, 1 << 20)],
)


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "908_results.json.gz"
    p.write_bytes(gzip.compress(json.dumps(DOC).encode()))
    return p


@pytest.fixture
def ta(path):
    return TraceAnalysis(trace_dir=str(path), use_cache=False, progress=False)


def test_detected_by_content(path):
    assert detect(path.read_bytes()[:4096]) == "rocprof"


def test_one_rank_per_gpu(ta):
    meta = ta.get_trace_metadata()
    assert meta["rank"].tolist() == [0, 1]
    assert meta["rank_from"].tolist() == ["rocprof: process 4242, GPU 0",
                                          "rocprof: process 4242, GPU 1"]
    assert meta["gpu_events"].tolist() == [4, 1]


def test_kernel_time_per_name(ta):
    _, kernels = ta.get_gpu_kernel_breakdown(visualize=False, num_kernels=100)
    rank0 = kernels[kernels["rank"] == 0].set_index("name")
    assert rank0.loc["gemm_kernel", "sum (us)"] == pytest.approx(1.5)
    assert rank0.loc["rcclKernel_AllReduce", "sum (us)"] == pytest.approx(1.0)


def test_busy_idle(ta):
    row = ta.get_temporal_breakdown(visualize=False).set_index("rank").loc[0]
    # [1000, 2500) ∪ [3000, 3500) ∪ [4000, 4600): span 3600, busy 2600
    assert row["kernel_time(us)"] == pytest.approx(3.6)
    assert row["idle_time(us)"] == pytest.approx(1.0)


def test_copies_and_launches(ta):
    ev = ta.trace[0].events
    copy = ev[ev["cat"] == "gpu_memcpy"]
    assert copy["name"].astype(str).tolist() == ["Memcpy HtoD (Host -> Device)"]
    assert ta.trace[0].extra("memory_ops").loc[copy.index, "bytes"].tolist() == [1 << 20]
    stats = ta.get_cuda_kernel_launch_stats(ranks=[0], visualize=False)[0].set_index("correlation")
    assert stats.loc[101, "launch_delay"] == pytest.approx(0.7)  # 1000 - 100 - 200 ns


def test_critical_path_needs_launch_calls(tmp_path):
    doc = rocprof_json(dispatches=[(0, 10, 0, 1, 1, 1)], kernels={1: "k"})
    p = tmp_path / "kernels_only.json"
    p.write_text(json.dumps(doc))
    ta = TraceAnalysis(trace_dir=str(p), use_cache=False, progress=False)
    with pytest.raises(FormatNotSupportedError, match="not available for rocprofv3 files"):
        ta.get_critical_path_summary(visualize=False)


def test_wrong_structure_names_the_file(tmp_path):
    p = tmp_path / "broken.json"
    p.write_text('{"rocprofiler-sdk-tool": [{"buffer_records": {"kernel_dispatch": [{}]}}]}')
    with pytest.raises(CorruptTraceError, match="broken.json.*rocprofv3"):
        TraceAnalysis(trace_dir=str(p), use_cache=False, progress=False)


def test_symbols_keyed_by_id_and_agents_without_index(tmp_path):
    doc = rocprof_json(dispatches=[(0, 10, 1, 1, 7, 1)], kernels={7: "k7"})
    process = doc["rocprofiler-sdk-tool"][0]
    process["kernel_symbols"] = {"7": {"formatted_kernel_name": "k7"}}
    for agent in process["agents"]:
        del agent["logical_node_type_id"]
    p = tmp_path / "older.json"
    p.write_text(json.dumps(doc))
    ta = TraceAnalysis(trace_dir=str(p), use_cache=False, progress=False)
    assert ta.get_trace_metadata()["rank_from"].tolist() == ["rocprof: process 4242, GPU 1"]
    assert ta.trace[0].events["name"].astype(str).tolist() == ["k7"]


def test_a_copy_between_cpu_agents_makes_no_gpu_rank(tmp_path):
    """A host-to-host copy (both agents CPUs) has no GPU to go to: it made a rank 'GPU -1';
    it is left out and said so. A device-to-host copy goes to its source GPU."""
    doc = rocprof_json(
        dispatches=[(1000, 2000, 0, 5, 1, 101)], kernels={1: "gemm_kernel"},
        copies=[(4000, 4600, "MEMORY_COPY_HOST_TO_HOST", 0, 64),
                (5000, 5100, "MEMORY_COPY_DEVICE_TO_HOST", 1, 128)])
    h2h, d2h = doc["rocprofiler-sdk-tool"][0]["buffer_records"]["memory_copy"]
    h2h["dst_agent_id"] = {"handle": 100}
    d2h["src_agent_id"], d2h["dst_agent_id"] = {"handle": 201}, {"handle": 100}
    path = tmp_path / "909_results.json"
    path.write_text(json.dumps(doc))
    ta = TraceAnalysis(trace_dir=str(path), use_cache=False, progress=False)
    meta = ta.get_trace_metadata()
    assert meta["rank_from"].tolist() == ["rocprof: process 4242, GPU 0",
                                          "rocprof: process 4242, GPU 1"]
    assert ta.trace[1].events["name"].astype(str).tolist() == ["Memcpy DtoH (Device -> Host)"]
    assert any("1 kernel dispatch(es) or memory copies of process 4242 ran on no GPU agent" in a
               for a in ta.trace[0].meta.anomalies)
