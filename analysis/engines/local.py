"""The local engine: the per-rank work runs in this process, within a memory budget.

Loading uses :func:`analysis.kineto.loader.load_trace` (a local process pool, through the cache of
parsed traces). The engine then keeps per-rank *results*, not per-rank traces:

- the load streams (:class:`_Intake`): each rank, as soon as its file is parsed or read from the
  cache, gives its step numbers, its analysed window is cut and counted (``window_stats``), the
  first windows are kept while they fit in ``max_memory``, and the rank's tables are let go; so a
  load of 512 ranks holds one rank's tables at a time (plus the windows kept), not all of them;
- a rank read from the cache (``RankTrace.cache_entry``: its tables are memory-mapped Arrow IPC
  files, strings dictionary-encoded) can be released and read back from there at any time; a rank
  that has no cache entry (``use_cache=False``, an in-memory trace) stays held;
- ``map_ranks`` visits the ranks one after another: it reads a rank back if it was released, cuts
  its analysed window (the rows it keeps are remembered, a bit per event), runs the step and keeps the rank (its window and the values its analyses
  derived and memoised) only while the ranks held stay within ``max_memory`` bytes, releasing the
  least recently used ones first;
- the parts of a ``run_on_rank`` step (:func:`analysis.registry.run_on_rank`) are memoised per (analysis, options, context,
  window, rank): asking the same question again runs nothing, and a batch runs only the analyses
  a rank has not answered yet;
- the parts of analyses declared ``persist`` (a function of the rank's trace alone) are also kept
  in the rank's trace cache entry (:func:`analysis.kineto.cache.put_result`), keyed by the
  analysis, its options and context, the rank and its file, what cuts the analysed window (the
  number of profiler steps over all ranks, ``include_last_profiler_step``, ``gpu_events``,
  ``window``; for a ``"steps"`` part) and a hash of the package's source (:func:`_source_hash`:
  any change to the code computes them again): a later process that asks again reads them,
  without reading the rank's tables.

``max_memory`` defaults to :func:`default_max_memory` (an eighth of the memory available when the
engine starts, at most 512 MiB, at least 128 MiB). The sizes counted are the tables' bytes (the
memory-mapped columns included: they count in the process's RSS once read) plus those of the
frames and arrays the analyses memoised on the rank.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import os
import pickle
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from analysis.errors import ConfigError
from analysis.io import LoadOptions
from analysis.kineto.cache import TraceCache, get_result, has_result, put_result
from analysis.kineto.loader import load_trace
from analysis.kineto.model import RankMeta, RankTrace, Trace
from analysis.kineto.steps import step_numbers
from analysis.kineto.window import (
    GpuEvents,
    Window,
    WindowSource,
    WindowStats,
    apply_window,
    check_window,
    count_steps,
    window_rows,
    window_stats,
)

MiB = 1 << 20
_DEFAULT_CAP = 512 * MiB
_DEFAULT_FLOOR = 128 * MiB
_COLLECT_EVERY = 64  # releases between full collections (a safety net: see _fit)


def default_max_memory() -> int:
    """The default memory budget (bytes) of the ranks a :class:`LocalEngine` holds at once: an
    eighth of the memory available now (psutil), between 128 MiB and 512 MiB."""
    try:
        import psutil

        available = int(psutil.virtual_memory().available)
    except Exception:  # no psutil, or no /proc: the cap
        return _DEFAULT_CAP
    return max(_DEFAULT_FLOOR, min(_DEFAULT_CAP, available // 8))


def _shared_objects_bytes(values: np.ndarray) -> int:
    """Bytes of an object column: a pointer per row, and each distinct object once. The text
    columns read back from the cache share one object per distinct value (a collective's
    ``pg_name``, ``pg_ranks``: one string for thousands of rows), which pandas' ``deep`` measure
    counts once per row (7× the true size on a real trace's collectives, and slower)."""
    if not len(values):
        return 0
    ids = np.fromiter(map(id, values), dtype=np.int64, count=len(values))
    _, first = np.unique(ids, return_index=True)
    return 8 * len(values) + sum(sys.getsizeof(values[i]) for i in first.tolist())


def _frame_bytes(value: pd.DataFrame | pd.Series | pd.Index) -> int:
    """Bytes held by a frame, series or index: numbers and categoricals as pandas measures them
    (``deep``: a categorical's distinct values once), object columns by
    :func:`_shared_objects_bytes`; the index once."""
    if isinstance(value, pd.DataFrame):
        columns = ([column for _, column in value.items()] if not value.columns.has_duplicates
                   else [value.iloc[:, i] for i in range(value.shape[1])])
    elif isinstance(value, pd.Series):
        columns = [value]
    else:
        columns, value = [value], None
    total = 0 if value is None else _frame_bytes(value.index)
    for column in columns:
        if column.dtype == object:
            total += _shared_objects_bytes(column.to_numpy())
        elif isinstance(column, pd.Series):
            total += int(column.memory_usage(index=False, deep=True))
        else:
            total += int(column.memory_usage(deep=True))
    return total


def _nbytes(value: Any, depth: int = 0) -> int:
    """Bytes held by a memoised value: frames, series and arrays, inside tuples/lists/dicts."""
    if isinstance(value, pd.DataFrame | pd.Series | pd.Index):
        return _frame_bytes(value)
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if depth < 3 and isinstance(value, tuple | list):
        if len(value) > 64 and isinstance(value[0], str | int | float):
            return 0  # a list of texts or numbers (a column's distinct names): not measured
        return sum(_nbytes(v, depth + 1) for v in value)
    if depth < 3 and isinstance(value, dict):
        return sum(_nbytes(v, depth + 1) for v in value.values())
    if depth < 3 and dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(_nbytes(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value))
    return 0


_SIZES = "engine: bytes measured"  # a memo entry of the rank: what _rank_bytes measured


def _rank_bytes(rt: RankTrace) -> int:
    """The bytes of the rank's tables and memoised values, each measured once (a table, or a
    memoised value, never changes once there; ``deep`` measures take milliseconds per table)."""
    sizes = rt._memo.setdefault(_SIZES, {})
    tables = {("table", "events"): rt.events, ("table", "flows"): rt.flows,
              ("table", "collectives"): rt.collectives,
              **{("extra", name): t for name, t in rt.extras.items()}}
    for key, value in (*tables.items(), *rt._memo.items()):
        if key != _SIZES and key not in sizes:
            sizes[key] = _nbytes(value)
    return sum(sizes.values())


def _pack(rows: np.ndarray | None) -> np.ndarray | None:
    return None if rows is None else np.packbits(rows)


def _unpack(packed: np.ndarray, n: int) -> np.ndarray:
    return np.unpackbits(packed, count=n).view(bool)


def _memo_key(value: Any) -> bytes | None:
    """A stable key for options/context (None when they cannot be pickled: then no memo)."""
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return None


class _Intake:
    """``load_trace``'s ``on_rank`` for :meth:`LocalEngine.load`: each rank, as it arrives, gives
    its profiler step numbers and, when it can be read back from the cache, is replaced by a
    stand-in without tables, so the load holds one rank's tables at a time, not all of them.

    The analysed window depends on the other ranks only through "more than one distinct profiler
    step over all ranks" (:func:`analysis.kineto.window.rank_window`), and the set of step numbers
    only grows: once the ranks seen so far have more than one, each rank's window and its
    :class:`WindowStats` are final as it arrives (with ``window="iterations"`` a rank's window is
    its own from the start). A rank seen before that is windowed after the load, read back from
    the cache (only when the first ranks have at most one step).
    """

    def __init__(
        self, include_last_profiler_step: bool, gpu_events: GpuEvents, max_memory: int,
        window: WindowSource = "auto",
    ) -> None:
        self.include_last_profiler_step = include_last_profiler_step
        self.gpu_events = gpu_events
        self.window = check_window(window)
        self.max_memory = max_memory
        self.steps: set[int] = set()
        # id(stand-in) -> its window's stats (None: to be windowed after the load)
        self.stand_ins: dict[int, WindowStats | None] = {}
        # id(meta) -> the rows of the window (_pack), for the ranks windowed while loading
        self.rows: dict[int, np.ndarray | None] = {}
        # id(stand-in) -> (window, bytes): the first windows, kept while they fit in max_memory
        self.windows: dict[int, tuple[RankTrace, int]] = {}
        self._window_bytes = 0
        self._kept: list[RankTrace] = []  # the stand-ins, alive so that their ids stay theirs

    def __call__(self, rt: RankTrace) -> RankTrace:
        self.steps |= step_numbers(rt)
        if rt.cache_entry is None:
            return rt  # cannot be read back: the engine holds it whole
        stats = keep_window = None
        if len(self.steps) > 1 or self.window == "iterations":
            rows = window_rows(rt, len(self.steps), self.include_last_profiler_step,
                               self.gpu_events, self.window)
            self.rows[id(rt.meta)] = _pack(rows)
            window = apply_window(rt, rows)
            stats = window_stats(rt, window)
            size = _rank_bytes(window)
            if self._window_bytes + size <= self.max_memory:
                self._window_bytes += size
                keep_window = window
        empty = {name: getattr(rt, name).iloc[:0].copy() for name in ("events", "flows",
                                                                         "collectives")}
        # another profiler's extras (memory_ops) are built by its parse and not stored in the
        # cache entry: the stand-in keeps them (Kineto's are read back from the entry)
        extras = {} if rt.meta.source_format == "kineto" else dict(rt.extras)
        stand_in = replace(rt, extras=extras, **empty)
        self.stand_ins[id(stand_in)] = stats
        if keep_window is not None:
            self.windows[id(stand_in)] = (keep_window, size)
        self._kept.append(stand_in)
        return stand_in


def _source_hash() -> str:
    """A hash of the package's Python source (every module under ``analysis/``), read once per
    process: a persisted part depends on its metric, on the modules it reads (other families, the
    shared metric modules, the extras' builders) and on how the rank's window was cut
    (:mod:`analysis.kineto.window`), so any change to the code keys the parts anew."""
    global _HASH
    if _HASH is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # analysis/
        digest = hashlib.sha256()
        for folder, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
            for name in sorted(n for n in names if n.endswith(".py")):
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    digest.update(os.path.relpath(path, root).encode() + b"\0" + f.read())
        _HASH = digest.hexdigest()
    return _HASH


_HASH: str | None = None


class LocalEngine:
    """Runs per-rank steps in this process over the loaded ranks (see the module docstring).

    ``full_trace`` and ``trace`` (the analysed window) are still available as whole
    :class:`~analysis.kineto.model.Trace` objects; asking for them holds every rank at once.
    ``release_loaded``: ``full_trace`` belongs to the engine, which empties it rank by rank.
    ``intake``: the :class:`_Intake` that ``full_trace`` was loaded through (:meth:`load`).
    """

    def __init__(
        self,
        full_trace: Trace,
        include_last_profiler_step: bool = False,
        gpu_events: GpuEvents = "hta",
        *,
        max_memory: int | None = None,
        release_loaded: bool = False,
        window: WindowSource = "auto",
        options: LoadOptions | None = None,
        intake: _Intake | None = None,
    ) -> None:
        # the options the ranks were read with (read_extras reads with them too); max_memory,
        # when given, replaces theirs
        self.options = LoadOptions.of(
            options, **({} if max_memory is None else {"max_memory": max_memory}))
        self.max_memory = self.options.max_memory or default_max_memory()
        self.include_last_profiler_step = include_last_profiler_step
        self.gpu_events = gpu_events
        self.window = check_window(window)  # what the analysed window is cut at
        self.source = full_trace.source
        self.skipped = full_trace.skipped
        self._ranks = full_trace.rank_list()
        self._n_steps = (
            len(intake.steps) if intake is not None else count_steps(full_trace.values())
        )
        self.metas: dict[int, RankMeta] = {r: rt.meta for r, rt in full_trace.items()}
        self.window_stats: dict[int, WindowStats] = {}
        # Ranks that cannot be read back (no cache entry) stay here for good.
        self._pinned: dict[int, RankTrace] = {}
        self._entries: dict[int, str] = {}
        # rank -> {"full": RankTrace, "steps": RankTrace}, least recently used first
        self._held: OrderedDict[int, dict[str, RankTrace]] = OrderedDict()
        # bytes of each held rank, measured when its memo last grew: rank -> (memo sizes, bytes)
        self._sizes: dict[int, tuple] = {}
        self._results: dict[tuple, Any] = {}
        self._rows: dict[int, np.ndarray | None] = {}  # rank -> its window's rows (_pack)
        self._whole: dict[str, Trace] = {}
        self._released = 0  # ranks released since the last garbage collection
        for r in list(full_trace):  # what was just loaded is held while the budget allows
            rt = full_trace.ranks[r]
            if intake is not None and id(rt) in intake.stand_ins:
                self._entries[r] = rt.cache_entry
                stats = intake.stand_ins[id(rt)]
                if id(rt.meta) in intake.rows:
                    self._rows[r] = intake.rows[id(rt.meta)]
                if stats is not None:  # windowed while loading: held if it fit, else released
                    self.window_stats[r] = replace(stats, rank=r, source=rt.meta.source)
                    if id(rt) in intake.windows:
                        window, size = intake.windows.pop(id(rt))
                        window.meta = rt.meta  # the loader may have renumbered the rank since
                        self._sizes[r] = ((len(window._memo),), size)
                        self._hold(r, {"steps": window})
                    continue
                rt = self._read_full(r)
                rt.extras.update(full_trace.ranks[r].extras)  # see _Intake: not in the entry
            if release_loaded and rt.cache_entry is not None:
                # the loader's Trace is ours: let go of each rank as soon as it is windowed, so its
                # memory-mapped pages are unmapped instead of all being held until the end
                del full_trace.ranks[r]
            steps = self._window_of(rt)
            self.window_stats[r] = window_stats(rt, steps)
            if rt.cache_entry is not None:
                self._entries[r] = rt.cache_entry
            elif r not in self._entries:
                self._pinned[r] = rt
            self._hold(r, {"full": rt, "steps": steps} if r in self._pinned else {"steps": steps})

    @classmethod
    def load(
        cls,
        trace_dir: str | os.PathLike | None = None,
        trace_files: Iterable[str] | Mapping[int, str] | None = None,
        *,
        include_last_profiler_step: bool = False,
        gpu_events: GpuEvents = "hta",
        window: WindowSource = "auto",
        options: LoadOptions | None = None,
        **load_options: Any,
    ) -> LocalEngine:
        """Load with :func:`analysis.kineto.loader.load_trace`, which gets the same ``options``
        (a :class:`~analysis.io.LoadOptions`; ``load_options``: its fields as keywords), each rank
        let go as soon as it is loaded and windowed (:class:`_Intake`)."""
        opts = LoadOptions.of(options, **load_options)
        intake = _Intake(include_last_profiler_step, gpu_events,
                         opts.max_memory or default_max_memory(), window)
        trace = load_trace(
            None if trace_dir is None else os.fspath(trace_dir), trace_files, options=opts,
            on_rank=intake,
        )
        return cls(trace, include_last_profiler_step, gpu_events, options=opts,
                   release_loaded=True, window=window, intake=intake)

    @property
    def read_extras(self):
        """Attaches extras to a rank as this engine read it (``ExtrasReader(self.options)``)."""
        from analysis.kineto.extras import ExtrasReader  # reads files: imported when needed

        return ExtrasReader(self.options)

    # ------------------------------------------------------------------------------ ranks held
    def _window_of(self, full: RankTrace) -> RankTrace:
        """``full``'s analysed window; the rows it keeps are remembered (a bit per event), so a
        rank read back again is cut without finding its steps and launches again."""
        if full.rank not in self._rows:
            self._rows[full.rank] = _pack(window_rows(
                full, self._n_steps, self.include_last_profiler_step, self.gpu_events,
                self.window))
        packed = self._rows[full.rank]
        rows = None if packed is None else _unpack(packed, len(full.events))
        return apply_window(full, rows)

    def _hold(self, rank: int, views: dict[str, RankTrace]) -> None:
        self._held[rank] = views
        self._held.move_to_end(rank)
        self._fit(keep=rank)

    def _fit(self, keep: int | None = None) -> None:
        """Release ranks until the ranks held fit in ``max_memory``. ``keep``, the rank just used,
        stays and is measured again when its analyses memoised more. The rank released is the
        most recently used one before ``keep``: the facade visits ranks in a cycle (each analysis
        over every rank), where keeping the same ranks held gives hits and least-recently-used
        release would give none."""
        if keep is not None and keep in self._held:
            views = self._held[keep]
            shape = tuple(len(rt._memo) for rt in views.values())
            if self._sizes.get(keep, (None, 0))[0] != shape:
                self._sizes[keep] = (shape, sum(_rank_bytes(rt) for rt in views.values()))
        if self._whole:
            return  # full_trace / trace were handed out: every rank stays held
        held = sum(self._sizes[r][1] for r in self._held if r in self._sizes)
        while held > self.max_memory and len(self._held) > (keep is not None):
            victim = next(r for r in reversed(self._held) if r != keep)
            for view in self._held.pop(victim).values():
                # memoised values that point back at their rank form reference cycles, which
                # only a (slow, ~0.25 s) full collection would free: emptying the memo breaks
                # them, so the rank's tables and mapped pages go as soon as they are let go
                view._memo.clear()
            held -= self._sizes.pop(victim, (None, 0))[1]
            self._released += 1
        if self._released >= _COLLECT_EVERY:
            # a released rank's tables may sit in reference cycles (memoised values that point
            # back at the rank): collect them now, so their memory and mapped pages go back
            gc.collect()
            self._released = 0

    def _read_full(self, rank: int) -> RankTrace:
        if rank in self._pinned:
            return self._pinned[rank]
        return replace(TraceCache.read(self._entries[rank]), meta=self.metas[rank])

    def rank_trace(self, rank: int, window: Window = "steps") -> RankTrace:
        """One rank, whole (``"full"``) or its analysed window (``"steps"``), read back from the
        cache if it was released. A window is held without the whole rank it was cut from (the
        memory-mapped tables are let go: the window is what the analyses read)."""
        if window not in ("steps", "full"):
            raise ConfigError(f"window must be 'steps' or 'full', not {window!r}")
        self.select([rank])
        views = self._held.get(rank)
        if views is None:
            views = self._held[rank] = {}
        self._held.move_to_end(rank)
        if window not in views:
            full = views.get("full") or self._read_full(rank)
            if window == "full" or rank in self._pinned:
                views["full"] = full
            if window == "steps":
                views["steps"] = self._window_of(full)
        return views[window]

    def _whole_trace(self, window: Window) -> Trace:
        if window not in self._whole:
            ranks = {r: self.rank_trace(r, window) for r in self._ranks}
            self._whole[window] = Trace(ranks, source=self.source, skipped=self.skipped)
        return self._whole[window]

    @property
    def full_trace(self) -> Trace:
        """Every rank, whole, held in this process from now on."""
        return self._whole_trace("full")

    @property
    def trace(self) -> Trace:
        """The analysed window of every rank, held in this process from now on."""
        return self._whole_trace("steps")

    # ---------------------------------------------------------------------------------- running
    @property
    def ranks(self) -> list[int]:
        return list(self._ranks)

    def select(self, ranks=None, default: str = "first") -> list[int]:
        """A ``ranks`` argument as a list of loaded ranks (:meth:`analysis.kineto.model.Trace.select`)."""
        return Trace.select(self._rank_index(), ranks, default=default)

    def _rank_index(self) -> Trace:
        # Trace.select only needs the rank numbers; the metas stand in for the ranks' traces.
        index = Trace.__new__(Trace)
        index.ranks = dict.fromkeys(self._ranks)
        return index

    def map_ranks(
        self, func: Callable[..., Any], ranks: Iterable[int], *, window: Window = "steps", **kw
    ) -> dict[int, Any]:
        """``{rank: func(rank_trace, **kw)}`` in the order of ``ranks``; errors propagate as raised.

        The parts of a ``run_on_rank`` step are memoised per analysis, options and rank."""
        if window not in ("steps", "full"):
            raise ConfigError(f"window must be 'steps' or 'full', not {window!r}")
        out: dict[int, Any] = {}
        memo = getattr(func, "__name__", None) == "run_on_rank" and "requests" in kw
        ranks = [int(r) for r in ranks]
        if memo and len(ranks) > 1:
            self._cache_extras(func, ranks, window, kw)
        for rank in ranks:
            if memo:
                out[rank] = self._run_on_rank(func, rank, window, kw)
            else:
                out[rank] = func(self.rank_trace(rank, window), **kw)
            self._fit(keep=rank)
        return out

    def _run_on_rank(self, func, rank: int, window: Window, kw: dict[str, Any]) -> dict[str, Any]:
        """``func`` (a ``run_on_rank``: ``requests`` of ``(analysis, options)`` → ``{name: part}``)
        on ``rank`` for the requests whose part is not memoised yet."""
        requests = kw["requests"]
        keys = self._request_keys(func, rank, window, kw)
        missing = [
            (spec, o) for spec, o in requests
            if (k := keys[spec if isinstance(spec, str) else spec.name]) is None
            or k not in self._results
        ]
        persisted = getattr(func, "persisted", None)
        stored = {}
        for spec, _ in missing if persisted is not None else ():
            name = spec if isinstance(spec, str) else spec.name
            key = self._stored_key(keys[name], rank, window) if persisted(name) else None
            if key is not None:
                stored[name] = key
        for name, key in stored.items():
            part = get_result(self._entries[rank], key)
            if part is not None:
                self._results[keys[name]] = part
        missing = [(spec, o) for spec, o in missing
                   if (k := keys[spec if isinstance(spec, str) else spec.name]) is None
                   or k not in self._results]
        fresh = func(self.rank_trace(rank, window), **{**kw, "requests": missing}) if missing else {}
        for name, part in fresh.items():
            if keys[name] is not None:
                self._results[keys[name]] = part
            if name in stored:
                try:
                    put_result(self._entries[rank], stored[name], part)
                except OSError:  # a read-only cache: computed again next time
                    pass
        return {name: fresh[name] if name in fresh else self._results[keys[name]] for name in keys}

    def _request_keys(self, func, rank: int, window: Window, kw: dict[str, Any]) -> dict:
        """``{analysis name: memo key}`` of a ``run_on_rank`` batch on ``rank`` (None: options
        that cannot be keyed, never memoised)."""
        rest_key = _memo_key({k: v for k, v in kw.items() if k != "requests"})
        keys = {}
        for spec, options in kw["requests"]:
            name = spec if isinstance(spec, str) else spec.name
            opt_key = _memo_key(options)
            keys[name] = (
                None if rest_key is None or opt_key is None
                else (func.__qualname__, name, opt_key, rest_key, window, rank)
            )
        return keys

    def _cache_extras(self, func, ranks: list[int], window: Window, kw: dict[str, Any]) -> None:
        """Before a batch runs rank by rank: decode the extras its analyses read into the cache
        entries of the ranks that will compute them (no part memoised or stored, the table not
        attached or cached yet), all files at once on the load's processes
        (:func:`analysis.kineto.extras.cache_extras`), so the rank steps then read them from the
        cache; a file decoded in parallel instead of one after another."""
        kinds_of = getattr(func, "extra_kinds", None)
        if kinds_of is None or not self.options.use_cache or not kinds_of(kw["requests"]):
            return
        from analysis.kineto.extras import CacheTask, cache_extras, entry_extra_path, get_kind

        persisted = getattr(func, "persisted", None)
        tasks = []
        for rank in ranks:
            meta = self.metas[rank]
            if rank not in self._entries or meta.source_format != "kineto":
                continue
            keys = self._request_keys(func, rank, window, kw)
            todo = []
            for name, options in kw["requests"]:
                name = name if isinstance(name, str) else name.name
                key = keys[name]
                if key is not None and key in self._results:
                    continue
                stored = (self._stored_key(key, rank, window)
                          if persisted is not None and persisted(name) else None)
                if stored is not None and has_result(self._entries[rank], stored):
                    continue
                todo.append((name, options))
            attached = {k for view in self._held.get(rank, {}).values() for k in view.extras}
            targets = []
            for name in kinds_of(todo):
                kind = get_kind(name)
                path = entry_extra_path(self._entries[rank], kind)
                if not kind.parsed and name not in attached and not path.is_file():
                    targets.append((name, str(path)))
            if targets:
                tasks.append(CacheTask(meta.source, meta.capture_trace, tuple(targets)))
        if len(tasks) > 1:
            cache_extras(tasks, self.options)

    def _stored_key(self, memo_key, rank: int, window: Window) -> str | None:
        """Where the part of ``rank`` of a ``persist`` analysis is kept in its cache entry (None:
        not kept: no entry, or options that cannot be keyed)."""
        if memo_key is None or rank not in self._entries:
            return None
        cut = None if window == "full" else (
            self._n_steps, self.include_last_profiler_step, self.gpu_events, self.window)
        meta = self.metas[rank]
        text = pickle.dumps((memo_key[1:4], meta.rank, meta.source, window, cut, _source_hash()),
                            protocol=pickle.HIGHEST_PROTOCOL)
        return hashlib.sha256(text).hexdigest()[:32]

    def __repr__(self) -> str:
        return f"LocalEngine(source={self.source!r}, ranks={self.ranks})"
