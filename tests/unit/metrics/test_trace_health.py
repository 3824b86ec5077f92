"""Trace health: each check fires on a trace built to trigger it, and only there."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from trace_helpers import load_dir

from analysis.kineto.loader import load_trace
from analysis.kineto.parse import parse_trace_bytes
from analysis.metrics.health import trace_health as th
from analysis.testing import health_traces as ht

# check → (severity it reports, kernel pattern preset that shows it)
EXPECTED = {
    "negative_duration": ("error", "default"),
    "zero_duration": ("info", "default"),
    "stream_overlap": ("warning", "default"),
    "unclassified_communication": ("warning", "default"),
    "unclassified_kernels": ("info", "default"),
    "kernels_without_launch": ("warning", "default"),
    "launches_without_kernels": ("warning", "default"),
    "missing_flows": ("info", "default"),
    "gpu_stops_early": ("warning", "default"),
    "kineto_warnings": ("warning", "default"),
    "truncated_last_step": ("info", "default"),
    "timestamp_resolution": ("info", "default"),
    "graph_capture": ("warning", "default"),
    "rank_origin": ("info", "default"),
    "missing_distributed_info": ("warning", "default"),
    "no_gpu_events": ("warning", "default"),
    "world_size": ("error", "default"),
    "steps_mismatch": ("warning", "default"),
    "clock_skew": ("warning", "default"),
}


def _findings(job, tmp_path: Path, patterns="default"):
    ht.write_job(job, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = load_trace(tmp_path, use_cache=False, max_workers=1, progress=False)
    return th.combine({r: th.trace_health_rank(rt, patterns=patterns) for r, rt in trace.items()})


def test_every_fault_has_an_expectation():
    assert set(ht.FAULTS) == set(EXPECTED)


def test_healthy_job_has_no_findings(tmp_path):
    findings = _findings(ht.healthy_job(), tmp_path)
    assert findings.empty, findings.to_string()
    assert th.exit_code(findings) == 0


@pytest.mark.parametrize("check", sorted(EXPECTED))
def test_fault_is_found(check, tmp_path):
    severity, patterns = EXPECTED[check]
    findings = _findings(ht.faulty_job(check), tmp_path, patterns)
    hits = findings[findings["check"] == check]
    assert not hits.empty, findings.to_string()
    assert severity in set(hits["severity"])
    assert list(findings.columns) == th.COLUMNS
    assert th.exit_code(findings) == int((findings["severity"] == "error").any())
    # nothing else is an error: each fault is reported by its own check
    others = findings[(findings["check"] != check) & (findings["severity"] == "error")]
    assert others.empty, others.to_string()


def test_clock_skew_measures_the_shift(tmp_path):
    findings = _findings(ht.faulty_job("clock_skew"), tmp_path)
    evidence = findings.loc[findings["check"] == "clock_skew", "evidence"].iloc[0]
    # rank 1 runs 5000 µs ahead; the all-reduce lasts 100 µs: 4,900 µs of causality violated
    assert evidence.startswith("4,900.0 µs")


def test_hta_patterns_miss_deepep(tmp_path):
    job = ht.healthy_job()
    for e in job[0]["traceEvents"]:
        if e["name"] == ht.ALLREDUCE:
            e["name"] = "void deep_ep::internode::dispatch<8, 4>(int*, float*)"
    default = _findings(job, tmp_path / "default", "default")
    hta = _findings(job, tmp_path / "hta", "hta")
    assert "unclassified_communication" not in set(default["check"])
    assert "unclassified_communication" in set(hta["check"])


def test_broadcasting_computation_is_not_communication(tmp_path):
    """TensorFlow's Eigen kernels (``TensorBroadcastingOp``) and XLA's broadcast fusions compute;
    a broadcast collective's kernel names its library (tensorflow/profiler's GPU demo profile
    had two Eigen kernels reported as unclassified communication)."""
    from analysis.metrics.health.trace_health import COMM_LIKE

    assert not COMM_LIKE.search("void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<"
                                "Eigen::TensorAssignOp<..., Eigen::TensorBroadcastingOp<...>>>")
    assert not COMM_LIKE.search("loop_broadcast_fusion")
    assert COMM_LIKE.search("ncclDevKernel_Broadcast_RING_LL(ncclDevComm*, unsigned long)")
    assert COMM_LIKE.search("mscclKernel_Sum_float_Simple_false")


def test_errors_come_first(tmp_path):
    findings = _findings(ht.faulty_job("negative_duration"), tmp_path)
    order = {"error": 0, "warning": 1, "info": 2}
    assert list(findings["severity"].map(order)) == sorted(findings["severity"].map(order))


def test_real_traces_raise_no_error(hta_traces_dir):
    """The real traces are healthy enough: no finding of severity "error" (no false alarm)."""
    for folder in ("trace_filter", "df_index_resolver", "negative_queue_length_values_check",
                   "nccl_parser_config", "ns_resolution_trace", "critical_path/alexnet",
                   "amd_trace", "triton_example", "mtia_inference_trace", "cpu_only"):
        trace = load_dir(hta_traces_dir / folder)
        findings = th.combine({r: th.trace_health_rank(rt) for r, rt in trace.items()})
        assert "error" not in set(findings["severity"]), (folder, findings.to_string())
    tracelens = hta_traces_dir.parent / "tracelens"
    for path in sorted(tracelens.glob("*/*.json.gz")):  # H100 and MI300 traces of TraceLens
        rt = parse_trace_bytes(path.read_bytes(), str(path))
        findings = th.combine({0: th.trace_health_rank(rt)})
        assert "error" not in set(findings["severity"]), (path.name, findings.to_string())


def test_calls_kineto_names_invalid_are_not_launches_without_kernels(hta_traces_dir):
    """``INVALID`` (a runtime callback Kineto does not know) is a launch only with a GPU event
    (cuDNN's, on some traces); df_index_resolver's 2,020 others launch nothing and are no
    ``launches_without_kernels`` warning (8.3 % of its launch calls, when they were counted)."""
    trace = load_dir(hta_traces_dir / "df_index_resolver")
    findings = th.combine({r: th.trace_health_rank(rt) for r, rt in trace.items()})
    assert "launches_without_kernels" not in set(findings["check"])


def test_missing_flows_whole_or_partial(tmp_path):
    findings = _findings(ht.faulty_job("missing_flows"), tmp_path)
    hits = findings[findings["check"] == "missing_flows"].set_index("rank")
    assert hits.loc[0, "message"].startswith("no flow events")
    assert hits.loc[1, "message"].startswith("4 of 12 launches have no flow event")


def test_gpu_stops_early_names_the_silent_stream(tmp_path):
    """Stream 20 loses its all-reduces while stream 7, launched by the same thread, goes on."""
    findings = _findings(ht.faulty_job("gpu_stops_early"), tmp_path)
    evidence = findings.loc[findings["check"] == "gpu_stops_early", "evidence"].tolist()
    assert len(evidence) == 1 and evidence[0].startswith("stream 20: silent for the last")
    assert "stream 7" not in evidence[0]


def test_kernels_launched_before_the_profiler_started_are_info(tmp_path):
    job = ht.healthy_job()
    job[0]["traceEvents"] = [e for e in job[0]["traceEvents"]
                             if not (e.get("cat") == "cuda_runtime"
                                     and e["args"]["correlation"] == 1001)]
    hits = _findings(job, tmp_path).query("check == 'kernels_without_launch'")
    assert hits["severity"].tolist() == ["info"]
    assert "before the profiler started" in hits["message"].iloc[0]


def test_graph_capture_says_how_to_record_it(tmp_path):
    job = ht.faulty_job("graph_capture")
    launches = [e for e in job[0]["traceEvents"] if e.get("name") == "cudaGraphLaunch"]
    findings = _findings(job, tmp_path)
    hit = findings[findings["check"] == "graph_capture"].iloc[0]
    assert "capture_traces/" in hit["message"]
    assert hit["message"].startswith(f"{len(launches)} graph launches")
    assert hit["evidence"].startswith(f"{len(launches)} kernels")  # one GEMM per launch
