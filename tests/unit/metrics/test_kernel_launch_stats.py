"""CUDA kernel launch statistics: parity with HTA 0.5.0, ground truth, launch-API presets."""

from __future__ import annotations

import pickle

import pandas as pd
import pytest
from trace_helpers import analyse, facade, load_dir, rank_trace

from analysis.errors import ConfigError, NoGPUEventsError
from analysis.kineto.model import Trace
from analysis.metrics.gpu_time.kernel_launch_stats import (
    COLUMNS,
    DEFAULT_LAUNCH_APIS,
    combine,
    kernel_launch_stats_rank,
)
from analysis.testing.synthetic import SynthConfig, generate, write_traces


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    config = SynthConfig(ranks=2, steps=3, kernels_per_step=20, seed=11, ns_resolution=True)
    out = tmp_path_factory.mktemp("synth-launch")
    write_traces(config, out)
    return generate(config), out


@pytest.mark.parametrize("patterns", ["default", "hta"])
def test_ground_truth(synthetic, patterns):
    job, trace = synthetic
    stats = facade(trace, patterns=patterns, rounding="exact").get_cuda_kernel_launch_stats(visualize=False, ranks="all")
    assert list(stats) == [0, 1]
    for rank, truth in job.truth.items():
        df = stats[rank]
        got = sorted(zip(df["correlation"], df["cpu_duration"], df["gpu_duration"],
                         df["launch_delay"], strict=True))
        assert got == sorted(truth.launches)  # exact: ns-resolution times, no rounding


def test_ground_truth_without_memory_events(synthetic):
    job, trace = synthetic
    stats = facade(trace, rounding="exact").get_cuda_kernel_launch_stats(visualize=False, ranks=[1], include_memory_events=False)
    memory = [c for c, *_ in job.truth[1].launches if c not in set(stats[1]["correlation"])]
    # the copies and sets of every step (launched with cudaMemcpyAsync / cudaMemsetAsync) drop out
    assert len(memory) > 0
    assert len(stats[1]) + len(memory) == len(job.truth[1].launches)


def test_hand_made():
    us = 1000
    rt = rank_trace([
        ("cudaLaunchKernel", "cuda_runtime", 0, 5 * us, -1, 1),
        ("cudaMemcpyAsync", "cuda_runtime", 10 * us, 4 * us, -1, 2),
        ("cudaGraphLaunch", "cuda_runtime", 20 * us, 8 * us, -1, 3),
        ("gemm", "kernel", 3 * us, 10 * us, 7, 1),          # starts before its call ends: delay 0
        ("Memcpy HtoD", "gpu_memcpy", 114 * us, 2 * us, 7, 2),  # delay 100 µs
        ("g1", "kernel", 30 * us, 1 * us, 7, 3),            # two kernels of one graph launch
        ("g2", "kernel", 40 * us, 1 * us, 7, 3),
    ])
    df = analyse(Trace({0: rt}), rounding="exact").get_cuda_kernel_launch_stats(visualize=False)[0]
    assert list(df.columns) == COLUMNS
    assert df.values.tolist() == [
        [1, 5.0, 10.0, 0.0], [2, 4.0, 2.0, 100.0], [3, 8.0, 1.0, 2.0], [3, 8.0, 1.0, 12.0],
    ]
    hta = analyse(Trace({0: rt}), patterns="hta", rounding="exact").get_cuda_kernel_launch_stats(visualize=False, include_memory_events=False)[0]
    assert hta["correlation"].tolist() == [1]  # no graph launches, no copies


def test_custom_launch_apis():
    rt = rank_trace([
        ("myLaunch", "cuda_runtime", 0, 1000, -1, 1),
        ("k", "kernel", 5000, 1000, 7, 1),
    ])
    assert analyse(Trace({0: rt}), rounding="exact").get_cuda_kernel_launch_stats(visualize=False)[0].empty
    apis = DEFAULT_LAUNCH_APIS.extend(kernel=["myLaunch"])
    df = analyse(Trace({0: rt}), rounding="exact").get_cuda_kernel_launch_stats(visualize=False, launch_apis=apis)[0]
    assert df["launch_delay"].tolist() == [4.0]
    with pytest.raises(ConfigError, match="launch_apis"):
        analyse(Trace({0: rt}), rounding="exact").get_cuda_kernel_launch_stats(visualize=False, launch_apis="nope")


def test_a_launch_kineto_names_invalid_counts_by_default():
    """Kineto writes ``INVALID`` for a runtime callback its CUPTI table does not know; cuDNN
    launches convolution kernels through one (48 of 1,005 kernels of warming423/pf's RTX 3080
    training trace). The default preset counts such a call when a GPU event carries its
    correlation id; HTA 0.5.0 does not."""
    rt = rank_trace([
        ("INVALID", "cuda_runtime", 0, 1000, -1, 1),
        ("sm86_xmma_fprop_implicit_gemm", "kernel", 5000, 1000, 7, 1),
        ("INVALID", "cuda_runtime", 8000, 500, -1, 2),  # no GPU event: no row
    ])
    df = analyse(Trace({0: rt}), rounding="exact").get_cuda_kernel_launch_stats(visualize=False)[0]
    assert df["launch_delay"].tolist() == [4.0] and df["cpu_duration"].tolist() == [1.0]
    assert analyse(Trace({0: rt}), patterns="hta").get_cuda_kernel_launch_stats(
        visualize=False)[0].empty


def test_no_gpu_events_raises_our_error(hta_traces_dir):
    cpu_only = load_dir(hta_traces_dir / "cpu_only")
    with pytest.raises(NoGPUEventsError, match="kernel launch statistics"):
        analyse(cpu_only, rounding="exact").get_cuda_kernel_launch_stats(visualize=False, ranks="all")


def test_default_rank_is_first_present_and_step_plus_combine():
    rows = [("cudaLaunchKernel", "cuda_runtime", 0, 1000, -1, 1), ("k", "kernel", 3000, 500, 7, 1)]
    trace = Trace({2: rank_trace(rows, rank=2), 5: rank_trace(rows, rank=5)})
    assert list(analyse(trace, rounding="exact").get_cuda_kernel_launch_stats(visualize=False)) == [2]
    whole = analyse(trace, rounding="exact").get_cuda_kernel_launch_stats(visualize=False, ranks="all")
    frames = {r: pickle.loads(pickle.dumps(kernel_launch_stats_rank(trace[r]))) for r in trace}
    again = combine(frames)
    assert list(again) == [2, 5]
    for r in trace:
        pd.testing.assert_frame_equal(whole[r], again[r])


def test_classification_columns_against_known_launch_delays():
    from analysis.metrics.gpu_time.kernel_launch_stats import CLASS_COLUMNS, classified_launches

    us = 1000
    rt = rank_trace([
        ("cudaLaunchKernel", "cuda_runtime", 0, 5 * us, -1, 1),
        ("cudaLaunchKernel", "cuda_runtime", 10 * us, 60 * us, -1, 2),
        ("cudaLaunchKernel", "cuda_runtime", 100 * us, 5 * us, -1, 3),
        ("cudaLaunchKernel", "cuda_runtime", 300 * us, 5 * us, -1, 4),
        ("k1", "kernel", 5 * us, 2 * us, 7, 1),     # 2 µs on the GPU for a 5 µs call: short kernel
        ("k2", "kernel", 70 * us, 1 * us, 7, 2),    # 60 µs call: a runtime outlier, not short
        ("k3", "kernel", 205 * us, 20 * us, 7, 3),  # waits exactly 100 µs: not an outlier
        ("k4", "kernel", 406 * us, 20 * us, 7, 4),  # waits 101 µs: a launch delay outlier
    ])
    stats = analyse(Trace({0: rt}), rounding="exact").get_cuda_kernel_launch_stats(visualize=False)
    table = classified_launches(stats)
    assert list(table.columns) == [*COLUMNS, "rank", *CLASS_COLUMNS]
    assert table["launch_delay"].tolist() == [0.0, 0.0, 100.0, 101.0]
    assert table[CLASS_COLUMNS].values.tolist() == [
        [False, True, False], [True, False, False], [False, False, False], [False, False, True],
    ]
    # other cut-offs move the classes; the summary counts the same columns
    assert classified_launches(stats, 4, 99)[CLASS_COLUMNS].values.sum(axis=0).tolist() == [4, 0, 2]
    from analysis.metrics.gpu_time.kernel_launch_stats import launch_summary

    summary = launch_summary(stats)
    assert summary[["runtime_outliers", "launch_delay_outliers"]].values.tolist() == [[1, 1]]


def test_classification_of_a_synthetic_job(synthetic):
    from analysis.metrics.gpu_time.kernel_launch_stats import classified_launches

    job, trace = synthetic
    stats = facade(trace, rounding="exact").get_cuda_kernel_launch_stats(visualize=False, ranks="all")
    truth = pd.DataFrame([(rank, *launch) for rank, t in job.truth.items() for launch in t.launches],
                         columns=["rank", *COLUMNS])
    # cut-offs inside the known values, so that each class has members and non-members
    runtime_cutoff = truth["cpu_duration"].median()
    delay_cutoff = truth["launch_delay"].median()
    got = classified_launches(stats, runtime_cutoff, delay_cutoff).sort_values(["rank", "correlation"])
    truth = truth.sort_values(["rank", "correlation"])
    expected_runtime = (truth["cpu_duration"] > runtime_cutoff).tolist()
    assert got["runtime_outlier"].tolist() == expected_runtime and 0 < sum(expected_runtime) < len(truth)
    assert got["launch_delay_outlier"].tolist() == (truth["launch_delay"] > delay_cutoff).tolist()
    expected_short = [not r and g < c for r, g, c in zip(expected_runtime, truth["gpu_duration"],
                                                         truth["cpu_duration"], strict=True)]
    assert got["short_kernel"].tolist() == expected_short
