"""Event args read only when an analysis asks for them ("extras"), aligned to ``RankTrace.events`` rows.

The parser decodes only the fields that every analysis needs, so that a first open stays fast. Some
analyses need more of a trace: the operator roofline needs each operator's recorded shapes (the
``record_shapes=True`` args ``Input Dims``, ``Input type``, ``Input Strides``, ``Concrete Inputs``).
Those are an *extra kind*, decoded from the trace file again, on demand:

- an :class:`ExtraKind` names the args it reads (a ``msgspec.Struct`` holding only those keys), the
  categories of the rows that may carry them, and how to turn them into a table;
- :func:`extract` decodes a file's bytes, keeps exactly the rows the parser keeps
  (:func:`analysis.kineto.parse.kept_rows`), decodes the args of the kind's rows with that struct
  and returns one table row per event that has the args, indexed by the event's row label in the
  full ``RankTrace.events`` (windows keep those labels); :func:`extract_many` gives several kinds
  from one decode of the file;
- :func:`attach_extras` (:func:`extra_table` for one kind) puts the kinds in ``rt.extras``, taking
  each from the cache (an Arrow IPC file in the rank's trace cache entry,
  ``<entry>/extras/<name>-v<version>.arrow``) or else, all the missing ones at once, from the
  source file, and keeps them on the rank, so a kind is read at most once per file;
- :func:`cache_extras` decodes the kinds of many files into their cache entries on several
  processes: the local engine calls it before running a batch rank by rank, so a job's files are
  decoded in parallel (a batch's analyses share one decode per file: the registry attaches the
  kinds of the whole batch at once).

Analyses never call this module (it reads files): the engine attaches the kinds an analysis
declares, and the analysis reads ``rt.extra(name)`` (:meth:`analysis.kineto.model.RankTrace.extra`).

Adding a kind (e.g. NCCL kernel args): write a ``msgspec.Struct`` of the args, an :class:`ExtraKind`
with a ``build`` function, and :func:`register` it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from analysis.errors import ConfigError, CorruptTraceError
from analysis.io import LoadOptions
from analysis.kineto import kernel_args
from analysis.kineto.cache import (
    PARSER_VERSION,
    CacheWarning,
    TraceCache,
    cache_key,
    parsed_extra_path,
    read_extra_table,
    write_extra_table,
)
from analysis.kineto.cuda_graphs import with_graph_capture
from analysis.kineto.ints import int_or_none
from analysis.kineto.kernel_args import number
from analysis.kineto.model import LEGACY_CATEGORIES, RankTrace
from analysis.kineto.parse import _decode_top, _decompress, kept_rows
from analysis.kineto.sources import find_trace_files, read_trace_bytes

_NULL = msgspec.Raw(b"null")


@dataclass(frozen=True)
class ExtraKind:
    """One kind of extra: which args it reads, from which rows, and the table it makes.

    ``build(rows, args)`` gets the row labels (int64 array) and the decoded ``args`` structs of the
    rows of ``categories`` that have an ``args`` object, and returns the table (index: row labels,
    a subset of ``rows``); with ``raw_categories``, ``build(rows, args, cats)`` also gets each
    row's category exactly as written (``"Runtime"`` and ``"cuda_runtime"`` are one normalised
    category in the model, but not to every tool). Bump ``version`` whenever the table changes:
    cached tables of other versions are then ignored.

    A kind with ``instant`` set reads no rows of the model: it gets the instant events (``"ph":
    "i"``) named ``instant`` instead (``build(ts_ns, pid, tid, args)``, file order), indexed 0..n-1.

    A ``parsed`` kind is read by the parser itself (``RankTrace.extras`` of a fresh parse) and
    stored with the trace's cache entry (:func:`analysis.kineto.cache.parsed_extra_path`); its
    ``args`` and ``build`` serve only other profilers' files (an empty table).
    """

    name: str
    version: int
    args: type[msgspec.Struct]
    categories: tuple[str, ...]
    build: Callable[..., pd.DataFrame]
    raw_categories: bool = False
    instant: str | None = None
    parsed: bool = False


KINDS: dict[str, ExtraKind] = {}


def register(kind: ExtraKind) -> ExtraKind:
    KINDS[kind.name] = kind
    return kind


def get_kind(name: str) -> ExtraKind:
    try:
        return KINDS[name]
    except KeyError:
        raise ConfigError(f"unknown extra kind {name!r}; known: {sorted(KINDS)}") from None


# --- decoding --------------------------------------------------------------------------------


# every field the kinds' rows are chosen by (kept_rows's and the instant events'); ``args``
# undecoded: each kind decodes its rows' args with its own struct (_kind_args)
_EVENT = msgspec.defstruct("_ExtraEvent", [
    ("cat", str | None, None),
    ("ts", msgspec.Raw, _NULL),
    ("dur", msgspec.Raw, _NULL),
    ("ph", str | None, None),
    ("name", str | None, None),
    ("pid", Any, None),
    ("tid", Any, None),
    ("args", msgspec.Raw, _NULL),
], gc=False)
_EVENTS = msgspec.json.Decoder(list[_EVENT])


@cache
def _args_decoder(kind: ExtraKind) -> msgspec.json.Decoder:
    return msgspec.json.Decoder(list[kind.args | None])


def _kind_args(kind: ExtraKind, raws: list[msgspec.Raw], source: str) -> list:
    """The ``args`` objects ``raws`` (null for none) decoded with ``kind``'s struct, in one call."""
    try:
        return _args_decoder(kind).decode(b"[" + b",".join(raws) + b"]")
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise CorruptTraceError(source, f"unexpected {kind.name} args: {exc}") from None


def extract(data: bytes, source: str, kind: ExtraKind) -> pd.DataFrame:
    """The ``kind`` table of one trace file (gzip or plain JSON bytes); see the module docstring.

    Raises ``CorruptTraceError`` naming ``source`` when the bytes are not a readable trace.
    """
    return extract_many(data, source, [kind])[kind.name]


def extract_many(data: bytes, source: str, kinds: Sequence[ExtraKind]) -> dict[str, pd.DataFrame]:
    """``{name: table}`` of each of ``kinds`` in one trace file, from one decode of it (each kind's
    rows and table as :func:`extract` gives them alone).

    Raises ``CorruptTraceError`` naming ``source`` when the bytes are not a readable trace, or
    when the args of a row some kind reads are not what that kind expects.
    """
    top = _decode_top(_decompress(bytes(data), source), source)
    try:
        events = _EVENTS.decode(top["traceEvents"])
    except (msgspec.ValidationError, UnicodeDecodeError) as exc:
        raise CorruptTraceError(source, f"unreadable events: {exc}") from None
    del top
    kept = None  # kept_rows(events), found once for every kind that reads rows
    out = {}
    for kind in kinds:
        if kind.instant is not None:
            out[kind.name] = _instant_table(events, kind, source)
            continue
        if kept is None:
            kept = kept_rows(events)
        out[kind.name] = _row_table(events, kept, kind, source)
    return out


def _row_table(events: list, kept: list[int], kind: ExtraKind, source: str) -> pd.DataFrame:
    """The table of a kind that reads rows (see :class:`ExtraKind`)."""
    wanted = set(kind.categories) | {
        k for k, v in LEGACY_CATEGORIES.items() if v in kind.categories
    }
    keep_without_args = kind.raw_categories  # such kinds keep rows without args
    rows, raws, cats = [], [], []
    for label, position in enumerate(kept):
        e = events[position]
        if e.cat in wanted and (keep_without_args or e.args != _NULL):
            rows.append(label)
            raws.append(e.args)
            cats.append(e.cat)
    args = _kind_args(kind, raws, source)
    if keep_without_args:
        no_args = kind.args()
        args = [no_args if a is None else a for a in args]
        return kind.build(np.array(rows, dtype=np.int64), args, cats)
    return kind.build(np.array(rows, dtype=np.int64), args)


def _instant_table(events: list, kind: ExtraKind, source: str) -> pd.DataFrame:
    """The ``kind.instant`` instant events of a file (see :class:`ExtraKind`)."""
    from analysis.kineto.columns import _as_int, _ns_values

    chosen = [e for e in events if e.ph == "i" and e.name == kind.instant and e.ts != _NULL]
    try:
        ts = _ns_values([e.ts for e in chosen])
    except Exception as exc:  # a non-numeric ts: the file is not a usable trace
        raise CorruptTraceError(source, f"unreadable ts of a {kind.instant!r} event: {exc}") from None
    pid = np.array([_as_int(e.pid) for e in chosen], dtype=np.int64)
    tid = np.array([_as_int(e.tid) for e in chosen], dtype=np.int64)
    return kind.build(ts, pid, tid, _kind_args(kind, [e.args for e in chosen], source))


# --- cache and attachment ------------------------------------------------------------------------


def _cache_path(rt: RankTrace, kind: ExtraKind, storage_options, cache_dir) -> Path | None:
    """Where the kind's table of this rank is cached: inside the rank's trace cache entry, which
    must exist (a trace loaded with ``use_cache=False`` has none, and its extras are not cached)."""
    if rt.cache_entry is not None and rt.meta.source_format == "kineto":
        entry = Path(rt.cache_entry)  # read from the cache: no need to find the file again
    else:
        try:
            files = find_trace_files(rt.meta.source, None, storage_options)
        except Exception:  # the source vanished or is unreachable: nothing to key an entry on
            return None
        if len(files) != 1 or files[0].version is None:
            return None
        entry = TraceCache(cache_dir).entry_dir(
            cache_key(files[0].url, files[0].size, files[0].version, rt.meta.capture_trace)
        )
    if not (entry / "meta.json").is_file():
        return None
    if rt.meta.source_format == "kineto":
        return entry_extra_path(entry, kind)
    # a file of another profiler may hold several ranks, all in the first rank's entry
    part = f"-part{rt.meta.other.get('part', 0)}"
    return entry / "extras" / f"{kind.name}-v{kind.version}-p{PARSER_VERSION}{part}.arrow"


def entry_extra_path(entry: str | os.PathLike, kind: ExtraKind) -> Path:
    """Where the trace cache entry of a Kineto trace keeps its ``kind`` table."""
    if kind.parsed:
        return parsed_extra_path(entry, kind.name)
    return Path(entry) / "extras" / f"{kind.name}-v{kind.version}-p{PARSER_VERSION}.arrow"


def extra_table(
    rt: RankTrace,
    name: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
) -> pd.DataFrame:
    """``rt.extras[name]``, read from the cache or the source file the first time (then kept)."""
    attach_extras(rt, [name], storage_options=storage_options, cache_dir=cache_dir,
                  use_cache=use_cache)
    return rt.extras[name]


def _read_cached(path: Path, name: str, source: str) -> pd.DataFrame | None:
    try:
        return read_extra_table(path)
    except Exception as exc:  # a damaged file: decode the source again
        warnings.warn(
            f"ignoring unreadable cached {name} table {path} ({exc}); reading {source}",
            CacheWarning,
            stacklevel=4,
        )
        return None


def _decoded(rt: RankTrace, kinds: list[ExtraKind], storage_options) -> dict[str, pd.DataFrame]:
    """The tables of ``kinds`` from the rank's source file, read once."""
    data = read_trace_bytes(rt.meta.source, storage_options)
    # rows as the loader numbered them
    data, _ = with_graph_capture(data, rt.meta.source, rt.meta.capture_trace)
    if rt.meta.source_format != "kineto":
        from analysis.formats.readers import foreign_extra  # another profiler's file: its reader

        return {kind.name: foreign_extra(rt, kind, data) for kind in kinds}
    out = {}
    parsed = [kind for kind in kinds if kind.parsed]
    if parsed:  # the entry lost them (or there is none): the parser's again, one parse for all
        from analysis.kineto.parse import parse_trace_bytes

        extras = parse_trace_bytes(data, rt.meta.source).extras
        out.update({kind.name: extras[kind.name] for kind in parsed})
    rest = [kind for kind in kinds if not kind.parsed]
    if rest:  # one decode of the file for all of them
        out.update(extract_many(data, rt.meta.source, rest))
    return out


def attach_extras(
    rt: RankTrace,
    names: Sequence[str],
    *,
    storage_options: Mapping[str, Any] | None = None,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
) -> RankTrace:
    """``rt`` with every kind of ``names`` in ``rt.extras``: each read from the rank's cache entry,
    else from the source file (the kinds missing from the cache all from one read and decode of
    it, then cached), then kept on the rank. Mutates and returns ``rt``."""
    wanted = [get_kind(name) for name in dict.fromkeys(names) if name not in rt.extras]
    paths: dict[str, Path | None] = {}
    missing = []
    for kind in wanted:
        path = paths[kind.name] = (
            _cache_path(rt, kind, storage_options, cache_dir) if use_cache else None)
        table = None
        if path is not None and path.is_file():
            table = _read_cached(path, kind.name, rt.meta.source)
        if table is None:
            missing.append(kind)
        else:
            rt.extras[kind.name] = table
    if not missing:
        return rt
    tables = _decoded(rt, missing, storage_options)
    for kind in missing:
        table = tables[kind.name]
        path = paths[kind.name]
        if path is not None:
            try:
                write_extra_table(table, path)
            except OSError as exc:
                warnings.warn(
                    f"could not cache the {kind.name} table at {path} ({exc})",
                    CacheWarning,
                    stacklevel=2,
                )
        rt.extras[kind.name] = table
    return rt


@dataclass(frozen=True)
class CacheTask:
    """Extras of one Kineto trace file to decode and write into its cache entry: ``targets``
    pairs an extra kind's name with the file the entry keeps it in (:func:`entry_extra_path`)."""

    source: str
    capture_trace: str | None
    targets: tuple[tuple[str, str], ...]


def _cache_file_extras(task: CacheTask, storage_options) -> bool:
    """Decode ``task``'s kinds from its file in one pass and write them to the cache; False on
    any failure (left to the rank's own :func:`attach_extras`, which raises it where it
    belongs)."""
    try:
        data = read_trace_bytes(task.source, storage_options)
        data, _ = with_graph_capture(data, task.source, task.capture_trace)
        tables = extract_many(data, task.source, [get_kind(name) for name, _ in task.targets])
        del data
        for name, path in task.targets:
            write_extra_table(tables[name], Path(path))
        return True
    except Exception:  # noqa: BLE001 - see the docstring
        return False


# below this much source data (as stored: 4 MB of gzip is ~50 MB of JSON, ~0.5 s to decode) the
# pool's start (~10 ms forked, up to ~1 s for a new forkserver) is not paid back
_PARALLEL_MIN_BYTES = 4 << 20


def cache_extras(tasks: Sequence[CacheTask], options: LoadOptions) -> None:
    """Decode the extras of several trace files into their cache entries at once, on up to
    ``options.max_workers`` processes (one per CPU by default): a later :func:`attach_extras` of
    each rank reads them from the cache. An engine calls this before asking each rank in turn
    for analyses that read extras, so a job's files are decoded in parallel as when it was loaded.
    Does nothing when one process would do as well (one file, one CPU, little data)."""
    from concurrent.futures import ProcessPoolExecutor

    from analysis.kineto.loader import (
        _available_cpus,
        _is_local,
        _pool_context,
        _use_environment,
    )

    workers = min(len(tasks), options.max_workers or _available_cpus())
    if workers < 2:
        return
    local = [t.source for t in tasks if _is_local(t.source)]
    size = sum(os.path.getsize(s.removeprefix("file://")) for s in local
               if os.path.isfile(s.removeprefix("file://")))
    if len(local) == len(tasks) and size < _PARALLEL_MIN_BYTES:
        return
    so = options.storage_options
    with ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context(
            [t.source for t in tasks]), initializer=_use_environment,
            initargs=(dict(os.environ),)) as pool:
        futures = [pool.submit(_cache_file_extras, task, so) for task in tasks]
        for future in futures:
            try:
                future.result()
            except Exception:  # noqa: BLE001 - a worker that died: its rank decodes it itself
                pass


@dataclass(frozen=True)
class ExtrasReader:
    """An engine's reader of extras: attaches kinds to a rank it loaded, reading the source file
    and the cache with the :class:`~analysis.io.LoadOptions` it loaded the rank with (an engine's
    ``read_extras``). Picklable, so the per-rank task takes it to a Dask worker."""

    options: LoadOptions = field(default_factory=LoadOptions)

    def __call__(self, rt: RankTrace, names: Sequence[str]) -> RankTrace:
        o = self.options
        return attach_extras(rt, names, storage_options=o.storage_options,
                             cache_dir=o.cache_dir, use_cache=o.use_cache)


# --- the operator shapes kind --------------------------------------------------------------------


class _ShapeArgs(msgspec.Struct, gc=False):
    """The ``record_shapes=True`` args of a ``cpu_op`` event, kept as raw JSON text. PyTorch 1.8
    and earlier wrote ``Input dims`` (read when there is no ``Input Dims``, as the TensorBoard
    plugin does)."""

    input_dims: msgspec.Raw = msgspec.field(default=_NULL, name="Input Dims")
    input_dims_1_8: msgspec.Raw = msgspec.field(default=_NULL, name="Input dims")
    input_types: msgspec.Raw = msgspec.field(default=_NULL, name="Input type")
    input_strides: msgspec.Raw = msgspec.field(default=_NULL, name="Input Strides")
    concrete_inputs: msgspec.Raw = msgspec.field(default=_NULL, name="Concrete Inputs")


OP_SHAPE_COLUMNS = ("input_dims", "input_types", "input_strides", "concrete_inputs")


def _canonical_json(raws: list[msgspec.Raw]) -> pd.Categorical:
    """Each raw JSON value re-encoded compactly (``"[[8,16],[16,4]]"``); "" when absent or null.

    Values repeat a lot (one per distinct shape), so each distinct text is decoded once.
    """
    memo: dict[bytes, str] = {b"null": ""}
    out = []
    for raw in raws:
        text = bytes(raw)
        value = memo.get(text)
        if value is None:
            value = msgspec.json.encode(msgspec.json.decode(text)).decode()
            memo[text] = value
        out.append(value)
    return pd.Categorical(out)


def _build_op_shapes(rows: np.ndarray, args: list[_ShapeArgs]) -> pd.DataFrame:
    for a in args:
        if a.input_dims == _NULL:
            a.input_dims = a.input_dims_1_8
    has = [a.input_dims != _NULL for a in args]
    rows = rows[np.array(has, dtype=bool)] if len(rows) else rows
    args = [a for a, h in zip(args, has, strict=True) if h]
    columns = {c: _canonical_json([getattr(a, c) for a in args]) for c in OP_SHAPE_COLUMNS}
    return pd.DataFrame(columns, index=pd.Index(rows, dtype="int64"))


OP_SHAPES = register(
    ExtraKind(
        name="op_shapes",
        version=2,
        args=_ShapeArgs,
        categories=("cpu_op",),
        build=_build_op_shapes,
    )
)
"""``op_shapes``: one row per ``cpu_op`` event with ``Input Dims`` (or ``Input dims``); columns
``input_dims``, ``input_types``, ``input_strides``, ``concrete_inputs`` (categorical compact JSON
text, "" when the trace does not have it)."""


# --- the operator call stacks kind (with_stack=True, as PyTorch wrote it until ~1.10) -------------


class _StackArgs(msgspec.Struct, gc=False):
    """The ``Call stack`` arg of a ``cpu_op`` event (innermost frame first, one per line)."""

    call_stack: msgspec.Raw = msgspec.field(default=_NULL, name="Call stack")


def _build_op_stacks(rows: np.ndarray, args: list[_StackArgs]) -> pd.DataFrame:
    raws = [a.call_stack for a in args]
    has = np.array([r != _NULL for r in raws], dtype=bool)
    texts = [_stack_text(r) for r, h in zip(raws, has.tolist(), strict=True) if h]
    keep = np.array([t != "" for t in texts], dtype=bool)
    rows = rows[has][keep] if len(rows) else rows
    return pd.DataFrame({"call_stack": pd.Categorical([t for t in texts if t])},
                        index=pd.Index(rows, dtype="int64"))


def _stack_text(raw: msgspec.Raw) -> str:
    """A JSON string's value; any other JSON value as written."""
    text = bytes(raw)
    try:
        value = msgspec.json.decode(text)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return text.decode("utf-8", "replace")
    return value if isinstance(value, str) else text.decode("utf-8", "replace")


OP_STACKS = register(
    ExtraKind(
        name="op_stacks",
        version=1,
        args=_StackArgs,
        categories=("cpu_op",),
        build=_build_op_stacks,
    )
)
"""``op_stacks``: one row per ``cpu_op`` event with a non-empty ``Call stack`` arg (PyTorch's
``with_stack=True`` before stacks became ``python_function`` events): ``call_stack``
(categorical text, as written)."""


# --- the memory operations kind ------------------------------------------------------------------


class _MemoryArgs(msgspec.Struct, gc=False):
    """The args of a ``gpu_memcpy`` / ``gpu_memset`` event that give its size and bandwidth."""

    nbytes: Any = msgspec.field(default=None, name="bytes")
    bandwidth: Any = msgspec.field(default=None, name="memory bandwidth (GB/s)")


MEMORY_OP_COLUMNS = {"bytes": "int64", "bandwidth_gbps": "float64"}


def _build_memory_ops(rows: np.ndarray, args: list[_MemoryArgs]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "bytes": np.array([number(a.nbytes, -1) for a in args], dtype=np.float64).astype(
                np.int64
            ),
            "bandwidth_gbps": np.array([number(a.bandwidth, np.nan) for a in args],
                                       dtype=np.float64),
        },
        index=pd.Index(rows, dtype="int64"),
    ).astype(MEMORY_OP_COLUMNS)


MEMORY_OPS = register(
    ExtraKind(
        name="memory_ops",
        version=1,
        args=_MemoryArgs,
        categories=("gpu_memcpy", "gpu_memset"),
        build=_build_memory_ops,
    )
)
"""``memory_ops``: one row per GPU memcpy/memset event with args; columns ``bytes`` (int64,
``args.bytes``, -1 when absent) and ``bandwidth_gbps`` (float64, Kineto's
``args["memory bandwidth (GB/s)"]``, NaN when absent)."""


# --- the kernel launch args kind (the TensorBoard plugin's kernel view) --------------------------


def _int_or(value: Any, missing: int) -> int:

    number = int_or_none(value)
    return missing if number is None else number


KERNEL_ARGS = register(
    ExtraKind(
        name=kernel_args.NAME,
        version=3,
        args=msgspec.Struct,  # unused: the parser reads these args (parsed=True)
        categories=("kernel", "cuda_runtime", "python_function"),
        build=lambda rows, args: kernel_args.table([], []),
        parsed=True,
    )
)
"""``kernel_args``: read by the parser itself (one decode of the file) and kept in the trace cache
entry: :mod:`analysis.kineto.kernel_args` has its columns."""


# --- the memory events kind (profile_memory=True) ------------------------------------------------


class _MemoryEventArgs(msgspec.Struct, gc=False):
    """The args of a ``[memory]`` instant event (``profile_memory=True``)."""

    addr: Any = msgspec.field(default=None, name="Addr")
    nbytes: Any = msgspec.field(default=None, name="Bytes")
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")


MEMORY_EVENT_COLUMNS = {
    "ts": "int64",
    "pid": "int64",
    "tid": "int64",
    "has_addr": "bool",
    "addr": "int64",
    "bytes": "int64",
    "total_allocated": "float64",
    "total_reserved": "float64",
    "device_type": "int64",
    "device_id": "int64",
}


def _build_memory_events(ts: np.ndarray, pid: np.ndarray, tid: np.ndarray,
                         args: list[_MemoryEventArgs | None]) -> pd.DataFrame:

    args = [a if a is not None else _MemoryEventArgs() for a in args]

    def ints(field: str, missing: int) -> np.ndarray:
        values = [int_or_none(getattr(a, field)) for a in args]
        return np.array([missing if v is None else v for v in values], dtype=np.int64)

    addrs = [int_or_none(a.addr) for a in args]
    return pd.DataFrame(
        {
            "ts": ts,
            "pid": pid,
            "tid": tid,
            "has_addr": np.array([v is not None for v in addrs], dtype=bool),
            "addr": np.array([-1 if v is None else v for v in addrs], dtype=np.int64),
            "bytes": ints("nbytes", 0),  # the plugin's default for a missing size
            "total_allocated": np.array([number(a.total_allocated, np.nan) for a in args]),
            "total_reserved": np.array([number(a.total_reserved, np.nan) for a in args]),
            "device_type": ints("device_type", -1),
            "device_id": ints("device_id", -1),
        }
    ).astype(MEMORY_EVENT_COLUMNS)


MEMORY_EVENTS = register(
    ExtraKind(
        name="memory_events",
        version=1,
        args=_MemoryEventArgs,
        categories=(),
        build=_build_memory_events,
        instant="[memory]",
    )
)
"""``memory_events``: one row per ``[memory]`` instant event (``profile_memory=True``), file order,
indexed 0..n-1 (not rows of ``events``): ``ts`` (ns), ``pid``, ``tid``, ``has_addr``, ``addr``
(-1 when absent), ``bytes`` (negative: a free), ``total_allocated``, ``total_reserved`` (bytes,
float64, NaN when absent), ``device_type`` (0 CPU, 1 CUDA, -1 absent), ``device_id``."""


# --- the Python function ids kind (with_stack / with_modules: the nn.Module hierarchy) ----------


class _PythonArgs(msgspec.Struct, gc=False):
    """The ids of a ``python_function`` event: its own, its caller's and its ``nn.Module``'s."""

    python_id: Any = msgspec.field(default=None, name="Python id")
    parent_id: Any = msgspec.field(default=None, name="Python parent id")
    module_id: Any = msgspec.field(default=None, name="Python module id")


PYTHON_FUNCTION_COLUMNS = {"python_id": "int64", "parent_id": "int64", "module_id": "int64"}


def _build_python_functions(rows: np.ndarray, args: list[_PythonArgs]) -> pd.DataFrame:
    return pd.DataFrame(
        {col: np.array([_int_or(getattr(a, field), -1) for a in args], dtype=np.int64)
         for col, field in (("python_id", "python_id"), ("parent_id", "parent_id"),
                            ("module_id", "module_id"))},
        index=pd.Index(rows, dtype="int64"),
    ).astype(PYTHON_FUNCTION_COLUMNS)


PYTHON_FUNCTIONS = register(
    ExtraKind(
        name="python_functions",
        version=1,
        args=_PythonArgs,
        categories=("python_function",),
        build=_build_python_functions,
    )
)
"""``python_functions``: one row per ``python_function`` event with args: ``python_id``,
``parent_id`` (the calling Python function's id) and ``module_id`` (the ``nn.Module``'s id for a
module's ``forward``, recorded with ``with_modules=True``), int64, -1 when absent."""
