"""Analyses declared ``persist`` keep their per-rank parts in the trace cache entry: a later
process reads them (the same frames, dtypes included) instead of computing them again; a part of
the analysed window is kept apart for each way of cutting the window."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest

from analysis import TraceAnalysis
from analysis import analyses as catalogue
from analysis.kineto import cache as trace_cache
from analysis.testing import tensorboard_traces
from analysis.testing.synthetic import SynthConfig, write_traces

VIEWS = ("gpu_summary", "gpu_utilization_timeline", "step_time_breakdown", "kernel_table",
         "operator_table")
# analyses of the analysed window (window="steps") whose parts are kept
WINDOWED = ("critical_path_summary", "collectives", "collective_summary", "stragglers",
            "operator_summary")


def open_trace(folder: Path, cache: Path, **options) -> TraceAnalysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(str(folder), cache_dir=str(cache), progress=False, **options)


def no_computing(monkeypatch) -> None:
    """From now on, a per-rank part that is computed (not read back) fails the test."""
    def boom(*args, **kwargs):
        raise AssertionError("computed again")
    monkeypatch.setattr(catalogue.CATALOGUE, "run_on_rank", boom)


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
    no_computing(monkeypatch)  # the second open must not compute them
    second = open_trace(traces, cache).run_many({n: {} for n in VIEWS})
    for name in VIEWS:
        assert type(second[name]) is type(first[name])
        for a, b in zip(frames(first[name]), frames(second[name]), strict=True):
            pd.testing.assert_frame_equal(a, b)


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("job")
    write_traces(SynthConfig(ranks=2, steps=3, kernels_per_step=20), folder)
    return folder


def test_parts_of_the_analysed_window_are_read_by_a_second_process(job, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    first = open_trace(job, cache).run_many(dict.fromkeys(WINDOWED, {}), ranks="all")
    assert len(list(cache.glob("*/results/*.json"))) == 2 * len(WINDOWED)  # 2 ranks
    no_computing(monkeypatch)
    second = open_trace(job, cache).run_many(dict.fromkeys(WINDOWED, {}), ranks="all")
    for name in WINDOWED:
        pd.testing.assert_frame_equal(first[name], second[name])


@pytest.mark.parametrize("options", [{"include_last_profiler_step": True}, {"gpu_events": "all"},
                                     {"window": "iterations"}])
def test_another_window_is_stored_apart(job, tmp_path, options, monkeypatch):
    """A window cut another way is other rows of the rank: its parts are computed (and kept)
    apart, never read from those of the default window."""
    cache = tmp_path / "cache"
    default = open_trace(job, cache).get_critical_path_summary(ranks="all", visualize=False)
    other = open_trace(job, cache, **options).get_critical_path_summary(ranks="all",
                                                                        visualize=False)
    assert len(list(cache.glob("*/results/*.json"))) == 4  # 2 ranks x 2 windows
    if "include_last_profiler_step" in options:  # one more step in the window
        assert other["instance"].nunique() == default["instance"].nunique() + 1
    no_computing(monkeypatch)  # and each is read back as it was
    pd.testing.assert_frame_equal(open_trace(job, cache, **options).get_critical_path_summary(
        ranks="all", visualize=False), other)
    pd.testing.assert_frame_equal(open_trace(job, cache).get_critical_path_summary(
        ranks="all", visualize=False), default)


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
