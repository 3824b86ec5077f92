"""The distributed-training analyses through the facade, on a real Dask LocalCluster (per-rank
extraction on the workers, matching in the caller), their figures and their report section."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.api import TraceAnalysis
from analysis.testing.collectives import CollectiveJobConfig, generate_collective_job


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("collective-job")
    job = generate_collective_job(CollectiveJobConfig(ranks=4))
    job.write(out)
    return out, job


def open_local(path, **kw):
    return TraceAnalysis(str(path), use_cache=False, progress=False, **kw)


def test_facade_methods_return_the_truth(job_dir):
    path, job = job_dir
    ta = open_local(path)
    got = ta.get_collectives(visualize=False)
    truth = pd.DataFrame(job.collectives)
    np.testing.assert_allclose(got["wait_us"], truth["wait_us"])
    np.testing.assert_allclose(got["busbw_gbps"], truth["busbw_gbps"])
    s = ta.get_stragglers(visualize=False)
    assert s["rank"].tolist() == [t["rank"] for t in job.stragglers]
    for col in ("wait_caused_us", "wait_caused_per_step_us", "wait_caused_pct_of_step"):
        np.testing.assert_allclose(s[col], [t[col] for t in job.stragglers])
    steps = ta.get_step_breakdown(visualize=False)
    np.testing.assert_allclose(steps["step_margin_us"], [t["step_margin_us"] for t in job.steps])
    summary = ta.get_collective_summary()
    assert set(summary["type"]) == {"all_reduce", "all_gather", "all_to_all"}
    # a subset of ranks: the pair groups still match, the world group has 2 of 4 ranks
    two = ta.get_collectives(visualize=False, ranks=[2, 3])
    assert set(two["rank"]) == {2, 3}


def test_dask_engine_gives_the_same_tables(job_dir, dask_client):
    path, _ = job_dir
    local = open_local(path)
    remote = open_local(path, client=dask_client, timeout=120)  # the session's cluster
    for method in ("get_collectives", "get_stragglers", "get_step_breakdown"):
        pd.testing.assert_frame_equal(getattr(remote, method)(visualize=False),
                                      getattr(local, method)(visualize=False))
    pd.testing.assert_frame_equal(remote.get_collective_summary(), local.get_collective_summary())


def test_report_has_the_sections(job_dir):
    from analysis.reports.content import build_report

    path, _ = job_dir
    content = build_report(open_local(path), analyses=["collectives", "step_breakdown"])
    titles = [s.title for s in content.sections]
    assert titles == ["Collectives and stragglers", "Per-step breakdown across ranks"]
    first = content.sections[0]
    assert {"collective_summary", "stragglers"} <= set(first.tables)
    assert "collectives" in first.csv_only
    assert "step_time_heatmap" in content.sections[1].figures
    assert {"times_last", "wait_caused_per_step_us"} <= set(content.headline.columns)
