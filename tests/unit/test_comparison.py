"""compare(base, test) on synthetic pairs whose every delta is known (analysis.testing.trace_pairs)."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

import analysis
from analysis import TraceAnalysis
from analysis.comparison import match_ranks
from analysis.errors import ConfigError
from analysis.metrics.compare.trace_diff import BREAKDOWN_ROWS, NO_OPERATOR
from analysis.testing.trace_pairs import (
    GEMM,
    Op,
    Program,
    base_program,
    changed_pair,
    identical_pair,
)


def _load(path) -> TraceAnalysis:
    return TraceAnalysis(path, use_cache=False, progress=False, max_workers=1)


@pytest.fixture(scope="module")
def changed(tmp_path_factory):
    pair = changed_pair()
    base_dir, test_dir = pair.write(tmp_path_factory.mktemp("changed"))
    return pair, analysis.compare(_load(base_dir), _load(test_dir))


@pytest.fixture(scope="module")
def identical(tmp_path_factory):
    pair = identical_pair()
    base_dir, test_dir = pair.write(tmp_path_factory.mktemp("identical"))
    return analysis.compare(_load(base_dir), _load(test_dir))


def test_breakdown_equals_the_truth_per_step(changed):
    pair, comparison = changed
    base, test = pair.base.truth()["breakdown"], pair.test.truth()["breakdown"]
    table = comparison.breakdown().set_index("category")
    assert list(table.index) == list(BREAKDOWN_ROWS)
    for cat in BREAKDOWN_ROWS:
        assert table.at[cat, "base_us"] == base[cat], cat
        assert table.at[cat, "test_us"] == test[cat], cat
        assert table.at[cat, "diff_us"] == test[cat] - base[cat], cat
    # the parts of the step time add up to its change (the waterfall closes)
    parts = table.loc[list(BREAKDOWN_ROWS[1:]), "diff_us"].sum()
    assert parts == table.at["step_time", "diff_us"]
    # the all-reduce is now 28 µs exposed per step, where it was hidden
    assert table.at["exposed_communication", "diff_us"] == 28
    assert comparison.steps().to_dict("records") == [
        {"base_rank": 0, "test_rank": 0, "base_steps": 3, "test_steps": 5}]


def test_kernel_deltas_equal_the_truth(changed):
    pair, comparison = changed
    base, test = pair.base.truth()["kernels"], pair.test.truth()["kernels"]
    table = comparison.kernels().set_index(["kernel_type", "name"])
    assert set(table.index) == set(base) | set(test)
    for key in table.index:
        b_count, b_us = base.get(key, (0, 0))
        t_count, t_us = test.get(key, (0, 0))
        row = table.loc[key]
        assert (row["base_count"], row["test_count"]) == (b_count, t_count), key
        assert (row["base_time_us"], row["test_time_us"]) == (b_us, t_us), key
        assert row["diff_time_us"] == t_us - b_us
    gemm = table.loc[("COMPUTATION", GEMM)]
    assert gemm["diff_pct"] == 100.0 and gemm["change"] == "slower"
    # sorted by the size of the change: the GEMM's +100 µs comes first
    assert comparison.kernels().iloc[0]["name"] == GEMM


def test_operator_deltas_equal_the_truth_with_exclusive_time(changed):
    pair, comparison = changed
    base, test = pair.base.truth()["operators"], pair.test.truth()["operators"]
    table = comparison.operators().set_index("operator")
    assert NO_OPERATOR not in table.index  # every kernel was launched inside an operator
    assert set(table.index) == set(base) | set(test)
    for name in table.index:
        b_count, b_us = base.get(name, (0, 0))
        t_count, t_us = test.get(name, (0, 0))
        assert (table.at[name, "base_count"], table.at[name, "test_count"]) == (b_count, t_count)
        assert (table.at[name, "base_time_us"], table.at[name, "test_time_us"]) == (b_us, t_us)
    # nested operators are not counted twice: aten::linear wraps aten::addmm and launches nothing
    assert table.at["aten::linear", "base_time_us"] == 0
    assert table.at["aten::addmm", "base_time_us"] == 100
    assert table["base_time_us"].sum() == sum(us for _, us in base.values())
    change = table["change"].astype(str)
    assert change["aten::mul"] == "added"
    assert change["aten::gelu"] == "removed"
    assert change["aten::addmm"] == "slower"
    assert change["aten::add"] == "unchanged"
    assert change["aten::linear"] == "unchanged"


def test_identical_runs_give_zero_deltas(identical):
    for table in (identical.breakdown(), identical.breakdown(per_rank=True)):
        assert (table["diff_us"] == 0).all()
    for table in (identical.kernels(), identical.operators()):
        assert (table["diff_time_us"] == 0).all() and (table["diff_count"] == 0).all()
        assert (table["change"] == "unchanged").all()
    assert identical.notes == []


def test_min_change_pct_is_the_noise_threshold(tmp_path):
    base = base_program()
    ops = tuple(Op(o.name, o.gpu_name, o.gpu_us + 1, o.kind, o.parent)
                if o.name == "aten::addmm" else o for o in base.ops)  # GEMM 100 → 101 µs: +1 %
    base.write(tmp_path / "base")
    Program(ops=ops, steps=base.steps).write(tmp_path / "test")
    b, t = _load(tmp_path / "base"), _load(tmp_path / "test")
    assert b.compare(t, min_change_pct=5).operators().set_index("operator").at[
        "aten::addmm", "change"] == "unchanged"
    assert b.compare(t, min_change_pct=0.5).operators().set_index("operator").at[
        "aten::addmm", "change"] == "slower"


def test_different_gpus_say_to_compare_operators(tmp_path):
    base_program().write(tmp_path / "base")
    Program(ops=base_program().ops, gpu="AMD Instinct MI300X").write(tmp_path / "test")
    notes = _load(tmp_path / "base").compare(_load(tmp_path / "test")).notes
    assert len(notes) == 1 and "operator level" in notes[0] and "MI300X" in notes[0]


def test_rank_matching():
    assert match_ranks([0, 1, 2], [1, 2, 3]) == [(1, 1), (2, 2)]
    assert match_ranks([0, 1], [0, 1], ranks=1) == [(1, 1)]
    with pytest.warns(UserWarning, match="share no rank number"):
        assert match_ranks([3], [5]) == [(3, 5)]
    with pytest.raises(ConfigError, match="share no rank"):
        match_ranks([0, 1], [2, 3])
    with pytest.raises(ConfigError, match=r"ranks \[4\] are not loaded in both runs"):
        match_ranks([0, 1], [0, 1], ranks=[4])


def test_bad_min_change_pct(tmp_path):
    base_program().write(tmp_path / "a")
    ta = _load(tmp_path / "a")
    with pytest.raises(ConfigError, match="min_change_pct"):
        ta.compare(ta, min_change_pct=-1)


def test_compare_is_exported_and_labels_html(changed):
    _, comparison = changed
    assert analysis.compare.__module__ == "analysis.comparison"
    assert isinstance(comparison, analysis.TraceComparison)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert isinstance(comparison.compare_traces(), pd.DataFrame)


def test_dask_engine_compares_like_local(tmp_path, dask_client):
    base_dir, test_dir = changed_pair().write(tmp_path)
    local = analysis.compare(_load(base_dir), _load(test_dir))

    def remote(path):  # on the session's cluster (tests/conftest.py)
        return TraceAnalysis(path, use_cache=False, progress=False, client=dask_client)

    on_dask = analysis.compare(remote(base_dir), remote(test_dir))
    for name, table in local.tables().items():
        pd.testing.assert_frame_equal(on_dask.tables()[name], table, obj=name)
    pd.testing.assert_frame_equal(on_dask.compare_traces(control_iteration=[10, 11]),
                                  local.compare_traces(control_iteration=[10, 11]))


def test_zero_threshold_still_calls_no_change_unchanged(tmp_path):
    base_dir, test_dir = identical_pair().write(tmp_path)
    comparison = analysis.compare(_load(base_dir), _load(test_dir), min_change_pct=0)
    assert (comparison.operators()["change"] == "unchanged").all()
    assert (comparison.kernels()["change"] == "unchanged").all()


def test_hta_arguments_are_checked(changed):
    _, comparison = changed
    with pytest.raises(ConfigError, match=r"invalid control iteration \[99\]: the trace has"):
        comparison.compare_traces(control_iteration=99)
    with pytest.raises(ConfigError, match=r"invalid test rank \[3\]"):
        comparison.ops_diff(test_rank=3)
    with pytest.raises(ConfigError, match="device_type must be one of"):
        comparison.compare_traces(device_type="TPU")
    # HTA's defaults: the first iteration of each run; both runs have steps 10..
    default = comparison.compare_traces()
    assert default.at["ProfilerStep#10", "Control_counts"] == 1
    assert "ProfilerStep#11" not in default.index


def test_a_run_without_gpu_work_in_the_window_is_noted(tmp_path, identical):
    """A CPU-only run compared with a GPU run showed every row 'gone' and its step as idle time,
    with no word: a note says which ranks ran no kernel."""
    import json

    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1,
               "tid": 1, "ts": 100 * i, "dur": 100, "args": {}} for i in range(3)]
    events += [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                "ts": 100 * i + 10, "dur": 50, "args": {}} for i in range(3)]
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "rank0.json").write_text(json.dumps(
        {"schemaVersion": 1, "distributedInfo": {"rank": 0}, "traceEvents": events}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = _load(str(tmp_path / "cpu"))
    compared = analysis.compare(identical.base, cpu)
    assert any(n.startswith("test: rank(s) [0] ran no GPU kernel") for n in compared.notes)
    assert not any("ran no GPU kernel" in n for n in identical.notes)
