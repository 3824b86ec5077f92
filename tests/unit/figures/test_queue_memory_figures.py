"""Figures of the queue length and the memory copies: they plot the results' numbers, and say so
when there is nothing to plot."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from analysis.figures import memory_bandwidth as mbf
from analysis.figures import queue_length as qlf
from analysis.kineto.extras import extra_table
from analysis.kineto.loader import load_trace
from analysis.metrics.gpu_time import memory_bandwidth, queue_length
from analysis.testing import health_traces as ht


def _parts(tmp_path):
    ht.write_job(ht.healthy_job(ranks=2), tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = load_trace(tmp_path, use_cache=False, progress=False, max_workers=1)
    for rt in trace.values():
        extra_table(rt, "memory_ops", use_cache=False)
    return ({r: queue_length.queue_length_rank(rt) for r, rt in trace.items()},
            {r: memory_bandwidth.memory_bandwidth_rank(rt) for r, rt in trace.items()})


def test_queue_length_figures(tmp_path):
    ql_parts, _ = _parts(tmp_path)
    streams = queue_length.stream_summary(ql_parts)
    fig = qlf.draw(streams)["queue_length"]
    assert isinstance(fig, go.Figure)
    mean = next(t for t in fig.data if t.name == "mean")
    assert list(mean.x) == [f"rank {r}<br>stream {s}" for r, s in zip(streams["rank"],
                                                                      streams["stream"], strict=True)]
    np.testing.assert_allclose(mean.y, streams["mean_queue_length"])
    empty = next(t for t in fig.data if t.name == "empty while idle")
    np.testing.assert_allclose(empty.y, streams["empty_idle_pctg"])
    series = qlf.queue_length_time_series(queue_length.time_series(ql_parts))
    assert len(series.data) == len(streams)  # one line per rank and stream


def test_memcpy_figures(tmp_path):
    _, mb_parts = _parts(tmp_path)
    copies = memory_bandwidth.copy_summary(mb_parts)
    fig = mbf.draw(copies)["memcpy_summary"]
    (bar,) = fig.data  # one copy kind: pinned host-to-device
    assert bar.name == "HtoD (Pinned → Device)"
    assert list(bar.x) == ["0", "1"]
    np.testing.assert_allclose(bar.y, [1_000_000 * 4 / (50_000 * 4)] * 2)  # bytes per ns = GB/s
    assert len(mbf.memory_bw_time_series(memory_bandwidth.time_series(mb_parts)).data) == 2


def test_empty_inputs_say_so():
    for fig in (qlf.queue_length_streams(pd.DataFrame(columns=queue_length.STREAM_SUMMARY_COLUMNS)),
                qlf.queue_length_time_series({}),
                mbf.memcpy_summary(pd.DataFrame(columns=memory_bandwidth.COPY_COLUMNS)),
                mbf.memory_bw_time_series({0: None})):
        assert fig.layout.annotations and not fig.data


def test_copies_far_apart_get_a_log_axis_labels_and_a_colour_each():
    # a 0.001 GB/s DtoH copy beside a 100 GB/s HtoD one: on a linear axis its bar is invisible
    rows = [dict(rank=r, kind="Memcpy", direction=d, src=s, dst=t, count=4, bytes=b, time=us,
                 achieved_gbps=b / us / 1000)
            for r in (0, 1)
            for d, s, t, b, us in (("DtoH", "Device", "Pageable", 4, 4.0),
                                   ("HtoD", "Pinned", "Device", 400_000_000, 4000.0),
                                   ("Memset", "Device", "", 1_000_000, 10.0))]
    copies = pd.DataFrame(rows)
    copies.loc[copies["direction"] == "Memset", "kind"] = "Memset"
    fig = mbf.memcpy_summary(copies)
    assert fig.layout.yaxis.type == "log"
    assert all(t.text is not None and len(t.text) == 2 for t in fig.data)
    colours = [t.marker.color for t in fig.data]
    assert len(set(colours)) == len(colours) == 3
    # close values keep the linear axis and no labels
    close = copies.assign(achieved_gbps=[1.0, 2.0, 3.0] * 2)
    assert mbf.memcpy_summary(close).layout.yaxis.type != "log"


def test_many_streams_turn_the_queue_bars_horizontal():
    rows = [{c: 1.0 for c in queue_length.STREAM_SUMMARY_COLUMNS} | {"rank": r, "stream": s}
            for r in range(4) for s in (7, 20)]
    fig = qlf.queue_length_streams(pd.DataFrame(rows, columns=queue_length.STREAM_SUMMARY_COLUMNS))
    bars = [t for t in fig.data if t.type == "bar"]
    assert all(t.orientation == "h" for t in bars)
    assert list(bars[0].y)[:2] == ["rank 0 · stream 7", "rank 0 · stream 20"]
    assert fig.layout.height >= 22 * len(rows)
