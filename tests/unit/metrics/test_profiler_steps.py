"""Profiler steps: HTA's step list, the per-rank step table against the synthesiser's truth."""

from __future__ import annotations

import pandas as pd
import pytest
from trace_helpers import analyse, facade

from analysis.kineto.model import EVENT_COLUMNS, RankMeta, RankTrace, Trace
from analysis.metrics.steps.profiler_steps import COLUMNS
from analysis.testing.synthetic import SynthConfig, generate, write_traces


def rank_trace(rows, rank=0) -> RankTrace:
    """A RankTrace from (name, cat, ts_ns, dur_ns, stream, correlation) tuples."""
    df = pd.DataFrame(rows, columns=["name", "cat", "ts", "dur", "stream", "correlation"])
    df = df.assign(pid=1, tid=1, external_id=-1, device=0, wait_on_stream=-1, wait_on_record=-1)
    df = df[list(EVENT_COLUMNS)].astype(EVENT_COLUMNS)
    return RankTrace(meta=RankMeta(rank=rank, source="hand-made"), events=df)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    config = SynthConfig(ranks=2, steps=3, kernels_per_step=10, seed=2, ns_resolution=True)
    out = tmp_path_factory.mktemp("synth-steps")
    write_traces(config, out)
    return generate(config), out


@pytest.mark.parametrize("include_last_step", [False, True])
def test_ground_truth(synthetic, include_last_step):
    job, out = synthetic
    ta = facade(out, include_last=include_last_step)
    df = ta.get_profiler_step_table()  # the whole trace: every step, the last one too
    assert list(df.columns) == COLUMNS
    for rank in job.truth:
        truth = job.truth(rank, True).steps  # the step table covers the whole trace
        mine = df[df["rank"] == rank]
        assert mine["step"].tolist() == [n for n, _, _ in truth]
        assert mine["duration(us)"].tolist() == [d for _, _, d in truth]  # exact: ns kept
        for start, (_, want, _) in zip(mine["start(us)"], truth, strict=True):
            assert start == pytest.approx(want, rel=1e-15)  # epoch µs as float
    # the analysed window leaves the last, partial step out unless asked to keep it
    steps = sorted({n for rank in job.truth for n, _, _ in job.truth(rank, include_last_step).steps})
    assert ta.get_profiler_steps() == steps


def test_cpu_annotation_only_and_hta_step_names():
    us = 1000
    rt = rank_trace([
        ("ProfilerStep#7", "user_annotation", 100 * us, 50 * us, -1, -1),
        ("ProfilerStep#7", "gpu_user_annotation", 120 * us, 60 * us, 7, -1),  # GPU copy
        ("ProfilerStep#6", "user_annotation", 10 * us, 80 * us, -1, -1),
        ("ProfilerStep", "user_annotation", 0, 5 * us, -1, -1),  # no #N: not a step (HTA: -1)
        ("aten::mm", "cpu_op", 11 * us, 5 * us, -1, -1),
    ], rank=3)
    df = analyse(rt).get_profiler_step_table()
    assert df.values.tolist() == [[3, 6, 10.0, 90.0, 0.0, 0.08, 80.0],
                                  [3, 7, 100.0, 150.0, 0.09, 0.14, 50.0]]


def test_rank_without_steps_and_rank_selection():
    with_steps = rank_trace([("ProfilerStep#1", "user_annotation", 0, 1000, -1, -1)], rank=0)
    without = rank_trace([("aten::mm", "cpu_op", 0, 1000, -1, -1)], rank=1)
    trace = Trace({0: with_steps, 1: without})
    assert analyse(trace, rounding="exact").get_profiler_step_table()["rank"].tolist() == [0]
    assert analyse(trace, rounding="exact").get_profiler_step_table(ranks=[1]).empty
    assert list(analyse(trace, rounding="exact").get_profiler_step_table(ranks=[1]).columns) == COLUMNS
    assert analyse(trace).get_profiler_steps() == [1]
