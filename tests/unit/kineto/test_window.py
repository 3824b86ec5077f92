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
    """The same from HTA's filtered frames (stored: the counts, not HTA's frames)."""
    return hta.computed("kept_events", _hta_kept_events)


def _hta_kept_events(hta) -> dict[int, Counter]:
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


# ---------------------------------------------------------------------------------------------
# Which GPU events: a trace that starts with the tail of an uncaptured iteration, and the GPU-side
# copies of the step annotations (issue: the analysed window).

def _write(job, out, edit) -> None:
    import json

    out.mkdir(parents=True, exist_ok=True)
    for rank, doc in job.traces.items():
        doc = json.loads(json.dumps(doc))
        edit(doc["traceEvents"])
        (out / f"rank-{rank}.pt.trace.json").write_text(json.dumps(doc))


def _orphan_tail(events, n=7, dur_us=3):
    """Prepend ``n`` kernels launched before profiling started: correlation ids that match no
    runtime call in the trace, all ending before the first captured kernel."""
    gpu = [e for e in events if e.get("cat") == "kernel"]
    first = min(e["ts"] for e in gpu)
    high = max(e["args"]["correlation"] for e in gpu)
    proto = gpu[0]
    for i in range(n):
        ts = first - (n - i) * 2 * dur_us * 1 - 100
        events.insert(0, {**proto, "name": f"tail_kernel_{i}", "ts": ts, "dur": dur_us,
                          "args": {**proto["args"], "correlation": high + 1000 + i}})


def test_uncaptured_tail_is_counted_and_excluded_by_default(tmp_path):
    from analysis import TraceAnalysis
    from analysis.testing.synthetic import SynthConfig, generate

    job = generate(SynthConfig(ranks=2, steps=3, kernels_per_step=12, seed=4))
    _write(job, tmp_path / "clean", lambda ev: None)
    _write(job, tmp_path / "tail", _orphan_tail)

    def open_(folder, **kw):
        return TraceAnalysis(str(tmp_path / folder), use_cache=False, progress=False, **kw)

    clean = open_("clean").get_temporal_breakdown(visualize=False)
    with pytest.warns(UserWarning, match=r"rank 0: 7 GPU events \(0\.02 ms of GPU time\) have no "
                                         r"launching call .* excluded \(gpu_events='launched'\)"):
        launched = open_("tail")
    # excluded: every number is the clean trace's, exactly (and the synthesiser's truth)
    pd.testing.assert_frame_equal(launched.get_temporal_breakdown(visualize=False), clean)
    for rank, truth in job.truth.items():
        assert clean.set_index("rank").loc[rank, "kernel_time(us)"] == truth.kernel_time
    meta = launched.get_trace_metadata()
    assert meta["unlaunched_gpu_events"].tolist() == [7, 7]
    assert meta["unlaunched_gpu_ms"].tolist() == [0.021, 0.021]
    # "all" keeps them: 7 × 3 µs more compute, and the span starts at the first tail kernel
    with pytest.warns(UserWarning, match="kept"):
        everything = open_("tail", gpu_events="all").get_temporal_breakdown(visualize=False)
    assert (everything["compute_time(us)"] - clean["compute_time(us)"]).tolist() == [21.0, 21.0]
    assert (everything["kernel_time(us)"] > clean["kernel_time(us)"]).all()
    # HTA's rule drops them too once there are two steps or more (HTA 0.5.0 does the same)
    with pytest.warns(UserWarning, match="excluded"):
        hta_rule = open_("tail", gpu_events="hta").get_temporal_breakdown(visualize=False)
    pd.testing.assert_frame_equal(hta_rule, clean)


def _gpu_step_copies(events):
    """Kineto's GPU-side copy of each step annotation (``gpu_user_annotation``, no stream), each
    starting after its CPU step; the last copy starts after every CPU event."""
    cpu_end = max(e["ts"] + e.get("dur", 0) for e in events if e.get("ph") == "X"
                  and e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset", "Trace"))
    steps = [e for e in events if e.get("cat") == "user_annotation"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
    for i, s in enumerate(sorted(steps, key=lambda e: e["ts"])):
        ts = cpu_end + 10 if i == len(steps) - 1 else s["ts"] + 5
        events.append({"ph": "X", "cat": "gpu_user_annotation", "name": s["name"], "pid": 0,
                       "tid": 7, "ts": ts, "dur": s["dur"], "args": {"External id": 1}})


def test_gpu_side_step_copies_are_not_step_boundaries(tmp_path):
    from analysis import TraceAnalysis
    from analysis.testing.synthetic import SynthConfig, generate

    job = generate(SynthConfig(ranks=1, steps=3, kernels_per_step=12, seed=6, slow_rank=None))
    _write(job, tmp_path / "clean", lambda ev: None)
    _write(job, tmp_path / "copies", _gpu_step_copies)
    for rule in ("launched", "all"):
        kw = dict(use_cache=False, progress=False, gpu_events=rule)
        clean = TraceAnalysis(str(tmp_path / "clean"), **kw)
        copies = TraceAnalysis(str(tmp_path / "copies"), **kw)
        whole = TraceAnalysis(str(tmp_path / "copies"), include_last_profiler_step=True, **kw)
        truth = job.truth[0]
        # the last (partial) step is left out, although its GPU-side copy starts after every
        # CPU event: include_last_profiler_step=False shortens the window
        assert copies.get_profiler_steps() == [n for n, _, _ in truth.steps]
        assert len(whole.get_profiler_steps()) == len(truth.steps) + 1
        assert len(copies.trace[0].events) < len(whole.trace[0].events)
        pd.testing.assert_frame_equal(copies.get_temporal_breakdown(visualize=False),
                                      clean.get_temporal_breakdown(visualize=False))
        # the step table and the metadata list each step once
        assert copies.get_trace_metadata()["steps"].iloc[0] == clean.get_trace_metadata()["steps"].iloc[0]
        assert copies.get_profiler_step_table()["step"].is_unique
    # HTA's rule (the HTA preset): the copies cut the window as HTA 0.5.0 cuts it -- here the
    # last copy starts after every CPU event, so nothing is left out (HTA's answer on such a
    # trace: tests/parity/test_hta_profiler_steps.py)
    kw = dict(use_cache=False, progress=False, gpu_events="hta")
    copies = TraceAnalysis(str(tmp_path / "copies"), **kw)
    whole = TraceAnalysis(str(tmp_path / "copies"), include_last_profiler_step=True, **kw)
    assert copies.get_profiler_steps() == whole.get_profiler_steps()
    assert len(copies.get_profiler_steps()) == len(job.truth[0].steps) + 1
    # the same events but the last copy itself (the cut is "starts before it")
    assert len(copies.trace[0].events) == len(whole.trace[0].events) - 1
    assert copies.get_profiler_step_table()["step"].is_unique


def test_amd_trace_lists_each_step_once_everywhere(hta_traces_dir):
    """amd_trace has GPU-side copies of its step annotations: the metadata, the step table and
    HTA's step list read the one definition of a step (the metadata used to say "1, 1, 2")."""
    import warnings

    from analysis import TraceAnalysis

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ta = TraceAnalysis(str(hta_traces_dir / "amd_trace"), use_cache=False, progress=False)
    table = ta.get_profiler_step_table()
    assert table["step"].tolist() == sorted(set(table["step"]))
    assert ta.get_trace_metadata()["steps"].iloc[0] == ", ".join(map(str, table["step"]))
    assert ta.get_profiler_steps() == table["step"].tolist()[:-1]  # the last step is dropped


def test_kernels_outside_the_window_are_named_as_such():
    """A rank whose kernels exist but none of whose launches fall in the analysed steps: the
    error says so, instead of calling it a CPU-only trace."""
    from trace_helpers import analyse, rank_trace

    from analysis.errors import NoGPUEventsError

    us = 1000
    rt = rank_trace([
        ("ProfilerStep#1", "user_annotation", 0, 100 * us, -1, -1),
        ("ProfilerStep#2", "user_annotation", 100 * us, 100 * us, -1, -1),
        ("ProfilerStep#3", "user_annotation", 200 * us, 10 * us, -1, -1),
        ("cudaLaunchKernel", "cuda_runtime", 205 * us, 2 * us, -1, 7),  # in the last step only
        ("gemm", "kernel", 208 * us, 5 * us, 7, 7),
    ])
    ta = analyse(rt, gpu_events="launched")
    with pytest.raises(NoGPUEventsError, match=r"the traces have GPU events \(rank 0: 1\) but none "
                                               r"inside the analysed window"):
        ta.get_idle_time_breakdown(visualize=False)
    # with the last step, the kernel is analysed
    assert len(analyse(rt, gpu_events="launched", include_last=True)
               .get_idle_time_breakdown(visualize=False)[0])
