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
        "step_idle_host_wait_us": 100.0, "step_idle_kernel_wait_us": 20.0, "step_idle_other_us": 250.0,
        "step_idle_us": 370.0, "past_step_end_us": 0.0,
    }


def test_work_running_past_the_step_end_counts_in_its_step():
    """A GEMM launched at the end of step 1 runs 300 µs into step 2 while step 2's own kernels
    start: it counts in step 1 (past_step_end 300), an instant both steps' work ran counts once
    (for step 1), and the steps' busy times add up to the rank's busy time."""
    rows = [("ProfilerStep#1", "user_annotation", 0, 1000 * US, -1, -1),
            ("ProfilerStep#2", "user_annotation", 1000 * US, 1000 * US, -1, -1)]
    # (name, start µs, end µs, correlation, launch call start µs, stream)
    kernels = [("gemm_1", 100, 400, 1, 50, 7),
               ("gemm_late", 900, 1300, 2, 850, 7),  # launched in step 1, ends 300 µs past it
               ("ncclDevKernel_AllReduce", 1200, 1500, 3, 1010, 20),  # step 2; 100 µs overlap
               ("gemm_2", 1600, 1700, 4, 1050, 7)]  # fmt: skip
    for name, start, end, corr, launch, stream in kernels:
        rows.append((name, "kernel", start * US, (end - start) * US, stream, corr))
        rows.append(("cudaLaunchKernel", "cuda_runtime", launch * US, 5 * US, -1, corr))
    table = B.step_breakdown_rank(rank_trace(rows, rank=0))
    one, two = table.iloc[0].to_dict(), table.iloc[1].to_dict()
    assert (one["computation_us"], one["exposed_comm_us"], one["past_step_end_us"]) == (700, 0, 300)
    # step 2: the all-reduce's 100 µs beside step 1's GEMM belong to step 1's time
    assert (two["computation_us"], two["exposed_comm_us"], two["past_step_end_us"]) == (100, 200, 0)
    # idle is the GPU's, over each step's span: [0,100) [400,900) | [1500,1600) [1700,2000)
    assert (one["step_idle_us"], two["step_idle_us"]) == (600, 400)
    busy = 300 + 400 + 200 + 100  # the rank's merged busy time
    assert table[["computation_us", "exposed_comm_us", "memory_us", "other_us"]].sum().sum() == busy


def test_kernel_wait_threshold_is_an_option():
    row = B.step_breakdown_rank(step_rank(), consecutive_kernel_delay=10).iloc[0]
    assert row["step_idle_kernel_wait_us"] == 0 and row["step_idle_other_us"] == 270


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
    assert table.loc[2, "step_idle_other_us"] == table.loc[2, "step_time_us"] == 1300


def test_work_launched_before_the_first_step_counts_where_it_runs():
    """A kernel launched before step 1 (or without a launch call) counts in the step it starts in;
    one that starts outside every step counts in none."""
    rows = [("ProfilerStep#1", "user_annotation", 100 * US, 1000 * US, -1, -1),
            ("gemm_early", "kernel", 150 * US, 200 * US, 7, 1),
            ("cudaLaunchKernel", "cuda_runtime", 10 * US, 5 * US, -1, 1),  # before the step
            ("gemm_orphan", "kernel", 500 * US, 100 * US, 7, 2),  # no launch call in the trace
            ("gemm_before", "kernel", 20 * US, 50 * US, 7, 3),  # runs before the step
            ("cudaLaunchKernel", "cuda_runtime", 12 * US, 5 * US, -1, 3)]  # fmt: skip
    row = B.step_breakdown_rank(rank_trace(rows, rank=0)).iloc[0]
    assert row["computation_us"] == 200 + 100
    assert row["step_idle_us"] == 1000 - 300
