"""Analyses declared ``persist`` keep their per-rank parts in the trace cache entry: a later
process reads them (the same frames, dtypes included) instead of computing them again; a part of
the analysed window is kept apart for each way of cutting the window."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd
import pytest
from catalogue_checks import assert_same

from analysis import TraceAnalysis
from analysis import analyses as catalogue
from analysis.kineto import cache as trace_cache
from analysis.testing import tensorboard_traces
from analysis.testing.synthetic import SynthConfig, write_traces

# every analysis that keeps its parts, from the catalogue (a new one joins these tests)
PERSISTED = [n for n, s in catalogue.analyses().items() if s.persist and s.rank_step is not None]
# those of the whole trace (window="full"), and those of the analysed window (window="steps")
WHOLE = [n for n in PERSISTED if catalogue.get(n).window == "full"]
WINDOWED = [n for n in PERSISTED if n not in WHOLE]


def open_trace(folder: Path, cache: Path, **options) -> TraceAnalysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(str(folder), cache_dir=str(cache), progress=False, **options)


def no_computing(monkeypatch) -> None:
    """From now on, a per-rank part that is computed (not read back) fails the test."""
    def boom(*args, **kwargs):
        raise AssertionError("computed again")
    monkeypatch.setattr(catalogue.CATALOGUE, "run_on_rank", boom)


@pytest.fixture()
def traces(tmp_path) -> Path:
    folder = tmp_path / "traces"
    folder.mkdir()
    tensorboard_traces.write(folder / "rank0.json.gz", modules=True, memory=True)
    return folder


def test_every_persisted_analysis_is_one_of_the_two_kinds():
    assert len(PERSISTED) >= 20 and {"gpu_summary", "temporal_breakdown"} <= set(PERSISTED)
    assert all(catalogue.get(n).window in ("full", "steps") for n in PERSISTED)


def test_a_second_process_reads_the_stored_parts(traces, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    stored_kinds = PERSISTED  # the trace has what each needs (memory events, modules)
    first = open_trace(traces, cache).run_many({n: {} for n in stored_kinds})
    stored = list(cache.glob("*/results/*.json"))
    assert len(stored) == len(stored_kinds)
    no_computing(monkeypatch)  # the second open must not compute them
    second = open_trace(traces, cache).run_many({n: {} for n in stored_kinds})
    for name in stored_kinds:  # values, dtypes, index and order
        assert_same(first[name], second[name], name)


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
        assert_same(first[name], second[name], name)


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
    assert not trace_cache.put_result(tmp_path, "0" * 32, ({"a": 1}, "rank0.json"))
    assert not trace_cache.put_result(tmp_path, "0" * 32, 3.5)
    assert not trace_cache.put_result(tmp_path, "0" * 32, pd.DataFrame({"a": [1]}, index=[5]))
    with_attrs = pd.DataFrame({"a": [1]})
    with_attrs.attrs["operators"] = pd.DataFrame({"b": [2]})  # Arrow would drop it
    assert not trace_cache.put_result(tmp_path, "0" * 32, with_attrs)
    assert trace_cache.get_result(tmp_path, "0" * 32) is None


def test_frames_texts_and_nones_come_back_in_their_places(tmp_path):
    """A rank's part and the file it came from (the memory and module views), None for a rank
    without the events, as a plain tuple or this package's NamedTuple."""
    from analysis.metrics.tensorboard.memory_view import MemoryView

    frame = pd.DataFrame({"rank": [0, 0], "bytes": [1.5, 2.0], "name": ["a", "b"]})
    for i, value in enumerate([(frame, "gs://b/rank0.json"), (None, "rank1.json"),
                               MemoryView(frame, frame.head(1), frame, frame.tail(1).reset_index(drop=True))]):
        key = f"{i:032x}"
        assert trace_cache.put_result(tmp_path, key, value)
        back = trace_cache.get_result(tmp_path, key)
        assert_same(value, back, str(i))


def test_attrs_of_a_result_survive_a_second_open(tmp_path):
    """The serving iterations carry their operator split in ``attrs``: a second process gets it
    too (a part with attrs is never stored, so it is computed again)."""
    from analysis.testing.graph_traces import serving_events

    folder = tmp_path / "serving"
    folder.mkdir()
    (folder / "serving.json").write_text(json.dumps(
        {"traceEvents": serving_events(["prefill", "decode", "decode", "mixed", "decode"])}))
    cache = tmp_path / "cache"
    first = open_trace(folder, cache).get_inference_iterations(visualize=False)
    second = open_trace(folder, cache).get_inference_iterations(visualize=False)
    assert len(first.attrs["operators"]) > 0
    pd.testing.assert_frame_equal(first.attrs["operators"], second.attrs["operators"])
