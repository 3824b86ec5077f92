"""Analyses declared ``persist`` keep their per-rank parts in the trace cache entry: a later
process reads them (the same frames, dtypes included) instead of computing them again."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest

from analysis import TraceAnalysis
from analysis import analyses as catalogue
from analysis.kineto import cache as trace_cache
from analysis.testing import tensorboard_traces

VIEWS = ("gpu_summary", "gpu_utilization_timeline", "step_time_breakdown", "kernel_table",
         "operator_table")


def open_trace(folder: Path, cache: Path) -> TraceAnalysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(str(folder), cache_dir=str(cache), progress=False)


def frames(value) -> list[pd.DataFrame]:
    return list(value) if isinstance(value, tuple) else [value]


@pytest.fixture()
def traces(tmp_path) -> Path:
    folder = tmp_path / "traces"
    folder.mkdir()
    tensorboard_traces.write(folder / "rank0.json.gz", modules=True)
    return folder


def test_a_second_process_reads_the_stored_parts(traces, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    first = open_trace(traces, cache).run_many({n: {} for n in VIEWS})
    stored = list(cache.glob("*/results/*.json"))
    assert len(stored) == len(VIEWS)
    # the second open must not compute them: the per-rank task now fails if it runs
    def boom(*args, **kwargs):
        raise AssertionError("computed again")
    monkeypatch.setattr(catalogue.CATALOGUE, "run_on_rank", boom)
    second = open_trace(traces, cache).run_many({n: {} for n in VIEWS})
    for name in VIEWS:
        assert type(second[name]) is type(first[name])
        for a, b in zip(frames(first[name]), frames(second[name]), strict=True):
            pd.testing.assert_frame_equal(a, b)


def test_other_options_are_stored_apart(traces, tmp_path):
    cache = tmp_path / "cache"
    by_name = open_trace(traces, cache).get_operator_table(group_by="name", visualize=False)
    by_shape = open_trace(traces, cache).get_operator_table(group_by="name_and_input_shape",
                                                            visualize=False)
    assert "input_shape" in by_shape.columns and "input_shape" not in by_name.columns
    assert len(list(cache.glob("*/results/*.json"))) == 2


def test_a_damaged_stored_part_is_computed_again(traces, tmp_path):
    cache = tmp_path / "cache"
    first = open_trace(traces, cache).get_gpu_summary(visualize=False)
    for path in cache.glob("*/results/*.arrow"):
        path.write_bytes(b"not arrow")
    with pytest.warns(trace_cache.CacheWarning, match="unreadable cached result"):
        again = open_trace(traces, cache).get_gpu_summary(visualize=False)
    pd.testing.assert_frame_equal(first, again)


def test_without_a_cache_nothing_is_stored(traces, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ta = TraceAnalysis(str(traces), use_cache=False, progress=False)
    assert len(ta.get_gpu_summary(visualize=False)) == 1


def test_results_that_are_not_frames_are_not_stored(tmp_path):
    assert not trace_cache.put_result(tmp_path, "0" * 32, ("text", None))  # the module view's
    assert not trace_cache.put_result(tmp_path, "0" * 32, pd.DataFrame({"a": [1]}, index=[5]))
    assert trace_cache.get_result(tmp_path, "0" * 32) is None
