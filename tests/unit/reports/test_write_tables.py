"""``write_tables``: a ``ChunkedTable`` (one row per event of every rank, never held whole) is
written a chunk at a time as the CSV of its chunks' concatenation."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.registry import ChunkedTable
from analysis.reports import write_tables

COLUMNS = ("correlation", "launch_delay", "rank", "launch_delay_outlier")


def chunk(rank: int, n: int) -> pd.DataFrame:
    rng = np.random.default_rng(rank)
    delay = rng.exponential(50, n)
    # columns in another order than the table's: the CSV follows ``columns``
    return pd.DataFrame({"rank": rank, "launch_delay_outlier": delay > 100,
                         "correlation": np.arange(n), "launch_delay": delay})


def test_chunks_are_written_as_the_csv_of_their_concatenation(tmp_path):
    calls = []

    def chunks():
        calls.append(1)
        return (chunk(r, n) for r, n in ((0, 5), (3, 0), (7, 4)))

    written = write_tables({"launches": ChunkedTable(chunks, COLUMNS),
                            "whole": pd.concat(list(chunks()), ignore_index=True)[list(COLUMNS)]},
                           tmp_path)
    assert written["launches"].read_text() == written["whole"].read_text()
    got = pd.read_csv(written["launches"])
    assert got["rank"].tolist() == [0] * 5 + [7] * 4 and list(got.columns) == list(COLUMNS)
    assert len(calls) == 2  # the chunks are asked for once per write


def test_a_table_without_chunks_is_its_header(tmp_path):
    written = write_tables({"none": ChunkedTable(lambda: [], COLUMNS)}, tmp_path)
    assert written["none"].read_text() == ",".join(COLUMNS) + "\n"


def test_an_empty_table_says_so_on_the_page():
    """An analysis with no row for these traces (no collective, no copy in the window) showed a
    header alone with 'All rows: x.csv', read as a table that failed (about 60 sections on the
    traces of a CLI sweep): the page says there is nothing to list."""
    from analysis.reports.html import table_html

    empty = str(table_html(pd.DataFrame({"rank": [], "bytes": []}), "memcpy_summary"))
    assert "No rows: these traces hold nothing this table lists" in empty
    assert "<table" not in empty and 'href="tables/memcpy_summary.csv"' in empty
    full = str(table_html(pd.DataFrame({"rank": [0], "bytes": [8]}), "memcpy_summary"))
    assert "<table" in full and "All rows:" in full
