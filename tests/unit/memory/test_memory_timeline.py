"""Memory timeline files of torch.profiler's export_memory_timeline: read, coalesced as HTA does,
and plotted by category."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from analysis.errors import WrongFileKindError
from analysis.figures.memory import memory_timeline_figure
from analysis.memory import CATEGORIES, load_memory_timeline, memory_timeline_peak


def test_raw_rows_are_coalesced_per_timestamp_and_preexisting_placed_first(tmp_path):
    rows = [[-1, 1, 100, 0], [-1, 1, 50, 7], [10, 2, 30, 4], [10, 2, 20, 4], [12, 4, -30, 4],
            [15, 3, -20, 4], [15, 3, 20, 5]]
    path = tmp_path / "m.raw.json.gz"
    path.write_bytes(gzip.compress(json.dumps(rows).encode()))
    t = load_memory_timeline(str(path))
    assert t["time_ns"].tolist() == [10, 10, 12, 15]
    assert t["parameter"].tolist() == [100] * 4 and t["unknown"].tolist() == [50] * 4
    assert t["activation"].tolist() == [0, 50, 20, 0] and t["gradient"].tolist() == [0, 0, 0, 20]
    assert t["total_bytes"].tolist() == [150, 200, 170, 170]
    assert memory_timeline_peak(t)["total_bytes"].iat[0] == 200


def test_coalesced_file_reads_the_same_categories(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps([[5, 7], [[0, 1, 2, 3, 4, 5, 6, 7, 8], [0, 8, 7, 6, 5, 4, 3, 2, 1]]]))
    t = load_memory_timeline(str(path))
    assert t["time_ns"].tolist() == [5000, 7000]
    assert t[list(CATEGORIES)].iloc[1].tolist() == [8, 7, 6, 5, 4, 3, 2, 1]


def test_a_trace_is_not_a_memory_timeline(tmp_path):
    """A Kineto trace is said to be one, and where its [memory] events are read (it was
    msgspec's "Expected `array`, got `object`"); other JSON says what was expected."""
    path = tmp_path / "trace.json"
    path.write_text('{"traceEvents": []}')
    with pytest.raises(WrongFileKindError, match=r"trace.json: a Kineto profiler trace, not a "
                                                 r"memory timeline.*trace-analysis memory-timeline"):
        load_memory_timeline(str(path))
    other = tmp_path / "other.json"
    other.write_text('{"nodes": []}')
    with pytest.raises(WrongFileKindError, match="other.json: not a memory timeline"):
        load_memory_timeline(str(other))


def test_hta_memory_timeline_matches_hta_and_is_plotted(hta_traces_dir):
    path = hta_traces_dir / "memory_analysis" / "memory_timeline.raw.gz"
    t = load_memory_timeline(str(path))
    from hta.memory_analysis import MemoryAnalysis

    times, sizes = MemoryAnalysis(str(path))._process_raw_events()
    np.testing.assert_array_equal(t["time_ns"], times)
    np.testing.assert_array_equal(t[list(CATEGORIES)], sizes)
    peak = memory_timeline_peak(t).iloc[0]
    assert peak["total_bytes"] == max(sum(s) for s in sizes) == 3_082_832_104
    fig = memory_timeline_figure(t)
    assert [tr.name for tr in fig.data] == [c.replace("_", " ") for c in CATEGORIES]
    at_peak = int(np.argmax(fig.data[0].x == (peak["time_ns"] - t["time_ns"].iat[0]) / 1e6))
    assert sum(tr.y[at_peak] for tr in fig.data) == pytest.approx(3_082_832_104 / 2**30)
    assert any("peak 2.87 GiB" in a.text for a in fig.layout.annotations)
