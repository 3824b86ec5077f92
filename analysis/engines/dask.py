"""The Dask engine: each rank is read, parsed, kept and analysed on a Dask worker.

Only file names travel out and only small results travel back, so the caller's memory is bounded
by the size of the results, not of the traces (HTA needs ~5 GB of RAM per GB of trace on one
machine, HTA issue #250). The steps, all as Dask tasks whose futures the engine keeps, so the
tables stay in the workers' memory (``client.persist`` semantics) and are recomputed from the
source by Dask if a worker holding them dies:

1. the caller lists the files (:func:`analysis.kineto.sources.find_trace_files`);
2. ``load_rank``: one task per file reads it through fsspec on the worker (gs:// directly), parses
   it, or takes it from the worker's own trace cache (``cache_dir`` is a path on the workers);
3. ``rank_info``: the small part comes back -- each file's :class:`RankMeta` and its
   ``ProfilerStep`` names -- and the caller assigns ranks exactly as the local loader does
   (mapping, ``distributedInfo``, file name, duplicate check: the same code);
4. ``place_rank`` gives each table its rank; ``rank_window`` cuts HTA's analysed window, with the
   step names gathered over *all* ranks (:mod:`analysis.kineto.window`);
5. :meth:`DaskEngine.map_ranks` runs a per-rank step next to each rank's table; the facade
   combines the results on the caller.

Failures: a file that fails to load raises (``on_error="raise"``) or is skipped with a warning
(``"skip"``) exactly as with the local loader. A worker that dies while loading a file
(``KilledWorker``: a crash, or the OOM killer) fails that file only: files that died with it are
retried one at a time, so an innocent file is never blamed; the error names the file and, where
known, its rank. A worker death while running an analysis names the rank and its file, and with
``on_error="skip"`` drops that rank from the result with a warning; the ranks that died with it
are run again one at a time, and a rank whose tables Dask gave up on (a worker died while
recomputing them too) is first built again from its file, so an innocent rank is never blamed.
"""

from __future__ import annotations

import os
import pickle
import traceback
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from analysis.errors import (
    ConfigError,
    InputFileError,
    TraceAnalysisError,
    TraceLoadError,
    TraceLoadWarning,
    UnknownRankError,
)
from analysis.io import LoadOptions
from analysis.kineto.cache import TraceCache, cache_key
from analysis.kineto.loader import (
    WorkerTraceback,
    assign_ranks,
    error_from,
    load_file,
    progress_bar,
    settle_failures,
)
from analysis.kineto.model import EVENT_COLUMNS, RankMeta, RankTrace, Trace, empty_frame
from analysis.kineto.sources import TraceFile, find_trace_files, rank_from_file_name
from analysis.kineto.steps import step_numbers
from analysis.kineto.window import Window, check_window, rank_window, window_stats

try:
    from distributed import KilledWorker, as_completed, wait
except ImportError as exc:  # an optional extra
    raise ConfigError(
        "the Dask engine needs dask.distributed: pip install 'trace-analysis[dask]'"
    ) from exc

WINDOWS = ("steps", "full")


# ---------------------------------------------------------------------------------------------
# Tasks: these run on the workers.

def load_rank(file: TraceFile, options: LoadOptions) -> tuple[RankTrace, list[str]]:
    """Read and parse one file on a worker, through the worker's trace cache, with the engine's
    load ``options`` (``cache_dir`` is a path on the worker).

    Returns the trace (rank not yet assigned) and notes for the caller to warn about; raises the
    file's :class:`TraceLoadError`, as :func:`analysis.kineto.loader.load_trace` would.
    """
    use = options.use_cache and file.version
    key = cache_key(file.url, file.size, file.version, options.capture_trace) if use else None
    cached = TraceCache(options.cache_dir).get_parts(key) if key is not None else None
    if cached is not None:
        traces, notes = cached, []
    else:
        outcome = load_file(file.url, options.storage_options, options.cache_dir, key, True,
                            capture=options.capture_trace)
        if outcome[0] == "error":
            raise error_from(outcome)
        traces, notes = outcome[1], outcome[2]
    if len(traces) > 1:  # nsys/XPlane/rocprof files may hold several (analysis.formats)
        raise TraceLoadError(
            file.url,
            f"this {traces[0].meta.source_format} file holds {len(traces)} ranks; the Dask engine "
            "loads one rank per file: open it without client=",
        )
    return traces[0], notes


def rank_info(loaded: tuple[RankTrace, list[str]]) -> tuple[RankMeta, set[int], list[str]]:
    """The small part of a loaded file: its metadata, its profiler step numbers and its notes."""
    trace, notes = loaded
    return trace.meta, step_numbers(trace), notes


def place_rank(loaded: tuple[RankTrace, list[str]], meta: RankMeta) -> RankTrace:
    """The loaded trace with the metadata (rank, rank origin, source) decided on the caller."""
    return replace(loaded[0], meta=meta)


@dataclass
class _Raised:
    """An exception raised by a per-rank step, carried back as data.

    Dask would pickle the exception itself, but pickle rebuilds an exception by calling its class
    with ``args``, which breaks classes whose ``__init__`` takes other arguments (such as
    ``NoGPUEventsError(ranks, what)``); this keeps the class, ``args`` and attributes as they were.
    """

    cls: type
    args: tuple
    state: dict
    traceback: str

    @classmethod
    def capture(cls, exc: Exception) -> _Raised:
        state = dict(getattr(exc, "__dict__", {}))
        try:
            pickle.dumps((type(exc), exc.args, state))
        except Exception:  # attributes that cannot travel: keep the message
            return cls(TraceAnalysisError, (f"{type(exc).__name__}: {exc}",), {},
                       traceback.format_exc())
        return cls(type(exc), exc.args, state, traceback.format_exc())

    def rebuild(self) -> Exception:
        exc = self.cls.__new__(self.cls)
        exc.args = self.args
        exc.__dict__.update(self.state)
        exc.__cause__ = WorkerTraceback(self.traceback)
        return exc


def run_rank(func: Callable[..., Any], trace: RankTrace, kw: Mapping[str, Any]) -> Any:
    """``func(trace, **kw)`` on the worker that holds ``trace``; an exception comes back as data."""
    try:
        return func(trace, **kw)
    except Exception as exc:
        return _Raised.capture(exc)


# ---------------------------------------------------------------------------------------------
# The caller's side.

def _task_key(name: str, label: Any) -> str:
    # readable on the dashboard, unique per submission (tasks are not pure: files change)
    return f"{name}-{label}-{uuid.uuid4().hex[:12]}"


def _rank_hint(file: TraceFile) -> str:
    rank = file.rank if file.rank is not None else rank_from_file_name(file.url)
    return "" if rank is None else f"rank {rank}: "


def _died_while(what: str, exc: BaseException) -> str:
    return (
        f"the Dask worker {what} died each time it was tried (crashed, or was killed, e.g. for "
        f"lack of memory; see that worker's log) [{type(exc).__name__}: {exc}]"
    )


class DaskEngine:
    """Per-rank traces held on a Dask cluster; see the module docstring. Build with :meth:`load`."""

    def __init__(
        self,
        client,
        full: dict[int, Any],
        window: dict[int, Any],
        metas: dict[int, RankMeta],
        *,
        source: str = "",
        skipped: list[tuple[str, str]] | None = None,
        options: LoadOptions | None = None,
    ) -> None:
        self.client = client
        self.options = LoadOptions.of(options)  # how the ranks were read: their extras too
        self._full = full  # rank → Future[RankTrace], the whole trace
        self._window = window  # rank → Future[RankTrace], the analysed steps
        self.metas = metas
        self.source = source
        self.skipped = list(skipped or [])
        self.on_error = self.options.on_error
        self.timeout = self.options.timeout
        self.window_stats: dict[int, Any] = {}
        self._recipes: dict[int, _Recipe] = {}  # how each rank's tables were built (by load)

    # ------------------------------------------------------------------------------- loading
    @classmethod
    def load(
        cls,
        client,
        trace_dir: str | os.PathLike | None = None,
        trace_files: Iterable[str] | Mapping[int, str] | None = None,
        *,
        include_last_profiler_step: bool = False,
        gpu_events: str = "hta",
        window: str = "auto",
        options: LoadOptions | None = None,
        **load_options: Any,
    ) -> DaskEngine:
        """Load every file on ``client``'s workers (``options``, a :class:`~analysis.io.LoadOptions`,
        or its fields as keywords, as :func:`analysis.load_trace`); each ``load_rank`` task gets
        the same options.

        ``cache_dir`` is a path on the workers (default: each worker's
        ``$TRACE_ANALYSIS_CACHE`` or ``~/.cache/trace-analysis``). ``timeout`` (s) bounds each
        wait on the cluster; None waits as long as it takes.
        """
        opts = LoadOptions.of(options, **load_options)
        on_error, progress, timeout = opts.on_error, opts.progress, opts.timeout
        window_source = check_window(window)
        source = os.fspath(trace_dir) if trace_dir is not None else "trace_files"
        files = find_trace_files(trace_dir, trace_files, opts.storage_options)

        def submit(file: TraceFile, attempt: str):
            load = client.submit(load_rank, file, opts,
                                 key=_task_key("load_rank", attempt), pure=False)
            info = client.submit(rank_info, load, key=_task_key("rank_info", attempt), pure=False)
            return load, info

        loads: dict[str, Any] = {}
        infos: dict[str, tuple] = {}
        failures: dict[str, TraceLoadError] = {}
        killed: list[TraceFile] = []

        def settle(file: TraceFile, info, retried: bool) -> None:
            """Record a ``rank_info`` future's value, or the failure it ended with."""
            outcome = _outcome(info, timeout, f"{file.url}: loading on the Dask cluster")
            if not isinstance(outcome, _Failed):
                infos[file.url] = outcome
                return
            exc = outcome.exc
            if isinstance(exc, KilledWorker) and not retried:
                killed.append(file)
            elif isinstance(exc, KilledWorker):
                failures[file.url] = TraceLoadError(
                    file.url, _rank_hint(file) + _died_while("loading this file", exc)
                )
            elif isinstance(exc, InputFileError):
                failures[file.url] = exc
            else:
                failures[file.url] = TraceLoadError(
                    file.url, f"unexpected {type(exc).__name__} while loading: {exc}"
                )
            loads.pop(file.url, None)

        pending = {}
        for i, file in enumerate(files):
            loads[file.url], pending[file.url] = submit(file, i)
        with progress_bar(len(files), progress) as bar:
            done = as_completed(list(pending.values()), timeout=timeout)
            try:
                for _ in done:
                    if bar is not None:
                        bar.update(1)
            except TimeoutError as exc:
                raise TraceAnalysisError(
                    f"{source}: loading on the Dask cluster did not finish within {timeout} s"
                ) from exc
        for file in files:
            settle(file, pending[file.url], retried=False)
        # A worker that dies takes every task it was running down with it; rerun those files one
        # at a time so that only the file that kills its worker is blamed (as the local loader).
        for file in killed:
            loads[file.url], info = submit(file, f"retry-{file.url.rsplit('/', 1)[-1]}")
            settle(file, info, retried=True)
        del pending

        for _meta, _names, notes in infos.values():
            for note in notes:
                warnings.warn(note, TraceLoadWarning, stacklevel=2)
        skipped = settle_failures(files, infos, failures, on_error, source)

        # Ranks are decided here, by the local loader's own rule, over metadata-only stand-ins.
        stand_ins = [
            (f, RankTrace(meta=infos[f.url][0], events=empty_frame(EVENT_COLUMNS)))
            for f in files if f.url in infos
        ]
        by_rank = assign_ranks(stand_ins)
        full = {  # assign_ranks set each meta.source to its file's URL, the key of `loads`
            rank: client.submit(place_rank, loads[rt.meta.source], rt.meta,
                                key=_task_key("place_rank", rank), pure=False)
            for rank, rt in by_rank.items()
        }
        numbers: set[int] = set()
        for _, steps, _ in infos.values():
            numbers |= steps
        file_of = {f.url: f for f in files}
        recipes = {
            rank: _Recipe(file_of[rt.meta.source], len(numbers), include_last_profiler_step,
                          gpu_events, window_source)
            for rank, rt in by_rank.items()
        }
        window = {rank: recipes[rank].cut(client, fut, rank) for rank, fut in full.items()}
        stats = {
            rank: client.submit(window_stats, full[rank], fut,
                                key=_task_key("window_stats", rank), pure=False)
            for rank, fut in window.items()
        }
        loads.clear()  # the placed tables keep what they need; Dask frees the rest
        metas = {rank: rt.meta for rank, rt in by_rank.items()}
        engine = cls(client, full, window, metas, source=source, skipped=skipped, options=opts)
        engine._recipes = recipes
        what = f"{source}: preparing the ranks on the Dask cluster"
        _wait(list(window.values()) + list(stats.values()), timeout, what)
        engine.window_stats = {rank: _outcome(f, timeout, what) for rank, f in stats.items()}
        return engine

    # ------------------------------------------------------------------------------ analysis
    @property
    def read_extras(self):
        """Attaches extras to a rank as this engine read it, on the worker that holds the rank
        (``ExtrasReader(self.options)``: its ``cache_dir`` is a path on the workers)."""
        from analysis.kineto.extras import ExtrasReader  # reads files: imported when needed

        return ExtrasReader(self.options)

    @property
    def ranks(self) -> list[int]:
        return sorted(self._full)

    def select(self, ranks=None, default: str = "first") -> list[int]:
        """A ``ranks`` argument as a list of loaded ranks (:meth:`analysis.kineto.model.Trace.select`)."""
        # the same rule as the local engine's, over a trace of rank numbers only
        return Trace(dict.fromkeys(self.ranks), source=self.source).select(ranks, default=default)

    def _futures(self, window: Window) -> dict[int, Any]:
        if window not in WINDOWS:
            raise ConfigError(f"window must be one of {WINDOWS}, not {window!r}")
        return self._window if window == "steps" else self._full

    def map_ranks(
        self, func: Callable[..., Any], ranks: Iterable[int], *, window: Window = "steps", **kw
    ) -> dict[int, Any]:
        """``{rank: func(rank_trace, **kw)}`` computed on the workers, in the order of ``ranks``.

        ``func`` must be importable on the workers (a module-level function of this package, or
        of a module the workers have). An exception it raises is re-raised here unchanged (the
        first in rank order). A worker death names the rank and its file; with the engine's
        ``on_error="skip"`` that rank is left out with a warning instead.
        """
        sources = self._futures(window)
        chosen = [int(r) for r in ranks]
        for r in chosen:
            if r not in sources:
                raise UnknownRankError(r, self.ranks)
        name = getattr(func, "__name__", "analysis")

        def submit(r: int, attempt: str = ""):
            return self.client.submit(run_rank, func, sources[r], dict(kw),
                                      key=_task_key(name + attempt, r), pure=False)

        what = f"{self.source}: {name} on the Dask cluster"
        futures = {r: submit(r) for r in chosen}
        _wait(list(futures.values()), self.timeout, what)
        outcomes = {r: _outcome(f, self.timeout, what) for r, f in futures.items()}
        # As when loading: a worker death fails every task it ran; rerun those ranks one at a
        # time, so only the rank that kills its worker is blamed.
        for r in [r for r in chosen if _killed(outcomes[r])]:
            self._rebuild_lost(r)
            outcomes[r] = _outcome(submit(r, "-retry"), self.timeout, what)
        out: dict[int, Any] = {}
        for r in chosen:
            value = outcomes[r]
            if isinstance(value, _Raised):
                raise value.rebuild()
            if not isinstance(value, _Failed):
                out[r] = value
                continue
            error = self._rank_error(r, value.exc, f"running {name}")
            if _killed(value) and self.on_error == "skip":
                warnings.warn(f"left out {error}", TraceLoadWarning, stacklevel=2)
                continue
            raise error from value.exc
        return out

    def _rebuild_lost(self, rank: int) -> None:
        """Submit again the tasks that build ``rank``'s tables if Dask gave them up.

        Dask recomputes a held table lost with a dead worker from the tasks that made it; but
        when a worker dies while running that recomputation too (with the scheduler's
        ``allowed_failures`` spent), the table's future ends in error, and every later step on
        that rank would fail with the death of a worker it never ran on. Such a rank is built
        again here from its file (the whole trace) or from its whole trace (the window), with the
        metadata and window the load gave it."""
        recipe = self._recipes.get(rank)
        full, window = self._full.get(rank), self._window.get(rank)
        if recipe is None or full is None or window is None:
            return
        if full.status == "error":
            loaded = self.client.submit(load_rank, recipe.file, self.options, pure=False,
                                        key=_task_key("load_rank", f"again-{rank}"))
            full = self.client.submit(place_rank, loaded, self.metas[rank], pure=False,
                                      key=_task_key("place_rank", f"again-{rank}"))
            self._full[rank] = full
        elif window.status != "error":
            return
        self._window[rank] = recipe.cut(self.client, full, f"again-{rank}")

    def _rank_error(self, rank: int, exc: BaseException, what: str) -> TraceAnalysisError:
        source = self.metas[rank].source
        if isinstance(exc, KilledWorker):
            error = TraceLoadError(source, f"rank {rank}: " + _died_while(what, exc))
        else:
            error = TraceLoadError(source, f"rank {rank}: {type(exc).__name__} {what}: {exc}")
        error.rank = rank
        return error

    def fetch_trace(self, ranks: Iterable[int] | None = None, window: Window = "steps") -> Trace:
        """Bring ranks' tables to the caller as a :class:`Trace` (all of them: mind the memory)."""
        sources = self._futures(window)
        chosen = self.ranks if ranks is None else [int(r) for r in ranks]
        for r in chosen:
            if r not in sources:
                raise UnknownRankError(r, self.ranks)
        traces = self.client.gather([sources[r] for r in chosen])
        return Trace(dict(zip(chosen, traces, strict=True)), source=self.source,
                     skipped=self.skipped)

    def close(self) -> None:
        """Release the ranks' tables on the workers."""
        futures = list(self._full.values()) + list(self._window.values())
        self._full, self._window = {}, {}
        self.client.cancel(futures)

    def __repr__(self) -> str:
        return f"DaskEngine(source={self.source!r}, ranks={self.ranks}, client={self.client!r})"


@dataclass(frozen=True)
class _Recipe:
    """What :meth:`DaskEngine.load` built a rank's tables from: its file, the number of profiler
    steps over all ranks and the window options (:func:`analysis.kineto.window.rank_window`)."""

    file: TraceFile
    n_steps: int
    include_last_profiler_step: bool
    gpu_events: str
    window: str

    def cut(self, client, full, label: Any):
        """The future of the analysed window cut from the future ``full`` (the whole rank)."""
        return client.submit(rank_window, full, self.n_steps, self.include_last_profiler_step,
                             self.gpu_events, self.window, key=_task_key("rank_window", label),
                             pure=False)


@dataclass
class _Failed:
    """The exception a Dask task ended with (as opposed to a value it returned)."""

    exc: BaseException


def _killed(outcome: Any) -> bool:
    return isinstance(outcome, _Failed) and isinstance(outcome.exc, KilledWorker)


def _outcome(future, timeout: float | None, what: str) -> Any:
    """The future's value, or :class:`_Failed`. Asked of the future itself, never of a status
    seen earlier: a finished result lost with a dead worker is being recomputed by Dask."""
    try:
        return future.result(timeout=timeout)
    except TimeoutError as exc:
        raise TraceAnalysisError(f"{what} did not finish within {timeout} s") from exc
    except Exception as exc:
        return _Failed(exc)


def _wait(futures: list, timeout: float | None, what: str) -> None:
    try:
        wait(futures, timeout=timeout)
    except TimeoutError as exc:
        raise TraceAnalysisError(f"{what} did not finish within {timeout} s") from exc
