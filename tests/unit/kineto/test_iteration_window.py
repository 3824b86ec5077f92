"""The analysed window cut at a serving engine's steady-state iterations (``window="iterations"``,
and ``"auto"`` on a trace without ProfilerSteps): every windowed analysis covers it."""

import json

import pytest

from analysis.api import TraceAnalysis
from analysis.errors import ConfigError
from analysis.testing.graph_traces import SERVING_KERNELS, serving_events

PHASES = ["prefill", "decode", "decode", "mixed", "decode"]


def _write(tmp_path, events):
    path = tmp_path / "serving.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return str(path)


def _kernels(i: int, phase: str) -> list[tuple[float, float]]:
    """(start, end) µs of iteration ``i``'s kernels, as ``serving_events`` lays them out."""
    t = 1000 * (i + 1)
    return [(t + 40 + 10 * k, t + 40 + 10 * k + k + 1) for k in range(SERVING_KERNELS[phase])]


def _expected(kernels: list[tuple[float, float]]) -> dict[str, float]:
    busy = sum(e - s for s, e in kernels)  # the layout has no overlap
    span = max(e for _, e in kernels) - min(s for s, _ in kernels)
    return {"kernel_time(us)": span, "compute_time(us)": busy, "idle_time(us)": span - busy}


@pytest.mark.parametrize("window", ["auto", "iterations"])
def test_temporal_breakdown_over_the_steady_iterations(tmp_path, window):
    """Iteration 0 (the first of more than two) is warm-up and the kernel launched before it is
    outside every iteration: the window is iterations 1..4, GPU work 2040..5052 µs."""
    path = _write(tmp_path, serving_events(PHASES))
    table = TraceAnalysis(trace_files={0: path}, window=window).get_temporal_breakdown()
    kernels = [k for i, p in enumerate(PHASES) if i >= 1 for k in _kernels(i, p)]
    for column, value in _expected(kernels).items():
        assert table[column].iloc[0] == pytest.approx(value), column
    assert table["kernel_time(us)"].iloc[0] == pytest.approx(5052 - 2040)


def test_the_iteration_window_says_what_it_leaves_out(tmp_path):
    """A rule that drops data says so: the warm-up iteration 0 (3 kernels, 1+2+3 µs) and the
    kernel launched before the first iteration (50 µs) are outside the window: 4 GPU events,
    56 µs. A real vLLM H100 trace left 83.91 ms of its 233.4 ms of GPU time out without a word."""
    path = _write(tmp_path, serving_events(PHASES))
    with pytest.warns(UserWarning, match=r"rank\(s\) \[0\]: the analysed window is the steady-"
                      r"state serving iterations \(window='auto', no ProfilerStep\): 4 GPU events "
                      r"\(0\.06 ms of GPU time\) outside them are left out"):
        TraceAnalysis(trace_files={0: path}, use_cache=False)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the whole trace: nothing left out, nothing said
        TraceAnalysis(trace_files={0: path}, use_cache=False, window="steps")


def test_steps_window_keeps_the_whole_trace_without_profiler_steps(tmp_path):
    path = _write(tmp_path, serving_events(PHASES))
    table = TraceAnalysis(trace_files={0: path}, window="steps").get_temporal_breakdown()
    kernels = [(600, 650)] + [k for i, p in enumerate(PHASES) for k in _kernels(i, p)]
    for column, value in _expected(kernels).items():
        assert table[column].iloc[0] == pytest.approx(value), column


def test_hta_preset_analyses_a_serving_trace_whole(tmp_path):
    """HTA 0.5.0 has no iteration window: with ``kernel_patterns="hta"`` a trace without
    profiler steps is analysed whole unless ``window`` says otherwise (before, the HTA preset cut
    it at the iterations and differed from HTA by 89.5 ms of span on a public vLLM H100 trace);
    the CLI's ``--patterns hta`` likewise."""
    from analysis.kineto.loader import load_trace

    path = _write(tmp_path, serving_events(PHASES))
    whole = TraceAnalysis(trace_files={0: path}, window="steps").get_temporal_breakdown()
    hta = TraceAnalysis(trace_files={0: path}, kernel_patterns="hta")
    assert hta.window == "steps"
    assert hta.get_temporal_breakdown()["kernel_time(us)"].iloc[0] == whole[
        "kernel_time(us)"].iloc[0] == 5052 - 600
    built = TraceAnalysis.from_trace(load_trace(trace_files={0: path}, use_cache=False),
                                     kernel_patterns="hta")
    assert built.window == "steps"
    cut = TraceAnalysis(trace_files={0: path}, kernel_patterns="hta", window="auto")
    assert cut.get_temporal_breakdown()["kernel_time(us)"].iloc[0] == 5052 - 2040


def test_operator_and_kernel_tables_take_the_window(tmp_path):
    path = _write(tmp_path, serving_events(PHASES))
    windowed = TraceAnalysis(trace_files={0: path})
    names = set(windowed.get_gpu_kernel_breakdown(visualize=False)[1]["name"])
    assert "warmup" not in names and {"k0", "k1", "k2"} <= names
    whole = TraceAnalysis(trace_files={0: path}, window="steps")
    assert "warmup" in set(whole.get_gpu_kernel_breakdown(visualize=False)[1]["name"])


def test_profiler_steps_win_under_auto(tmp_path):
    """A trace with ProfilerSteps keeps HTA's step window under ``auto``, even with serving
    annotations in it."""
    events = serving_events(PHASES, warmup_kernel=False)
    for n in range(3):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}",
                       "pid": 1, "tid": 1, "ts": 1000 * (n + 1) - 5, "dur": 990, "args": {}})
    path = _write(tmp_path, events)
    auto = TraceAnalysis(trace_files={0: path}).get_temporal_breakdown()
    steps = TraceAnalysis(trace_files={0: path}, window="steps").get_temporal_breakdown()
    assert auto.equals(steps)
    # steps 0 and 1 (the last is dropped): iterations 0 and 1's kernels
    kernels = _kernels(0, "prefill") + _kernels(1, "decode")
    assert auto["kernel_time(us)"].iloc[0] == pytest.approx(_expected(kernels)["kernel_time(us)"])


def test_window_argument_is_checked(tmp_path):
    path = _write(tmp_path, serving_events(PHASES))
    with pytest.raises(ConfigError, match="window must be one of"):
        TraceAnalysis(trace_files={0: path}, window="iteration")


def test_trace_without_iterations_keeps_everything_under_iterations(tmp_path):
    events = [e for e in serving_events(PHASES) if e["cat"] != "user_annotation"]
    path = _write(tmp_path, events)
    a = TraceAnalysis(trace_files={0: path}, window="iterations").get_temporal_breakdown()
    b = TraceAnalysis(trace_files={0: path}, window="steps").get_temporal_breakdown()
    assert a.equals(b)


def test_cli_window_option(tmp_path):
    from click.testing import CliRunner

    from analysis.cli import main

    folder = tmp_path / "t"
    folder.mkdir()
    _write(folder, serving_events(PHASES))
    spans = {}
    for window in ("iterations", "steps"):
        out = CliRunner().invoke(main, ["summary", str(folder), "-q", "--wide", "--window", window,
                                        "--cache-dir", str(tmp_path / "c")],
                                 catch_exceptions=False)
        assert out.exit_code == 0, out.output
        lines = out.output.splitlines()
        header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["rank", "gpu"])
        row = dict(zip(lines[header].split(), lines[header + 1].split(), strict=False))
        spans[window] = float(row["idle_%"])
    # iterations 1..4: 15 µs busy over 3012 µs; whole trace: 71 µs busy over 5052 - 600 µs
    assert spans["iterations"] == pytest.approx(100 * (1 - 15 / 3012), abs=0.01)
    assert spans["steps"] == pytest.approx(100 * (1 - 71 / 4452), abs=0.01)
    # --patterns hta without --window: HTA's whole-trace view
    out = CliRunner().invoke(main, ["summary", str(folder), "-q", "--wide", "--patterns", "hta",
                                    "--cache-dir", str(tmp_path / "c")], catch_exceptions=False)
    lines = out.output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["rank", "gpu"])
    row = dict(zip(lines[header].split(), lines[header + 1].split(), strict=False))
    assert float(row["idle_%"]) == pytest.approx(100 * (1 - 71 / 4452), abs=0.01)


def test_summary_names_the_iteration_window(tmp_path):
    path = _write(tmp_path, serving_events(PHASES))
    text = " ".join(repr(TraceAnalysis(trace_files={0: path})).split())
    assert "Serving iterations analysed #1–4 of 5 (1 warm-up left out)" in text
    assert "Profiler steps analysed" not in text
    text = " ".join(repr(TraceAnalysis(trace_files={0: path}, window="steps")).split())
    assert "Serving iterations analysed" not in text and "Profiler steps analysed" in text


def test_from_trace_takes_the_window(tmp_path):
    from analysis.kineto.loader import load_trace

    path = _write(tmp_path, serving_events(PHASES))
    for window in ("auto", "steps"):
        built = TraceAnalysis.from_trace(load_trace(trace_files={0: path}, use_cache=False),
                                         window=window)
        loaded = TraceAnalysis(trace_files={0: path}, window=window, use_cache=False)
        assert built.window == window
        assert built.get_temporal_breakdown().equals(loaded.get_temporal_breakdown())
    assert TraceAnalysis.from_trace(load_trace(trace_files={0: path}, use_cache=False)
                                    ).get_temporal_breakdown()["kernel_time(us)"].iloc[0] == 3012


def _slow_iteration(events: list[dict], index: int, dur_us: float) -> list[dict]:
    """``events`` with the CPU time of iteration ``index``'s annotation set to ``dur_us``."""
    annotations = [e for e in events if e.get("cat") == "user_annotation"]
    annotations[index]["dur"] = dur_us
    return events


def test_trace_metadata_counts_serving_iterations(tmp_path):
    """Iteration 0 is warm-up (the first of more than two); iteration 2 (a decode of 900 µs, over
    3 × its phase's 100 µs median) is an outlier inside the window: 3 steady of 5, from #1 to #4."""
    path = _write(tmp_path, _slow_iteration(serving_events(PHASES), 2, 900))
    ta = TraceAnalysis(trace_files={0: path})
    meta = ta.get_trace_metadata().iloc[0]
    assert (meta["iterations"], meta["steady_iterations"]) == (5, 3)
    assert (meta["steady_first"], meta["steady_last"]) == (1, 4)
    text = " ".join(repr(ta).split())
    assert "Serving iterations analysed #1–4 of 5 (2 warm-up left out)" in text


def test_trace_metadata_without_serving_iterations(tmp_path):
    """A training trace (ProfilerSteps, no serving annotations): no iterations, and the report's
    metadata table leaves the iteration columns out."""
    from analysis.analyses import get
    from analysis.testing.synthetic import SynthConfig, write_traces

    trace_dir = tmp_path / "train"
    write_traces(SynthConfig(ranks=1, steps=2, kernels_per_step=10, slow_rank=None), trace_dir)
    meta = TraceAnalysis(trace_dir=str(trace_dir)).get_trace_metadata()
    assert meta["iterations"].tolist() == [0] and meta["steady_iterations"].tolist() == [0]
    assert meta["steady_first"].isna().all() and meta["steady_last"].isna().all()
    table = get("trace_metadata").tables(meta)["trace_metadata"]
    assert "iterations" not in table.columns and "start(us)" not in table.columns
    assert "steps" in table.columns
