"""The critical path through the facade (registry entries): HTA's call and the per-step summary."""

from __future__ import annotations

import json

import pytest

from analysis import TraceAnalysis
from analysis.testing import critical_path_traces as cpt


@pytest.fixture
def launch_bound_dir(tmp_path):
    doc, truth = cpt.launch_bound(steps=3)
    (tmp_path / "rank0.json").write_text(json.dumps(doc))
    return tmp_path, truth


def test_critical_path_analysis_returns_graph_and_success_like_hta(launch_bound_dir):
    path, truth = launch_bound_dir
    ta = TraceAnalysis(trace_dir=str(path), use_cache=False)
    graph, success = ta.critical_path_analysis(0, annotation="ProfilerStep", instance_id=1)
    assert success and graph.instance == "ProfilerStep#2"
    bd = graph.get_critical_path_breakdown()
    assert list(bd.columns) == ["event_idx", "duration", "type", "s_name", "cat", "pid", "tid",
                                "stream", "bound_by"]  # fmt: skip
    assert bd.groupby("bound_by")["duration"].sum().drop("").to_dict() == truth.bound_by
    assert graph.summary().idxmax() == "gpu_kernel_launch_overhead"


def test_summary_per_step_of_the_analysed_window(launch_bound_dir):
    path, truth = launch_bound_dir
    ta = TraceAnalysis(trace_dir=str(path), use_cache=False)
    df = ta.get_critical_path_summary(visualize=False)
    # the last profiler step is left out of the analysed window, as HTA does
    assert df["instance"].tolist() == ["ProfilerStep#1", "ProfilerStep#2"]
    assert (df["path_length_us"] == cpt.STEP_US).all()
    assert df["gpu_kernel_launch_overhead"].tolist() == pytest.approx([75.0, 75.0])
    head = ta.summary()
    assert head.loc[0, "critical_path_bound_by"] == "gpu_kernel_launch_overhead"
