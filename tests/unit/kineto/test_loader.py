"""load_trace: finding files, ranks, skipping non-traces, error policy, parallel = sequential."""

from __future__ import annotations

import gzip
import json
import multiprocessing
import os
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest
from paths import REPO_ROOT

from analysis.errors import (
    ConfigError,
    CorruptTraceError,
    DuplicateRankError,
    MultipleLoadErrors,
    TraceLoadError,
    TraceNotFoundError,
    TracePermissionError,
)
from analysis.kineto import loader
from analysis.kineto.loader import TraceLoadWarning, load_trace
from analysis.kineto.sources import rank_from_file_name

TABLES = ("events", "flows", "collectives")


def _kineto(rank: int | None = None, ts: int = 1000) -> dict:
    """A minimal hand-written Kineto trace: one CPU op and one kernel."""
    doc = {
        "schemaVersion": 1,
        "traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
             "ts": ts, "dur": 10, "args": {"External id": 1}},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": ts + 20,
             "dur": 5, "args": {"stream": 7, "correlation": 2, "device": 0}},
        ],
    }
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    return doc


def _write(path: Path, doc: dict) -> Path:
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


@pytest.fixture
def two_ranks(hta_traces_dir, tmp_path) -> Path:
    """A copy of trace_filter: two real GPU traces with distributedInfo ranks 0 and 1."""
    return Path(shutil.copytree(hta_traces_dir / "trace_filter", tmp_path / "run"))


def _assert_same_trace(a, b) -> None:
    assert a.rank_list() == b.rank_list()
    for rank in a:
        for table in TABLES:
            pd.testing.assert_frame_equal(getattr(a[rank], table), getattr(b[rank], table))
        assert a[rank].meta == b[rank].meta


def test_local_directory(two_ranks):
    trace = load_trace(two_ranks, use_cache=False, progress=False)
    assert trace.rank_list() == [0, 1]
    assert trace[1].meta.rank_origin == "distributedInfo"
    assert trace[1].meta.source == str(two_ranks / "sampled_rank-1.json.gz")
    assert len(trace[0].events) > 1000
    assert trace.skipped == []


def test_list_of_files_relative_to_trace_dir(two_ranks):
    by_dir = load_trace(two_ranks, use_cache=False, max_workers=1)
    names = ["sampled_rank-1.json.gz", "sampled_rank-0.json.gz"]
    by_list = load_trace(two_ranks, trace_files=names, use_cache=False, max_workers=1)
    _assert_same_trace(by_list, by_dir)


def test_rank_mapping_overrides_the_trace(two_ranks):
    mapping = {5: two_ranks / "sampled_rank-1.json.gz", 7: two_ranks / "sampled_rank-0.json.gz"}
    trace = load_trace(trace_files=mapping, use_cache=False, max_workers=1)
    assert trace.rank_list() == [5, 7]
    assert trace[5].meta.rank_origin == "mapping"
    assert trace[5].meta.source.endswith("sampled_rank-1.json.gz")


def test_single_file(two_ranks):
    trace = load_trace(two_ranks / "sampled_rank-1.json.gz", use_cache=False)
    assert trace.rank_list() == [1]


def test_file_url_and_memory_url(two_ranks):
    import fsspec

    by_path = load_trace(two_ranks, use_cache=False, max_workers=1)
    by_url = load_trace(f"file://{two_ranks}", use_cache=False, max_workers=1)
    _assert_same_trace(by_url, by_path)
    mem = fsspec.filesystem("memory")
    for f in two_ranks.iterdir():
        mem.pipe(f"/loader-test/{f.name}", f.read_bytes())
    in_memory = load_trace("memory://loader-test", use_cache=False)  # one process: memory is local
    assert in_memory.rank_list() == [0, 1]
    assert in_memory[0].meta.source == "memory://loader-test/sampled_rank-0.json.gz"


def test_rank_from_file_name(tmp_path):
    for name, rank in [("job_rank-3.json", 3), ("Rank_4.pt.trace.json.gz", 4), ("rank12.json", 12)]:
        _write(tmp_path / name, _kineto(rank=None, ts=rank))
    trace = load_trace(tmp_path, use_cache=False, max_workers=1)
    assert trace.rank_list() == [3, 4, 12]
    assert {trace[r].meta.rank_origin for r in trace} == {"file name"}


@pytest.mark.parametrize("name, rank", [
    ("worker0.1623212756351.pt.trace.json.gz", 0), ("worker_7.1623212756351.pt.trace.json", 7),
    ("Worker-12_host.json", 12), ("host_rank5.worker2.json", 5),  # "rank" wins over "worker"
    ("workers.json", None), ("myworker3.json", None), ("host_1234.1623212756351.json", None),
])
def test_rank_from_file_name_rules(name, rank):
    assert rank_from_file_name(f"gs://b/run/{name}") == rank


def test_a_lone_file_without_rank_is_rank_zero_without_a_warning(tmp_path):
    path = _write(tmp_path / "worker.pt.trace.json", _kineto(rank=None))
    with warnings.catch_warnings():
        warnings.simplefilter("error", TraceLoadWarning)  # one file: nothing to disambiguate
        trace = load_trace(tmp_path, use_cache=False)
    assert trace.rank_list() == [0]
    assert trace[0].meta.rank_origin == "default"
    assert trace[0].meta.source == str(path)


def test_no_rank_anywhere_among_several_files_warns(tmp_path):
    _write(tmp_path / "worker.pt.trace.json", _kineto(rank=None))
    _write(tmp_path / "other.pt.trace.json", _kineto(rank=1))
    with pytest.warns(TraceLoadWarning, match="worker.pt.trace.json.*rank 0"):
        trace = load_trace(tmp_path, use_cache=False)
    assert trace.rank_list() == [0, 1]
    assert trace[0].meta.rank_origin == "default"


def test_duplicate_ranks_name_both_files(tmp_path):
    _write(tmp_path / "a.json", _kineto(rank=1))
    _write(tmp_path / "b.json.gz", _kineto(rank=1))
    with pytest.raises(DuplicateRankError, match=r"a\.json.*b\.json\.gz") as info:
        load_trace(tmp_path, use_cache=False, max_workers=1)
    assert info.value.rank == 1


def test_non_trace_files_are_skipped_with_a_warning(hta_traces_dir, tmp_path):
    run = Path(shutil.copytree(hta_traces_dir / "execution_trace", tmp_path / "run"))
    (run / "notes.txt").write_text("not a trace and not a trace name")
    with pytest.warns(TraceLoadWarning, match="benchmark_simple_add_et.json.gz"):
        trace = load_trace(run, use_cache=False, max_workers=1)
    assert len(trace) == 1
    assert [Path(p).name for p, _ in trace.skipped] == ["benchmark_simple_add_et.json.gz"]


@pytest.fixture
def good_and_bad(two_ranks) -> Path:
    good = (two_ranks / "sampled_rank-0.json.gz").read_bytes()
    (two_ranks / "rank-5.json.gz").write_bytes(good[: len(good) // 2])  # truncated gzip
    (two_ranks / "rank-6.json").write_text('{"traceEvents": [{"ph": "X",')  # invalid JSON
    return two_ranks


def test_on_error_raise_reports_every_bad_file(good_and_bad):
    with pytest.raises(MultipleLoadErrors) as info:
        load_trace(good_and_bad, use_cache=False, max_workers=2)
    errors = info.value.errors
    assert [Path(e.path).name for e in errors] == ["rank-5.json.gz", "rank-6.json"]
    assert all(isinstance(e, CorruptTraceError) for e in errors)


def test_on_error_raise_with_one_bad_file_raises_the_parser_error(two_ranks):
    (two_ranks / "rank-6.json").write_text("{not json")
    with pytest.raises(CorruptTraceError, match="rank-6.json"):
        load_trace(two_ranks, use_cache=False, max_workers=1)


def test_on_error_skip_keeps_the_good_ranks(good_and_bad):
    with pytest.warns(TraceLoadWarning, match=r"(?s)rank-5\.json\.gz.*rank-6\.json"):
        trace = load_trace(good_and_bad, use_cache=False, on_error="skip", max_workers=2)
    assert trace.rank_list() == [0, 1]
    assert [Path(p).name for p, _ in trace.skipped] == ["rank-5.json.gz", "rank-6.json"]


def test_on_error_skip_raises_when_nothing_loads(tmp_path):
    (tmp_path / "rank-1.json").write_text("{not json")
    with pytest.raises(CorruptTraceError):
        load_trace(tmp_path, use_cache=False, on_error="skip")


def test_invalid_on_error_is_a_config_error(two_ranks):
    with pytest.raises(ConfigError, match="on_error"):
        load_trace(two_ranks, on_error="ignore")


def test_empty_directory_says_what_was_looked_for(tmp_path):
    (tmp_path / "readme.txt").write_text("no traces here")
    with pytest.raises(TraceNotFoundError, match=r"\*\.json.*\*\.gz") as info:
        load_trace(tmp_path, use_cache=False)
    assert info.value.path == str(tmp_path)


def test_missing_path(tmp_path):
    missing = tmp_path / "no-such-run"
    with pytest.raises(TraceNotFoundError, match="no-such-run"):
        load_trace(missing)
    with pytest.raises(TraceNotFoundError, match="gone.json"):
        load_trace(tmp_path, trace_files=["gone.json"])


def test_unreadable_directory_is_a_permission_error(two_ranks):
    two_ranks.chmod(0)
    try:
        if os.access(two_ranks, os.R_OK):
            pytest.skip("running as root: chmod 000 does not stop reads")
        with pytest.raises(TracePermissionError, match=str(two_ranks)):
            load_trace(two_ranks, use_cache=False)
    finally:
        two_ranks.chmod(0o755)


def test_unreadable_file_is_a_permission_error_for_an_unprivileged_user(tmp_path, hta_traces_dir):
    """Real EACCES: as root, a child process drops to uid 65534 before loading a chmod-000 file."""
    import subprocess
    import sys
    import textwrap

    if os.geteuid() != 0 and not hasattr(os, "setuid"):
        pytest.skip("cannot switch users here")
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="perm-"))  # pytest's tmp_path is private to root
    d.chmod(0o755)
    shutil.copy(hta_traces_dir / "triton_example" / "triton_example.json.gz", d / "rank0.json.gz")
    (d / "rank0.json.gz").chmod(0)
    script = textwrap.dedent(f"""
        import os
        from analysis.errors import TracePermissionError
        from analysis.kineto.loader import load_trace
        if os.geteuid() == 0:
            os.setgroups([]); os.setgid(65534); os.setuid(65534)
        try:
            load_trace({str(d)!r}, use_cache=False, progress=False, max_workers=1)
        except TracePermissionError as e:
            print("PERMISSION", e)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=REPO_ROOT)
    assert "PERMISSION" in out.stdout, out.stderr
    shutil.rmtree(d)
    assert "rank0.json.gz" in out.stdout and "permission denied" in out.stdout


class _KillsTheWorker:
    """Pickles fine here; unpickling it (in a worker process) ends that process at once."""

    def __reduce__(self):
        return (os._exit, (3,))


def test_a_dying_worker_fails_its_file_instead_of_hanging(two_ranks):
    # storage_options travel to every worker; this one kills whichever unpickles it. This
    # process parses one of the files itself (it unpickles nothing); the other fails.
    with pytest.raises(TraceLoadError, match="worker process") as info:
        load_trace(two_ranks, storage_options={"x": _KillsTheWorker()}, use_cache=False,
                   max_workers=2, on_error="raise")
    assert type(info.value) is TraceLoadError
    assert Path(info.value.path).name == "sampled_rank-0.json.gz"  # the pool takes the first
    with pytest.warns(TraceLoadWarning, match="sampled_rank-0.json.gz: the worker process"):
        trace = load_trace(two_ranks, storage_options={"x": _KillsTheWorker()}, use_cache=False,
                           max_workers=2, on_error="skip")
    assert trace.rank_list() == [1]


def test_this_process_parses_files_beside_the_pool_and_survives_its_crash(tmp_path):
    for rank in range(5):
        _write(tmp_path / f"rank{rank}.json", _kineto(rank))
    with pytest.warns(TraceLoadWarning, match="worker process parsing this file died") as caught:
        trace = load_trace(tmp_path, storage_options={"x": _KillsTheWorker()}, use_cache=False,
                           max_workers=2, on_error="skip")
    # How many files the pool took before its worker died depends on timing; every file is
    # either loaded or listed as skipped, never lost.
    died = [url for url, reason in trace.skipped if "died" in reason]
    assert 1 <= len(trace) <= 4 and len(trace) + len(died) == 5
    assert sum(str(w.message).count("died") for w in caught) == len(died)
    assert trace.skipped and all("worker process" in reason for _, reason in trace.skipped)


def test_parallel_load_equals_sequential_load(two_ranks):
    sequential = load_trace(two_ranks, use_cache=False, max_workers=1)
    parallel = load_trace(two_ranks, use_cache=False, max_workers=2)
    _assert_same_trace(parallel, sequential)


def test_progress_bar_only_when_asked(two_ranks, capsys):
    load_trace(two_ranks, use_cache=False, max_workers=1, progress=False)
    assert capsys.readouterr().err == ""
    load_trace(two_ranks, use_cache=False, max_workers=1, progress=True)
    assert "loading traces" in capsys.readouterr().err


@pytest.mark.parametrize(
    "exc",
    [PermissionError(13, "Permission denied"), OSError("Forbidden: bucket/run\nno access")],
    ids=["local EACCES", "gcsfs 403"],
)
def test_denied_access_maps_to_permission_error(exc):
    # What fsspec raises when access is denied (chmod cannot deny root, so checked directly).
    from analysis.io import as_load_error

    error = as_load_error("gs://bucket/run", exc, "list this directory")
    assert isinstance(error, TracePermissionError)
    assert error.path == "gs://bucket/run"


class _CountingChunkPool(loader.ChunkPool):
    chunks = 0
    in_pool = 0

    def __call__(self, fn, pieces):
        def counted(pieces):
            for piece in pieces:
                _CountingChunkPool.chunks += 1
                yield piece

        return super().__call__(fn, counted(pieces))

    def _submit(self, fn, piece):
        _CountingChunkPool.in_pool += fn is not int  # not the warm-up task
        return super()._submit(fn, piece)


def test_one_big_file_is_decoded_in_chunks_on_every_worker(hta_traces_dir, monkeypatch):
    path = hta_traces_dir / "df_index_resolver" / "df_index_resolver.json.gz"
    sequential = load_trace(path, use_cache=False, max_workers=1)
    monkeypatch.setattr(loader, "ChunkPool", _CountingChunkPool)
    _CountingChunkPool.chunks = _CountingChunkPool.in_pool = 0
    chunked = load_trace(path, use_cache=False, max_workers=2)  # asked for: used on 2 cores too
    assert _CountingChunkPool.chunks > 4  # 54 MB of JSON in 4 MiB chunks
    assert 0 < _CountingChunkPool.in_pool <= _CountingChunkPool.chunks
    _assert_same_trace(chunked, sequential)


@pytest.mark.parametrize(("cpus", "chunked"), [(2, False), (4, True)])
def test_chunks_on_several_cores_by_default_only_from_four(hta_traces_dir, monkeypatch, cpus, chunked):
    path = hta_traces_dir / "df_index_resolver" / "df_index_resolver.json.gz"
    monkeypatch.setattr(loader, "_available_cpus", lambda: cpus)
    monkeypatch.setattr(loader, "SMALL_JOB_BYTES", 0)  # the 4 MB of gzip would be parsed here
    monkeypatch.setattr(loader, "ChunkPool", _CountingChunkPool)
    _CountingChunkPool.chunks = 0
    load_trace(path, use_cache=False, progress=False)
    assert (_CountingChunkPool.chunks > 0) == chunked


_PARENT = os.getpid()


def _double_unless_in_a_worker(x: int) -> int:
    if os.getpid() != _PARENT:
        os._exit(3)  # a worker dies, as one killed for lack of memory would
    return 2 * x


def test_chunks_of_a_dead_chunk_worker_are_decoded_here():
    with loader.ChunkPool(2, multiprocessing.get_context("fork")) as pool:
        assert list(pool(_double_unless_in_a_worker, range(10))) == [2 * x for x in range(10)]
