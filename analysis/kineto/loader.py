"""Loading a set of trace files into a :class:`~analysis.kineto.model.Trace`, in parallel, through the cache.

``load_trace`` finds the files (:mod:`analysis.kineto.sources`), takes what it can from the cache
(:mod:`analysis.kineto.cache`), parses the rest in this process and a process pool -- one file per
task; each worker reads the bytes, parses them, writes the cache entry and returns only the entry's
key, so big tables cross the process boundary as a memory-mapped Arrow file instead of a pickle --
and then gives every file its rank. With fewer files than cores, the files are parsed here one
after another instead, each file's chunks of events decoded on every core (``ChunkPool``).

The pool forks when every file is local and no other thread runs; else it uses "forkserver" where
there is one, else "spawn" (a fork can deadlock on the threads that gcsfs and fsspec run). As with
any such pool, a *script* that calls ``load_trace`` at import time must guard it with
``if __name__ == "__main__":``.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import multiprocessing
import os
import threading
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from analysis import arguments
from analysis.errors import (
    DuplicateRankError,
    InputFileError,
    MultipleLoadErrors,
    NotATraceError,
    TraceLoadError,
    TraceLoadWarning,
    TraceNotFoundError,
    printable,
)
from analysis.io import LoadOptions, read_limit, remote_timeout
from analysis.kineto.cache import TraceCache, cache_key, part_key
from analysis.kineto.model import RankTrace, Trace
from analysis.kineto.progress import PROGRESS_DELAY_S, progress_bar  # noqa: F401 (re-exported)
from analysis.kineto.sources import (
    TraceFile,
    find_trace_files,
    rank_from_file_name,
    read_trace_bytes,
)

ON_ERROR_CHOICES = arguments.ON_ERROR_CHOICES
# Below this much (compressed) input, starting a process pool (~0.7 s) costs more than it saves:
# parsing runs at roughly 20 MB of gzip per second per core.
SMALL_JOB_BYTES = 8 * 2**20
# Progress appears only for loads slower than this (seconds), so quick loads print nothing.
# Imported once by the forkserver, so every worker starts with them already loaded.
_WORKER_PRELOAD = [
    "analysis.kineto.parse",
    "analysis.kineto.columns",
    "analysis.kineto.cache",
    "analysis.kineto.sources",
]
# One file's chunks are decoded on several cores by default only from this many: on 2 cores the
# main process's serial part (decompressing, the top-level pass, joining) and the chunks' trip
# through pipes leave little to gain, and on a busy 2-core machine it measured slower (a 1 M-event
# file: 4.1 s against 3.2 s in one process, load average 2-3). ``max_workers=`` asks for it anyway.
MIN_CHUNK_POOL_CPUS = 4
# Chunks in flight per worker when one file's chunks are decoded in parallel: enough to keep
# every worker busy, few enough that the chunks waiting in pipes stay a few MiB each.
_CHUNKS_IN_FLIGHT_PER_WORKER = 2
# Chunks a ChunkPool worker decodes for each one this process decodes: this process also has the
# serial part of a parse (decompressing, the top-level pass, joining the tables). Measured with
# 2 cores on a 1 M-event file: this process 1.6-2.0 CPU-s against its worker's 0.5-1.2 at 1:1.
_LOCAL_SHARE = 2


class WorkerTraceback(Exception):
    """The traceback, as text, of an exception raised in a worker (a pool process or a Dask
    worker); attached as the ``__cause__`` of the error re-raised in the caller."""


# ---------------------------------------------------------------------------------------------
# One file: runs in a worker process, or in-process for a single file / max_workers=1.

def load_file(
    url: str,
    storage_options: Mapping[str, Any] | None,
    cache_dir: str | None,
    key: str | None,
    return_trace: bool,
    map_chunks=None,
    capture: str | None = None,
) -> tuple:
    """Read, parse and cache one file. Returns ``("trace", [RankTrace, ...], notes)``,
    ``("cached", key, notes)`` or ``("error", error class, path, reason, traceback text)``.
    ``map_chunks``: how the parser decodes the file's chunks (default: here, one after another).
    ``capture``: the graph-capture trace(s) to merge into a replay trace (``capture_trace=``;
    None: the ``capture_traces/`` folder beside it, :mod:`analysis.kineto.cuda_graphs`).

    Errors are returned, not raised: the project's exceptions take (path, reason) and would not
    survive pickling back to the parent as they are.
    """
    try:
        data = read_trace_bytes(url, storage_options)
        from analysis.kineto.cuda_graphs import with_graph_capture

        data, graph_notes = with_graph_capture(data, url, capture)
        traces = parse_any(data, url, map_chunks)
        for trace in traces:
            trace.meta.capture_trace = capture
    except InputFileError as exc:
        return ("error", type(exc), exc.path, exc.reason, None)
    except MemoryError:
        return ("error", InputFileError, url, "ran out of memory parsing this file", None)
    except Exception as exc:  # a parser bug: keep the file name and the traceback
        reason = f"unexpected {type(exc).__name__} while parsing: {exc}"
        return ("error", TraceLoadError, url, reason, traceback.format_exc())
    del data
    notes: list[str] = graph_notes
    if key is not None:
        try:
            cache = TraceCache(cache_dir)
            cache.put_parts(key, traces)
            # each rank can now be released and read back from its entry (analysis.engines.local)
            for part, trace in enumerate(traces):
                trace.cache_entry = str(cache.entry_dir(part_key(key, part)))
            if not return_trace:
                return ("cached", key, notes)
        except OSError as exc:
            notes.append(f"{url}: could not write the trace cache entry ({exc}); not cached")
    return ("trace", traces, notes)


def parse_any(data: bytes, url: str, map_chunks=None) -> list[RankTrace]:
    """One file's ranks: a Kineto trace is one rank; an nsys, XPlane or rocprofv3 file (chosen by
    content, ``analysis.formats.detect``) may hold several."""
    from analysis.formats import detect
    from analysis.formats.readers import parse_foreign  # here, so sources-only callers skip them

    source_format = detect(data[:4096])
    if source_format != "kineto":
        return parse_foreign(data, url, source_format)
    from analysis.kineto.parse import parse_trace_bytes

    return [parse_trace_bytes(data, url, map_chunks=map_chunks)]


def error_from(outcome: tuple) -> InputFileError:
    _, cls, path, reason, tb = outcome
    try:
        exc = cls(path, reason)
    except TypeError:  # a subclass with another signature
        exc = TraceLoadError(path, reason)
    if tb:
        exc.__cause__ = WorkerTraceback(tb)
    return exc


def _worker_died(url: str) -> tuple:
    reason = (
        "the worker process parsing this file died (crashed, or killed e.g. for lack of memory)"
    )
    return ("error", TraceLoadError, url, reason, None)


# ---------------------------------------------------------------------------------------------
# Many files.

def _pool_context(urls: Sequence[str] | None = None):
    # fork starts workers at once with this process's modules already imported, where a fresh
    # forkserver first imports pandas and pyarrow again (1-2 s and ~110 MiB more). It is
    # safe only for local files in a process with no other thread: a lock another thread holds at
    # fork time is never released in the child (gcsfs/fsspec, Jupyter and tqdm run threads).
    if (
        urls is not None
        and threading.active_count() == 1
        and all(_is_local(u) for u in urls)
        and "fork" in multiprocessing.get_all_start_methods()
    ):
        return multiprocessing.get_context("fork")
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_WORKER_PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


def _available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))  # honours cgroup/cpuset limits, unlike cpu_count()
    except AttributeError:
        return os.cpu_count() or 1


def _use_environment(environ: dict[str, str]) -> None:
    """Worker initializer: forkserver workers inherit the environment of the forkserver's start,
    not today's; credentials or emulator settings changed since then must still apply."""
    os.environ.clear()
    os.environ.update(environ)


def _is_local(url: str) -> bool:
    return "://" not in url or url.startswith("file://")


def _run_pool(tasks: list[tuple], workers: int, on_outcome, ctx, load=load_file) -> None:
    """Run ``load_file`` over ``tasks`` on ``workers`` processes: this one and ``workers - 1`` in
    a pool. Parsing here too saves a process (its ~100 MiB of imports) at the same parallelism.
    A dead pool worker fails its own file only, never hangs."""
    pool_args = {"mp_context": ctx, "initializer": _use_environment, "initargs": (dict(os.environ),)}
    broken: list[tuple] = []
    queue = collections.deque(tasks)
    helpers = workers - 1
    in_flight: dict = {}
    pool = ProcessPoolExecutor(max_workers=helpers, **pool_args)
    try:
        while queue or in_flight:
            # a file for each idle pool worker, leaving one for this process
            while len(queue) > 1 and len(in_flight) < helpers and not broken:
                task = queue.popleft()
                try:
                    in_flight[pool.submit(load, *task)] = task
                except BrokenProcessPool:
                    broken.append(task)
            if broken:  # after a crash, every file left is isolated below
                broken += queue
                queue.clear()
            if queue:
                task = queue.pop()  # from the end: the pool takes the front
                on_outcome(task, load(*task[:4], return_trace=True))
                done = [f for f in in_flight if f.done()]
            else:
                done = wait(in_flight, return_when=FIRST_COMPLETED).done if in_flight else []
            for future in done:
                task = in_flight.pop(future)
                try:
                    on_outcome(task, future.result())
                except BrokenProcessPool:
                    broken.append(task)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    # A broken pool fails every unfinished task; rerun those one per fresh single-worker pool to
    # find the file that kills its worker and load the innocent ones (forkserver: threads may
    # run by now).
    pool_args["mp_context"] = _pool_context()
    for task in broken:
        with ProcessPoolExecutor(max_workers=1, **pool_args) as single:
            try:
                outcome = single.submit(load, *task).result()
            except BrokenProcessPool:
                outcome = _worker_died(task[0])
        on_outcome(task, outcome)


class ChunkPool:
    """Decodes the chunks of one file at a time in this process and ``workers - 1`` others
    (``parse``'s ``map_chunks``).

    Used when there are fewer files than cores: the files are then read and parsed one after
    another in this process, and each file's chunks spread over every core. This process decodes
    a chunk whenever the pool has enough queued, so it is not idle and a process is saved. A
    worker that dies does not lose the file: its chunks are decoded here instead.
    """

    def __init__(self, workers: int, ctx):
        self.helpers = max(1, workers - 1)
        self._pool = ProcessPoolExecutor(max_workers=self.helpers, mp_context=ctx)
        self._broken = False
        # Start the workers now, while this process is small: a worker forked later would count
        # the file being parsed here in its resident memory too.
        self._submit(int, b"0")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __call__(self, fn, pieces):
        """``fn`` over ``pieces``, results in order."""
        queued = self.helpers * _CHUNKS_IN_FLIGHT_PER_WORKER
        pending: collections.deque = collections.deque()  # [piece, future, result]
        submitted = local = 0
        try:
            for piece in pieces:
                busy = sum(1 for _, future, _ in pending if future is not None and not future.done())
                # This process also cuts, sends and joins the chunks: it decodes at most one
                # chunk for every _LOCAL_SHARE chunks sent to each worker, else waits its turn.
                while busy >= queued and local * _LOCAL_SHARE * self.helpers >= submitted and pending:
                    yield self._result(fn, *pending.popleft())
                    busy = sum(1 for _, f, _ in pending if f is not None and not f.done())
                if busy < queued and not self._broken:
                    pending.append([piece, self._submit(fn, piece), None])
                    submitted += 1
                else:
                    pending.append([None, None, fn(piece)])  # the pool has enough: decode here
                    local += 1
                while pending and (pending[0][1] is None or pending[0][1].done()):
                    yield self._result(fn, *pending.popleft())
            while pending:
                yield self._result(fn, *pending.popleft())
        finally:
            for _, future, _ in pending:
                if future is not None:
                    future.cancel()

    def _submit(self, fn, piece):
        if self._broken:
            return None
        try:
            return self._pool.submit(fn, piece)
        except BrokenProcessPool:
            self._broken = True
            return None

    def _result(self, fn, piece, future, result):
        if future is not None:
            try:
                return future.result()
            except BrokenProcessPool:
                self._broken = True
            return fn(piece)
        return result if piece is None else fn(piece)


def assign_ranks(loaded: list[tuple[TraceFile, RankTrace]]) -> dict[int, RankTrace]:
    """Rank of each file: the mapping's, else distributedInfo.rank, else the file name's, else 0.
    The ranks of an nsys/XPlane/rocprof file are its reader's (plus the mapping's rank, if any).

    Also warns, once per file, about the data anomalies its parser counted (``meta.anomalies``),
    and about files whose rank was assumed, when several files compete for ranks (a lone file
    is rank 0 without a warning: ``meta.rank_origin`` still says "default").
    """
    ranks: dict[int, RankTrace] = {}
    defaulted = []
    for file, trace in loaded:
        meta = trace.meta
        meta.source = file.url
        if meta.anomalies:
            warnings.warn(
                f"{printable(file.url)}: " + "; ".join(meta.anomalies),
                TraceLoadWarning,
                stacklevel=3,
            )
        if meta.source_format != "kineto":
            # the reader numbered the file's ranks (analysis.formats); a mapping's rank offsets them
            if file.rank is not None:
                meta.rank += file.rank
        elif file.rank is not None:
            meta.rank, meta.rank_origin = file.rank, "mapping"
        elif meta.rank < 0:
            from_name = rank_from_file_name(file.url)
            if from_name is not None:
                meta.rank, meta.rank_origin = from_name, "file name"
            else:
                meta.rank, meta.rank_origin = 0, "default"
                defaulted.append(file.url)
        if meta.rank in ranks:
            raise DuplicateRankError(meta.rank, ranks[meta.rank].meta.source, file.url)
        ranks[meta.rank] = trace
    if defaulted and len(loaded) > 1:  # a lone file: no other file to tell its rank from
        warnings.warn(
            "no usable rank in distributedInfo or in the file name of "
            + ", ".join(map(printable, defaulted))
            + "; assumed rank 0 (pass trace_files={rank: path} to set ranks)",
            TraceLoadWarning,
            stacklevel=3,
        )
    return ranks


def settle_failures(
    files: Sequence[TraceFile],
    loaded: Mapping[str, Any],
    failures: Mapping[str, TraceLoadError],
    on_error: str,
    source: str,
) -> list[tuple[str, str]]:
    """Apply the rules for files that did not load; returns ``Trace.skipped`` as (path, reason).

    Non-traces are always skipped with one warning naming them. Other failures raise (one error,
    or ``MultipleLoadErrors``) with ``on_error="raise"`` or when nothing loaded; with ``"skip"``
    one warning lists them. One file given that is not a trace raises its ``NotATraceError``;
    nothing loaded from several is a ``TraceNotFoundError``.
    """
    skipped: list[tuple[str, str]] = []
    not_traces = [f.url for f in files if isinstance(failures.get(f.url), NotATraceError)]
    if len(files) == 1 and not_traces and not loaded:
        raise failures[not_traces[0]]  # the file and why it is not a trace, nothing to skip
    if not_traces:
        warnings.warn(
            "skipped files that are not profiler traces: "
            + ", ".join(f"{printable(url)} ({failures[url].reason})" for url in not_traces),
            TraceLoadWarning,
            stacklevel=3,
        )
        skipped += [(url, failures[url].reason) for url in not_traces]
    errors = [failures[f.url] for f in files if f.url in failures and f.url not in not_traces]
    if errors and (on_error == "raise" or not loaded):
        raise errors[0] if len(errors) == 1 else MultipleLoadErrors(errors)
    if errors:
        warnings.warn(
            f"skipped {len(errors)} trace file(s) that failed to load: "
            + "; ".join(str(e) for e in errors),
            TraceLoadWarning,
            stacklevel=3,
        )
        skipped += [(e.path, e.reason) for e in errors]
    if not loaded:
        raise TraceNotFoundError(
            source,
            f"none of the {len(files)} file(s) is a profiler trace (Kineto, Nsight Systems "
            "SQLite, XPlane, rocprofv3 JSON): "
            + ", ".join(f"{printable(url)} ({failures[url].reason})" for url in not_traces),
        )
    return skipped


def load_trace(
    trace_dir: str | os.PathLike | None = None,
    trace_files: Sequence[str | os.PathLike] | Mapping[int, str | os.PathLike] | None = None,
    *,
    options: LoadOptions | None = None,
    on_rank: Callable[[RankTrace], RankTrace] | None = None,
    **load_options: Any,
) -> Trace:
    """Load Kineto traces into a :class:`Trace` (one :class:`RankTrace` per rank).

    ``trace_dir``: a directory, prefix or single file; a local path or any fsspec URL
    (``gs://bucket/prefix``, ``file://``, ``memory://``). ``trace_files``: paths/URLs (relative
    ones are joined to ``trace_dir``) or HTA's ``{rank: path}`` mapping. ``options``: a
    :class:`~analysis.io.LoadOptions`; ``load_options``, its fields as keywords (replacing those
    of ``options``): ``storage_options`` go to fsspec (e.g. ``{"token": ..., "project": ...}`` for
    gcsfs), in the workers too; ``cache_dir``, ``use_cache``, ``on_error``, ``max_workers``,
    ``progress`` as below (``timeout`` and ``max_memory`` are the engines').

    Files that are valid JSON but not traces are skipped with a warning. Other failures:
    ``on_error="raise"`` raises the file's error (or :class:`MultipleLoadErrors`);
    ``on_error="skip"`` keeps every good rank, warns once and lists the rest in ``Trace.skipped``
    as ``(path, reason)``. Parsed files are cached in ``cache_dir`` (see :class:`TraceCache`)
    unless ``use_cache=False``. Files are parsed by ``max_workers`` processes (default: one per
    CPU, at most one per file; 1 parses in this process); when there are at least twice as many
    workers as files (and, unless ``max_workers`` is given, at least ``MIN_CHUNK_POOL_CPUS``
    CPUs), the files are parsed one by one, each file's chunks decoded by all the workers (one
    big rank on a laptop). ``progress``: None shows a bar only for
    loads over a second, True always, False never. ``capture_trace``: the graph-capture trace
    (a file, or a folder of them) merged into every CUDA/HIP graph replay trace loaded, instead
    of the ``capture_traces/`` folder beside each (:mod:`analysis.kineto.cuda_graphs`).

    ``on_rank``: each rank, as soon as its file is loaded (before ranks are assigned, so its
    ``meta.rank`` may still change), goes through ``on_rank`` and the Trace keeps what it returns.
    The local engine passes one that keeps a stand-in without tables for a rank it can read back
    from the cache, so a load never holds every rank's tables at once (``analysis.engines.local``).
    """
    arguments.trace_source(trace_dir, trace_files)
    opts = LoadOptions.of(options, **load_options)  # checked here unless given checked
    storage_options, on_error = opts.storage_options, opts.on_error
    max_workers, progress = opts.max_workers, opts.progress
    capture = opts.capture_trace
    if capture is not None:
        from analysis.kineto.cuda_graphs import capture_location

        capture_location("", capture)  # a missing capture trace fails here, once, naming it
    load = functools.partial(load_file, capture=capture)
    read_limit(), remote_timeout()  # a bad setting in the environment fails here, once
    source = os.fspath(trace_dir) if trace_dir is not None else "trace_files"
    files = find_trace_files(trace_dir, trace_files, storage_options)
    cache = TraceCache(opts.cache_dir) if opts.use_cache else None
    cache_dir_str = str(cache.dir) if cache is not None else None

    traces: dict[str, list[RankTrace]] = {}  # a file's ranks (one, unless another format)

    def keep(url: str, parts: list[RankTrace]) -> None:
        traces[url] = parts if on_rank is None else [on_rank(part) for part in parts]

    failures: dict[str, TraceLoadError] = {}
    notes: list[str] = []

    # chosen before the progress bar starts, whose monitor thread would rule out fork
    ctx = _pool_context([f.url for f in files])
    # cache hits first: a second open starts no progress bar (tqdm's import alone is ~0.05 s)
    tasks = []
    for file in files:
        key = (cache_key(file.url, file.size, file.version, capture)
               if cache and file.version else None)
        cached = cache.get_parts(key) if key is not None else None
        if cached is not None:
            keep(file.url, cached)
        else:
            tasks.append((file.url, storage_options, cache_dir_str, key))

    with progress_bar(len(tasks), progress) if tasks else contextlib.nullcontext() as bar:

        def on_outcome(task: tuple, outcome: tuple) -> None:
            url = task[0]
            if outcome[0] == "error":
                failures[url] = error_from(outcome)
            elif outcome[0] == "trace":
                keep(url, outcome[1])
                notes.extend(outcome[2])
            else:
                cached = cache.get_parts(outcome[1])
                if cached is None:  # removed or damaged since the worker wrote it: parse here
                    outcome = load(url, storage_options, None, None, True)
                    return on_outcome(task, outcome)
                for part in cached:  # parsed just now by the worker, cached on the way
                    part.meta.from_cache = False
                keep(url, cached)
                notes.extend(outcome[2])
            if bar is not None:
                bar.update(1)

        cpus = max_workers or _available_cpus()
        workers = min(cpus, len(tasks))
        sizes = [f.size for f in files if f.url in {t[0] for t in tasks}]
        small_job = max_workers is None and None not in sizes and sum(sizes) < SMALL_JOB_BYTES
        # memory:// lives in this process only; workers would find it empty.
        # one file's chunks over several cores: asked for, or enough cores to pay off
        chunks_in_parallel = cpus >= 2 * len(tasks) and (
            max_workers is not None or cpus >= MIN_CHUNK_POOL_CPUS
        )
        in_process = (
            (workers <= 1 and not chunks_in_parallel)
            or cpus <= 1
            or small_job
            or any(t[0].startswith("memory://") for t in tasks)
        )
        if not tasks:
            pass
        elif in_process:
            for task in tasks:
                on_outcome(task, load(*task, return_trace=True))
        elif chunks_in_parallel:
            # fewer files than cores: one file at a time, its chunks decoded on every core
            with ChunkPool(cpus, ctx) as chunk_pool:
                for task in tasks:
                    on_outcome(task, load(*task, return_trace=True, map_chunks=chunk_pool))
        else:
            _run_pool([(*task, False) for task in tasks], workers, on_outcome, ctx, load)

    for note in notes:
        warnings.warn(note, TraceLoadWarning, stacklevel=2)

    skipped = settle_failures(files, traces, failures, on_error, source)
    loaded = [(f, t) for f in files if f.url in traces for t in traces[f.url]]
    return Trace(ranks=assign_ranks(loaded), source=source, skipped=skipped)
