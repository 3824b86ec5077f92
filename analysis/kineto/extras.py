"""Event args read only when an analysis asks for them ("extras"), aligned to ``RankTrace.events`` rows.

The parser decodes only the fields that every analysis needs, so that a first open stays fast. Some
analyses need more of a trace: the operator roofline needs each operator's recorded shapes (the
``record_shapes=True`` args ``Input Dims``, ``Input type``, ``Input Strides``, ``Concrete Inputs``).
Those are an *extra kind*, decoded from the trace file again, on demand:

- an :class:`ExtraKind` names the args it reads (a ``msgspec.Struct`` holding only those keys), the
  categories of the rows that may carry them, and how to turn them into a table;
- :func:`extract` decodes a file's bytes with that struct, keeps exactly the rows the parser keeps
  (:func:`analysis.kineto.parse.kept_rows`) and returns one table row per event that has the args,
  indexed by the event's row label in the full ``RankTrace.events`` (windows keep those labels);
- :func:`extra_table` returns ``rt.extras[name]``, taking it from the cache (an Arrow IPC file in the
  rank's trace cache entry, ``<entry>/extras/<name>-v<version>.arrow``) or from the source file,
  and keeps it on the rank, so a kind is read at most once per file.

Analyses never call this module (it reads files): the engine attaches the kinds an analysis
declares, and the analysis reads ``rt.extra(name)`` (:meth:`analysis.kineto.model.RankTrace.extra`).

Adding a kind (e.g. NCCL kernel args): write a ``msgspec.Struct`` of the args, an :class:`ExtraKind`
with a ``build`` function, and :func:`register` it.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa

from analysis.errors import ConfigError, CorruptTraceError
from analysis.kineto.cache import PARSER_VERSION, CacheWarning, TraceCache, cache_key
from analysis.kineto.model import LEGACY_CATEGORIES, RankTrace
from analysis.kineto.parse import _decode_top, _decompress, kept_rows
from analysis.kineto.sources import find_trace_files, read_trace_bytes

_NULL = msgspec.Raw(b"null")


@dataclass(frozen=True)
class ExtraKind:
    """One kind of extra: which args it reads, from which rows, and the table it makes.

    ``build(rows, args)`` gets the row labels (int64 array) and the decoded ``args`` structs of the
    rows of ``categories`` that have an ``args`` object, and returns the table (index: row labels,
    a subset of ``rows``). Bump ``version`` whenever the table changes: cached tables of other
    versions are then ignored.
    """

    name: str
    version: int
    args: type[msgspec.Struct]
    categories: tuple[str, ...]
    build: Callable[[np.ndarray, list[Any]], pd.DataFrame]


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


@cache
def _decoder(kind: ExtraKind) -> msgspec.json.Decoder:
    # only what kept_rows needs, plus this kind's args: every other key is skipped by msgspec
    event = msgspec.defstruct(
        f"_Event_{kind.name}",
        [
            ("cat", str | None, None),
            ("ts", msgspec.Raw, _NULL),
            ("dur", msgspec.Raw, _NULL),
            ("args", kind.args | None, None),
        ],
        gc=False,
    )
    return msgspec.json.Decoder(list[event])


def extract(data: bytes, source: str, kind: ExtraKind) -> pd.DataFrame:
    """The ``kind`` table of one trace file (gzip or plain JSON bytes); see the module docstring.

    Raises ``CorruptTraceError`` naming ``source`` when the bytes are not a readable trace.
    """
    top = _decode_top(_decompress(bytes(data), source), source)
    try:
        events = _decoder(kind).decode(top["traceEvents"])
    except (msgspec.ValidationError, UnicodeDecodeError) as exc:
        raise CorruptTraceError(source, f"unexpected {kind.name} args: {exc}") from None
    wanted = set(kind.categories) | {
        k for k, v in LEGACY_CATEGORIES.items() if v in kind.categories
    }
    rows, args = [], []
    for label, position in enumerate(kept_rows(events)):
        e = events[position]
        if e.args is not None and e.cat in wanted:
            rows.append(label)
            args.append(e.args)
    return kind.build(np.array(rows, dtype=np.int64), args)


# --- cache and attachment ------------------------------------------------------------------------


def _cache_path(rt: RankTrace, kind: ExtraKind, storage_options, cache_dir) -> Path | None:
    """Where the kind's table of this rank is cached: inside the rank's trace cache entry, which
    must exist (a trace loaded with ``use_cache=False`` has none, and its extras are not cached)."""
    try:
        files = find_trace_files(rt.meta.source, None, storage_options)
    except Exception:  # the source vanished or is unreachable: nothing to key a cache entry on
        return None
    if len(files) != 1 or files[0].version is None:
        return None
    entry = TraceCache(cache_dir).entry_dir(
        cache_key(files[0].url, files[0].size, files[0].version)
    )
    if not (entry / "meta.json").is_file():
        return None
    # a file of another profiler may hold several ranks, all in the first rank's entry
    part = f"-part{rt.meta.other.get('part', 0)}" if rt.meta.source_format != "kineto" else ""
    return entry / "extras" / f"{kind.name}-v{kind.version}-p{PARSER_VERSION}{part}.arrow"


def _read(path: Path) -> pd.DataFrame:
    with pa.memory_map(str(path), "r") as source:
        table = pa.ipc.open_file(source).read_all()
    df = table.to_pandas()
    return df.set_index("row").rename_axis(None)


def _write(df: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    os.close(fd)
    try:
        table = pa.Table.from_pandas(df.rename_axis("row").reset_index(), preserve_index=False)
        with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def extra_table(
    rt: RankTrace,
    name: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
) -> pd.DataFrame:
    """``rt.extras[name]``, read from the cache or the source file the first time (then kept)."""
    if name in rt.extras:
        return rt.extras[name]
    kind = get_kind(name)
    path = _cache_path(rt, kind, storage_options, cache_dir) if use_cache else None
    table = None
    if path is not None and path.is_file():
        try:
            table = _read(path)
        except Exception as exc:  # a damaged file: decode the source again
            warnings.warn(
                f"ignoring unreadable cached {name} table {path} ({exc}); reading {rt.meta.source}",
                CacheWarning,
                stacklevel=2,
            )
    if table is None:
        data = read_trace_bytes(rt.meta.source, storage_options)
        if rt.meta.source_format != "kineto":
            from analysis.formats.readers import (
                foreign_extra,  # another profiler's file: its reader
            )

            table = foreign_extra(rt, kind, data)
        else:
            table = extract(data, rt.meta.source, kind)
        del data
        if path is not None:
            try:
                _write(table, path)
            except OSError as exc:
                warnings.warn(
                    f"could not cache the {name} table at {path} ({exc})",
                    CacheWarning,
                    stacklevel=2,
                )
    rt.extras[name] = table
    return table


def attach_extras(rt: RankTrace, names: Sequence[str], **source_options: Any) -> RankTrace:
    """``rt`` with every kind of ``names`` in ``rt.extras`` (see :func:`extra_table` for the
    keywords: ``storage_options``, ``cache_dir``, ``use_cache``). Mutates and returns ``rt``."""
    for name in names:
        extra_table(rt, name, **source_options)
    return rt


# --- the operator shapes kind --------------------------------------------------------------------


class _ShapeArgs(msgspec.Struct, gc=False):
    """The ``record_shapes=True`` args of a ``cpu_op`` event, kept as raw JSON text."""

    input_dims: msgspec.Raw = msgspec.field(default=_NULL, name="Input Dims")
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
    has = [a.input_dims != _NULL for a in args]
    rows = rows[np.array(has, dtype=bool)] if len(rows) else rows
    args = [a for a, h in zip(args, has, strict=True) if h]
    columns = {c: _canonical_json([getattr(a, c) for a in args]) for c in OP_SHAPE_COLUMNS}
    return pd.DataFrame(columns, index=pd.Index(rows, dtype="int64"))


OP_SHAPES = register(
    ExtraKind(
        name="op_shapes",
        version=1,
        args=_ShapeArgs,
        categories=("cpu_op",),
        build=_build_op_shapes,
    )
)
"""``op_shapes``: one row per ``cpu_op`` event with ``Input Dims``; columns ``input_dims``,
``input_types``, ``input_strides``, ``concrete_inputs`` (categorical compact JSON text, "" when the
trace does not have it)."""


# --- the memory operations kind ------------------------------------------------------------------


class _MemoryArgs(msgspec.Struct, gc=False):
    """The args of a ``gpu_memcpy`` / ``gpu_memset`` event that give its size and bandwidth."""

    nbytes: Any = msgspec.field(default=None, name="bytes")
    bandwidth: Any = msgspec.field(default=None, name="memory bandwidth (GB/s)")


MEMORY_OP_COLUMNS = {"bytes": "int64", "bandwidth_gbps": "float64"}


def _number(value: Any, missing: float) -> float:
    """An int/float or numeric string as a float; ``missing`` for anything else."""
    if isinstance(value, bool):
        return missing
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return missing
    return missing


def _build_memory_ops(rows: np.ndarray, args: list[_MemoryArgs]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "bytes": np.array([_number(a.nbytes, -1) for a in args], dtype=np.float64).astype(
                np.int64
            ),
            "bandwidth_gbps": np.array([_number(a.bandwidth, np.nan) for a in args],
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
