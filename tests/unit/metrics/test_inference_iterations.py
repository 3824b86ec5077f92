"""Serving-engine iterations: synthetic traces with known phases, busy and idle times, and the
shared vLLM / SGLang decode traces."""

import json
from pathlib import Path

import numpy as np
import pytest

from analysis.api import TraceAnalysis
from analysis.metrics.inference.iterations import phase_summary

INFERENCE = Path(__file__).resolve().parents[3] / "../shared/traces/tracelens/inference"


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def _engine_trace(iterations):
    """Per iteration (name, cpu start, [(kernel start, dur, stream)]): the annotation, one launch
    per kernel inside it."""
    ev, corr = [], 1
    for name, t0, kernels in iterations:
        ev.append(_x("user_annotation", name, t0, 100))
        for i, (ks, kd, stream) in enumerate(kernels):
            ev.append(_x("cuda_runtime", "cudaLaunchKernel", t0 + 1 + i, 1, correlation=corr))
            ev.append(_x("kernel", f"k{i}", ks, kd, pid=0, tid=stream, correlation=corr,
                         stream=stream, device=0))
            corr += 1
    return {"traceEvents": ev}


PREFILL = "execute_512_context_2(sq256sk256)_generation_0(sq0sk0)"
DECODE = "execute_4_context_0(sq0sk0)_generation_4(sq4sk300)"
MIXED = "execute_260_context_1(sq256sk256)_generation_4(sq4sk300)"


def _analysis(tmp_path, doc):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "engine.json"
    path.write_text(json.dumps(doc))
    return TraceAnalysis(trace_files={0: str(path)})


def test_phases_busy_union_and_idle_inside_vs_between(tmp_path):
    doc = _engine_trace([
        (PREFILL, 0, [(10, 20, 7), (40, 10, 7)]),            # 10..50: busy 30, idle inside 10
        (DECODE, 200, [(210, 10, 7), (215, 10, 8)]),          # 210..225 overlapping: busy 15
        (MIXED, 400, [(420, 5, 7)]),                          # busy 5
        (DECODE, 600, [(610, 4, 7), (620, 4, 7)]),            # busy 8, idle inside 6
    ])
    table = _analysis(tmp_path, doc).get_inference_iterations()
    assert list(table["phase"]) == ["prefill", "decode", "mixed", "decode"]
    assert list(table["tokens"]) == [512, 4, 260, 4]
    assert list(table["batch_size"]) == [2, 4, 5, 4]
    assert list(table["gpu_busy_us"]) == [30, 15, 5, 8]
    assert list(table["idle_inside_us"]) == [10, 0, 0, 6]
    np.testing.assert_array_equal(table["idle_before_us"], [np.nan, 160, 195, 185])
    assert list(table["kernels"]) == [2, 2, 1, 2]
    assert list(table["steady"]) == [False, True, True, True]  # the first of > 2 is warm-up
    phases = phase_summary(table).set_index("phase")
    assert phases.loc["decode", "iterations"] == 2
    assert phases.loc["decode", "gpu_busy_us_mean"] == pytest.approx(11.5)
    assert "prefill" not in phases.index


def test_sglang_step_annotation_and_slow_warmup(tmp_path):
    doc = _engine_trace([
        ("step[DECODE bs=8]", 0, [(10, 5, 7)]),
        ("step[DECODE bs=8]", 200, [(210, 5, 7)]),
        ("step[EXTEND bs=2]", 400, [(410, 5, 7)]),
        ("step[DECODE bs=8]", 600, [(610, 5, 7)]),
    ])
    doc["traceEvents"][0]["dur"] = 150  # compiles: far slower than the other decode steps
    table = _analysis(tmp_path, doc).get_inference_iterations()
    assert list(table["phase"]) == ["decode", "decode", "prefill", "decode"]
    assert list(table["batch_size"]) == [8, 8, 2, 8]
    assert table["tokens"].isna().all()
    assert list(table["steady"]) == [False, True, True, True]


def test_training_trace_has_no_iterations(tmp_path):
    doc = _engine_trace([("ProfilerStep#1", 0, [(10, 5, 7)])])
    assert _analysis(tmp_path, doc).get_inference_iterations().empty


@pytest.mark.parametrize("folder,replay", [
    ("sglang_decode", "sglang_Qwen3-8B_decode.json.gz"),
    ("vllm_decode_full", "graph_execution.json.gz"),
])
def test_shared_decode_traces(folder, replay):
    """One decode iteration of batch 32; its busy time is the union of all the trace's GPU work
    launched inside it, which here is every kernel but none outside the iteration."""
    import gzip

    from analysis.metrics.intervals import merge

    base = INFERENCE / folder
    if not (base / replay).exists():
        pytest.skip("shared inference traces absent")
    table = TraceAnalysis(trace_files={0: str(base / replay)}).get_inference_iterations()
    assert list(table["phase"]) == ["decode"] and list(table["batch_size"]) == [32]
    events = json.load(gzip.open(base / replay))["traceEvents"]
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    start = np.array([round(e["ts"] * 1000) for e in gpu], dtype=np.int64)
    end = start + np.array([round(e["dur"] * 1000) for e in gpu], dtype=np.int64)
    ms, me = merge(start, end)
    # every GPU event of these traces is launched inside the iteration's annotation
    assert table["kernels"].iloc[0] == len(gpu)
    row = table.iloc[0]
    assert row["gpu_busy_us"] == pytest.approx((me - ms).sum() / 1000, abs=0.01)
    # on one stream nothing overlaps: busy is then the plain sum of the kernels' durations
    if len({e["args"].get("stream") for e in gpu}) == 1:
        assert row["gpu_busy_us"] == pytest.approx((end - start).sum() / 1000, abs=0.01)
    else:  # SGLang's two streams overlap a little: the union is less than the sum
        assert row["gpu_busy_us"] < (end - start).sum() / 1000
    # idle inside the iteration and idle between iterations are reported apart: the span from the
    # first kernel to the last, less busy, is inside; one iteration has nothing before it
    assert row["idle_inside_us"] == pytest.approx((end.max() - start.min() - (me - ms).sum()) / 1000,
                                                  abs=0.01)
    assert np.isnan(row["idle_before_us"])
    # the analysed window is the iteration: the temporal breakdown's idle is its idle inside
    temporal = TraceAnalysis(trace_files={0: str(base / replay)}).get_temporal_breakdown()
    assert temporal["idle_time(us)"].iloc[0] == pytest.approx(row["idle_inside_us"], abs=0.01)


def test_serving_findings(tmp_path):
    doc = _engine_trace([
        (PREFILL, 0, [(10, 20, 7), (40, 10, 7)]),
        (DECODE, 200, [(210, 10, 7), (215, 10, 8)]),   # span 15, idle inside 0
        (MIXED, 400, [(420, 5, 7)]),
        (DECODE, 600, [(610, 4, 7), (620, 4, 7)]),     # span 14, idle inside 6
    ])
    found = _analysis(tmp_path, doc).findings().set_index("title")
    decode = found.loc["Decode is launch-bound"]
    assert decode["value"] == pytest.approx(100 * 6 / (15 + 14), abs=0.01)
    between = found.loc["The GPU idles between serving iterations"]
    idle = 160 + 195 + 185  # gaps before iterations 1..3 (steady: 1..3)
    assert between["value"] == pytest.approx(100 * idle / (idle + 15 + 5 + 14), abs=0.01)


def test_serving_findings_silent_without_gaps(tmp_path):
    doc = _engine_trace([(DECODE, 0, [(10, 10, 7), (20, 10, 7)])])  # back to back, one iteration
    found = _analysis(tmp_path, doc).findings()
    assert not set(found["title"]) & {"Decode is launch-bound",
                                      "The GPU idles between serving iterations"}
    assert "launch_bound_decode" not in found.attrs["not_run"]


def _ops_trace(iterations):
    """Per iteration (name, cpu start, [(operator or None, kernel start, dur)]): the annotation,
    and per kernel an operator (if any) around its launch."""
    ev, corr = [], 1
    for name, t0, kernels in iterations:
        ev.append(_x("user_annotation", name, t0, 100))
        for i, (op, ks, kd) in enumerate(kernels):
            t = t0 + 1 + 5 * i
            if op is not None:
                ev.append(_x("cpu_op", op, t, 4))
            ev.append(_x("cuda_runtime", "cudaLaunchKernel", t + 1, 1, correlation=corr))
            ev.append(_x("kernel", f"k{corr}", ks, kd, pid=0, tid=7, correlation=corr, stream=7,
                         device=0))
            corr += 1
    return {"traceEvents": ev}


ATTN, MM = "vllm::unified_attention_with_output", "aten::mm"


def test_operator_split_per_iteration_and_phase(tmp_path):
    doc = _ops_trace([
        (PREFILL, 0, [(ATTN, 10, 60), (MM, 80, 30), (None, 115, 10)]),
        (PREFILL, 200, [(ATTN, 210, 40), (MM, 260, 20), ("_C::rms_norm", 290, 5)]),
        (DECODE, 400, [(MM, 410, 8), ("_C_cache_ops::reshape_and_cache_flash", 420, 2)]),
    ])
    table = _analysis(tmp_path, doc).get_inference_iterations()
    assert list(table["attention_us"]) == [60, 40, 2]  # the KV-cache write counts as attention
    assert list(table["gemm_us"]) == [30, 20, 8]
    assert table["top_operators"].iloc[0] == f"{ATTN} 60.0 %; {MM} 30.0 %; (no operator) 10.0 %"
    ops = table.attrs["operators"]
    totals = ops.groupby("iteration")["gpu_us"].sum()
    assert list(totals) == [100, 65, 10]  # every kernel of the iteration, once
    phases = phase_summary(table).set_index("phase")  # the first of three is warm-up
    assert phases.loc["prefill", "attention_pct"] == pytest.approx(100 * 40 / 65)
    assert phases.loc["prefill", "gemm_pct"] == pytest.approx(100 * 20 / 65)
    assert phases.loc["decode", "top_operators"].startswith(f"{MM} 80.0 %")


def test_prefill_attention_finding_and_when_it_is_silent(tmp_path):
    prefill = [(ATTN, 10, 60), (MM, 80, 30), (None, 115, 10)]
    doc = _ops_trace([(PREFILL, 200 * i, [(o, 200 * i + s, d) for o, s, d in prefill])
                      for i in range(3)])
    found = _analysis(tmp_path, doc).findings().set_index("title")
    row = found.loc["Prefill is dominated by attention"]
    assert row["value"] == pytest.approx(60.0) and row["metric"] == "prefill_attention_pct"
    # GEMM-heavy prefill
    heavy = [(ATTN, 10, 20), (MM, 40, 70)]
    doc = _ops_trace([(PREFILL, 200 * i, [(o, 200 * i + s, d) for o, s, d in heavy])
                      for i in range(3)])
    found = _analysis(tmp_path / "gemm", doc).findings().set_index("title")
    assert found.loc["Prefill is dominated by GEMM", "value"] == pytest.approx(100 * 70 / 90,
                                                                            abs=0.01)
    # no operators (a graph replay without its capture): silent, with the reason
    bare = [(None, 10, 60), (None, 80, 30)]
    doc = _ops_trace([(PREFILL, 200 * i, [(o, 200 * i + s, d) for o, s, d in bare])
                      for i in range(3)])
    found = _analysis(tmp_path / "bare", doc).findings()
    assert not found["title"].str.startswith("Prefill is dominated").any()
    assert "attributed to operators" in found.attrs["not_run"]["prefill_attention_vs_gemm"]
    # decode only: silent, with the reason
    doc = _ops_trace([(DECODE, 200 * i, [(MM, 200 * i + 10, 8)]) for i in range(3)])
    found = _analysis(tmp_path / "decode", doc).findings()
    assert "prefill" in found.attrs["not_run"]["prefill_attention_vs_gemm"]


@pytest.mark.parametrize("folder,replay", [
    ("sglang_decode", "sglang_Qwen3-8B_decode.json.gz"),
    ("vllm_decode_full", "graph_execution.json.gz"),
])
def test_attention_and_gemm_time_match_tracelens_categories(folder, replay):
    """The iteration's attention and GEMM GPU time against TraceLens's op categories
    (``ops_summary_by_category.csv``: InferenceAttention, GEMM), within 1 %."""
    import pandas as pd

    base = INFERENCE / folder
    if not (base / replay).exists():
        pytest.skip("shared inference traces absent")
    oracle = pd.read_csv(base / "perf_csvs" / "ops_summary_by_category.csv")
    by_cat = oracle.groupby("op category")["total_direct_kernel_time_ms"].sum() * 1000
    table = TraceAnalysis(trace_files={0: str(base / replay)}).get_inference_iterations()
    assert table["attention_us"].sum() == pytest.approx(by_cat["InferenceAttention"], rel=0.01)
    assert table["gemm_us"].sum() == pytest.approx(by_cat["GEMM"], rel=0.01)
