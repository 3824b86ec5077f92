"""Critical-path figures: the stacked shares per step and the Perfetto overlay trace."""

from __future__ import annotations

import gzip
import json

import pytest

from analysis.figures.critical_path import (
    critical_path_shares,
    draw,
    overlay_trace,
    write_overlay_trace,
)
from analysis.kineto.parse import parse_trace_bytes
from analysis.metrics.critical_path.critical_path import combine, critical_path_rank
from analysis.testing import critical_path_traces as cpt


def graphs(scenario: str, steps: int = 2):
    doc, truth = cpt.SCENARIOS[scenario](steps)
    rt = parse_trace_bytes(json.dumps(doc).encode(), f"{scenario}.json")
    return critical_path_rank(rt), truth


def test_stacked_bars_show_each_category_of_each_step():
    gs, truth = graphs("gpu_bound")
    fig = critical_path_shares(combine({0: gs}))
    by_name = {t.name: t for t in fig.data}
    assert set(by_name) == set(truth.bound_by)
    for name, us in truth.bound_by.items():
        assert list(by_name[name].y) == pytest.approx([us / cpt.STEP_US * 100] * 2)
        assert list(by_name[name].x) == ["ProfilerStep#1", "ProfilerStep#2"]
    assert fig.layout.barmode == "stack"
    assert set(draw(combine({0: gs}))) == {"critical_path"}


def test_several_ranks_are_labelled_and_empty_input_says_so():
    gs, _ = graphs("cpu_bound")
    fig = critical_path_shares(combine({0: gs, 3: gs}))
    assert list(fig.data[0].x)[-1] == "rank 3 · ProfilerStep#2"
    empty = critical_path_shares(combine({}))
    assert "No critical path" in str(empty.layout.annotations[0].text)


def test_overlay_marks_the_path_events_and_its_launch_and_sync_arrows(tmp_path):
    gs, _ = graphs("launch_bound", steps=1)
    (g,) = gs.values()
    trace = overlay_trace(g)
    critical = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["args"].get("critical")]
    assert len(critical) == len(g.critical_path_events_set)
    flows = [e for e in trace["traceEvents"] if e["ph"] in "sf"]
    # 5 launches and 5 stream syncs on the path, each an arrow of two flow events
    cats = [e["cat"] for e in flows if e["ph"] == "s"]
    assert cats.count("critical_path_kernel_launch_delay") == 5
    assert cats.count("critical_path_sync_dependency") == 5
    path = write_overlay_trace(g, tmp_path / "overlay.json.gz", only_critical=True)
    written = json.loads(gzip.decompress(path.read_bytes()))
    assert sum(e["ph"] == "X" for e in written["traceEvents"]) == len(critical)


def test_many_steps_turn_the_bars_horizontal_so_labels_do_not_collide():
    from analysis.figures.style import MAX_VERTICAL_CATEGORIES

    gs, _ = graphs("cpu_bound", steps=4)
    table = combine({r: gs for r in range(4)})  # 16 bars
    assert len(table) > MAX_VERTICAL_CATEGORIES
    fig = critical_path_shares(table)
    assert all(t.orientation == "h" for t in fig.data)
    assert list(fig.data[0].y)[-1] == "rank 3 · ProfilerStep#4"
    assert fig.layout.height >= 22 * len(table)
