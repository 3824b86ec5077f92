"""Findings: each rule fires on a trace built to trigger it, with the right value, and stays silent
on a trace built not to; rules without the data they need say why instead of guessing."""

from __future__ import annotations

import pandas as pd
import pytest
from trace_helpers import analyse, rank_trace

from analysis.kineto.model import Trace
from analysis.metrics.findings import findings as F

US = 1000


def rank_of(kernels, rank=0, steps=None):
    """A rank from ``(name, cat, start_us, dur_us, stream, launch_start_us)`` GPU events, each
    launched by a 2 µs runtime call, plus ``ProfilerStep#N`` annotations ``(n, start_us, dur_us)``."""
    rows = []
    for corr, (name, cat, start, dur, stream, launch) in enumerate(kernels, start=1):
        call = "cudaMemcpyAsync" if cat == "gpu_memcpy" else "cudaLaunchKernel"
        rows.append((call, "cuda_runtime", launch * US, 2 * US, -1, corr))
        rows.append((name, cat, start * US, dur * US, stream, corr))
    for n, start, dur in steps or []:
        rows.append((f"ProfilerStep#{n}", "user_annotation", start * US, dur * US, -1, -1))
    return rank_trace(rows, rank=rank)


def by_rule(table: pd.DataFrame, metric: str) -> pd.Series:
    rows = table[table["metric"] == metric]
    assert len(rows) == 1, table[["metric", "title"]]
    return rows.iloc[0]


# ------------------------------------------------------------------------ GPU waits for the CPU
def starved():
    # 10 kernels of 10 µs, each launched 1 µs after the previous kernel ended: 90 µs gaps
    return [("gemm", "kernel", i * 100, 10, 7, i * 100 - 2) for i in range(1, 11)]


def fed():
    # the same kernels back to back, all launched up front
    return [("gemm", "kernel", 100 + i * 11, 10, 7, i) for i in range(10)]


def test_gpu_idle_host_bound_fires_with_the_idle_share():
    table = analyse(rank_of(starved())).findings()
    f = by_rule(table, "gpu_idle_pct")
    # span 100 → 1010 µs = 910 µs, busy 100 µs: idle 810 / 910 = 89.01 %
    assert f["value"] == pytest.approx(89.01)
    assert f["threshold"] == F.IDLE_SHARE_PCT
    assert "host_wait is 100 %" in f["evidence"]
    assert "CUDA graphs" in f["suggestion"]


def test_gpu_idle_host_bound_silent_when_fed():
    table = analyse(rank_of(fed())).findings()
    assert "gpu_idle_pct" not in set(table["metric"])


# ------------------------------------------------------------------------ exposed communication
STEPS = [(1, 0, 100), (2, 100, 1)]  # one complete 100 µs step, and the last (partial) one


def test_exposed_communication_fires_with_the_exposed_share():
    # compute [0, 60) µs, NCCL [60, 100) µs on another stream: 40 % of the step exposed
    kernels = [("gemm", "kernel", 0, 60, 7, -5), ("ncclDevKernel_AllReduce", "kernel", 60, 40, 20, -4)]
    f = by_rule(analyse(rank_of(kernels, steps=STEPS)).findings(), "exposed_comm_pct")
    assert f["value"] == pytest.approx(40.0)
    assert "step_breakdown: exposed communication rank 0 (40.0 %)" in f["evidence"]


def test_exposed_communication_silent_when_overlapped():
    kernels = [("gemm", "kernel", 0, 100, 7, -5), ("ncclDevKernel_AllReduce", "kernel", 20, 40, 20, -4)]
    table = analyse(rank_of(kernels, steps=STEPS)).findings()
    assert "exposed_comm_pct" not in set(table["metric"])


def test_exposed_communication_says_why_without_collectives():
    table = analyse(rank_of(fed(), steps=STEPS)).findings()
    assert table.attrs["not_run"]["exposed_communication"] == (
        "no exposed communication kernels in the profiler steps")


def test_exposed_communication_without_steps_does_not_claim_there_is_none():
    """A serving trace has no profiler steps: the rule cannot measure per step, and must not say
    "no exposed communication" (hyukjlee/traceMap's vLLM MI300X trace: 33.6 ms of custom
    all-reduce, none of it overlapped)."""
    kernels = [("gemm", "kernel", 0, 60, 7, -5), ("ncclDevKernel_AllReduce", "kernel", 60, 40, 20, -4)]
    table = analyse(rank_of(kernels)).findings()
    assert table.attrs["not_run"]["exposed_communication"].startswith(
        "needs complete profiler steps")


# --------------------------------------------------------------------------- host-to-device copies
def test_pageable_and_large_htod_copies_fire():
    kernels = [("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 0, 20, 7, -5),
               ("gemm", "kernel", 20, 80, 7, -4)]
    table = analyse(rank_of(kernels)).findings()
    assert by_rule(table, "pageable_htod_ms")["value"] == pytest.approx(0.02)
    assert by_rule(table, "htod_share_pct")["value"] == pytest.approx(20.0)


def test_small_pinned_copies_are_silent():
    kernels = [("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy", 0, 1, 7, -5),
               ("gemm", "kernel", 1, 99, 7, -4)]
    table = analyse(rank_of(kernels)).findings()
    assert not {"pageable_htod_ms", "htod_share_pct"} & set(table["metric"])


# -------------------------------------------------------------------------------- step variance
def stepped(durations_ms, rank=0):
    """Steps of the given durations (ms), one 10 µs kernel at each step start, and a last step."""
    steps, kernels, t = [], [], 0
    for n, d in enumerate([*durations_ms, 1], start=1):
        steps.append((n, t, d * 1000))
        kernels.append(("gemm", "kernel", t + 5, 10, 7, t + 1))
        t += d * 1000
    return rank_of(kernels, rank=rank, steps=steps)


def test_unsteady_steps_fire_with_the_coefficient_of_variation():
    table = analyse(stepped([10, 10, 10, 20])).findings()
    f = by_rule(table, "step_time_cv_pct")
    durations = pd.Series([10.0, 10, 10, 20])
    assert f["value"] == pytest.approx(round(100 * durations.std(ddof=0) / durations.mean(), 2))
    assert "step 4: 20.0 ms" in f["detail"]


def test_steady_steps_and_ranks_are_silent():
    trace = Trace({0: stepped([10, 10, 10]), 1: stepped([10, 10, 10], rank=1)})
    table = analyse(trace).findings()
    assert not {"step_time_cv_pct", "rank_step_spread_pct"} & set(table["metric"])


def test_a_slow_rank_fires_with_its_margin():
    trace = Trace({0: stepped([10, 10, 10]), 1: stepped([10, 10, 10], rank=1),
                   2: stepped([13, 13, 13], rank=2)})
    f = by_rule(analyse(trace).findings(), "rank_step_spread_pct")
    assert f["title"] == "Rank 2 is slower than the others"
    assert f["value"] == pytest.approx(30.0)


def test_step_rule_needs_two_steps():
    table = analyse(rank_of(fed())).findings()
    assert table.attrs["not_run"]["step_time_variance"] == "needs at least two complete profiler steps"


# ------------------------------------------------------------------------------------ the table
def test_table_shape_order_and_display():
    table = analyse(rank_of(starved() + [
        ("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 2000, 5, 7, 1990)])).findings()
    assert list(table.columns) == F.COLUMNS
    assert set(table["severity"]) <= set(F.SEVERITY_ORDER)
    # ranked: the same severity sorted by how far past the threshold; a finding whose threshold is
    # 0 (any pageable copy) has no such ratio and comes after the others of its severity (it
    # ranked first, as if infinitely past: 0.02 ms of pageable copies above 82 % exposed
    # communication on a real Megatron job)
    metrics = table["metric"].tolist()
    assert metrics[0] == "gpu_idle_pct"
    page = table[table["metric"] == "pageable_htod_ms"].iloc[0]
    same = table[table["severity"] == page["severity"]]
    assert same["metric"].tolist()[-1] == "pageable_htod_ms"
    html = table._repr_html_()
    assert "The GPU waits for the CPU" in html and "<script" not in html


def test_display_escapes_names_from_the_trace():
    rt = rank_of(fed())
    rt.meta.source = "<script>x</script>.json"  # quoted in the checks that could not run
    html = analyse(rt).findings()._repr_html_()
    assert "<script>x" not in html and "&lt;script&gt;x" in html


def test_cpu_only_trace_runs_no_gpu_rule_and_says_why():
    cpu = rank_trace([("aten::mm", "cpu_op", 0, 1000, -1, -1)])
    table = analyse(cpu).findings()
    assert table.empty
    assert "gpu_idle_host_bound" in table.attrs["not_run"]


# ---------------------------------------------------------------------------- data loading stall
def steps_starting_late(offset_us, rank=0):
    """Four 1 ms steps (and a last one), each launching its first kernel ``offset_us`` after it
    starts; a DataLoader event covers the first 100 µs of each step."""
    rows, corr = [], 0
    for n in range(1, 6):
        t = (n - 1) * 1000
        rows.append((f"ProfilerStep#{n}", "user_annotation", t * US, 1000 * US, -1, -1))
        rows.append(("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                     "user_annotation", t * US, 100 * US, -1, -1))
        corr += 1
        rows.append(("cudaLaunchKernel", "cuda_runtime", (t + offset_us) * US, 2 * US, -1, corr))
        rows.append(("gemm", "kernel", (t + offset_us + 5) * US, 10 * US, 7, corr))
    return rank_trace(rows, rank=rank)


def test_data_loading_stall_fires_with_the_gap_share():
    table = analyse(steps_starting_late(400)).findings()
    f = by_rule(table, "step_start_gap_pct")
    assert f["value"] == pytest.approx(40.0)
    assert "first launch after 0.4 ms (step 1)" in f["evidence"]
    assert "0.4 ms in DataLoader events" in f["evidence"]  # 4 complete steps × 100 µs


def test_data_loading_stall_silent_when_launches_come_early():
    table = analyse(steps_starting_late(20)).findings()
    assert "step_start_gap_pct" not in set(table["metric"])


def test_step_start_gap_table():
    gaps = analyse(steps_starting_late(400)).get_step_start_gaps()
    assert gaps["step"].tolist() == [1, 2, 3, 4, 5]
    assert gaps["first_launch_us"].tolist() == [400.0] * 5
    assert gaps["dataloader_us"].tolist() == [100.0] * 5


# ------------------------------------------------------------------------------------ roofline
def one_big_gemm(kernel_us, step_us):
    """One bf16 8192³ ``aten::mm`` (1.1 TFLOP; 1112 µs at an H100's 989 TFLOP/s) in one step."""
    from roofline_traces import BASE, BF16, _gpu, _launch, _op

    n = 8192
    return [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": BASE, "dur": step_us,
         "pid": 1, "tid": 1},
        _op("aten::mm", 10, 50, [[n, n], [n, n]], [BF16, BF16]),
        _launch(20, 1),
        _gpu(100, kernel_us, 1),
    ]


def test_far_from_roofline_fires_with_the_time_lost_and_low_mfu():
    from roofline_traces import hand_made_rank

    table = analyse(hand_made_rank(events=one_big_gemm(5000, 6000))).findings()
    f = by_rule(table, "roofline_time_lost_pct")
    flops = 2 * 8192**3
    at_roofline_us = flops / 989e12 * 1e6
    assert f["value"] == pytest.approx(round(100 * (5000 - at_roofline_us) / 5000, 2))
    assert "aten::mm" in f["evidence"] and "compute-bound" in f["evidence"]
    mfu = by_rule(table, "mfu_pct")
    assert mfu["severity"] == "info"
    assert mfu["value"] == pytest.approx(round(100 * flops / (6000e-6 * 989e12), 2))


def test_mfu_is_no_finding_when_most_kernel_time_has_no_perf_model():
    """MFU counts only the modelled operators' FLOPs: with the GEMM under half the kernel time
    (the rest kernels launched outside any operator), a low MFU measures the coverage, not the run
    (a real H200 trace gave 'median 0.0 %' from 0.4 % of its kernel time). The roofline loss of
    the GEMM itself is still reported."""
    from roofline_traces import _gpu, _launch, hand_made_rank

    events = one_big_gemm(5000, 60000)
    events += [_launch(5200, 2, name="cudaGraphLaunch"), _gpu(5200, 6000, 2, name="graph_kernel")]
    table = analyse(hand_made_rank(events=events)).findings()
    assert "roofline_time_lost_pct" in set(table["metric"])
    assert "mfu_pct" not in set(table["metric"])
    # the same GEMM alone in the same step: MFU is reported, and says what it covers
    alone = by_rule(analyse(hand_made_rank(events=one_big_gemm(5000, 60000))).findings(), "mfu_pct")
    assert "100 % of the GPU kernel time" in alone["detail"] and "profiler steps" in alone["detail"]
    # the report card: the MFU of the modelled operators, a lower bound when they are the minority
    from analysis.metrics.roofline.operator_roofline import key_numbers

    low = dict(key_numbers(analyse(hand_made_rank(events=events)).get_operator_roofline(
        visualize=False)))
    assert any("lower bound" in label for label in low)
    full = dict(key_numbers(analyse(hand_made_rank(events=one_big_gemm(5000, 60000)))
                            .get_operator_roofline(visualize=False)))
    assert "model FLOPs utilisation" in full


def test_far_from_roofline_silent_near_the_roofline():
    from roofline_traces import hand_made_rank

    table = analyse(hand_made_rank(events=one_big_gemm(1150, 1300))).findings()
    assert not {"roofline_time_lost_pct", "mfu_pct"} & set(table["metric"])


def test_far_from_roofline_says_why_without_shapes():
    table = analyse(rank_of(fed())).findings()
    assert "far_from_roofline" in table.attrs["not_run"]


# ---------------------------------------------------------------------- stragglers, bus bandwidth
def collective_job(tmp_path, **config):
    import warnings

    from analysis import TraceAnalysis
    from analysis.testing.collectives import CollectiveJobConfig, generate_collective_job

    job = generate_collective_job(CollectiveJobConfig(**config))
    job.write(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return job, TraceAnalysis(str(tmp_path), use_cache=False, progress=False)


def test_straggler_fires_with_its_lateness(tmp_path):
    delayed = tuple((s, j) for s in range(3) for j in range(3))
    job, ta = collective_job(tmp_path, straggler_delay_us=2000, delayed=delayed, cause="compute")
    f = by_rule(ta.findings(), "straggler_lateness_pct")
    top = ta.get_stragglers(visualize=False).iloc[0]
    steps = ta.get_step_breakdown(visualize=False)
    median_step = steps.groupby("step")["step_time_us"].median().median()
    assert f["title"] == "Rank 2 is a straggler: the others wait for it"
    assert f["value"] == pytest.approx(round(100 * top["mean_lateness_us"] / median_step, 2))
    assert "busy" in f["detail"]


def test_straggler_rule_says_why_on_a_job_without_profiler_steps(tmp_path):
    """Real serving traces have collectives and no ProfilerStep: one rank of such a job is 'one
    rank loaded' (not 'no collectives matched'); several ranks say the steps are missing."""
    import gzip
    import json
    import warnings

    from analysis import TraceAnalysis
    from analysis.testing.collectives import CollectiveJobConfig, generate_collective_job

    generate_collective_job(CollectiveJobConfig(straggler_delay_us=2000)).write(tmp_path / "job")
    stepless = tmp_path / "stepless"
    stepless.mkdir()
    for path in sorted((tmp_path / "job").iterdir()):
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt") as f:
            doc = json.load(f)
        doc["traceEvents"] = [e for e in doc["traceEvents"]
                              if not str(e.get("name", "")).startswith("ProfilerStep#")]
        with opener(stepless / path.name, "wt") as f:
            json.dump(doc, f)
    files = sorted(stepless.iterdir())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = TraceAnalysis(str(files[0]), use_cache=False, progress=False)
        assert len(one.get_collectives(visualize=False))
        not_run = one.findings().attrs["not_run"]
        assert "one rank loaded" in not_run["straggler_rank"]
        # a collective's time on the one rank loaded includes waiting for the others: no bus
        # bandwidth (it fired, '4 MiB at 1 GB/s', on one rank of a real 8-rank MI300X job)
        assert "one rank loaded" in not_run["low_bus_bandwidth"]
        # the plugin's rules read its window, which without steps is the CPU events' span (a
        # vLLM trace whose GPU is busy 99.8 % was told 0.0 % utilization)
        assert "no profiler steps" in not_run["low_gpu_utilization"]
        assert "no profiler steps" in not_run["dataloader_share"]
        every = TraceAnalysis(str(stepless), use_cache=False, progress=False)
        assert "no profiler steps" in every.findings().attrs["not_run"]["straggler_rank"]


def test_straggler_silent_when_nobody_is_late(tmp_path):
    _, ta = collective_job(tmp_path, straggler_delay_us=0)
    assert "straggler_lateness_pct" not in set(ta.findings()["metric"])


def test_low_bus_bandwidth_fires_and_respects_the_expected_figure(tmp_path, monkeypatch):
    # 2 MiB all-to-alls in ~300 µs on 4 ranks: about 2 MiB / 300 µs × 3/4 = 5.2 GB/s of bus
    # bandwidth, the slowest of the collectives of 1 MiB or more (4 MiB all-reduces: 12.6 GB/s)
    _, ta = collective_job(tmp_path, straggler_delay_us=0)
    f = by_rule(ta.findings(), "busbw_median_gbps")
    summary = ta.get_collective_summary()
    large = summary[summary["bucket_bytes"] >= 2**20]
    assert f["value"] == pytest.approx(round(large["busbw_median_gbps"].min(), 2))
    assert f["value"] == pytest.approx(2 * 2**20 / 300e-6 * 0.75 / 1e9, rel=0.01)
    assert "all_to_all of 2 MiB" in f["detail"]
    assert f["threshold"] == F.BUSBW_FRACTION * F.EXPECTED_BUSBW_GBPS["H100"]
    # on a link whose all-reduce reaches 8 GB/s, 5.2 GB/s is more than half of it: silent
    monkeypatch.setitem(F.EXPECTED_BUSBW_GBPS, "H100", 8.0)
    assert "busbw_median_gbps" not in set(ta.findings()["metric"])


def test_ranks_of_different_jobs_are_not_one_rank_and_show_no_nan():
    """Two ranks whose collectives match no other's (ranks of different jobs): the straggler and
    bus-bandwidth rules said 'one rank loaded' with two loaded; a rank without GPU events gave
    'rank 34 (nan %)' in the idle finding's evidence."""
    meta = pd.DataFrame({"rank": [0, 34], "gpu": ["NVIDIA H100", "NVIDIA H100"]})
    table = pd.DataFrame({"rank": [0], "times_last": [float("nan")]})
    with pytest.raises(F.Silent, match="no collective matched across the 2 ranks loaded"):
        F.straggler_rank({"stragglers": table, "step_breakdown": pd.DataFrame(),
                          "trace_metadata": meta})
    summary = pd.DataFrame({"ranks": [1], "bucket_bytes": [1 << 22], "busbw_median_gbps": [1.0]})
    with pytest.raises(F.Silent, match="no collective matched across the 2 ranks loaded"):
        F.low_bus_bandwidth({"collective_summary": summary, "trace_metadata": meta})
    idle = pd.Series([54.7, float("nan"), 53.6])
    assert F._ranks(idle, pd.Series([1, 34, 0])) == "rank 1 (54.7 %), rank 0 (53.6 %)"
