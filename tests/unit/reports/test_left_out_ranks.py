"""Ranks left out of a result (no GPU events) come back as data -- ``run_many(left_out=)``, the
summary's ``attrs``, ``Section.left_out`` / ``ReportContent.left_out`` -- not as warning text that
the report has to match."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from analysis import registry
from analysis.analyses import get
from analysis.api import TraceAnalysis
from analysis.errors import NoGPUEventsError
from analysis.testing.health_traces import healthy_job, write_job

NOTE = "Idle time breakdown: rank(s) [1] left out: no GPU events"
LAUNCHES = get("kernel_launch_stats").name  # the registry's name (rows carry it)
QUEUE = get("queue_length").name


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory) -> Path:
    """Two ranks; rank 1 kept only its annotations (a CPU-only rank, profiler steps intact)."""
    job = healthy_job(2)
    job[1]["traceEvents"] = [e for e in job[1]["traceEvents"] if e.get("cat") == "user_annotation"]
    out = tmp_path_factory.mktemp("left-out") / "job"
    write_job(job, out)
    return out


@pytest.fixture(scope="module")
def ta(job_dir) -> TraceAnalysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(str(job_dir), use_cache=False, progress=False)


def test_run_many_gives_left_out_ranks_as_rows_not_warnings(ta):
    left_out: list[registry.Failure] = []
    failures: list[registry.Failure] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would fail the test
        out = ta.run_many({"idle_time_breakdown": {}, LAUNCHES: {}, "temporal_breakdown": {}},
                          "all", errors="return", failures=failures, left_out=left_out)
    assert set(out[LAUNCHES]) == {0}  # {rank: launches}: rank 1 left out
    assert out["temporal_breakdown"]["rank"].tolist() == [0, 1]  # needs no GPU event
    assert failures == []  # left out is not "could not run"
    assert {(row.analysis, row.rank) for row in left_out} == {
        ("idle_time_breakdown", 1), (LAUNCHES, 1)}
    assert all(isinstance(row.error, NoGPUEventsError) for row in left_out)
    assert registry.left_out_ranks(left_out) == {"idle_time_breakdown": [1], LAUNCHES: [1]}
    assert registry.left_out_notes(left_out)["idle_time_breakdown"] == NOTE


def test_without_a_list_the_api_still_warns_in_the_same_words(ta):
    with pytest.warns(UserWarning) as caught:
        ta.get_idle_time_breakdown(ranks=[0, 1], visualize=False)
    assert NOTE in [str(w.message) for w in caught]


def test_summary_carries_the_left_out_ranks(ta):
    table = ta.summary()
    assert table["rank"].tolist() == [0, 1]
    assert table.attrs["left_out"][QUEUE] == [1]


def test_report_sections_name_their_left_out_ranks_from_data(ta):
    from analysis.reports.content import build_report

    content = build_report(ta, analyses=["temporal_breakdown", "idle_time_breakdown"])
    idle, temporal = (next(s for s in content.sections if s.key == key)
                      for key in ("idle_time_breakdown", "temporal_breakdown"))
    assert idle.left_out == [1] and idle.notes == [NOTE]
    assert idle.error is None and "idle_time_breakdown_could_not_run" not in idle.tables
    assert temporal.left_out == [] and temporal.notes == []
    assert ("idle_time_breakdown", 1) in {(r.analysis, r.rank) for r in content.left_out}
    assert content.failures == []


def test_cli_summary_prints_the_left_out_ranks_and_exits_0_under_strict(job_dir, tmp_path):
    from analysis.cli import main

    result = CliRunner().invoke(main, ["summary", str(job_dir), "--no-cache", "-q", "--strict"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "[left out] GPU summary (TensorBoard): rank(s) [1] left out: no GPU events" in " ".join(
        result.stdout.split())


def test_cli_summary_names_analyses_that_left_every_rank_out(job_dir, tmp_path):
    """A job whose every rank lacks GPU events: the analyses have no result at all, and the
    summary printed no [left out] line for them (only '–' in the table)."""
    import shutil

    from analysis.cli import main

    cpu_only = tmp_path / "cpu_only"
    cpu_only.mkdir()
    shutil.copy(sorted(job_dir.iterdir())[1], cpu_only)  # rank 1: annotations only
    result = CliRunner().invoke(main, ["summary", str(cpu_only), "--no-cache", "-q"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "[left out] Critical path needs GPU kernels, but rank(s) [1] have no GPU events" \
        in text
