"""TraceLens parity of the temporal breakdown: its ``gpu_timeline.csv`` on real H100/MI300X traces.

With ``gpu_events="launched"`` (the default preset's window: GPU events whose launching call is in
the trace) our span, idle and busy time equal TraceLens's ``total_time``, ``idle_time`` and
``busy_time`` to 0.002 ms on every trace. TraceLens counts memsets as computation where we (and HTA)
count them as memory: its ``computation_time`` is our computation ∪ memsets, and its
``exposed_memcpy_time`` is the busy time outside that union (docs/deviations.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from paths import REPO_ROOT

from analysis import TraceAnalysis
from analysis.metrics.intervals import merge
from analysis.metrics.kernel_types import classified_gpu_events

TRACELENS = REPO_ROOT.parent / "shared" / "traces" / "tracelens"
TRACES = sorted(TRACELENS.glob("*/*.json.gz")) if TRACELENS.is_dir() else []
TOLERANCE_MS = 0.002


def reference(trace: Path) -> pd.Series:
    csv = trace.parent / trace.name.replace(".json.gz", "_perf_report_csvs") / "gpu_timeline.csv"
    return pd.read_csv(csv).set_index("type")["time ms"]


@pytest.fixture(scope="module", params=TRACES, ids=lambda p: f"{p.parent.name}/{p.name[:24]}")
def analysed(request):
    with pytest.warns(UserWarning) if "Qwen" in request.param.name else _nothing():
        ta = TraceAnalysis(trace_files=[str(request.param)], use_cache=False, progress=False)
    return ta, reference(request.param)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_traces_are_there():
    if not TRACELENS.is_dir():
        pytest.skip(f"TraceLens traces not available: {TRACELENS} does not exist")
    assert len(TRACES) == 5


def test_total_busy_idle_equal_tracelens(analysed):
    ta, ref = analysed
    row = ta.get_temporal_breakdown(visualize=False).iloc[0]
    total = row["kernel_time(us)"] / 1000
    idle = row["idle_time(us)"] / 1000
    assert total == pytest.approx(ref["total_time"], abs=TOLERANCE_MS)
    assert idle == pytest.approx(ref["idle_time"], abs=TOLERANCE_MS)
    assert total - idle == pytest.approx(ref["busy_time"], abs=TOLERANCE_MS)


def test_computation_differs_by_memsets_only(analysed):
    ta, ref = analysed
    rank = ta.ranks[0]
    gpu = classified_gpu_events(ta.trace[rank], ta.patterns, ta.time_rounding)
    memset = gpu["name"].astype(str).str.startswith("Memset").to_numpy()
    as_tracelens = (gpu["kernel_type"] == "COMPUTATION").to_numpy() | memset
    s, e = merge(gpu["start"].to_numpy()[as_tracelens], gpu["end"].to_numpy()[as_tracelens])
    computation_ms = int((e - s).sum()) / 1e6
    row = ta.get_temporal_breakdown(visualize=False).iloc[0]
    busy_ms = (row["kernel_time(us)"] - row["idle_time(us)"]) / 1000
    assert computation_ms == pytest.approx(ref["computation_time"], abs=TOLERANCE_MS)
    assert busy_ms - computation_ms == pytest.approx(ref["exposed_memcpy_time"], abs=TOLERANCE_MS)
    # ours: computation kernels only (memsets are memory), never more than TraceLens's
    assert row["compute_time(us)"] / 1000 <= ref["computation_time"] + TOLERANCE_MS
    assert np.isclose(ref["exposed_comm_time"], 0.0)  # single-GPU traces: no communication


def test_qwen_orphans_are_counted_and_excluded(analysed):
    ta, ref = analysed
    meta = ta.get_trace_metadata().iloc[0]
    stats = ta.engine.window_stats[ta.ranks[0]]
    if "Qwen" not in meta["file"]:
        assert meta["unlaunched_gpu_events"] == 0
        return
    # the tail of the iteration before profiling started: 509 (H100) / 463 (MI300X) events
    expected = 509 if "/h100/" in meta["file"] else 463
    assert meta["unlaunched_gpu_events"] == stats.unlaunched == expected
    assert stats.unlaunched_kept == 0
    # their summed GPU time (13.742 / 13.319 ms) ...
    assert meta["unlaunched_gpu_ms"] == pytest.approx(13.742 if expected == 509 else 13.319, abs=1e-3)
    # ... and the span they would add to the analysed time (14.76 / 13.95 ms), kept with "all"
    with pytest.warns(UserWarning, match=f"{expected:,} GPU events .* kept"):
        everything = TraceAnalysis(trace_files=[meta["file"]], use_cache=False, progress=False,
                                   gpu_events="all")
    extra_us = (everything.get_temporal_breakdown(visualize=False)["kernel_time(us)"].iloc[0]
                - ta.get_temporal_breakdown(visualize=False)["kernel_time(us)"].iloc[0])
    assert extra_us / 1000 == pytest.approx(14.76 if expected == 509 else 13.95, abs=0.01)


@pytest.mark.parametrize("device", ["h100", "mi300"])
def test_hta_preset_keeps_the_orphans_as_hta_does(device, tmp_path):
    """HTA 0.5.0 keeps unlaunched GPU events when a trace has one profiler step: the ``"hta"``
    preset (``gpu_events="hta"``) reproduces its numbers (47.085 ms span on MI300X Qwen)."""
    import shutil

    from hta_oracle import hta_analysis

    qwen = TRACELENS / device / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    if not qwen.is_file():
        pytest.skip(f"TraceLens traces not available: {qwen} does not exist")
    shutil.copy(qwen, tmp_path / qwen.name)  # HTA reads every trace of a folder as a rank
    with pytest.warns(UserWarning, match="kept"):
        ta = TraceAnalysis(str(tmp_path), kernel_patterns="hta", use_cache=False, progress=False)
    ours = ta.get_temporal_breakdown(visualize=False)
    span_ms = ours["kernel_time(us)"].iloc[0] / 1000
    assert span_ms == pytest.approx(49.652 if device == "h100" else 47.085, abs=1.5e-3)
    if device == "h100":
        # HTA 0.5.0 fails its own `assert non_compute_time >= 0` on this trace (a bare
        # AssertionError); the "hta" preset still gives the row
        with pytest.raises(AssertionError):
            hta_analysis(str(tmp_path)).get_temporal_breakdown(visualize=False)
        return
    theirs = hta_analysis(str(tmp_path)).get_temporal_breakdown(visualize=False)
    pd.testing.assert_frame_equal(ours, theirs.reset_index(drop=True), rtol=1e-6)
