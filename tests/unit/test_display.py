"""The notebook summary of a TraceAnalysis (HTML and text) and the table display helper."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from analysis import TraceAnalysis
from analysis.display import overview, table
from analysis.engines.local import LocalEngine
from analysis.errors import NoGPUEventsError

T0 = 1_732_000_000_000_000  # µs since the epoch: 2024-11-19 07:06:40 UTC
EVIL = '<script>alert("x")</script> & <b>'


def _rank_doc(rank: int, gpu: str, offset_us: int) -> dict:
    """Three profiler steps of 100 µs, one kernel per step: 7 complete events in all."""
    events = []
    for i, step in enumerate((1, 2, 3)):
        start = T0 + offset_us + 100 * i
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1,
             "tid": 1, "ts": start, "dur": 100},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": start + 10, "dur": 5, "args": {"correlation": 10 + i}},
        ]
    events.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7,
                   "ts": T0 + offset_us + 20, "dur": 30,
                   "args": {"stream": 7, "correlation": 10, "device": 0}})
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": gpu}],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
        "traceEvents": events,
    }


@pytest.fixture
def hand_made(tmp_path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    # a file name and a GPU name with HTML in them: both come from the trace, both must be escaped
    (run / "rank0 & <i>.json").write_text(json.dumps(_rank_doc(0, EVIL, 0)))
    (run / "rank1.json").write_text(json.dumps(_rank_doc(1, "NVIDIA H100", 1000)))
    return run


def _ta(run: Path, tmp_path: Path, **kw) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=run, cache_dir=tmp_path / "cache", progress=False, **kw)


def test_overview_against_the_hand_made_truth(hand_made, tmp_path):
    ov = overview(_ta(hand_made, tmp_path))
    assert ov.ranks == [0, 1] and ov.world_size == [2] and ov.backends == ["nccl"]
    assert ov.gpus == {EVIL: 1, "NVIDIA H100": 1}
    assert ov.steps_analysed == [1, 2] and ov.steps_dropped == [3]
    assert ov.first_ns == T0 * 1000
    assert ov.last_ns == (T0 + 1000 + 300) * 1000  # rank 1's last step ends at +1300 µs
    assert ov.duration_ms == pytest.approx(1.3)
    assert [r["events"] for r in ov.per_rank] == [7, 7]
    assert [r["steps"] for r in ov.per_rank] == ["1–3", "1–3"]
    assert ov.from_cache == 0 and ov.kernel_patterns == "default"


def test_text_repr_is_readable(hand_made, tmp_path):
    text = repr(_ta(hand_made, tmp_path, kernel_patterns="hta"))
    lines = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in text.splitlines()[1:]
                 if not line.startswith("    - "))
    assert lines["Ranks"] == "2 (0–1)"
    assert lines["Profiler steps analysed"] == "#1–2 (2 of 3)"
    assert lines["Profiler steps dropped"].startswith("3 (incomplete last step")
    assert lines["Time range"] == (
        "2024-11-19 07:06:40.000 UTC → 2024-11-19 07:06:40.001 UTC (1.300 ms)"
    )
    assert lines["Events"] == "14 (7 per rank)"
    assert lines["Kernel patterns"] == "hta (time rounding: hta)"
    assert lines["Loaded"] == "parsed now (not from the cache)"
    # a second open reads the cache, and says so
    again = repr(_ta(hand_made, tmp_path))
    assert "2 of 2 ranks read from the cache of parsed traces" in again


def test_ranks_say_when_only_part_of_the_job_is_loaded(hand_made, tmp_path):
    (hand_made / "rank1.json").unlink()
    text = repr(_ta(hand_made, tmp_path))
    assert "Ranks                    1 of 2 in the job (0)" in text


def test_html_repr_escapes_names_from_the_trace(hand_made, tmp_path):
    page = _ta(hand_made, tmp_path)._repr_html_()
    assert "<script>" not in page and "<i>" not in page and "<b>" not in page
    # shown, escaped (Jinja2 writes quotes as &#34;)
    assert html.unescape(html.escape(f"1 × {EVIL}")) in html.unescape(page)
    assert "1 × &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &lt;b&gt;" in page
    assert "rank0 &amp; &lt;i&gt;.json" in page
    # the numbers are there
    for text in ("Profiler steps analysed", "1–2", "World size", "1.300 ms", ">7<"):
        assert text in page


def test_table_formats_and_indexes_without_changing_the_data():
    df = pd.DataFrame({
        "rank": [0, 0, 1], "stream": [7, 20, 7],
        "start(us)": [1.732e15, 1.732e15 + 2.5, 1.732e15 + 4],
        "idle_time": [1234.56, 7.0, float("nan")], "idle_time_ratio": [0.12345, 0.5, 0.25],
        "compute_time_pctg": [12.345, 50.0, 60.0], "75%": [2329.5, 1.0, 2.0],
    })
    before = df.copy()
    styler = table(df)
    pd.testing.assert_frame_equal(df, before)
    assert list(styler.data.index.names) == ["rank", "stream"]
    text = styler.to_string()
    assert "1,732,000,000,000,002" in text  # epoch µs as a whole number, not 1.732000e+15
    assert "1,234.6" in text and "0.123" in text and "12.3" in text and "–" in text
    assert "e+15" not in text
    assert "2,329.5" in text  # describe()'s quantile columns are µs, not percentages


def test_repr_never_raises(hand_made, tmp_path, monkeypatch):
    ta = _ta(hand_made, tmp_path)

    def broken(*a, **k):
        raise RuntimeError("worker lost")

    monkeypatch.setattr(ta.engine, "map_ranks", broken)
    assert "summary unavailable: RuntimeError: worker lost" in repr(ta)
    assert "ranks=[0, 1]" in ta._repr_html_()


def _health_result(monkeypatch, ta, result) -> None:
    """Make the batch the overview runs answer ``result`` for the trace health check."""
    run_many = ta.run_many

    def with_health(requests, *args, **kwargs):
        out = run_many(requests, *args, **kwargs)
        return {**out, "trace_health": result} if "trace_health" in out else out

    monkeypatch.setattr(ta, "run_many", with_health)


class CountingEngine(LocalEngine):
    """The local engine, counting its round trips (``map_ranks`` calls) and what they ran."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, list]] = []

    def map_ranks(self, func, ranks, *, window="steps", **kw):
        self.calls.append((window, [n for n, _ in kw.get("requests", [])]))
        return super().map_ranks(func, ranks, window=window, **kw)


def test_overview_is_one_engine_round_trip(hand_made, tmp_path):
    loaded = _ta(hand_made, tmp_path)
    engine = CountingEngine(loaded.full_trace, gpu_events="launched")
    ta = TraceAnalysis.from_engine(engine, gpu_events="launched")
    ov = overview(ta)
    assert engine.calls == [("full", ["trace_metadata", "profiler_step_table", "trace_health"])]
    # the same numbers as the facade's own methods give
    assert ov.steps_analysed == ta.get_profiler_steps() == [1, 2]
    health = ta.check()
    assert ov.findings == [(r.severity, r.check, r.message) for r in health.itertuples()
                           if r.severity in ("error", "warning")]
    repr(ta)  # the overview is kept: no second round trip
    assert len(engine.calls) == 3  # the two calls above, not the overview again


def test_trace_health_opens_the_summary_escaped(hand_made, tmp_path, monkeypatch):
    ta = _ta(hand_made, tmp_path)
    found = pd.DataFrame({"severity": ["error", "warning", "info"],
                          "check": [EVIL, "clock_skew", "ns_timestamps"],
                          "message": ["rank 1 <dropped>", "5 ms", "fine"]})
    _health_result(monkeypatch, ta, found)
    text = repr(ta)
    assert ("Trace health             1 error, 1 warning (details: ta.check(); what the analyses "
            "find wrong: ta.findings())") in text
    assert f"    - error: {EVIL}" in text and "    - warning: clock_skew" in text
    assert "ns_timestamps" not in text  # info is not shown here
    page = ta._repr_html_()
    assert EVIL not in page and "rank 1 &lt;dropped&gt;" in page and "clock_skew" in page


def test_findings_that_fail_say_why(hand_made, tmp_path, monkeypatch):
    ta = _ta(hand_made, tmp_path)

    _health_result(monkeypatch, ta, NoGPUEventsError([0, 1], "trace health"))
    assert "not available (NoGPUEventsError: " in repr(ta)


def test_steps_analysed_says_numbers_and_count():
    from analysis.display import steps_analysed

    assert steps_analysed([6], []) == "#6 (1 of 1)"
    assert steps_analysed([10, 11, 12, 13], [14]) == "#10–13 (4 of 5)"
    assert steps_analysed([], [3]) == "none (0 of 1)"
