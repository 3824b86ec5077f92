"""Analyses that run one rank step (collectives, collective summary and stragglers read one
collectives table per rank) compute it once per rank and options (``registry.run_on_rank``'s
``shared_steps``), in one batch and across the facade's calls; a failure is each analysis's own."""

from __future__ import annotations

import dataclasses
import warnings
from collections import Counter

import pytest

from analysis import analyses as catalogue
from analysis.api import TraceAnalysis
from analysis.errors import AnalysisFailedError
from analysis.metrics.distributed import collectives
from analysis.testing.health_traces import healthy_job, write_job

SHARING = ("collectives", "collective_summary", "stragglers")


def test_the_catalogue_knows_which_rank_steps_are_shared():
    shared = catalogue.CATALOGUE.shared_steps
    assert collectives.collectives_rank in shared
    assert catalogue.get("temporal_breakdown").rank_step not in shared  # one analysis runs it
    for step in shared:
        assert sum(s.rank_step is step for s in catalogue.CATALOGUE.specs.values()) > 1


def _counting(monkeypatch, step):
    """Every sharing analysis's rank step replaced by one counting wrapper of ``step``."""
    calls: Counter = Counter()

    def counted(rt, **kwargs):
        calls[rt.rank] += 1
        return step(rt, **kwargs)

    for name in SHARING:
        spec = catalogue.get(name)
        monkeypatch.setitem(catalogue.CATALOGUE.specs, name,
                            dataclasses.replace(spec, rank_step=counted))
    monkeypatch.setattr(catalogue.CATALOGUE, "shared_steps",
                        catalogue.CATALOGUE.shared_steps | {counted})
    return calls


def _open(path, **kwargs) -> TraceAnalysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(trace_dir=str(path), use_cache=False, progress=False, **kwargs)


@pytest.fixture
def job(tmp_path):
    write_job(healthy_job(2), tmp_path / "job")
    return tmp_path / "job"


def test_a_shared_rank_step_runs_once_per_rank_for_every_analysis_that_reads_it(monkeypatch, job):
    expected = _open(job).run_many({n: {} for n in SHARING}, "all")
    calls = _counting(monkeypatch, collectives.collectives_rank)
    ta = _open(job)
    out = ta.run_many({n: {} for n in SHARING}, "all")
    assert calls == {0: 1, 1: 1}
    for name in SHARING:  # the same answers as each computing its own
        assert out[name].equals(expected[name]), name
    assert not out["collectives"].empty
    # the facade's later calls on the held ranks reuse it too
    ta.get_stragglers(visualize=False)
    ta.get_collective_summary()
    assert calls == {0: 1, 1: 1}


def test_another_context_computes_the_shared_step_again(monkeypatch, job):
    calls = _counting(monkeypatch, collectives.collectives_rank)
    ta = _open(job)
    ta.run_many({"collectives": {}, "stragglers": {}}, "all")
    assert calls == {0: 1, 1: 1}
    # the same step with other patterns (another engine context) is another value
    ta2 = _open(job, kernel_patterns="hta")
    ta2.run_many({"collectives": {}, "stragglers": {}}, "all")
    assert calls == {0: 2, 1: 2}


def test_a_failing_shared_step_fails_each_analysis_under_its_own_name(monkeypatch, job):
    def broken(rt, **kwargs):
        if rt.rank == 1:
            return {}["a bug"]
        return collectives.collectives_rank(rt, **kwargs)

    calls = _counting(monkeypatch, broken)
    ta = _open(job)
    failures: list = []
    out = ta.run_many({n: {} for n in SHARING}, "all", errors="return", failures=failures)
    assert sorted((f.analysis, f.rank) for f in failures) == sorted((n, 1) for n in SHARING)
    for f in failures:
        assert isinstance(f.error, AnalysisFailedError)
        assert f"{f.analysis} on rank 1 failed" in f.message
    assert calls[0] == 1  # rank 0's table was shared
    assert calls[1] == len(SHARING)  # a failure is not memoised: each analysis ran it
    assert out["collectives"]["rank"].eq(0).all()
