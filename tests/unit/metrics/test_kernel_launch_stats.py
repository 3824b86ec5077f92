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
