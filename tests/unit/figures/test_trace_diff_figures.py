"""Comparison figures: the waterfall closes on the test step time; the top-N bars are the right rows."""

from __future__ import annotations

import pandas as pd

from analysis.figures.trace_diff import draw, step_time_waterfall, top_changes


def _breakdown() -> pd.DataFrame:
    rows = [("step_time", 200.0, 250.0), ("computation", 150.0, 170.0),
            ("exposed_communication", 0.0, 40.0), ("exposed_memory", 10.0, 10.0),
            ("other", 0.0, 0.0), ("idle", 40.0, 30.0)]
    df = pd.DataFrame(rows, columns=["category", "base_us", "test_us"])
    df["diff_us"] = df["test_us"] - df["base_us"]
    return df


def _deltas(diffs: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame({"operator": list(diffs), "base_time_us": 100.0,
                         "test_time_us": [100.0 + d for d in diffs.values()],
                         "diff_time_us": list(diffs.values()), "change": "slower"})


def test_waterfall_starts_at_base_steps_through_each_part_and_ends_at_test():
    fig = step_time_waterfall(_breakdown(), ("before", "after"))
    bar = fig.data[0]
    assert list(bar.x) == ["before step", "computation", "exposed comm.", "exposed memory",
                           "other GPU work", "GPU idle", "after step"]
    assert list(bar.y) == [200.0, 20.0, 40.0, 0.0, 0.0, -10.0, 250.0]
    assert bar.y[0] + sum(bar.y[1:-1]) == bar.y[-1]
    assert list(bar.measure) == ["absolute", *["relative"] * 5, "total"]


def test_top_changes_keeps_the_largest_gains_and_losses():
    fig = top_changes(_deltas({"a": 5.0, "b": -30.0, "c": 50.0, "d": -1.0, "e": 0.0, "f": 2.0}),
                      key="operator", top=2, what="operators")
    bar = fig.data[0]
    assert list(bar.y) == ["b", "d", "a", "c"]  # bottom to top: largest loss ... largest gain
    assert list(bar.x) == [-30.0, -1.0, 5.0, 50.0]


def test_empty_and_unchanged_inputs_say_so():
    assert "No profiler steps" in step_time_waterfall(pd.DataFrame()).layout.annotations[0].text
    fig = top_changes(_deltas({"a": 0.0}), key="operator", what="operators")
    assert "No operators changed" in fig.layout.annotations[0].text


def test_draw_names_every_figure():
    kernels = _deltas({"k": 3.0}).rename(columns={"operator": "name"})
    figs = draw({"breakdown": _breakdown(), "operators": _deltas({"a": 1.0}), "kernels": kernels})
    assert set(figs) == {"step_time_waterfall", "operators_gained_lost", "kernels_gained_lost"}
