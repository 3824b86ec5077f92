"""The local engine within a memory budget: ranks released and read back from the cache give the
same results as ranks held; results memoised per analysis and rank; a bad budget is refused."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from analysis import TraceAnalysis
from analysis import analyses as catalogue
from analysis.errors import ConfigError, TraceLoadError
from analysis.kineto.cache import TraceCache
from analysis.testing.synthetic import SynthConfig, write_traces

HEADLINE = catalogue.headline_names()


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    root = tmp_path_factory.mktemp("job")
    write_traces(SynthConfig(ranks=4, steps=3, kernels_per_step=40), root / "traces")
    return root


def _open(job, cache, **kw):
    return TraceAnalysis(job / "traces", cache_dir=job / cache, progress=False, **kw)


def _same(a, b):
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b)
    elif isinstance(a, tuple | list):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    else:
        assert a == b or (a is None and b is None)


def test_ranks_released_and_read_back_give_the_same_results(job):
    whole = _open(job, "cache-a", max_memory=1 << 40)
    tight = _open(job, "cache-b", max_memory=1)  # one rank held at a time
    assert sorted(tight.engine._entries) == [0, 1, 2, 3]  # every rank can be read back
    assert len(tight.engine._held) <= 1
    assert len(whole.engine._held) == 4
    expected = whole.run_many(dict.fromkeys(HEADLINE, {}), ranks="all", errors="return")
    got = tight.run_many(dict.fromkeys(HEADLINE, {}), ranks="all", errors="return")
    assert len(tight.engine._held) <= 1
    for name in HEADLINE:
        _same(got[name], expected[name])
    # the analysis methods one after another, as a notebook calls them
    _same(tight.get_temporal_breakdown(visualize=False), whole.get_temporal_breakdown(visualize=False))
    _same(tight.get_idle_time_breakdown(ranks="all", visualize=False),
          whole.get_idle_time_breakdown(ranks="all", visualize=False))
    _same(tight.get_gpu_kernel_breakdown(visualize=False), whole.get_gpu_kernel_breakdown(visualize=False))


def test_second_open_from_the_cache_within_a_budget_matches_the_first(job):
    first = _open(job, "cache-c", max_memory=1 << 40)
    second = _open(job, "cache-c", max_memory=1)
    assert all(m.from_cache for m in second.engine.metas.values())
    _same(second.get_cuda_kernel_launch_stats(ranks="all", visualize=False),
          first.get_cuda_kernel_launch_stats(ranks="all", visualize=False))
    # the whole trace is still there for those who ask for it (every rank then held)
    assert second.trace.rank_list() == first.trace.rank_list()
    pd.testing.assert_frame_equal(second.trace[2].events, first.trace[2].events)


def test_results_are_memoised_per_analysis_and_rank(job, monkeypatch):
    ta = _open(job, "cache-d", max_memory=1)
    first = ta.get_temporal_breakdown(visualize=False)
    reads = []
    original = ta.engine.rank_trace
    monkeypatch.setattr(ta.engine, "rank_trace", lambda r, w="steps": reads.append(r) or original(r, w))
    again = ta.get_temporal_breakdown(visualize=False)
    assert reads == []  # answered from the memo: no rank read, no step run
    pd.testing.assert_frame_equal(again, first)
    ta.run_many({"temporal_breakdown": {}, "comm_comp_overlap": {}}, ranks="all")
    assert reads == [0, 1, 2, 3]  # once per rank, for the analysis not answered yet
    ta.run_many({"comm_comp_overlap": {}}, ranks="all")
    assert reads == [0, 1, 2, 3]
    ta.get_idle_time_breakdown(ranks=[2], visualize=False, consecutive_kernel_delay=30)
    ta.get_idle_time_breakdown(ranks=[2], visualize=False, consecutive_kernel_delay=30)
    ta.get_idle_time_breakdown(ranks=[2], visualize=False, consecutive_kernel_delay=10)
    assert reads == [0, 1, 2, 3, 2, 2]  # other options: another question


def test_a_bad_budget_is_refused(job):
    with pytest.raises(ConfigError, match="max_memory"):
        _open(job, "cache-e", max_memory=0)


def test_a_cache_entry_removed_after_opening_is_named(job):
    ta = _open(job, "cache-f", max_memory=1)
    entry = ta.engine._entries[0]
    shutil.rmtree(entry)
    with pytest.raises(TraceLoadError, match="read back"):
        TraceCache.read(entry)


def _held_engine(traces, cache):
    """The engine as it was before loads streamed: every rank loaded, then windowed."""
    from analysis.engines.local import LocalEngine
    from analysis.kineto.loader import load_trace

    engine = LocalEngine(load_trace(traces, cache_dir=cache, progress=False), False, "launched")
    return TraceAnalysis.from_engine(engine, gpu_events="launched")


def test_a_load_holds_one_rank_at_a_time(job, monkeypatch):
    """Each rank is replaced by a table-less stand-in as it arrives: while the load runs, at most
    the rank just loaded (and none of the earlier ones) keeps its events table alive, without
    waiting for a garbage collection."""
    import weakref

    from analysis.engines import local

    alive: list = []
    most = []
    original = local._Intake.__call__

    def spy(self, rt):
        alive.append(weakref.ref(rt.events))
        out = original(self, rt)
        most.append(sum(ref() is not None for ref in alive))
        return out

    monkeypatch.setattr(local._Intake, "__call__", spy)
    ta = _open(job, "cache-g", max_memory=1)
    assert len(most) == 4 and max(most) <= 1  # only the caller's own reference, if any
    assert len(ta.engine._held) == 0  # nothing fits in one byte: every rank released
    assert sorted(ta.engine._entries) == [0, 1, 2, 3]
    held = _held_engine(job / "traces", job / "cache-g")
    assert ta.engine.window_stats == held.engine.window_stats
    expected = held.run_many(dict.fromkeys(HEADLINE, {}), ranks="all", errors="return")
    got = ta.run_many(dict.fromkeys(HEADLINE, {}), ranks="all", errors="return")
    for name in HEADLINE:
        _same(got[name], expected[name])


def test_a_rank_loaded_before_the_steps_are_known_is_windowed_after_the_load(tmp_path):
    """Rank 0 has no ProfilerStep: while only it is loaded the number of steps is not known, so
    its window is cut after the load; the results match an engine that held every rank."""
    import gzip
    import json

    traces = tmp_path / "traces"
    write_traces(SynthConfig(ranks=3, steps=3, kernels_per_step=30), traces)
    path = traces / "rank-0.pt.trace.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if not str(e.get("name", "")).startswith("ProfilerStep#")]
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    ta = TraceAnalysis(traces, cache_dir=tmp_path / "c", progress=False, max_workers=1)
    held = _held_engine(traces, tmp_path / "c")
    assert ta.engine.window_stats == held.engine.window_stats
    for name in ("temporal_breakdown", "idle_time_breakdown", "kernel_breakdown"):
        _same(ta.run(name, ranks="all"), held.run(name, ranks="all"))


def test_released_ranks_are_freed_without_a_garbage_collection(job, monkeypatch):
    """A rank let go within the budget frees its tables at once, not at the next full garbage
    collection (the engine runs one only every _COLLECT_EVERY releases: each costs ~0.25 s)."""
    import gc
    import weakref

    from analysis.kineto.cache import TraceCache as Cache

    ta = _open(job, "cache-h", max_memory=1)
    read = Cache.read
    alive: list = []

    def spy(entry):
        rt = read(entry)
        alive.append(weakref.ref(rt.events))
        return rt

    monkeypatch.setattr(Cache, "read", staticmethod(spy))
    gc.collect()
    gc.disable()
    try:
        ta.run_many(dict.fromkeys(HEADLINE, {}), ranks="all", errors="return")
        assert len(alive) >= 4
        assert sum(ref() is not None for ref in alive) <= 1  # the one rank held
    finally:
        gc.enable()


def test_the_iterations_window_is_cut_as_each_rank_arrives(tmp_path, monkeypatch):
    """With ``window="iterations"`` a rank's window is its own (its steady serving iterations), so
    the load cuts it as the rank arrives, without waiting for the other ranks' steps; the results
    match an engine that held every rank and cut the window after the load."""
    import json

    from analysis.engines import local
    from analysis.engines.local import LocalEngine
    from analysis.kineto.loader import load_trace
    from analysis.testing.graph_traces import serving_events

    files = {}
    for rank, phases in enumerate((["prefill", "decode", "decode", "mixed"],
                                   ["prefill", "mixed", "decode", "decode", "decode"])):
        path = tmp_path / f"serving-{rank}.json"
        path.write_text(json.dumps({"traceEvents": serving_events(phases)}))
        files[rank] = str(path)
    cut_on_arrival = []
    original = local._Intake.__call__

    def spy(self, rt):
        stand_in = original(self, rt)
        cut_on_arrival.append(self.stand_ins[id(stand_in)] is not None)
        return stand_in

    monkeypatch.setattr(local._Intake, "__call__", spy)
    ta = TraceAnalysis(trace_files=files, window="iterations", cache_dir=tmp_path / "c",
                       progress=False, max_workers=1)
    assert cut_on_arrival == [True, True]
    held = TraceAnalysis.from_engine(LocalEngine(
        load_trace(trace_files=files, cache_dir=tmp_path / "c", progress=False), False, "hta",
        window="iterations"), window="iterations")
    assert ta.engine.window_stats == held.engine.window_stats
    for name in ("temporal_breakdown", "idle_time_breakdown", "kernel_breakdown"):
        _same(ta.run(name, ranks="all"), held.run(name, ranks="all"))
    steps = TraceAnalysis(trace_files=files, window="steps", cache_dir=tmp_path / "c",
                          progress=False, max_workers=1)
    assert not steps.run("temporal_breakdown", ranks="all").equals(
        ta.run("temporal_breakdown", ranks="all"))  # the iterations window did cut something


def test_a_text_shared_by_many_rows_is_counted_once():
    """Tables read back from the cache share one string per distinct value (a collective's
    ``pg_ranks``: one group's ranks written out, thousands of rows): the engine's memory
    accounting counts that string once, plus a pointer per row, where pandas' ``deep`` measure
    counts it on every row; distinct strings, numbers and categoricals measure as pandas does."""
    import sys

    import numpy as np
    import pandas as pd

    from analysis.engines import local

    group = str(list(range(512)))  # 2.4 kB
    shared = pd.DataFrame({"pg_ranks": pd.Series([group] * 1000, dtype=object),
                           "ts": np.arange(1000, dtype=np.int64)})
    assert local._nbytes(shared) == (
        shared.index.memory_usage() + 8 * 1000 + sys.getsizeof(group) + 8 * 1000)
    assert local._nbytes(shared) < shared.memory_usage(index=True, deep=True).sum() / 100
    distinct = pd.DataFrame({
        "name": pd.Series([f"kernel_{i}" for i in range(1000)], dtype=object),
        "cat": pd.Categorical([f"k{i % 7}" for i in range(1000)]),
        "dur": np.ones(1000),
    })
    assert local._nbytes(distinct) == distinct.memory_usage(index=True, deep=True).sum()
    assert local._nbytes(distinct["name"]) == distinct["name"].memory_usage(index=True, deep=True)
    assert local._nbytes(pd.Index(["a", "b"], dtype=object)) == pd.Index(
        ["a", "b"], dtype=object).memory_usage(deep=True)


def test_rank_bytes_measures_each_table_and_memoised_value_once(job, monkeypatch):
    """The memory accounting counts the tables and every memoised value (arrays inside a
    dataclass included), and measures each only once: a table or a memoised value never changes
    once there, and a deep measure of a table takes milliseconds."""
    from dataclasses import dataclass

    import numpy as np

    from analysis.engines import local

    rt = _open(job, "bytes").engine.rank_trace(0, "full")

    @dataclass(frozen=True)
    class Held:
        values: np.ndarray
        parts: dict

    before = local._rank_bytes(rt)
    rt.memoised("held", lambda: Held(np.zeros(1000), {"a": (np.zeros(10), np.zeros(20))}))
    calls = []
    measure = local._nbytes

    def counted(value, depth=0):
        if depth == 0:  # one measure (its nested calls not counted)
            calls.append(value)
        return measure(value, depth)

    monkeypatch.setattr(local, "_nbytes", counted)
    assert local._rank_bytes(rt) == before + 8 * (1000 + 10 + 20)
    assert len(calls) == 1  # only the new memoised value: the tables were measured before
    assert local._rank_bytes(rt) == before + 8 * 1030 and len(calls) == 1
