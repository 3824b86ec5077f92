"""Temporal breakdown: parity with HTA 0.5.0, ground truth on synthetic traces, hand-made cases."""

from __future__ import annotations

import numpy as np
import pytest
from trace_helpers import analyse, facade, rank_trace

from analysis.kineto.model import Trace
from analysis.metrics.gpu_time.temporal_breakdown import COLUMNS
from analysis.testing.synthetic import SynthConfig, generate, write_traces


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    config = SynthConfig(ranks=2, steps=3, kernels_per_step=24, seed=3)
    out = tmp_path_factory.mktemp("synth")
    write_traces(config, out)
    return generate(config), out


@pytest.mark.parametrize("patterns", ["default", "hta"])
def test_ground_truth(synthetic, patterns):
    job, trace = synthetic
    got = facade(trace, patterns=patterns, rounding="exact").get_temporal_breakdown(visualize=False).set_index("rank")
    for rank, truth in job.truth.items():
        row = got.loc[rank]
        assert row["kernel_time(us)"] == truth.kernel_time
        assert row["idle_time(us)"] == truth.idle
        assert row["compute_time(us)"] == truth.compute
        assert row["non_compute_time(us)"] == truth.non_compute
        assert row["idle_time_pctg"] == round(100 * truth.idle / truth.kernel_time, 2)


def test_hand_made_breakdown():
    # compute [0, 10) µs and [5, 20) µs, nccl [15, 40) µs, a gap, a memcpy [50, 60) µs
    rt = rank_trace([
        ("gemm", "kernel", 0, 10_000, 7, 1),
        ("gemm", "kernel", 5_000, 15_000, 7, 2),
        ("ncclKernel_AllReduce", "kernel", 15_000, 25_000, 20, 3),
        ("Memcpy DtoH", "gpu_memcpy", 50_000, 10_000, 7, 4),
        ("cudaLaunchKernel", "cuda_runtime", 0, 1_000, -1, 1),
    ])
    row = analyse(Trace({0: rt}), rounding="exact").get_temporal_breakdown(visualize=False).iloc[0]
    assert list(analyse(Trace({0: rt}), rounding="exact").get_temporal_breakdown(visualize=False).columns) == COLUMNS
    assert row["kernel_time(us)"] == 60.0
    assert row["idle_time(us)"] == 10.0
    assert row["compute_time(us)"] == 20.0
    assert row["non_compute_time(us)"] == 30.0
    assert row["compute_time_pctg"] == 33.33


def test_exact_rounding_keeps_ns_where_hta_loses_sub_us_kernels():
    # two 0.4 µs kernels at 10.3 µs and 20.3 µs: HTA rounds each to ceil(ts) > floor(end), a
    # negative length; exact keeps 0.8 µs of compute
    rt = rank_trace([("k", "kernel", 10_300, 400, 7, 1), ("k", "kernel", 20_300, 400, 7, 2)],
                    float_timestamps=True)
    exact = analyse(Trace({0: rt}), rounding="exact").get_temporal_breakdown(visualize=False).iloc[0]
    hta = analyse(Trace({0: rt}), patterns="hta", rounding="hta").get_temporal_breakdown(visualize=False).iloc[0]
    assert exact["compute_time(us)"] == pytest.approx(0.8)
    assert exact["kernel_time(us)"] == pytest.approx(10.4)
    assert hta["compute_time(us)"] == -2.0  # HTA's arithmetic, reproduced for parity
    assert hta["kernel_time(us)"] == 9.0  # floor(20.7) − ceil(10.3)


def test_default_ignores_cpu_calls_with_a_stream_and_sync_waits():
    # ROCm runtime calls carry args.stream; HTA counts them as GPU time, the default does not
    rt = rank_trace([
        ("hipLaunchKernel", "cuda_runtime", 0, 5_000, 0, 1),
        ("gemm", "kernel", 10_000, 10_000, 0, 1),
        ("Stream Wait Event", "cuda_sync", 20_000, 30_000, 0, 2),
    ])
    default = analyse(Trace({0: rt}), rounding="exact").get_temporal_breakdown(visualize=False).iloc[0]
    hta = analyse(Trace({0: rt}), patterns="hta", rounding="exact").get_temporal_breakdown(visualize=False).iloc[0]
    assert default["kernel_time(us)"] == 10.0 and default["idle_time(us)"] == 0.0
    assert hta["kernel_time(us)"] == 50.0
    assert hta["compute_time(us)"] == 45.0  # HTA counts the launch call and the wait as compute


def test_rank_without_gpu_events_gives_nan_row():
    gpu = rank_trace([("gemm", "kernel", 0, 10_000, 7, 1)], rank=0)
    cpu = rank_trace([("aten::add", "cpu_op", 0, 10_000, -1, -1)], rank=3)
    df = analyse(Trace({0: gpu, 3: cpu}), rounding="exact").get_temporal_breakdown(visualize=False)
    assert df["rank"].tolist() == [0, 3]
    assert np.isnan(df.iloc[1][COLUMNS[1:]].to_numpy(dtype=float)).all()
    assert df.iloc[0]["compute_time_pctg"] == 100.0


def test_ranks_selection():
    a = rank_trace([("gemm", "kernel", 0, 10_000, 7, 1)], rank=2)
    b = rank_trace([("gemm", "kernel", 0, 20_000, 7, 1)], rank=5)
    t = Trace({2: a, 5: b})
    assert analyse(t, rounding="exact").get_temporal_breakdown(visualize=False, ranks=[5])["kernel_time(us)"].tolist() == [20.0]
    assert analyse(t, rounding="exact").get_temporal_breakdown(visualize=False, ranks="all")["rank"].tolist() == [2, 5]


def test_times_are_float_us_even_when_every_time_is_whole(tmp_path):
    """HTA 0.5.0 gives int64 time columns when every time it sums is a whole µs (its
    ``call_stack`` test trace: 45) and float64 otherwise; ours are float64 whatever the trace
    (docs/deviations.md), with HTA's values."""
    gpu = rank_trace([("gemm", "kernel", 0, 45_000, 7, 1)], rank=0)
    ta = analyse(Trace({0: gpu}), patterns="hta", rounding="hta")
    df = ta.get_temporal_breakdown(visualize=False)
    assert df["kernel_time(us)"].tolist() == [45.0] and df["idle_time(us)"].tolist() == [0.0]
    assert (df.dtypes[COLUMNS[1:5]] == np.float64).all()
    _, kernels = ta.get_gpu_kernel_breakdown(visualize=False)
    assert kernels["sum (us)"].tolist() == [45.0] and kernels["sum (us)"].dtype == np.float64
