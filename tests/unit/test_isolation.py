"""One failing (analysis, rank) never takes the report down (issue 26): the boundary in
``registry.run_on_rank``/``combine_parts``, the "could not run" table of the report and
``summary``, ``--strict`` and ``--debug``; and the shapes of real traces that broke analyses."""

from __future__ import annotations

import dataclasses
import pickle
import warnings

import pandas as pd
import pytest
from click.testing import CliRunner

from analysis import analyses as catalogue
from analysis import registry
from analysis.api import TraceAnalysis
from analysis.cli import main
from analysis.errors import AnalysisFailedError, TraceAnalysisError
from analysis.metrics.gpu_time import temporal_breakdown
from analysis.testing.edge_traces import gloo_cpu_job, kernels_outside_steps, no_kernels_in_window
from analysis.testing.health_traces import healthy_job, write_job


def _broken_on_rank_1(rt, *, patterns="default"):
    if rt.rank == 1:
        return {}["a bug"]  # KeyError: not the project's error
    return temporal_breakdown.temporal_breakdown_rank(rt, patterns=patterns)


@pytest.fixture
def broken(monkeypatch, tmp_path):
    """A 2-rank job whose temporal breakdown raises a foreign KeyError on rank 1."""
    spec = catalogue.get("temporal_breakdown")
    monkeypatch.setitem(catalogue.CATALOGUE.specs, "temporal_breakdown",
                        dataclasses.replace(spec, rank_step=_broken_on_rank_1))
    write_job(healthy_job(2), tmp_path / "job")
    return tmp_path / "job"


def _open(path) -> TraceAnalysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(trace_dir=str(path), use_cache=False, progress=False)


def test_a_foreign_exception_is_a_row_and_the_other_ranks_still_count(broken):
    ta = _open(broken)
    failures: list[registry.Failure] = []
    out = ta.run_many({"temporal_breakdown": {}, "kernel_breakdown": {}}, "all", errors="return",
                      failures=failures)
    assert out["temporal_breakdown"]["rank"].tolist() == [0]  # rank 0's result is kept
    assert not isinstance(out["kernel_breakdown"], Exception)  # the batch's other analysis ran
    [failure] = failures
    assert (failure.analysis, failure.rank, failure.is_bug) == ("temporal_breakdown", 1, True)
    assert "KeyError" in failure.message and "\n" not in failure.message
    assert "Traceback" in failure.error.traceback_text
    table = registry.failures_table(failures)
    assert table.to_dict("records") == [
        {"analysis": "temporal_breakdown", "rank": "1", "message": failure.message}]
    # the API (errors raised) gives the project's error, not the KeyError
    with pytest.raises(AnalysisFailedError, match="temporal_breakdown on rank 1 failed"):
        ta.get_temporal_breakdown(visualize=False)


def test_collect_failures_leaves_the_failed_rank_out_of_a_get_method(broken):
    ta = _open(broken)
    with ta.collect_failures() as failures:
        table = ta.get_temporal_breakdown(visualize=False)
    assert table["rank"].tolist() == [0]
    assert [(f.analysis, f.rank, f.is_bug) for f in failures] == [("temporal_breakdown", 1, True)]
    with pytest.raises(AnalysisFailedError):  # outside the block, the failure is raised again
        ta.get_temporal_breakdown(visualize=False)


def test_analysis_failed_error_survives_pickling():
    err = AnalysisFailedError("critical_path", 3, "IndexError", "boolean index", "Traceback ...")
    back = pickle.loads(pickle.dumps(err))
    assert isinstance(back, TraceAnalysisError)
    assert (back.analysis, back.rank, back.traceback_text, str(back)) == (
        "critical_path", 3, "Traceback ...", str(err))


def test_summary_lists_what_could_not_run_and_exits_0(broken):
    result = CliRunner().invoke(main, ["summary", str(broken), "-q", "--no-cache"])
    assert result.exit_code == 0, result.output
    tail = result.stdout[result.stdout.index("could not run:"):]
    assert "temporal_breakdown" in tail and "KeyError" in tail
    assert "warning: could not run temporal_breakdown (rank 1)" in result.stderr
    assert "Traceback" not in result.output
    strict = CliRunner().invoke(main, ["summary", str(broken), "-q", "--no-cache", "--strict"])
    assert strict.exit_code == 1
    debug = CliRunner().invoke(main, ["--debug", "summary", str(broken), "-q", "--no-cache"])
    assert debug.exit_code == 0 and "Traceback" in debug.stderr and "KeyError" in debug.stderr


def test_report_shows_the_failure_in_its_section_and_writes_the_rest(broken, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["report", str(broken), "-o", str(out), "-f", "html", "-q",
                                       "--no-cache"])
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(out / "tables" / "temporal_breakdown_could_not_run.csv")
    assert rows[["analysis", "rank"]].values.tolist() == [["temporal_breakdown", 1]]
    assert pd.read_csv(out / "tables" / "temporal_breakdown.csv")["rank"].tolist() == [0]
    assert (out / "tables" / "kernel_breakdown.csv").is_file()
    assert "temporal_breakdown_could_not_run" in (out / "index.html").read_text()
    strict = CliRunner().invoke(main, ["report", str(broken), "-o", str(out), "-f", "html", "-q",
                                       "--no-cache", "--strict"])
    assert strict.exit_code == 1


def test_check_runs_the_other_ranks(monkeypatch, broken):
    from analysis.metrics.health import trace_health

    def health(rt, *, patterns="default"):
        if rt.rank == 1:
            raise ZeroDivisionError("x")
        return trace_health.trace_health_rank(rt, patterns=patterns)

    spec = catalogue.get("trace_health")
    monkeypatch.setitem(catalogue.CATALOGUE.specs, "trace_health",
                        dataclasses.replace(spec, rank_step=health))
    result = CliRunner().invoke(main, ["check", str(broken), "--no-cache", "-q"])
    assert result.exit_code == 0, result.output
    assert "could not run trace_health (rank 1)" in result.stderr


# ------------------------------------------------------------------- shapes from real traces
def test_critical_path_of_a_window_without_events_is_empty_with_a_reason(tmp_path):
    write_job(no_kernels_in_window(), tmp_path)
    graphs, ok = _open(tmp_path).run_many({"critical_path_graph": {}}, "all")["critical_path_graph"]
    assert not ok and len(graphs) == 2  # the 2 complete steps of 3
    for g in graphs.values():
        assert g.critical_path_nodes == [] and not g.success and "empty path" in g.reason


def test_critical_path_summary_of_a_window_without_a_path_is_unknown_not_zero(tmp_path):
    """The summary row of a window without a path (HTA's graph of a window holding only a
    ``Stream Wait Event``: two nodes, no edge): NaN length and shares (they sum to 100 where there
    is a path), and a warning with the reason; before, 0 everywhere."""
    import json

    from analysis.metrics.critical_path.critical_path import BOUND_BY, CriticalPathWarning
    from analysis.testing.critical_path_traces import edgeless

    doc, _ = edgeless()
    (tmp_path / "rank0.json").write_text(json.dumps(doc))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ta = TraceAnalysis(str(tmp_path), use_cache=False, progress=False, kernel_patterns="hta")
    with pytest.warns(CriticalPathWarning, match="no critical path: .*no edge"):
        summary = ta.get_critical_path_summary(annotation="", visualize=False)
    assert len(summary) == 1 and summary["nodes"].item() == 2
    assert summary["path_length_us"].isna().all() and summary[list(BOUND_BY)].isna().all().all()


def test_critical_path_of_a_rank_without_gpu_events_in_its_steps_says_why(tmp_path):
    from analysis.errors import NoGPUEventsError

    write_job(no_kernels_in_window(), tmp_path)
    with pytest.raises(NoGPUEventsError, match="none inside the analysed window"):
        _open(tmp_path).get_critical_path_summary(visualize=False)


def test_critical_path_on_kernels_without_stream_args_is_no_gpu_events(tmp_path):
    """A rocprof-converted trace whose kernels have no stream or correlation arg (the analyses
    count none of them) and no CPU event: the critical path says so as the other GPU analyses
    do, instead of a row of zeros."""
    import json

    from analysis.errors import NoGPUEventsError

    events = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "ts": 1000 + 100 * i, "dur": 50,
               "pid": 0, "tid": 0} for i in range(5)]
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ta = TraceAnalysis(str(path), use_cache=False, progress=False)
        with pytest.raises(NoGPUEventsError, match="no stream or correlation"):
            ta.get_critical_path_summary(annotation="", visualize=False)


def test_critical_path_with_a_stream_only_outside_the_steps(tmp_path):
    write_job(kernels_outside_steps(), tmp_path)
    graphs, ok = _open(tmp_path).run_many({"critical_path_graph": {}}, "all")["critical_path_graph"]
    assert ok and all(g.reason == "" for g in graphs.values())
    # stream 8's kernels (after the last step, unlaunched) are in no graph: only stream 7's GEMM
    for g in graphs.values():
        kernels = g.graph.events.iloc[sorted(set(g.graph.node_event.tolist()))]
        assert set(kernels.loc[kernels["stream"] >= 0, "stream"]) == {7}


def test_cpu_only_gloo_findings_name_the_straggler_and_nothing_about_gpus(tmp_path):
    write_job(gloo_cpu_job(ranks=4, slow_rank=2), tmp_path)
    table = _open(tmp_path).findings()
    assert len(table) == 1
    row = table.iloc[0]
    assert row["title"].startswith("Rank 2 is a straggler")
    assert "gpu" not in " ".join(str(v) for v in row.to_dict().values()).lower()
    # what it claims (the suggestion may still name the input pipeline as a cause to look at)
    assert "data load" not in f"{row['title']} {row['detail']} {row['evidence']}".lower()
    assert "data_loading_stall" in table.attrs["not_run"]
    not_run = table.attrs["not_run"]
    for rule in ("gpu_idle_host_bound", "data_loading_stall", "low_bus_bandwidth",
                 "host_to_device_copies", "far_from_roofline"):
        assert "no GPU kernels" in not_run[rule]
    assert "- -" not in " ".join(not_run.values())
