"""Idle time breakdown: parity with HTA 0.5.0, ground truth on synthetic traces, hand-made cases."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from trace_helpers import analyse, facade, load_dir, rank_trace

from analysis.errors import NoGPUEventsError
from analysis.kineto.model import RankTrace, Trace
from analysis.metrics.gpu_time.idle_time_breakdown import (
    COLUMNS,
    combine,
    idle_intervals,
    idle_time_breakdown_rank,
)
from analysis.testing.synthetic import SynthConfig, generate, write_traces


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    config = SynthConfig(ranks=2, steps=3, kernels_per_step=24, seed=5, ns_resolution=True)
    out = tmp_path_factory.mktemp("synth-idle")
    write_traces(config, out)
    return generate(config), out


@pytest.mark.parametrize("patterns", ["default", "hta"])
def test_ground_truth(synthetic, patterns):
    job, trace = synthetic
    df, stats = facade(trace, patterns=patterns, rounding="exact").get_idle_time_breakdown(visualize=False, ranks="all", show_idle_interval_stats=True)
    for rank, truth in job.truth.items():
        got = df[df["rank"] == rank].set_index(["stream", "idle_category"])["idle_time"]
        got_n = stats[stats["rank"] == rank].reset_index().set_index(["stream", "idle_category"])
        for (stream, cat), (total, n) in truth.idle_by_category().items():
            if (stream, cat) not in got.index:  # HTA lists only the categories that occur
                assert n == 0
                continue
            assert got[(stream, cat)] == pytest.approx(total, rel=1e-12, abs=0.006 if patterns == "hta" else 0)
            assert got_n.loc[(stream, cat), "count"] == n
    assert set(df["idle_category"]) == {"host_wait", "kernel_wait", "other"}


def test_ground_truth_intervals(synthetic):
    job, trace = synthetic
    truth = job.truth[0]
    gaps = idle_intervals(facade(trace).trace[0]).dropna(subset=["idle_interval"])
    names = gaps["idle_category"].map({0: "host_wait", 1: "kernel_wait", 2: "other"})
    # both in (stream, start) order; epoch µs floats are too coarse to compare starts directly
    got = sorted(zip(gaps["stream"], gaps["idle_interval"], names, strict=True), key=lambda t: t[0])
    want = [(g.stream, g.gap, g.category)
            for g in sorted(truth.idle_gaps, key=lambda g: (g.stream, g.next_start))]
    assert sorted({s for s, _, _ in got}) == truth.streams
    assert [(s, c) for s, _, c in got] == [(s, c) for s, _, c in want]
    np.testing.assert_allclose([g for _, g, _ in got], [g for _, g, _ in want], rtol=0, atol=1e-9)


def hand_made() -> RankTrace:
    us = 1000
    return rank_trace([
        # launches: k1 early, k2 early (queued: kernel wait), k3 after k2 ended (host wait),
        # k4 queued early but starts 100 µs after k3 (other)
        ("cudaLaunchKernel", "cuda_runtime", 0, 5 * us, -1, 1),
        ("cudaLaunchKernel", "cuda_runtime", 6 * us, 5 * us, -1, 2),
        ("cudaLaunchKernel", "cuda_runtime", 60 * us, 5 * us, -1, 3),
        ("cudaLaunchKernel", "cuda_runtime", 66 * us, 5 * us, -1, 4),
        ("k1", "kernel", 10 * us, 20 * us, 7, 1),      # [10, 30)
        ("k2", "kernel", 32 * us, 10 * us, 7, 2),      # gap 2 µs → kernel wait
        ("k3", "kernel", 70 * us, 10 * us, 7, 3),      # gap 28 µs, launched at 60 > 42 → host wait
        ("Stream Sync", "cuda_sync", 80 * us, 50 * us, 7, 9),  # a sync event is not idle-time work
        ("k4", "kernel", 180 * us, 10 * us, 7, 4),     # gap 100 µs, launched at 66 < 80 → other
        ("Memset", "gpu_memset", 12 * us, 1 * us, 9, 5),  # alone on stream 9, no launch call
    ])


def test_hand_made_categories():
    df, stats = analyse(Trace({0: hand_made()}), rounding="exact").get_idle_time_breakdown(visualize=False, show_idle_interval_stats=True)
    assert list(df.columns) == COLUMNS
    rows = {(r.stream, r.idle_category): r.idle_time for r in df.itertuples()}
    assert rows == {(7, "host_wait"): 28.0, (7, "kernel_wait"): 2.0, (7, "other"): 100.0,
                    (9, "other"): 0.0}
    ratio = df.set_index(["stream", "idle_category"])["idle_time_ratio"]
    assert ratio[(7, "other")] == pytest.approx(100 / 130)
    assert np.isnan(ratio[(9, "other")])  # 0 / 0, as HTA
    assert stats.loc["other"].set_index("stream").loc[9, "count"] == 0  # first event: no interval


def test_kernel_wait_threshold_is_in_microseconds():
    df, _ = analyse(Trace({0: hand_made()}), rounding="exact").get_idle_time_breakdown(visualize=False, consecutive_kernel_delay=1.5)
    cats = set(df[df["stream"] == 7]["idle_category"])
    assert "kernel_wait" not in cats  # the 2 µs gap is no longer below the threshold


def test_default_clips_overlaps_where_hta_counts_negative_idle():
    us = 1000
    rt = rank_trace([
        ("cudaLaunchKernel", "cuda_runtime", 0, us, -1, 1),
        ("cudaLaunchKernel", "cuda_runtime", 2 * us, us, -1, 2),
        ("cudaLaunchKernel", "cuda_runtime", 3 * us, us, -1, 3),
        ("long", "kernel", 10 * us, 50 * us, 7, 1),   # [10, 60)
        ("inside", "kernel", 20 * us, 5 * us, 7, 2),  # [20, 25): overlaps, gap −40 µs for HTA
        ("next", "kernel", 70 * us, 5 * us, 7, 3),    # HTA: 70 − 25 = 45; really idle 70 − 60 = 10
    ])
    hta, _ = analyse(Trace({0: rt}), patterns="hta", rounding="exact").get_idle_time_breakdown(visualize=False)
    default, _ = analyse(Trace({0: rt}), rounding="exact").get_idle_time_breakdown(visualize=False)
    assert hta["idle_time"].sum() == pytest.approx(5.0)  # −40 + 45
    assert default["idle_time"].sum() == pytest.approx(10.0)
    assert (default["idle_time"] >= 0).all()


def test_default_does_not_round():
    us = 1000
    rt = rank_trace([
        ("cudaLaunchKernel", "cuda_runtime", 0, us, -1, 1),
        ("cudaLaunchKernel", "cuda_runtime", 0, us, -1, 2),
        ("a", "kernel", 10 * us, us, 7, 1),
        ("b", "kernel", 11 * us + 1, us, 7, 2),  # 1 ns gap
    ])
    assert analyse(Trace({0: rt}), rounding="exact").get_idle_time_breakdown(visualize=False)[0]["idle_time"].max() == 0.001
    assert analyse(Trace({0: rt}), patterns="hta", rounding="exact").get_idle_time_breakdown(visualize=False)[0]["idle_time"].max() == 0.0


def test_no_gpu_events_raises_our_error(hta_traces_dir):
    rt = rank_trace([("aten::mm", "cpu_op", 0, 1000, -1, -1)], rank=3)
    with pytest.raises(NoGPUEventsError, match=r"rank\(s\) \[3\]"):
        analyse(Trace({3: rt}), rounding="exact").get_idle_time_breakdown(visualize=False)
    other = rank_trace([("aten::mm", "cpu_op", 0, 1000, -1, -1)], rank=5)
    # among GPU ranks, CPU-only ranks are left out with one warning naming them all
    with pytest.warns(UserWarning, match=r"rank\(s\) \[3, 5\] left out: no GPU events"):
        df, _ = analyse(Trace({0: hand_made(), 3: rt, 5: other})).get_idle_time_breakdown(
            visualize=False, ranks="all")
    assert set(df["rank"]) == {0}
    with pytest.raises(NoGPUEventsError, match=r"rank\(s\) \[3, 5\]"):
        analyse(Trace({3: rt, 5: other})).get_idle_time_breakdown(visualize=False, ranks="all")
    cpu_only = load_dir(hta_traces_dir / "cpu_only")
    with pytest.raises(NoGPUEventsError):
        analyse(cpu_only, rounding="exact").get_idle_time_breakdown(visualize=False, ranks="all")


def test_ranks_all_and_rank_step_plus_combine_equal_the_convenience():
    a, b = hand_made(), hand_made()
    b.meta.rank = 4
    trace = Trace({0: a, 4: b})
    whole, stats = analyse(trace, rounding="exact").get_idle_time_breakdown(visualize=False, ranks="all", show_idle_interval_stats=True)
    frames = {
        r: pickle.loads(pickle.dumps(idle_time_breakdown_rank(
            pickle.loads(pickle.dumps(trace[r])), show_idle_interval_stats=True)))
        for r in trace
    }
    again, stats_again = combine(frames, show_idle_interval_stats=True)
    pd.testing.assert_frame_equal(whole, again)
    pd.testing.assert_frame_equal(stats, stats_again)
    assert list(whole["rank"].unique()) == [0, 4]
    assert list(whole.index[:4]) == [0, 1, 2, 3] and whole.index[4] == 0  # per-rank index, as HTA
