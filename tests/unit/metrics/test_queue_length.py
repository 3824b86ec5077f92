"""CUDA queue length on hand-built traces whose answer is worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
from trace_helpers import rank_trace

from analysis.errors import NoGPUEventsError
from analysis.metrics.gpu_time import queue_length as ql

US = 1000  # ns


def _trace(third_launch_us: int):
    # launches at 0, 10 and `third_launch_us` µs; kernels on stream 7 at 5 (30 µs), 35 (10), 100 (10)
    return rank_trace(
        [
            ("cudaLaunchKernel", "cuda_runtime", 0, 2 * US, -1, 1),
            ("cudaLaunchKernel", "cuda_runtime", 10 * US, 2 * US, -1, 2),
            ("cudaLaunchKernel", "cuda_runtime", third_launch_us * US, 2 * US, -1, 3),
            ("k1", "kernel", 5 * US, 30 * US, 7, 1),
            ("k2", "kernel", 35 * US, 10 * US, 7, 2),
            ("k3", "kernel", 100 * US, 10 * US, 7, 3),
            ("unlaunched", "kernel", 200 * US, 1 * US, 7, 99),  # no launch call: not counted
        ]
    )


@pytest.mark.parametrize("patterns", ["default", "hta"])
def test_series_steps(patterns):
    part = ql.queue_length_rank(_trace(20), patterns=patterns)
    s = part.series
    assert s["ts"].tolist() == [0, 5, 10, 20, 35, 100]
    assert s["queue_length"].tolist() == [1, 0, 1, 2, 1, 0]
    assert set(s["stream"]) == {7}


def test_time_weighted_stats_and_empty_idle():
    part = ql.queue_length_rank(_trace(60))
    # queue: 1 on [0,5), 0 on [5,10), 1 on [10,35), 0 on [35,60), 1 on [60,100), 0 on [100,110)
    row = ql.stream_summary({0: part}).iloc[0]
    assert row["span"] == 110
    assert row["mean_queue_length"] == pytest.approx((5 + 25 + 40) / 110)
    assert row["max_queue_length"] == 1
    # empty and idle: [45, 60) only (k2 ends at 45, k3 launched at 60)
    assert row["empty_idle"] == 15
    assert row["empty_idle_pctg"] == pytest.approx(100 * 15 / 110)
    assert row["time_at_max_queue_length"] == 0


def test_time_at_max_queue_length_counts_every_stream():
    part = ql.queue_length_rank(_trace(20), max_queue_length=2)
    # the queue is 2 on [20, 35)
    assert ql.stream_summary({0: part})["time_at_max_queue_length"].tolist() == [15]


def test_launch_sorts_before_a_kernel_starting_at_the_same_time():
    rt = rank_trace(
        [
            ("cudaLaunchKernel", "cuda_runtime", 0, US, -1, 1),
            ("cudaLaunchKernel", "cuda_runtime", 5 * US, US, -1, 2),
            ("k1", "kernel", 5 * US, 10 * US, 7, 1),  # starts exactly when call 2 starts
            ("k2", "kernel", 15 * US, 10 * US, 7, 2),
        ]
    )
    s = ql.queue_length_rank(rt).series
    assert s["queue_length"].tolist() == [1, 2, 1, 0]


def test_summary_is_describe_of_change_points():
    part = ql.queue_length_rank(_trace(20))
    summary = ql.combine({0: part})
    assert summary.loc[(0, 7), ("queue_length", "count")] == 6
    assert summary.loc[(0, 7), ("queue_length", "mean")] == pytest.approx(5 / 6)
    assert summary.loc[(0, 7), ("queue_length", "max")] == 2


def test_every_stream_reported():
    rt = rank_trace(
        [
            ("cudaLaunchKernel", "cuda_runtime", 0, US, -1, 1),
            ("cudaLaunchKernel", "cuda_runtime", 0, US, -1, 2),
            ("k1", "kernel", 5 * US, 10 * US, 7, 1),
            ("k2", "kernel", 5 * US, 10 * US, 9, 2),
        ]
    )
    assert ql.stream_summary({0: ql.queue_length_rank(rt)})["stream"].tolist() == [7, 9]


def test_rank_without_gpu_events_raises():
    rt = rank_trace([("aten::mm", "cpu_op", 0, US, -1, -1)], rank=3)
    with pytest.raises(NoGPUEventsError, match=r"\[3\]"):
        ql.queue_length_rank(rt)


def test_no_launches_gives_empty_results():
    rt = rank_trace([("k", "kernel", 0, US, 7, 5)])
    part = ql.queue_length_rank(rt)
    assert ql.time_series({0: part}) == {}
    assert ql.combine({0: part}) is None
    assert np.asarray(ql.stream_summary({0: part})).size == 0


def test_default_counts_graph_launches_that_hta_does_not():
    """Deviation: the default launch calls include cudaGraphLaunch (one call, many kernels)."""
    rt = rank_trace(
        [
            ("cudaGraphLaunch", "cuda_runtime", 0, US, -1, 1),
            ("g1", "kernel", 5 * US, 10 * US, 7, 1),
            ("g2", "kernel", 15 * US, 10 * US, 7, 1),
        ]
    )
    assert ql.queue_length_rank(rt).series["queue_length"].tolist() == [1, 2, 1, 0]
    assert ql.time_series({0: ql.queue_length_rank(rt, patterns="hta")}) == {}


def test_the_summary_step_keeps_only_the_stream_statistics():
    """The stream summary's per-rank step (what the engine keeps until the ranks are combined) is
    the statistics table, not the series, and the summary is the same from either part."""
    from analysis import analyses as catalogue

    rt = _trace(60)
    step = catalogue.get("queue_length_stream_summary").rank_step
    part = step(rt, max_queue_length=1)
    assert list(part.columns) == list(ql.STREAM_SUMMARY_COLUMNS) and len(part) == 1
    whole = ql.queue_length_rank(rt, max_queue_length=1)
    assert ql.stream_summary({0: part}).equals(ql.stream_summary({0: whole}))
    assert ql.stream_summary({0: part})["time_at_max_queue_length"].tolist() == [70]


def test_a_gpu_tid_written_as_text_is_minus_one_and_the_stream_is_kept():
    """Kineto 2021 wrote GPU events' tid as text (``"stream 7"``): HTA 0.5.0 keeps the text in
    its series' ``tid``; the model holds ids as integers, so here ``tid`` is -1 and the stream is
    in ``stream`` (docs/deviations.md; TensorBoard's ResNet-50 V100 samples)."""
    import json

    from analysis.kineto.parse import parse_trace_bytes

    events = [
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": "1441273664",
         "ts": 100, "dur": 5, "args": {"correlation": 1, "external id": 3}},
        {"ph": "X", "cat": "Kernel", "name": "k", "pid": 0, "tid": "stream 7", "ts": 110,
         "dur": 10, "args": {"correlation": 1, "external id": 3, "stream": 7, "device": 0}},
    ]
    rt = parse_trace_bytes(json.dumps({"traceEvents": events}).encode(), "legacy.json")
    series = ql.queue_length_rank(rt, patterns="hta").series
    assert series["tid"].tolist() == [-1, -1] and series["stream"].tolist() == [7, 7]
    assert series["queue_length"].tolist() == [1, 0]
    assert rt.events.loc[rt.events["name"] == "cudaLaunchKernel", "tid"].tolist() == [1441273664]
