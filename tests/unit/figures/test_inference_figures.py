"""Figures of the serving iterations: the bars are the iteration table's numbers, by phase."""

import json

import pytest

from analysis.api import TraceAnalysis
from analysis.figures import inference_iterations as figures
from analysis.testing.graph_traces import SERVING_KERNELS, serving_events

PHASES = ["prefill", "decode", "decode", "mixed", "decode"]


@pytest.fixture(scope="module")
def iterations(tmp_path_factory):
    path = tmp_path_factory.mktemp("serving") / "serving.json"
    path.write_text(json.dumps({"traceEvents": serving_events(PHASES)}))
    return TraceAnalysis(trace_files={0: str(path)}).get_inference_iterations()


def test_timeline_bars_are_the_iterations_by_phase(iterations):
    fig = figures.draw(iterations)["inference_iterations_timeline"]
    by_phase = {t.name: t for t in fig.data}
    assert set(by_phase) == {"prefill", "decode", "mixed"}
    decode = by_phase["decode"]
    # decode iterations 1, 2, 4: their kernels k0 (1 µs) and k1 (2 µs) at +40 and +50 µs
    assert list(decode.y) == pytest.approx([0.003] * 3)
    assert list(decode.width) == pytest.approx([0.012] * 3)
    # bar centres: GPU start from the first iteration's (1040 µs) plus half the span
    assert list(decode.x) == pytest.approx([(s - 1040) / 1000 + 0.006 for s in (2040, 3040, 5040)])
    assert list(by_phase["prefill"].marker.opacity) == [0.35]  # warm-up, faded


def test_phase_figure_stacks_busy_and_idle(iterations):
    fig = figures.draw(iterations)["inference_phases"]
    parts = {t.name: dict(zip(t.x, t.y, strict=True)) for t in fig.data}
    busy = 3 * sum(k + 1 for k in range(SERVING_KERNELS["decode"]))  # three steady decodes
    assert parts["GPU busy"]["decode"] == pytest.approx(busy / 1000)
    # idle inside a decode iteration: kernels at +40 (1 µs) and +50 (2 µs): 9 µs each
    assert parts["idle inside iterations"]["decode"] == pytest.approx(3 * 9 / 1000)
    assert "prefill" not in parts["GPU busy"]  # its only iteration is warm-up


def test_no_figures_without_iterations(iterations):
    assert figures.draw(iterations.iloc[0:0]) == {}


def test_report_has_the_inference_section(tmp_path):
    from analysis.reports.content import build_report

    path = tmp_path / "serving.json"
    path.write_text(json.dumps({"traceEvents": serving_events(PHASES)}))
    content = build_report(TraceAnalysis(trace_files={0: str(path)}),
                           analyses=["inference_iterations"])
    section = next(s for s in content.sections if s.key == "inference_iterations")
    assert set(section.figures) == {"inference_iterations_timeline", "inference_phases"}
    assert list(section.tables["inference_iterations"]["phase"]) == PHASES
    phases = section.tables["inference_phases"].set_index("phase")
    assert phases.loc["decode", "iterations"] == 3
    # no capture trace: the graph launches are a named row, never an unknown operator
    assert set(section.csv_only["inference_operators"]["name"]) == {"CUDA graph (cudaGraphLaunch)"}
