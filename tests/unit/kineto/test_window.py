"""The analysed window (analysis.kineto.window) against the events HTA 0.5.0 keeps in its constructor."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hta_oracle import hta_analysis
from trace_helpers import load_dir, parity_dirs

from analysis.kineto.model import EVENT_COLUMNS, RankMeta, RankTrace, Trace
from analysis.kineto.window import profiler_step_window
from analysis.metrics.timebase import event_bounds_ns


def kept_events(full: Trace, window: Trace) -> dict[int, Counter]:
    """Per rank, the multiset of (name, start, dur, stream, correlation) in HTA's terms: whole µs
    after HTA's rounding, start relative to the earliest event of all ranks (HTA aligns ranks)."""
    first = min(
        event_bounds_ns(rt.events["ts"], rt.events["dur"], "hta", rt.meta.float_timestamps)[0].min()
        for rt in full.values()
    )
    out = {}
    for rank, rt in window.items():
        ev = rt.events
        s, e = event_bounds_ns(ev["ts"], ev["dur"], "hta", rt.meta.float_timestamps)
        out[rank] = Counter(zip(ev["name"].astype(str), (s - first) // 1000, (e - s) // 1000,
                                ev["stream"], ev["correlation"], strict=True))
    return out


def hta_kept_events(hta) -> dict[int, Counter]:
    names = np.asarray(hta.t.symbol_table.get_sym_table(), dtype=object)
    out = {}
    for rank in hta.t.get_ranks():
        df = hta.t.get_trace(rank)
        out[rank] = Counter(zip(names[df["name"].to_numpy()], df["ts"].astype("int64"),
                                df["dur"].astype("int64"), df["stream"], df["correlation"],
                                strict=True))
    return out


@pytest.mark.parametrize("trace_dir", parity_dirs(), indirect=True)
def test_window_equals_htas_filtered_frames(trace_dir):
    full = load_dir(trace_dir)
    window = profiler_step_window(full)
    assert kept_events(full, window) == hta_kept_events(hta_analysis(str(trace_dir)))


def test_window_with_last_step_equals_hta(hta_traces_dir):
    trace_dir = hta_traces_dir / "trace_filter"
    full = load_dir(trace_dir)
    window = profiler_step_window(full, include_last_profiler_step=True)
    hta = hta_analysis(str(trace_dir), include_last_profiler_step=True)
    assert kept_events(full, window) == hta_kept_events(hta)
    assert sum(map(len, (rt.events for rt in window.values()))) > sum(
        map(len, (rt.events for rt in profiler_step_window(full).values()))
    )


def rank_trace(rows, rank=0) -> RankTrace:
    """A RankTrace from (name, cat, ts_ns, dur_ns, stream, correlation) tuples."""
    frame = pd.DataFrame(rows, columns=["name", "cat", "ts", "dur", "stream", "correlation"])
    frame = frame.assign(pid=1, tid=1, external_id=-1, device=0, wait_on_stream=-1, wait_on_record=-1)
    return RankTrace(meta=RankMeta(rank=rank, source="hand-made"),
                     events=frame[list(EVENT_COLUMNS)].astype(EVENT_COLUMNS))


def test_hand_made_window():
    rt = rank_trace([
        ("ProfilerStep#1", "user_annotation", 0, 100, -1, -1),
        ("cudaLaunchKernel", "cuda_runtime", 10, 5, -1, 1),
        ("ProfilerStep#2", "user_annotation", 100, 100, -1, -1),
        ("cudaLaunchKernel", "cuda_runtime", 110, 5, -1, 2),
        ("k1", "kernel", 150, 10, 7, 1),   # launched in step 1, runs later: kept
        ("k2", "kernel", 160, 10, 7, 2),   # launched in the last step: dropped
        ("k3", "kernel", 5, 1, 7, 99),     # no launching call in the trace: dropped (as HTA)
    ])
    kept = profiler_step_window(Trace({0: rt}))[0].events["name"].astype(str).tolist()
    assert kept == ["ProfilerStep#1", "cudaLaunchKernel", "k1"]
    whole = profiler_step_window(Trace({0: rt}), include_last_profiler_step=True)[0].events
    assert sorted(whole["name"].astype(str)) == sorted(
        ["ProfilerStep#1", "cudaLaunchKernel", "ProfilerStep#2", "cudaLaunchKernel", "k1", "k2"]
    )
