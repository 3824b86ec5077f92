"""The Dask engine on a real LocalCluster: same results as the local path, bounded caller memory,
failures named by rank and file."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import fsspec
import pytest
from catalogue_checks import assert_same, every_analysis
from fsspec.spec import AbstractFileSystem
from isal import igzip

distributed = pytest.importorskip("distributed")

from analysis import TraceAnalysis  # noqa: E402
from analysis.engines import load_engine  # noqa: E402
from analysis.engines.dask import DaskEngine  # noqa: E402
from analysis.errors import (  # noqa: E402
    CorruptTraceError,
    DuplicateRankError,
    NoGPUEventsError,
    TraceAnalysisError,
    TraceLoadError,
    TraceLoadWarning,
)
from analysis.kineto.loader import load_trace  # noqa: E402
from analysis.metrics.gpu_time import idle_time_breakdown as idle  # noqa: E402
from analysis.metrics.gpu_time import temporal_breakdown as temporal  # noqa: E402

# Every wait on the cluster is bounded, so a hung worker fails the test instead of the suite.
TIMEOUT_S = 120
# What the caller may allocate besides the results: its client, task metadata and messages for a
# few hundred tasks.
CALLER_OVERHEAD_BYTES = 8 * 2**20
CRASH_PROTOCOL = "crashfs"


# ---------------------------------------------------------------------------------------------
# Helpers that run on the workers (imported there by module name).

class CrashFS(AbstractFileSystem):
    """A "remote" file system whose reads kill the Dask worker process doing them."""

    protocol = CRASH_PROTOCOL

    def info(self, path, **kwargs):
        return {"name": path, "size": 1000, "type": "file"}

    def cat_file(self, path, start=None, end=None, **kwargs):
        distributed.get_worker()  # raises outside a worker: never kill the test process
        os._exit(1)


class RegisterCrashFS(distributed.WorkerPlugin):
    """Registers :class:`CrashFS` on every worker, restarted ones included."""

    def setup(self, worker):
        fsspec.register_implementation(CRASH_PROTOCOL, CrashFS, clobber=True)


def kill_worker_on_rank(rt, *, rank):
    """A per-rank step that kills its worker on ``rank`` and counts events elsewhere."""
    if rt.rank == rank:
        distributed.get_worker()
        os._exit(1)
    return len(rt.events)


def given_up_on():
    """What the future of a table holds once Dask gave up recomputing it: a worker died while
    recomputing it too, with the scheduler's ``allowed_failures`` spent."""
    raise distributed.KilledWorker("rank_window-lost", SimpleNamespace(address="tcp://dead:1"), 0)


def table_bytes(rt):
    """Memory held by a rank's tables, in bytes."""
    return int(sum(df.memory_usage(deep=True).sum() for df in (rt.events, rt.flows, rt.collectives)))


# ---------------------------------------------------------------------------------------------
# Fixtures

@pytest.fixture
def client(dask_client):
    """The session's cluster (tests/conftest.py): no worker dies on it."""
    return dask_client


@pytest.fixture(scope="module")
def dying_client():
    """A cluster of its own for the tests that kill workers, so a dead or restarting worker never
    reaches another test. allowed_failures=0: the first worker death fails its tasks (Dask's
    default retries 3 times), which keeps the failure tests short and exercises the engine's own
    one-at-a-time retry."""
    cluster = distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1",
        dashboard_address=None, scheduler_kwargs={"allowed_failures": 0},
    )
    fsspec.register_implementation(CRASH_PROTOCOL, CrashFS, clobber=True)
    with distributed.Client(cluster) as c:
        c.register_plugin(RegisterCrashFS())
        yield c
    cluster.close()


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    # One parsed copy per file for the module, shared by the local loader and the workers.
    return str(tmp_path_factory.mktemp("trace-cache"))


def facade_of(engine, patterns="default", rounding="exact"):
    return TraceAnalysis.from_engine(engine, kernel_patterns=patterns, time_rounding=rounding)


def results(engine, patterns="default", rounding="exact"):
    """Every analysis of the catalogue through ``engine`` in one batch: per-rank steps on the
    engine, combine here; an analysis the traces cannot give has its error as its result."""
    return facade_of(engine, patterns, rounding).run_many(every_analysis(), "all", errors="return")


def one_by_one(engine, patterns="default", rounding="exact"):
    """The same analyses one facade call at a time (a batch must not change any number)."""
    ta = facade_of(engine, patterns, rounding)
    out = {}
    for name, options in every_analysis().items():
        try:
            out[name] = ta.run(name, "all", **options)
        except TraceAnalysisError as exc:
            out[name] = exc
    return out


def loaded_the_same(dask_engine, local_engine):
    assert dask_engine.ranks == local_engine.ranks
    assert dask_engine.skipped == local_engine.skipped
    for r in local_engine.ranks:
        assert dask_engine.metas[r] == local_engine.metas[r]


# ---------------------------------------------------------------------------------------------
# Identical results

def test_sample_traces_identical_to_local(sample_on_dask, sample_traces_dir, cache_dir):
    # the sample traces parsed on the workers, every analysis in one batch there (conftest.py)
    on_dask, got = sample_on_dask
    dask_engine = on_dask.engine
    local = load_engine(sample_traces_dir, cache_dir=cache_dir, max_workers=1)
    assert isinstance(dask_engine, DaskEngine)
    assert dask_engine.ranks == list(range(8))
    loaded_the_same(dask_engine, local)
    # one batch on the cluster = one facade call at a time locally (the local batch on these
    # traces is compared with the cluster's in tests/unit/test_contract.py)
    assert_same(got, one_by_one(local))
    # the window was cut on the workers: the last (partial) step is gone there too
    assert sorted(got["profiler_step_table"]["step"].unique()) == [10, 11, 12, 13, 14]
    assert got["profiler_steps"] == [10, 11, 12, 13]
    assert_same(dask_engine.fetch_trace([3]).ranks[3].events, local.trace[3].events)


def test_trace_filter_identical_to_local(client, hta_traces_dir, cache_dir):
    folder = hta_traces_dir / "trace_filter"
    dask_engine = load_engine(folder, client=client, cache_dir=cache_dir, timeout=TIMEOUT_S)
    local = load_engine(folder, cache_dir=cache_dir, max_workers=1)
    loaded_the_same(dask_engine, local)
    assert dask_engine.ranks == [0, 1]
    for preset in ("default", "hta"):
        rounding = "hta" if preset == "hta" else "exact"
        got = results(dask_engine, preset, rounding)
        assert_same(got, results(local, preset, rounding))
        assert_same(got, one_by_one(local, preset, rounding))


def test_notebook_summary_identical_to_local(client, sample_traces_dir, cache_dir):
    from analysis import TraceAnalysis

    TraceAnalysis(sample_traces_dir, cache_dir=cache_dir, progress=False)  # both read the cache
    on_dask = TraceAnalysis(sample_traces_dir, client=client, cache_dir=cache_dir,
                            timeout=TIMEOUT_S, progress=False)
    local = TraceAnalysis(sample_traces_dir, cache_dir=cache_dir, progress=False)
    assert "8 of 8 ranks read from the cache" in repr(on_dask)
    assert repr(on_dask) == repr(local)
    assert on_dask._repr_html_() == local._repr_html_()


def test_rank_mapping_and_duplicates_as_local(client, sample_traces_dir, tmp_path, cache_dir):
    files = {5: str(sample_traces_dir / "rank-0.pt.trace.json.gz"),
             9: str(sample_traces_dir / "rank-1.pt.trace.json.gz")}
    dask_engine = load_engine(trace_files=files, client=client, cache_dir=cache_dir,
                              timeout=TIMEOUT_S)
    loaded_the_same(dask_engine, load_engine(trace_files=files, cache_dir=cache_dir))
    assert dask_engine.metas[9].rank_origin == "mapping"
    assert temporal.combine(
        dask_engine.map_ranks(temporal.temporal_breakdown_rank, [9])
    )["rank"].tolist() == [9]

    # two files whose distributedInfo both say rank 0
    shutil.copy(sample_traces_dir / "rank-0.pt.trace.json.gz", tmp_path / "a.pt.trace.json.gz")
    shutil.copy(sample_traces_dir / "rank-0.pt.trace.json.gz", tmp_path / "b.pt.trace.json.gz")
    with pytest.raises(DuplicateRankError) as local_err:
        load_trace(tmp_path, use_cache=False, max_workers=1)
    with pytest.raises(DuplicateRankError) as dask_err:
        load_engine(tmp_path, client=client, use_cache=False, timeout=TIMEOUT_S)
    assert str(dask_err.value) == str(local_err.value)


def test_analysis_errors_come_back_unchanged(client, tmp_path):
    cpu_only = {"distributedInfo": {"rank": 4}, "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}
    (tmp_path / "cpu.json").write_text(json.dumps(cpu_only))
    engine = load_engine(tmp_path, client=client, use_cache=False, timeout=TIMEOUT_S)
    local = load_engine(tmp_path, use_cache=False)
    with pytest.raises(NoGPUEventsError) as local_err:
        local.map_ranks(idle.idle_time_breakdown_rank, [4])
    with pytest.raises(NoGPUEventsError) as dask_err:
        engine.map_ranks(idle.idle_time_breakdown_rank, [4])
    assert dask_err.value.ranks == [4]
    assert str(dask_err.value) == str(local_err.value)
    assert "idle_time_breakdown_rank" in str(dask_err.value.__cause__)  # the worker's traceback


# ---------------------------------------------------------------------------------------------
# Caller memory

def write_ranks(sample_traces_dir, out_dir, n):
    """``n`` traces: the sample traces repeated, each with its own rank in distributedInfo."""
    originals = [gzip.decompress((sample_traces_dir / f"rank-{r}.pt.trace.json.gz").read_bytes())
                 for r in range(8)]
    rank_field = re.compile(rb'("distributedInfo": \{[^{}]*?"rank": )\d+')
    for rank in range(n):
        text, count = rank_field.subn(rb"\g<1>%d" % rank, originals[rank % 8], count=1)
        assert count == 1
        (out_dir / f"trace-{rank:03d}.pt.trace.json.gz").write_bytes(
            igzip.compress(text, compresslevel=0)
        )


CALLER = """
import json, sys, tracemalloc
import distributed
from analysis.engines import load_engine
from analysis.metrics.gpu_time import kernel_breakdown as kernels
from analysis.metrics.gpu_time import temporal_breakdown as temporal

address, warm, traces, timeout = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
cache = sys.argv[5]


def run(path):
    engine = load_engine(path, client=client, cache_dir=cache, progress=False, timeout=timeout)
    per_rank = engine.map_ranks(temporal.temporal_breakdown_rank, engine.ranks)
    table = temporal.combine(per_rank)
    breakdown = engine.map_ranks(kernels.kernel_breakdown_rank, engine.ranks)
    kernels.combine(breakdown)
    engine.close()
    return table, per_rank, breakdown


with distributed.Client(address, timeout=timeout) as client:
    run(warm)  # what is paid once per process (imports, pickled functions) is not bounded here
    tracemalloc.start()
    tracemalloc.reset_peak()
    table, per_rank, breakdown = run(traces)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    result_bytes = sum(
        int(df.memory_usage(deep=True).sum())
        for df in [*per_rank.values(), *(f for pair in breakdown.values() for f in pair)]
    )
    print(json.dumps({"peak": peak, "result_bytes": result_bytes,
                      "ranks": table["rank"].tolist()}))
"""


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_rank_whose_tables_dask_gave_up_on_is_built_again(client, sample_traces_dir, cache_dir,
                                                             on_error):
    """A rank's tables whose futures ended in a worker death (a worker died while Dask recomputed
    them) are built again before the rank is retried: the next analysis gives the same numbers,
    and no rank is blamed for a death it had no part in (rank 0: its window alone was given up;
    rank 1: its whole trace, so its window too)."""
    files = [str(sample_traces_dir / f"rank-{r}.pt.trace.json.gz") for r in range(3)]
    engine = load_engine(trace_files=files, client=client, cache_dir=cache_dir, on_error=on_error,
                         timeout=TIMEOUT_S)
    counts = {window: engine.map_ranks(kill_worker_on_rank, engine.ranks, window=window, rank=-1)
              for window in ("steps", "full")}
    assert counts["steps"][0] < counts["full"][0]  # the window is cut: a different table
    lost = client.submit(given_up_on, pure=False)
    assert isinstance(lost.exception(timeout=TIMEOUT_S), distributed.KilledWorker)
    engine._window[0] = lost
    engine._full[1] = engine._window[1] = lost
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no rank left out
        for window in ("steps", "full"):
            assert engine.map_ranks(kill_worker_on_rank, engine.ranks, window=window,
                                    rank=-1) == counts[window]
    assert {engine._full[1].status, engine._window[0].status, engine._window[1].status} == {
        "finished"}


def test_caller_memory_bounded_by_results(client, sample_traces_dir, tmp_path):
    """The process that calls the engine holds results, not traces. The caller runs in its own
    process: LocalCluster runs the scheduler in this one, and its allocations (which grow with the
    load on the machine: heartbeats, queued messages) are not the caller's."""
    n = 32
    traces, warm = tmp_path / "traces", tmp_path / "warm"
    traces.mkdir()
    warm.mkdir()
    write_ranks(sample_traces_dir, traces, n)
    write_ranks(sample_traces_dir, warm, 2)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[3]), os.environ.get("PYTHONPATH", "")])}
    cache = tmp_path / "cache"  # the workers parse each file once, into it
    done = subprocess.run(
        [sys.executable, "-c", CALLER, client.scheduler.address, str(warm), str(traces),
         str(TIMEOUT_S), str(cache)],
        capture_output=True, text=True, env=env, timeout=4 * TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["ranks"] == list(range(n))
    bound = CALLER_OVERHEAD_BYTES + 4 * out["result_bytes"]
    engine = load_engine(traces, client=client, cache_dir=cache, progress=False, timeout=TIMEOUT_S)
    trace_bytes = sum(engine.map_ranks(table_bytes, engine.ranks, window="full").values())
    engine.close()
    # The bound must be meaningful: holding the traces there would exceed it several times over.
    assert trace_bytes > 4 * bound, (trace_bytes, bound)
    peak = out["peak"]
    assert peak < bound, f"caller peak {peak / 2**20:.1f} MiB, bound {bound / 2**20:.1f} MiB"


# ---------------------------------------------------------------------------------------------
# Failures

def test_corrupt_file_named_and_skipped(client, sample_traces_dir, tmp_path, cache_dir):
    for r in range(3):
        shutil.copy(sample_traces_dir / f"rank-{r}.pt.trace.json.gz", tmp_path)
    bad = tmp_path / "rank-3.pt.trace.json.gz"
    bad.write_bytes((sample_traces_dir / "rank-3.pt.trace.json.gz").read_bytes()[:5000])

    with pytest.raises(CorruptTraceError) as err:
        load_engine(tmp_path, client=client, cache_dir=cache_dir, timeout=TIMEOUT_S)
    assert err.value.path == str(bad)

    with pytest.warns(TraceLoadWarning, match="rank-3.pt.trace.json.gz"):
        engine = load_engine(tmp_path, client=client, cache_dir=cache_dir, on_error="skip",
                             timeout=TIMEOUT_S)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceLoadWarning)
        local = load_engine(tmp_path, cache_dir=cache_dir, on_error="skip", max_workers=1)
    loaded_the_same(engine, local)
    assert engine.ranks == [0, 1, 2]
    assert [path for path, _ in engine.skipped] == [str(bad)]
    assert_same(results(engine)["temporal_breakdown"], results(local)["temporal_breakdown"])


def test_worker_death_while_loading(dying_client, sample_traces_dir):
    client = dying_client
    good = [str(sample_traces_dir / f"rank-{r}.pt.trace.json.gz") for r in range(3)]
    crashing = f"{CRASH_PROTOCOL}://bucket/run/rank-7.pt.trace.json.gz"
    with pytest.warns(TraceLoadWarning, match="rank-7") as record:
        engine = load_engine(trace_files=[*good, crashing], client=client, use_cache=False,
                             on_error="skip", timeout=TIMEOUT_S)
    assert engine.ranks == [0, 1, 2], engine.skipped  # files that shared the dead worker are not blamed
    [(path, reason)] = engine.skipped
    assert path == crashing
    assert reason.startswith("rank 7: the Dask worker loading this file died")
    assert any(crashing in str(w.message) for w in record)
    counts = engine.map_ranks(kill_worker_on_rank, engine.ranks, rank=-1)
    assert counts == {r: len(engine.fetch_trace([r])[r].events) for r in range(3)}


def test_worker_death_while_analysing(dying_client, sample_traces_dir, cache_dir):
    client = dying_client
    files = [str(sample_traces_dir / f"rank-{r}.pt.trace.json.gz") for r in range(4)]
    engine = load_engine(trace_files=files, client=client, cache_dir=cache_dir, on_error="skip",
                         timeout=TIMEOUT_S)
    with pytest.warns(TraceLoadWarning, match="rank 2") as record:
        counts = engine.map_ranks(kill_worker_on_rank, engine.ranks, rank=2)
    assert sorted(counts) == [0, 1, 3]
    assert files[2] in str(record[0].message)

    engine.on_error = "raise"
    with pytest.raises(TraceLoadError) as err:
        engine.map_ranks(kill_worker_on_rank, [1, 2], rank=2)
    assert err.value.path == files[2] and err.value.rank == 2
    assert "died" in err.value.reason
