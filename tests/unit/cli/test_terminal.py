"""Terminal tables fit the width: column blocks keyed by rank, constant columns said once, one
row transposed, names shortened in the middle but distinct."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.cli import terminal


def _frame(rows: int) -> pd.DataFrame:
    return pd.DataFrame({
        "rank": range(rows), "gpu": ["NVIDIA H100 80GB HBM3"] * rows,
        **{f"a_rather_long_metric_name_{i}": [1234.5678 * (r + 1) for r in range(rows)]
           for i in range(8)},
        "wait_caused_us": [152214314.0] + [0.0] * (rows - 1),
    })


@pytest.mark.parametrize("width", [60, 80, 100])
def test_blocks_fit_the_width_and_keep_every_column_and_row(width):
    df = _frame(8)
    lines = terminal.table(df, key=["rank"], columns=width)
    assert max(len(line) for line in lines) <= width
    assert lines[0] == "same on every row: gpu NVIDIA H100 80GB HBM3"
    text = "\n".join(lines)
    for column in df.columns:
        if column != "gpu":
            assert column in text
    blocks = [b for b in "\n".join(lines[2:]).split("\n\n") if b]
    assert all(b.splitlines()[0].startswith("rank") and len(b.splitlines()) == 9 for b in blocks)
    assert "152,214,314" in text  # whole numbers as integers with separators


def test_wide_is_one_line_per_row():
    lines = terminal.table(_frame(3), wide=True, columns=80)
    assert len(lines) == 4 and all(len(line) > 80 for line in lines)


def test_one_row_is_transposed():
    lines = terminal.table(_frame(1), columns=80)
    assert lines[0].split() == ["rank", "0"] and lines[1].split()[0] == "gpu"
    assert len(lines) == len(_frame(1).columns)


def test_cells_read_as_numbers():
    assert terminal.column_cells(pd.Series([872.0, 3.0])) == ["872", "3"]
    assert terminal.column_cells(pd.Series([1.234, 56.0])) == ["1.23", "56.00"]
    assert terminal.column_cells(pd.Series([123456.7, 2.5])) == ["123,457", "2"]
    assert terminal.column_cells(pd.Series([float("nan"), 1.5])) == ["–", "1.50"]


def test_wrap_indents_continuation_lines():
    lines = terminal.wrap("word " * 40, indent="    ", first="[warning] ", columns=50)
    assert lines[0].startswith("[warning] word") and all(line.startswith("    ") for line in lines[1:])
    assert max(len(line) for line in lines) <= 50
