"""The operator roofline on a hand-made trace whose shapes and kernel times are known exactly."""

from __future__ import annotations

import math

import pytest
from roofline_traces import hand_made_rank, trace_events

from analysis.errors import MissingExtraError, NoShapesError
from analysis.metrics.roofline import operator_roofline as roofline
from analysis.metrics.roofline.gpu_specs import lookup


@pytest.fixture(scope="module")
def result():
    return roofline.combine({0: roofline.operator_roofline_rank(hand_made_rank())})


def _row(ops, name):
    rows = ops[ops["name"] == name]
    assert len(rows) == 1
    return rows.iloc[0]


def test_kernel_time_is_the_busy_time_of_what_the_op_launched(result):
    linear, addmm = _row(result.ops, "aten::linear"), _row(result.ops, "aten::addmm")
    assert linear["kernel_time_us_sum"] == addmm["kernel_time_us_sum"] == 43.0  # memset included
    mm = _row(result.ops, "aten::mm")
    assert mm["count"] == 2
    assert (mm["kernel_time_us_sum"], mm["kernel_time_us_mean"], mm["kernel_time_us_median"]) == (
        50.0,
        25.0,
        25.0,
    )


def test_flops_bytes_and_achieved_rates(result):
    addmm = _row(result.ops, "aten::addmm")
    flops = 2 * 64 * 256 * 128 + 64 * 256
    moved = (256 + 64 * 128 + 128 * 256 + 64 * 256) * 2
    assert addmm["gflops"] == flops / 1e9 and addmm["data_moved_mb"] == moved / 2**20
    assert addmm["flops_per_byte"] == flops / moved
    assert addmm["tflops_per_s"] == pytest.approx(flops / 43e-6 / 1e12, rel=1e-12)
    assert addmm["tb_per_s"] == pytest.approx(moved / 43e-6 / 1e12, rel=1e-12)
    mm = _row(result.ops, "aten::mm")
    assert mm["tflops_per_s"] == pytest.approx(2 * 131072 / 50e-6 / 1e12, rel=1e-12)
    assert (mm["family"], mm["precision"]) == ("gemm", "fp32")


def test_roofline_bound_and_percent_of_peak(result):
    h100 = lookup("H100")
    mm = _row(result.ops, "aten::mm")
    moved = (32 * 64 + 64 * 32 + 32 * 32) * 4
    memory_us = moved / (h100.memory_tb_s * 1e6)
    compute_us = 131072 / (h100.peak_tflops("fp32") * 1e6)
    assert memory_us > compute_us and mm["bound"] == "memory"
    assert mm["roofline_time_us"] == pytest.approx(memory_us, rel=1e-12)
    assert mm["pct_of_peak"] == pytest.approx(100 * 2 * memory_us / 50, rel=1e-12)
    assert mm["time_lost_us"] == pytest.approx(50 - 2 * memory_us, rel=1e-12)
    addmm = _row(result.ops, "aten::addmm")
    flops, moved = 2 * 64 * 256 * 128 + 64 * 256, (256 + 64 * 128 + 128 * 256 + 64 * 256) * 2
    expected = max(flops / (989e6), moved / (3.35e6))
    assert addmm["roofline_time_us"] == pytest.approx(expected, rel=1e-12)
    assert addmm["bound"] == ("compute" if flops / 989e6 > moved / 3.35e6 else "memory")
    assert result.gpu.name == "H100 SXM"


def test_ops_without_a_model_are_listed_never_guessed(result):
    assert "aten::cat" not in set(result.ops["name"])
    unmodelled = result.unmodelled.set_index("name")
    assert unmodelled.loc["aten::cat", "kernel_time_us"] == 7.0
    assert unmodelled.loc["aten::foo", "kernel_time_us"] == 3.0
    assert unmodelled.loc[roofline.NO_OPERATOR, "kernel_time_us"] == 4.0


def test_coverage(result):
    cov = result.coverage.iloc[0]
    assert cov["gpu_kernel_time_us"] == 5 + 40 + 10 + 10 + 30 + 7 + 3 + 4 + 6
    assert cov["launched_before_trace_us"] == 6
    assert cov["modelled_kernel_time_us"] == 95
    assert cov["coverage_pct"] == pytest.approx(100 * 95 / 109, rel=1e-12)


def test_mfu_counts_outermost_modelled_ops_once(result):
    step = result.steps.iloc[0]
    flops = (2 * 64 * 256 * 128 + 64 * 256) + 2 * 131072  # linear (not addmm inside it) + 2 mm
    assert (step["rank"], step["step"], step["step_time_us"]) == (0, 1, 1000.0)
    assert step["model_tflop"] == pytest.approx(flops / 1e12, rel=1e-12)
    assert step["precision"] == "bf16" and step["peak_tflops"] == 989.0
    assert step["mfu_pct"] == pytest.approx(100 * flops / 1e-3 / 1e12 / 989.0, rel=1e-12)


def test_unknown_gpu_gives_nan_roofline_but_the_measured_numbers():
    r = roofline.combine({0: roofline.operator_roofline_rank(hand_made_rank("Mystery GPU"))})
    mm = _row(r.ops, "aten::mm")
    assert (
        mm["kernel_time_us_sum"] == 50.0 and math.isnan(mm["pct_of_peak"]) and mm["bound"] is None
    )
    assert r.gpu is None and math.isnan(r.steps.iloc[0]["mfu_pct"])
    tuned = roofline.combine(
        {0: roofline.operator_roofline_rank(hand_made_rank("Mystery GPU"))},
        gpu={"fp32": 10.0, "bf16": 100.0, "memory_tb_s": 1.0},
    )
    assert _row(tuned.ops, "aten::mm")["roofline_time_us"] == pytest.approx(20480 / 1e6)


def test_ranks_are_pooled_per_op_group():
    parts = {r: roofline.operator_roofline_rank(hand_made_rank()) for r in (0, 1)}
    r = roofline.combine(parts)
    mm = _row(r.ops, "aten::mm")
    assert mm["count"] == 4 and mm["kernel_time_us_sum"] == 100.0
    assert list(r.steps["rank"]) == [0, 1] and list(r.coverage["rank"]) == [0, 1]


def test_needs_the_op_shapes_extra():
    rt = hand_made_rank()
    rt.extras.clear()
    with pytest.raises(MissingExtraError, match="op_shapes"):
        roofline.operator_roofline_rank(rt)


def test_trace_without_steps_uses_its_span():
    events = [e for e in trace_events() if e["name"] != "ProfilerStep#1"]
    r = roofline.combine({0: roofline.operator_roofline_rank(hand_made_rank(events=events))})
    step = r.steps.iloc[0]
    assert step["step"] == -1 and step["step_time_us"] == 966 - 10  # first start → last end


@pytest.mark.filterwarnings("ignore:.*no launching call")
def test_through_the_facade_shapes_are_read_only_when_asked(tmp_path):
    import gzip
    import json

    from analysis import TraceAnalysis

    trace = {
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
        "distributedInfo": {"rank": 0, "world_size": 1},
        "traceEvents": trace_events(),
    }
    path = tmp_path / "rank0.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    ta = TraceAnalysis(str(path), cache_dir=tmp_path / "cache", gpu_events="all")
    # the analysed window (what the analyses read; the whole rank may be released and read back
    # from the cache with nothing attached)
    # opening the trace does not decode the shapes (kernel_args comes from the trace's own parse)
    assert "op_shapes" not in ta.trace[0].extras
    assert not list((tmp_path / "cache").glob("*/extras/op_shapes-*.arrow"))
    result = ta.get_operator_roofline(visualize=False)
    assert "op_shapes" in ta.trace[0].extras
    assert list((tmp_path / "cache").glob("*/extras/op_shapes-*.arrow"))
    direct = roofline.combine({0: roofline.operator_roofline_rank(hand_made_rank())})
    cols = ["name", "count", "gflops", "data_moved_mb", "kernel_time_us_sum", "pct_of_peak"]
    assert result.ops[cols].equals(direct.ops[cols])
    assert result.steps.equals(direct.steps)


def test_ranks_without_recorded_shapes_are_named():
    events = [dict(e) for e in trace_events()]
    for e in events:
        if e.get("cat") == "cpu_op":
            e["args"] = {"External id": 1}
    bare = roofline.operator_roofline_rank(hand_made_rank(events=events))
    with pytest.raises(NoShapesError, match=r"rank\(s\) \[3\].*record_shapes=True"):
        roofline.combine({3: bare})
    with pytest.warns(UserWarning, match=r"rank\(s\) \[1\].*record_shapes=True"):
        r = roofline.combine({0: roofline.operator_roofline_rank(hand_made_rank()), 1: bare})
    assert r.steps.set_index("rank").loc[1, "model_tflop"] == 0


def _gemm_rank(kernel_us: int, types: str):
    """One 8192³ ``aten::mm`` (1.1 TFLOP) in one step on an H100 (fp32 67, TF32 494 TFLOP/s)."""
    from roofline_traces import BASE, _gpu, _launch, _op

    n = 8192
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": BASE,
         "dur": 100_000, "pid": 1, "tid": 1},
        _op("aten::mm", 10, 50, [[n, n], [n, n]], [types, types]),
        _launch(20, 1),
        _gpu(100, kernel_us, 1),
    ]
    return hand_made_rank(events=events)


def test_an_fp32_gemm_faster_than_the_fp32_peak_is_held_to_tf32():
    """An fp32 GEMM at 220 TFLOP/s on an H100 (fp32 units: 67) ran on TF32 tensor cores: it is
    held to the TF32 peak (44 %, not 328 % of the fp32 one), and MFU with it; one at 55 TFLOP/s
    may have run on the fp32 units and stays fp32. A real A100 trace showed an fp32 mm at 569 %
    of its peak and -4.3 ms of time lost."""
    flops = 2 * 8192**3
    with pytest.warns(UserWarning, match="1 fp32 GEMM.*TF32 tensor cores"):
        fast = roofline.combine({0: roofline.operator_roofline_rank(_gemm_rank(5000, "float"))})
    mm = _row(fast.ops, "aten::mm")
    assert mm["precision"] == "tf32"
    assert mm["pct_of_peak"] == pytest.approx(100 * flops / 494e12 / 5000e-6)
    assert mm["time_lost_us"] == pytest.approx(5000 - flops / 494e12 * 1e6)
    assert fast.steps.iloc[0]["precision"] == "tf32" and fast.steps.iloc[0]["peak_tflops"] == 494
    slow = roofline.combine({0: roofline.operator_roofline_rank(_gemm_rank(20000, "float"))})
    mm = _row(slow.ops, "aten::mm")
    assert mm["precision"] == "fp32"
    assert mm["pct_of_peak"] == pytest.approx(100 * flops / 67e12 / 20000e-6)
    # bf16 is never reclassified
    bf16 = roofline.combine({0: roofline.operator_roofline_rank(_gemm_rank(1000, "c10::BFloat16"))})
    assert _row(bf16.ops, "aten::mm")["precision"] == "bf16"


def test_an_op_faster_than_its_roofline_loses_no_time():
    """An elementwise add of 2 MiB tensors (6 MiB moved) in 4 µs is 1.6 TB/s on an H100 whose
    HBM gives 3.35: under it. In 1 µs it is above: its data came from L2 (a real V100 trace: 19
    such groups at 101-152 % of peak and down to -164 µs of 'time lost'). Its share of peak
    stays above 100, its time lost is 0, and a warning says why."""
    from roofline_traces import BASE, _gpu, _launch, _op

    def rank(dur_us):
        events = [
            {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": BASE,
             "dur": 10_000, "pid": 1, "tid": 1},
            _op("aten::add", 100, 50, [[1024, 512], [1024, 512]], ["float", "float"]),
            _launch(110, 1), _gpu(200, dur_us, 1, name="elementwise_kernel"),
        ]
        return roofline.operator_roofline_rank(hand_made_rank(events=events))

    slow = _row(roofline.combine({0: rank(4)}).ops, "aten::add")
    assert slow["time_lost_us"] > 0 and slow["pct_of_peak"] < 100
    with pytest.warns(UserWarning, match=r"1 op group\(s\) ran faster than their roofline \(1 "
                                         r"memory-bound: their data came from the caches"):
        fast = _row(roofline.combine({0: rank(1)}).ops, "aten::add")
    assert fast["bound"] == "memory" and fast["pct_of_peak"] > 100
    assert fast["time_lost_us"] == 0


def test_an_op_group_without_kernel_time_has_no_time_lost():
    """Time lost is kernel time minus the roofline time: a group whose calls launched nothing
    has none (it was minus its roofline time, e.g. -27.3 µs for an aten::copy_ on a real trace)."""
    from roofline_traces import BASE, _gpu, _launch, _op

    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": BASE,
         "dur": 10_000, "pid": 1, "tid": 1},
        _op("aten::mm", 10, 50, [[64, 64], [64, 64]], ["float", "float"]),  # launches nothing
        _op("aten::mm", 100, 50, [[128, 128], [128, 128]], ["float", "float"]),
        _launch(110, 1),
        _gpu(200, 30, 1),
    ]
    result = roofline.combine({0: roofline.operator_roofline_rank(hand_made_rank(events=events))})
    ops = result.ops.set_index("input_dims")
    idle, busy = ops.loc["[[64,64],[64,64]]"], ops.loc["[[128,128],[128,128]]"]
    assert idle["kernel_time_us_sum"] == 0 and math.isnan(idle["time_lost_us"])
    assert math.isnan(idle["pct_of_peak"])
    assert busy["time_lost_us"] == pytest.approx(30 - busy["roofline_time_us"])
