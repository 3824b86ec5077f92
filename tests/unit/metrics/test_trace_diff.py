"""The per-rank profile of a comparison (analysis.metrics.compare.trace_diff) on hand-built traces."""

from __future__ import annotations

import json

import pandas as pd

from analysis.kineto.parse import parse_trace_bytes
from analysis.metrics.compare.trace_diff import (
    BREAKDOWN_ROWS,
    CATEGORIES,
    operator_deltas,
    trace_diff_rank,
)
from analysis.testing.trace_pairs import base_program


def _rank(doc: dict):
    return parse_trace_bytes(json.dumps(doc).encode(), "hand-made.json")


def test_operators_are_split_by_recorded_shapes_when_present():
    rt = _rank(base_program(steps=3).trace())
    ev = rt.events
    addmm = ev.index[ev["name"] == "aten::addmm"]
    assert len(addmm) == 4  # 3 steps + the partial one (no window here)
    dims = ["[[8,16],[16,4]]"] + ["[[4,16],[16,4]]"] * 3
    plain = trace_diff_rank(rt).operators
    rt.extras = {"op_shapes": pd.DataFrame(
        {"input_dims": dims, "input_types": ["[\"float\",\"float\"]"] * 4}, index=addmm)}
    shaped = trace_diff_rank(rt, shapes=True).operators
    assert (plain["input_dims"] == "").all()
    # shapes attached to the rank (by another analysis) are not read unless asked for
    pd.testing.assert_frame_equal(trace_diff_rank(rt).operators, plain)
    rows = shaped[shaped["operator"] == "aten::addmm"].set_index("input_dims")
    assert rows["count"].to_dict() == {"[[4,16],[16,4]]": 3, "[[8,16],[16,4]]": 1}
    assert rows["gpu_time_ns"].to_dict() == {"[[4,16],[16,4]]": 300_000, "[[8,16],[16,4]]": 100_000}
    # operators without recorded shapes keep an empty key, and the totals do not change
    assert shaped["gpu_time_ns"].sum() == plain["gpu_time_ns"].sum()
    # a shape seen only in the test run is "added", the other "removed"
    base = {0: trace_diff_rank(rt, shapes=True)}
    rt.extras["op_shapes"] = rt.extras["op_shapes"].assign(input_dims="[[4,16],[16,4]]")
    deltas = operator_deltas(base, {0: trace_diff_rank(rt, shapes=True)})
    mm = deltas[deltas["operator"] == "aten::addmm"].set_index("input_dims")["change"]
    assert mm.astype(str).to_dict() == {"[[4,16],[16,4]]": "slower", "[[8,16],[16,4]]": "removed"}


def test_rank_without_profiler_steps_uses_its_gpu_span_as_one_step():
    program = base_program(steps=3)
    doc = program.trace()
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not e["name"].startswith("ProfilerStep")]
    profile = trace_diff_rank(_rank(doc))
    length, placed = program.layout()
    last_gpu_end = max(e for *_, e in placed)
    assert profile.steps == 0
    # from the first copy (10 µs into step 0) to the last kernel of the 4th step
    assert profile.breakdown["step_time"] == (3 * length + last_gpu_end - 10) * 1000
    assert sum(profile.breakdown[c] for c in CATEGORIES) == profile.breakdown["step_time"]


def test_breakdown_parts_partition_the_steps():
    profile = trace_diff_rank(_rank(base_program(steps=2).trace()))
    truth = base_program(steps=2).truth()["breakdown"]
    # no window here: the partial 3rd step counts too
    assert profile.steps == 3
    assert {k: v / 1000 / 3 for k, v in profile.breakdown.items()} == truth
    assert list(profile.breakdown) == list(BREAKDOWN_ROWS)


def test_a_change_from_nothing_has_no_percentage():
    """A kernel new in the test run, a breakdown category at 0 µs in the base: diff_pct was inf,
    written as 'inf' into the comparison page and its CSVs; NaN now (no percentage of nothing),
    and the change column still says added / slower."""
    from analysis.metrics.compare.trace_diff import _deltas, _with_diff

    base = pd.DataFrame({"name": ["k0", "k1"], "count": [2.0, 3.0],
                         "time_us": [10.0, 0.0]}).set_index("name")
    test = pd.DataFrame({"name": ["k0", "k1", "k2"], "count": [2.0, 3.0, 1.0],
                         "time_us": [10.0, 4.0, 5.0]}).set_index("name")
    out = _deltas(base, test, ["name"], min_change_pct=1.0).set_index("name")
    assert out["diff_pct"].isna().tolist() == [True, True, False]  # k2, k1, k0 (largest first)
    assert out.loc["k0", "diff_pct"] == 0
    assert out["change"].astype(str).to_dict() == {"k2": "added", "k1": "slower",
                                                   "k0": "unchanged"}
    both = _with_diff(pd.DataFrame({"base_us": [0.0, 0.0, 8.0], "test_us": [0.0, 2.0, 4.0]}))
    assert both["diff_pct"].isna().tolist() == [True, True, False]
    assert both["diff_pct"].iloc[2] == -50.0
