"""The trace-health table grouped for reading: one row per finding, naming its ranks."""

import pandas as pd
import pytest

from analysis.reports.health import grouped, rank_span


@pytest.mark.parametrize("ranks, text", [
    ([0, 1, 2, 3, 4, 5, 6, 7], "ranks 0–7"), ([4], "rank 4"), ([0, 1, 2, 3, 5], "ranks 0–3, 5"),
    ([3, 1], "ranks 1, 3"), ([0, 1, 5, 6], "ranks 0, 1, 5, 6"), ([-1], "all ranks"), ([], ""),
])
def test_rank_span_names_runs_of_ranks(ranks, text):
    assert rank_span(ranks) == text


def test_identical_findings_become_one_row_and_keep_their_order():
    rows = [(-1, "warning", "clock_skew", "clocks disagree", "166 µs")]
    rows += [(r, "info", "truncated_last_step", "last step cut short", f"{r} µs") for r in range(8)]
    rows += [(2, "info", "zero_duration", "zero-length events", "3 events")]
    out = grouped(pd.DataFrame(rows, columns=["rank", "severity", "check", "message", "evidence"]))
    assert out["check"].tolist() == ["clock_skew", "truncated_last_step", "zero_duration"]
    assert out["ranks"].tolist() == ["all ranks", "ranks 0–7", "rank 2"]
    assert out["evidence"][0] == "166 µs"
    assert out["evidence"][1].startswith("rank 0: 0 µs (+7 more")


def test_an_empty_table_groups_to_an_empty_table():
    assert grouped(pd.DataFrame(columns=["rank", "severity", "check", "message", "evidence"])).empty
