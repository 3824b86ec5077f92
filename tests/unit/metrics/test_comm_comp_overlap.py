"""Communication/computation overlap: HTA parity, ground truth, hand-made cases."""

from __future__ import annotations

import math

import pytest
from trace_helpers import analyse, facade, rank_trace

from analysis.kineto.model import Trace
from analysis.metrics.gpu_time.comm_comp_overlap import combine, comm_comp_overlap_rank
from analysis.testing.synthetic import SynthConfig, generate, write_traces


@pytest.mark.parametrize("patterns", ["default", "hta"])
def test_ground_truth(tmp_path, patterns):
    config = SynthConfig(ranks=2, steps=2, kernels_per_step=30, seed=5, ns_resolution=True)
    write_traces(config, tmp_path)
    got = facade(tmp_path, patterns=patterns, rounding="exact").get_comm_comp_overlap(visualize=False)
    truth = generate(config).truth
    assert got["comp_comm_overlap_pctg"].tolist() == [
        round(truth[r].comm_comp_overlap_pctg, 2) for r in sorted(truth)
    ]
    assert (got["comp_comm_overlap_pctg"] > 0).all()


def test_hand_made_overlap():
    # nccl [0, 40) µs on stream 20; compute [10, 20) and [15, 30) µs; nccl [100, 110) alone
    rt = rank_trace([
        ("ncclDevKernel_AllReduce_Sum_f32", "kernel", 0, 40_000, 20, 1),
        ("gemm", "kernel", 10_000, 10_000, 7, 2),
        ("gemm", "kernel", 15_000, 15_000, 7, 3),
        ("ncclDevKernel_AllReduce_Sum_f32", "kernel", 100_000, 10_000, 20, 4),
    ])
    # |COMP ∩ COMM| = 20 µs of |COMM| = 50 µs
    assert analyse(Trace({0: rt}), rounding="exact").get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"].tolist() == [40.0]
    # HTA's pattern needs "...Kernel" after "nccl": ncclDevKernel matches, so both agree here
    assert analyse(Trace({0: rt}), patterns="hta", rounding="exact").get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"].tolist() == [40.0]


def test_default_recognises_deepep_and_custom_allreduce():
    rt = rank_trace([
        ("void deep_ep::internode::dispatch<8>(int*)", "kernel", 0, 10_000, 20, 1),
        ("void vllm::cross_device_reduce_1stage<float>", "kernel", 20_000, 10_000, 21, 2),
        ("gemm", "kernel", 5_000, 20_000, 7, 3),
    ])
    t = Trace({0: rt})
    # comm [0,10) ∪ [20,30) = 20 µs; compute [5,25) covers 5 + 5 µs of it
    assert analyse(t, rounding="exact").get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"].tolist() == [50.0]
    assert math.isnan(analyse(t, patterns="hta", rounding="exact").get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"][0])


def test_no_comm_and_no_gpu_events_give_nan():
    only_compute = rank_trace([("gemm", "kernel", 0, 10_000, 7, 1)], rank=0)
    cpu_only = rank_trace([("aten::mm", "cpu_op", 0, 10_000, -1, -1)], rank=1)
    frames = {r: comm_comp_overlap_rank(rt) for r, rt in {0: only_compute, 1: cpu_only}.items()}
    df = combine(frames)
    assert df["rank"].tolist() == [0, 1]
    assert df["comp_comm_overlap_pctg"].isna().all()


def test_exact_vs_hta_rounding_on_ns_timestamps():
    # comm [0.5, 10.5) µs, compute [10.2, 20) µs (after an epoch-µs origin, as Kineto writes):
    # 0.3 µs overlap exactly, none after HTA's rounding to [1, 10) and [11, 20)
    t0 = 1_700_000_000_000_000 * 1000
    rt = rank_trace([
        ("ncclKernel_x", "kernel", t0 + 500, 10_000, 20, 1),
        ("gemm", "kernel", t0 + 10_200, 9_800, 7, 2),
    ], float_timestamps=True)
    t = Trace({0: rt})
    assert analyse(t, rounding="exact").get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"].tolist() == [3.0]
    assert analyse(t, rounding="hta").get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"].tolist() == [0.0]
