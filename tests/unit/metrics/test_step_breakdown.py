"""The per-step breakdown on a hand-built rank whose every part is known (µs)."""

from __future__ import annotations

import pytest
from trace_helpers import rank_trace

from analysis.metrics.distributed import step_breakdown as B

US = 1000


def step_rank(rank: int = 0, step_us: int = 1000):
    rows = [("ProfilerStep#1", "user_annotation", 0, step_us * US, -1, -1)]
    # (name, start µs, end µs, correlation, launch call start µs)
    kernels = [
        ("gemm_a", 100, 300, 1, 50),        # after the lead gap [0, 100): other
        ("Memcpy HtoD (Pinned -> Device)", 300, 350, 2, 60),  # back to back: memory 50
        ("gemm_b", 370, 500, 3, 70),        # gap 20 < 30 µs, launched early: kernel_wait
        ("ncclDevKernel_AllReduce", 600, 800, 4, 550),  # gap 100, launched late: host_wait
        ("gemm_c", 700, 750, 5, 80),        # overlaps the all-reduce: exposed comm 150
        ("gemm_d", 900, 950, 6, 90),        # gap 100, launched early: other; tail 50: other
    ]
    for name, start, end, corr, launch in kernels:
        stream = 20 if name.startswith("nccl") else 7
        cat = "gpu_memcpy" if name.startswith("Memcpy") else "kernel"
        rows.append((name, cat, start * US, (end - start) * US, stream, corr))
        rows.append(("cudaLaunchKernel", "cuda_runtime", launch * US, 5 * US, -1, corr))
    return rank_trace(rows, rank=rank)


def test_every_part_of_a_hand_built_step():
    row = B.step_breakdown_rank(step_rank()).iloc[0].to_dict()
    assert row == {
        "rank": 0, "step": 1, "step_time_us": 1000.0,
        "computation_us": 430.0, "exposed_comm_us": 150.0, "memory_us": 50.0, "other_us": 0.0,
        "idle_host_wait_us": 100.0, "idle_kernel_wait_us": 20.0, "idle_other_us": 250.0,
        "idle_us": 370.0,
    }


def test_kernel_wait_threshold_is_an_option():
    row = B.step_breakdown_rank(step_rank(), consecutive_kernel_delay=10).iloc[0]
    assert row["idle_kernel_wait_us"] == 0 and row["idle_other_us"] == 270


def test_slowest_rank_and_margin_over_the_median():
    no_gpu = rank_trace([("ProfilerStep#1", "user_annotation", 0, 1300 * US, -1, -1)], rank=2)
    parts = {0: B.step_breakdown_rank(step_rank(0)),
             1: B.step_breakdown_rank(step_rank(1, step_us=1200)),
             2: B.step_breakdown_rank(no_gpu)}
    table = B.combine(parts)
    assert table["rank"].tolist() == [0, 1, 2]
    assert (table["step_slowest_rank"] == 2).all()
    assert table["step_margin_us"].tolist() == pytest.approx([100.0] * 3)  # 1300 − median 1200
    # a rank without GPU events: the whole step is idle, 'other'
    assert table.loc[2, "idle_other_us"] == table.loc[2, "step_time_us"] == 1300
