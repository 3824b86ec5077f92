"""CUDA kernel launch statistics: parity with HTA 0.5.0, ground truth, launch-API presets."""

from __future__ import annotations

import pickle

import pandas as pd
import pytest
from hta_oracle import hta_analysis
from trace_helpers import load_dir, parity_dirs, rank_trace

from analysis.errors import ConfigError, NoGPUEventsError
from analysis.kineto.model import Trace
from analysis.kineto.window import profiler_step_window
from analysis.metrics.kernel_launch_stats import (
    COLUMNS,
    DEFAULT_LAUNCH_APIS,
    combine,
    kernel_launch_stats,
    kernel_launch_stats_rank,
)
from analysis.testing.synthetic import SynthConfig, generate, write_traces


@pytest.mark.parametrize("include_memory_events", [True, False])
@pytest.mark.parametrize("trace_dir", parity_dirs(), indirect=True)
def test_hta_parity(trace_dir, include_memory_events):
    hta = hta_analysis(str(trace_dir))
    ranks = hta.t.get_ranks()
    theirs = hta.get_cuda_kernel_launch_stats(
        ranks=ranks, include_memory_events=include_memory_events, visualize=False
    )
    ours = kernel_launch_stats(
        profiler_step_window(load_dir(trace_dir)), ranks=ranks,
        include_memory_events=include_memory_events, patterns="hta", rounding="hta",
    )
    assert list(ours) == list(theirs)
    for rank in theirs:
        pd.testing.assert_frame_equal(
            ours[rank], theirs[rank].reset_index(drop=True), check_dtype=False, rtol=1e-6
        )


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    config = SynthConfig(ranks=2, steps=3, kernels_per_step=20, seed=11, ns_resolution=True)
    out = tmp_path_factory.mktemp("synth-launch")
    write_traces(config, out)
    return generate(config), profiler_step_window(load_dir(out))


@pytest.mark.parametrize("patterns", ["default", "hta"])
def test_ground_truth(synthetic, patterns):
    job, trace = synthetic
    stats = kernel_launch_stats(trace, ranks="all", patterns=patterns)
    assert list(stats) == [0, 1]
    for rank, truth in job.truth.items():
        df = stats[rank]
        got = sorted(zip(df["correlation"], df["cpu_duration"], df["gpu_duration"],
                         df["launch_delay"], strict=True))
        assert got == sorted(truth.launches)  # exact: ns-resolution times, no rounding


def test_ground_truth_without_memory_events(synthetic):
    job, trace = synthetic
    stats = kernel_launch_stats(trace, ranks=[1], include_memory_events=False)
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
    df = kernel_launch_stats(Trace({0: rt}))[0]
    assert list(df.columns) == COLUMNS
    assert df.values.tolist() == [
        [1, 5.0, 10.0, 0.0], [2, 4.0, 2.0, 100.0], [3, 8.0, 1.0, 2.0], [3, 8.0, 1.0, 12.0],
    ]
    hta = kernel_launch_stats(Trace({0: rt}), patterns="hta", include_memory_events=False)[0]
    assert hta["correlation"].tolist() == [1]  # no graph launches, no copies


def test_default_matches_more_launch_apis_than_hta(hta_traces_dir):
    # Triton launches with the driver API, ROCm with hipLaunchKernel: HTA 0.5.0 finds no launch
    for name, hta_rows, our_rows in (("triton_example", 0, 1), ("amd_trace", 0, 16)):
        trace = profiler_step_window(load_dir(hta_traces_dir / name))
        assert len(hta_analysis(str(hta_traces_dir / name))
                   .get_cuda_kernel_launch_stats(visualize=False)[0]) == hta_rows
        assert len(kernel_launch_stats(trace, patterns="hta", rounding="hta")[0]) == hta_rows
        assert len(kernel_launch_stats(trace)[0]) == our_rows


def test_custom_launch_apis():
    rt = rank_trace([
        ("myLaunch", "cuda_runtime", 0, 1000, -1, 1),
        ("k", "kernel", 5000, 1000, 7, 1),
    ])
    assert kernel_launch_stats(Trace({0: rt}))[0].empty
    apis = DEFAULT_LAUNCH_APIS.extend(kernel=["myLaunch"])
    df = kernel_launch_stats(Trace({0: rt}), launch_apis=apis)[0]
    assert df["launch_delay"].tolist() == [4.0]
    with pytest.raises(ConfigError, match="launch_apis"):
        kernel_launch_stats(Trace({0: rt}), launch_apis="nope")


def test_no_gpu_events_raises_our_error(hta_traces_dir):
    cpu_only = profiler_step_window(load_dir(hta_traces_dir / "cpu_only"))
    with pytest.raises(NoGPUEventsError, match="kernel launch statistics"):
        kernel_launch_stats(cpu_only, ranks="all")


def test_default_rank_is_first_present_and_step_plus_combine():
    rows = [("cudaLaunchKernel", "cuda_runtime", 0, 1000, -1, 1), ("k", "kernel", 3000, 500, 7, 1)]
    trace = Trace({2: rank_trace(rows, rank=2), 5: rank_trace(rows, rank=5)})
    assert list(kernel_launch_stats(trace)) == [2]
    whole = kernel_launch_stats(trace, ranks="all")
    frames = {r: pickle.loads(pickle.dumps(kernel_launch_stats_rank(trace[r]))) for r in trace}
    again = combine(frames)
    assert list(again) == [2, 5]
    for r in trace:
        pd.testing.assert_frame_equal(whole[r], again[r])
