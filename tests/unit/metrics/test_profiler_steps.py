"""Profiler steps: HTA's step list, the per-rank step table against the synthesiser's truth."""

from __future__ import annotations

import pandas as pd
import pytest
from hta_oracle import hta_analysis
from trace_helpers import load_dir, parity_dirs

from analysis.kineto.model import EVENT_COLUMNS, RankMeta, RankTrace, Trace
from analysis.kineto.window import profiler_step_window
from analysis.metrics.profiler_steps import COLUMNS, profiler_steps, profiler_steps_rank, step_ids
from analysis.testing.synthetic import SynthConfig, generate, write_traces


def rank_trace(rows, rank=0) -> RankTrace:
    """A RankTrace from (name, cat, ts_ns, dur_ns, stream, correlation) tuples."""
    df = pd.DataFrame(rows, columns=["name", "cat", "ts", "dur", "stream", "correlation"])
    df = df.assign(pid=1, tid=1, external_id=-1, device=0)
    df = df[list(EVENT_COLUMNS)].astype(EVENT_COLUMNS)
    return RankTrace(meta=RankMeta(rank=rank, source="hand-made"), events=df)


@pytest.mark.parametrize("trace_dir", parity_dirs(), indirect=True)
def test_hta_parity(trace_dir):
    theirs = hta_analysis(str(trace_dir)).get_profiler_steps()
    window = profiler_step_window(load_dir(trace_dir))
    assert step_ids(profiler_steps(window)) == [int(s) for s in theirs]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    config = SynthConfig(ranks=2, steps=3, kernels_per_step=10, seed=2, ns_resolution=True)
    out = tmp_path_factory.mktemp("synth-steps")
    write_traces(config, out)
    return generate(config), load_dir(out)


@pytest.mark.parametrize("include_last_step", [False, True])
def test_ground_truth(synthetic, include_last_step):
    job, full = synthetic
    trace = profiler_step_window(full, include_last_profiler_step=include_last_step)
    df = profiler_steps(trace)
    assert list(df.columns) == COLUMNS
    for rank in job.truth:
        truth = job.truth(rank, include_last_step).steps
        mine = df[df["rank"] == rank]
        assert mine["step"].tolist() == [n for n, _, _ in truth]
        assert mine["duration(us)"].tolist() == [d for _, _, d in truth]  # exact: ns kept
        for start, (_, want, _) in zip(mine["start(us)"], truth, strict=True):
            assert start == pytest.approx(want, rel=1e-15)  # epoch µs as float
    # the last, partial step is in the full trace only
    assert len(profiler_steps(full)) == len(profiler_steps(trace)) + (0 if include_last_step else 2)


def test_cpu_annotation_only_and_hta_step_names():
    us = 1000
    rt = rank_trace([
        ("ProfilerStep#7", "user_annotation", 100 * us, 50 * us, -1, -1),
        ("ProfilerStep#7", "gpu_user_annotation", 120 * us, 60 * us, 7, -1),  # GPU copy
        ("ProfilerStep#6", "user_annotation", 10 * us, 80 * us, -1, -1),
        ("ProfilerStep", "user_annotation", 0, 5 * us, -1, -1),  # no #N: not a step (HTA: -1)
        ("aten::mm", "cpu_op", 11 * us, 5 * us, -1, -1),
    ], rank=3)
    df = profiler_steps_rank(rt)
    # relative to the rank's first event (the "ProfilerStep" at 0 here)
    assert df.values.tolist() == [
        [3, 6, 10.0, 90.0, 80.0, 10.0, 90.0],
        [3, 7, 100.0, 150.0, 50.0, 100.0, 150.0],
    ]


def test_relative_times_from_the_jobs_first_event():
    """Absolute epoch µs stay for joins; *_rel(us) count from the earliest event of any rank, exactly."""
    epoch = 1_732_000_000_000_000_123  # ns: the float µs of this lose the last digits
    rank0 = rank_trace([
        ("aten::mm", "cpu_op", epoch + 500, 10, -1, -1),  # rank 0's first event
        ("ProfilerStep#1", "user_annotation", epoch + 2_001, 3_000_500, -1, -1),
    ], rank=0)
    rank1 = rank_trace([
        ("aten::mm", "cpu_op", epoch, 10, -1, -1),  # the job's first event
        ("ProfilerStep#1", "user_annotation", epoch + 1_000, 2_000_001, -1, -1),
    ], rank=1)
    df = profiler_steps(Trace({0: rank0, 1: rank1}))
    assert df["start_rel(us)"].tolist() == [2.001, 1.0]
    assert df["end_rel(us)"].tolist() == [3002.501, 2001.001]
    assert df["start(us)"].iloc[0] == pytest.approx(1_732_000_000_000_000.123 + 2.001, abs=0.25)
    # one rank alone: relative to its own first event
    assert profiler_steps(Trace({0: rank0, 1: rank1}), ranks=[0])["start_rel(us)"].tolist() == [1.501]


def test_rank_without_steps_and_rank_selection():
    with_steps = rank_trace([("ProfilerStep#1", "user_annotation", 0, 1000, -1, -1)], rank=0)
    without = rank_trace([("aten::mm", "cpu_op", 0, 1000, -1, -1)], rank=1)
    trace = Trace({0: with_steps, 1: without})
    assert profiler_steps(trace)["rank"].tolist() == [0]
    assert profiler_steps(trace, ranks=[1]).empty
    assert list(profiler_steps(trace, ranks=[1]).columns) == COLUMNS
    assert step_ids(profiler_steps(trace, ranks=None)) == [1]
