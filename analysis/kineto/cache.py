"""The local cache of parsed traces: one directory of Arrow IPC files per trace file.

Parsing a large trace takes seconds; reading its parsed tables back from Arrow IPC takes a small
fraction of that. An entry is keyed by :func:`cache_key` -- the source URL, its size, its version
(GCS generation, ETag, MD5 or mtime, whatever the filesystem reports) and :data:`PARSER_VERSION` --
so a changed file, or a new parser, misses the cache instead of serving stale tables.

Layout of an entry ``<cache_dir>/<key>/``: ``events.arrow``, ``flows.arrow``, ``collectives.arrow``
(Arrow IPC files; categoricals stay dictionary-encoded) and ``meta.json`` (the :class:`RankMeta`,
the pandas dtypes to restore, and the key itself). Entries are written into a temporary directory
inside ``cache_dir`` and renamed into place, so a reader never sees half an entry.

Beside them: ``extras/`` (event args decoded on demand, or by the parser:
:mod:`analysis.kineto.extras`) and ``results/`` (per-rank parts of analyses that depend on the
file alone, stored by the engine under a key it chooses: :func:`put_result`, :func:`get_result`;
this module does not know what they are).

Opening or reading an entry back sets its directory's mtime: its last use, which
:meth:`TraceCache.prune` reads to remove the least recently used entries (and those of another
parser version, which this version never reads again).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import os
import re
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa

from analysis.errors import TraceLoadError
from analysis.kineto.model import RankMeta, RankTrace

# Bump whenever the parser's output changes (columns, dtypes, normalisation, RankMeta fields):
# old entries then miss and are re-parsed.
# 2: collectives gained kernel and gloo rows and "seq"; 3: wait_on_stream / wait_on_record columns;
# 4: negative dur set to 0, RankMeta anomalies and negative_durations (the branches merged: 5)
# 7: the parser reads the kernel_args extra (kept in the entry's extras/); 8: gloo annotations'
# shapes also from PyTorch 1.8's "Input dims"; 9: XPlane GPU planes read from their Stream #
# lines only and launch calls given to their GPU's rank; Kineto GPU events without stream or
# correlation named in meta.anomalies; nsys driver calls keep their _v2, older GPU tables named;
# 10: an Intel GPU event's SYCL queue is its stream; 11: ProcessGroupNCCL's nccl:* annotations
# with their shapes where no kernel carries collective args; 12: a Chrome trace none of whose
# events has a 'cat' (JAX's trace.json.gz) is no Kineto trace; gzipped XPlane files are read
PARSER_VERSION = 12
# The extras the parser itself builds (analysis.kineto.kernel_args), stored in the entry
PARSED_EXTRAS = ("kernel_args",)

CACHE_ENV = "TRACE_ANALYSIS_CACHE"
DEFAULT_CACHE_DIR = Path("~/.cache/trace-analysis")
TABLES = ("events", "flows", "collectives")
_TMP_PREFIX = ".tmp-"
_KEY_RE = re.compile(r"[0-9a-f]{32}")


class CacheWarning(UserWarning):
    """A cache entry could not be read or written; the trace is parsed from its source instead."""


def cache_key(
    source: str, size: int | None, version: str | None, capture: str | None = None
) -> str:
    """The entry name for one trace file: a hash of what identifies its content and the parser
    (and the capture traces merged into it: ``capture``, the ``capture_trace=`` argument, else
    those beside it)."""
    from analysis.kineto.cuda_graphs import capture_signature

    # a replay trace's parse depends on its capture traces
    text = (f"{PARSER_VERSION}\n{source}\n{size}\n{version}\n"
            f"{capture_signature(source, capture)}")
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def part_key(key: str, part: int) -> str:
    """The entry name of the ``part``-th rank of a file that holds several (part 0: ``key``)."""
    if part == 0:
        return key
    return hashlib.sha256(f"{key}#{part}".encode()).hexdigest()[:32]


def default_cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE_DIR).expanduser()


def _dtype_record(df: pd.DataFrame) -> dict[str, list[str | None]]:
    """Each column's pandas dtype (and a categorical's categories dtype): Arrow does not keep
    ``object`` string columns as ``object`` in pandas 3, so they are restored from this."""
    out: dict[str, list[str | None]] = {}
    for name, dtype in df.dtypes.items():
        cats = str(df[name].cat.categories.dtype) if isinstance(dtype, pd.CategoricalDtype) else None
        out[str(name)] = [str(dtype), cats]
    return out


def _restore_dtypes(df: pd.DataFrame, record: dict[str, list[str | None]]) -> pd.DataFrame:
    for name, (dtype, cats) in record.items():
        col = df[name]
        if cats is not None:
            if str(col.cat.categories.dtype) != cats:
                categories = pd.Index(col.cat.categories, dtype=cats)
                df[name] = pd.Categorical.from_codes(col.cat.codes, categories=categories)
        elif str(col.dtype) != dtype:
            df[name] = col.astype(dtype)
    return df


def _dictionary_encoded(table: pa.Table) -> pa.Table:
    """``table`` with each text column whose values repeat (at most one distinct value per two
    rows) dictionary-encoded: a collective's ``pg_ranks`` (the group's ranks written out, 2.4 kB
    per row at 512 ranks) is stored once per group, and read back as a categorical whose object
    column (:func:`_restore_dtypes`) shares the group's one string instead of a string per row."""
    for i, field in enumerate(table.schema):
        if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
            continue
        column = table.column(i)
        if len(column) < 2 or column.null_count:  # nulls would come back as NaN, not None
            continue
        encoded = column.dictionary_encode()
        distinct = max((len(chunk.dictionary) for chunk in encoded.chunks), default=0)
        if 2 * distinct <= len(column):
            table = table.set_column(i, field.name, encoded)
    return table


def _column_array(column: pd.Series) -> pa.Array | None:
    """A column as an Arrow array built straight from its values: numbers and booleans without
    missing values, categoricals of text, text (None: another kind, for ``Table.from_pandas``)."""
    dtype = column.dtype
    try:
        if isinstance(dtype, pd.CategoricalDtype):
            categories = column.cat.categories
            if categories.dtype != object and not isinstance(categories.dtype, pd.StringDtype):
                return None
            codes = column.cat.codes.to_numpy()
            values = pa.array(categories.to_numpy(object), type=pa.large_string())
            return pa.DictionaryArray.from_arrays(
                codes, values, mask=codes < 0 if (codes < 0).any() else None)
        if isinstance(dtype, np.dtype) and dtype.kind in "biuf":
            return pa.array(column.to_numpy())
        if isinstance(dtype, pd.StringDtype):
            return pa.array(column.array, type=pa.large_string())
    except pa.ArrowException:  # categories that are not all text, say: Arrow's own conversion
        return None
    return None


def _arrow_table(df: pd.DataFrame) -> pa.Table:
    """``df`` as an Arrow table without the pandas metadata (the entry's dtype record restores
    the dtypes): column by column where :func:`_column_array` can, else ``Table.from_pandas``
    (a fifth of the time on the small frames of results)."""
    arrays = []
    for _, column in df.items() if not df.columns.has_duplicates else ():
        array = _column_array(column)
        if array is None:
            break
        arrays.append(array)
    if len(arrays) != df.shape[1]:
        return pa.Table.from_pandas(df, preserve_index=False)
    return pa.Table.from_arrays(arrays, names=[str(c) for c in df.columns])


def _write_table(df: pd.DataFrame, path: Path) -> None:
    table = _dictionary_encoded(_arrow_table(df))
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def _pandas_column(column: pa.ChunkedArray, dtype: str, categories: str | None):
    """One column read back as the dtype its record names, straight from its Arrow buffers:
    numbers and booleans (zero-copy views of the mapped file), dictionary-encoded categoricals
    and text (one object per distinct value). None: another case, left to ``to_pandas``."""
    if column.num_chunks != 1 or column.null_count:
        return None
    array = column.chunk(0)
    kind = array.type
    if pa.types.is_dictionary(kind):
        codes = array.indices.to_numpy()
        values = array.dictionary
        if categories is not None and dtype == "category":
            return pd.Categorical.from_codes(codes, categories=pd.Index(
                values.to_numpy(zero_copy_only=False), dtype=categories))
        if dtype == "object":  # a Series: a frame would infer pandas' str dtype from an array
            return pd.Series(values.to_numpy(zero_copy_only=False).astype(object)[codes],
                             dtype=object, copy=False)
        return None
    if (pa.types.is_integer(kind) or pa.types.is_floating(kind)) and str(kind) == dtype.replace(
            "float64", "double").replace("float32", "float"):
        return array.to_numpy()
    if pa.types.is_boolean(kind) and dtype == "bool":
        return array.to_numpy(zero_copy_only=False)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        if dtype == "object":
            return pd.Series(array.to_numpy(zero_copy_only=False), dtype=object, copy=False)
        if dtype == "str":
            return pd.array(column, dtype="str")
    return None


def _read_frame(path: Path, record: dict[str, list[str | None]]) -> pd.DataFrame:
    """The table at ``path`` with the pandas dtypes of ``record`` (:func:`_dtype_record`):
    column by column from the memory-mapped file where :func:`_pandas_column` can (a third of
    the time of Arrow's pandas conversion and the dtype restore), else that conversion
    (``split_blocks``: no consolidation copy). Either way numeric columns stay zero-copy,
    read-only views of the mapped file: page cache, not heap. Analyses never write into the
    model's frames."""
    with pa.memory_map(str(path), "r") as source:
        table = pa.ipc.open_file(source).read_all()
    return _frame_of(table, record)


def _frame_of(table: pa.Table, record: dict[str, list[str | None]]) -> pd.DataFrame:
    """:func:`_read_frame` of a table read already."""
    columns: dict[str, Any] = {}
    if list(record) == table.column_names:
        for name, column in zip(table.column_names, table.columns, strict=True):
            array = _pandas_column(column, *record[name])
            if array is None:
                break
            columns[name] = array
    if len(columns) != table.num_columns:
        return _restore_dtypes(table.to_pandas(split_blocks=True, self_destruct=True), record)
    return pd.DataFrame(columns, copy=False)


def parsed_extra_path(entry: str | os.PathLike, name: str) -> Path:
    """Where the entry keeps the parser's extra table ``name`` (:data:`PARSED_EXTRAS`); the
    entry's key already names the parser version."""
    return Path(entry) / "extras" / f"{name}-parsed.arrow"


def write_extra_table(df: pd.DataFrame, path: Path) -> None:
    """An extra table (indexed by event row labels) as an Arrow IPC file, written atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=path.parent)
    os.close(fd)
    try:
        _write_table(df.rename_axis("row").reset_index(), Path(tmp))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _schema_record(schema: pa.Schema) -> dict[str, list[str | None]] | None:
    """The pandas dtypes Arrow's conversion gives a table of numbers, booleans, text and
    dictionaries of text (pandas 3: text as ``str``), as :func:`_dtype_record` writes them; None
    for any other column type."""
    record: dict[str, list[str | None]] = {}
    for field in schema:
        kind = field.type
        if pa.types.is_dictionary(kind) and (pa.types.is_string(kind.value_type)
                                             or pa.types.is_large_string(kind.value_type)):
            record[field.name] = ["category", "str"]
        elif pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
            record[field.name] = [str(kind.to_pandas_dtype().__name__), None]
        elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
            record[field.name] = ["str", None]
        else:
            return None
    return record


def read_extra_table(path: Path) -> pd.DataFrame:
    """An extra table written by :func:`write_extra_table`, indexed by its event rows: the dtypes
    of Arrow's conversion (:func:`_schema_record`), read column by column where it can."""
    with pa.memory_map(str(path), "r") as source:
        table = pa.ipc.open_file(source).read_all()
    record = _schema_record(table.schema)
    if (record is None or "row" not in record or any(  # no text to tell str from object
            pa.types.is_dictionary(c.type) and not sum(len(k.dictionary) for k in c.chunks)
            for c in table.columns)):
        return table.to_pandas().set_index("row").rename_axis(None)
    df = _frame_of(table, record)
    return df.set_index(pd.Index(df.pop("row").to_numpy())).rename_axis(None)


def _meta_to_dict(meta: RankMeta) -> dict[str, Any]:
    return dataclasses.asdict(meta)


def _meta_from_dict(d: dict[str, Any]) -> RankMeta:
    span = d.get("profiler_span")
    d["profiler_span"] = tuple(span) if span is not None else None
    return RankMeta(**d)


def _read_entry(entry: Path, record: dict[str, Any]) -> RankTrace:
    tables = {
        name: _read_frame(entry / f"{name}.arrow", record["dtypes"][name])
        for name in TABLES
    }
    meta = _meta_from_dict(record["meta"])
    meta.from_cache = True
    return RankTrace(meta=meta, cache_entry=str(entry), **tables)


# An entry used this recently is never pruned for age or size (a running session may read it back).
PRUNE_GRACE_S = 3600


def _touch(entry: Path) -> None:
    """Mark the entry as used now (its directory's mtime: what :meth:`TraceCache.prune` reads)."""
    try:
        os.utime(entry)
    except OSError:  # a read-only cache: its entries just look older
        pass


def _used_at(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _readable(entry: Path) -> bool:
    """Can this version read the entry: a ``meta.json`` of this :data:`PARSER_VERSION`."""
    try:
        record = msgspec.json.decode((entry / "meta.json").read_bytes())
    except (OSError, msgspec.DecodeError):
        return False
    return isinstance(record, dict) and record.get("parser_version") == PARSER_VERSION


class TraceCache:
    """Parsed traces on local disk, keyed by :func:`cache_key`.

    ``cache_dir`` defaults to ``$TRACE_ANALYSIS_CACHE`` or ``~/.cache/trace-analysis``.
    """

    def __init__(self, cache_dir: str | os.PathLike | None = None):
        self.dir = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()

    def __repr__(self) -> str:
        return f"TraceCache({str(self.dir)!r})"

    def entry_dir(self, key: str) -> Path:
        return self.dir / key

    def get(self, key: str) -> RankTrace | None:
        """The cached trace, or None when there is no entry (or a broken one, with a warning)."""
        entry = self.entry_dir(key)
        meta_path = entry / "meta.json"
        if not meta_path.is_file():
            return None
        try:
            record = msgspec.json.decode(meta_path.read_bytes())
            if record.get("key") != key or record.get("parser_version") != PARSER_VERSION:
                raise ValueError("entry belongs to another key or parser version")
            trace = _read_entry(entry, record)
        except Exception as exc:  # any damage (truncation, bad JSON, missing file): re-parse
            warnings.warn(
                f"ignoring unreadable trace cache entry {entry} ({type(exc).__name__}: {exc}); "
                "the trace is parsed again",
                CacheWarning,
                stacklevel=2,
            )
            shutil.rmtree(entry, ignore_errors=True)
            return None
        _touch(entry)
        return trace

    @staticmethod
    def read(entry: str | os.PathLike) -> RankTrace:
        """The trace stored in the entry directory ``entry`` (a ``RankTrace.cache_entry``), read
        again: its tables memory-mapped, as :meth:`get` reads them. Raises
        :class:`~analysis.errors.TraceLoadError` when the entry is gone or damaged."""
        path = Path(entry)
        try:
            trace = _read_entry(path, msgspec.json.decode((path / "meta.json").read_bytes()))
        except Exception as exc:
            raise TraceLoadError(
                str(path), f"the trace cache entry could not be read back ({type(exc).__name__}: "
                f"{exc}); open the trace again"
            ) from exc
        _touch(path)
        return trace

    def put(self, key: str, trace: RankTrace) -> Path:
        """Store ``trace`` under ``key`` atomically; returns the entry's directory.

        Raises OSError when the cache directory cannot be written.
        """
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=self.dir))
        try:
            record = {
                "key": key,
                "parser_version": PARSER_VERSION,
                "meta": _meta_to_dict(trace.meta),
                "dtypes": {},
            }
            for name in TABLES:
                df = getattr(trace, name)
                record["dtypes"][name] = _dtype_record(df)
                _write_table(df, tmp / f"{name}.arrow")
            for name in PARSED_EXTRAS:  # the parser's extra tables travel with the entry
                if name in trace.extras:
                    write_extra_table(trace.extras[name], parsed_extra_path(tmp, name))
            # meta.json last: an entry without it is never read.
            (tmp / "meta.json").write_bytes(msgspec.json.encode(record))
            target = self.entry_dir(key)
            try:
                os.rename(tmp, target)
            except OSError:
                # Another process stored the same key first (same content); keep theirs.
                if not (target / "meta.json").is_file():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return target

    def put_parts(self, key: str, traces: list[RankTrace]) -> None:
        """Store the ranks of one file (several for an nsys/XPlane/rocprof file): the first under
        ``key``, the others under :func:`part_key`; the first is written last, so a reader that
        finds it finds the others (its ``meta.other["parts"]`` counts them)."""
        for part in reversed(range(len(traces))):
            self.put(part_key(key, part), traces[part])

    def get_parts(self, key: str) -> list[RankTrace] | None:
        """Every rank stored by :meth:`put_parts` under ``key``, or None when any is missing."""
        first = self.get(key)
        if first is None:
            return None
        count = int(first.meta.other.get("parts", 1)) if first.meta.source_format != "kineto" else 1
        rest = [self.get(part_key(key, part)) for part in range(1, count)]
        if any(r is None for r in rest):
            return None
        return [first, *rest]

    def _entries(self) -> list[Path]:
        if not self.dir.is_dir():
            return []
        return [p for p in self.dir.iterdir() if p.is_dir() and _KEY_RE.fullmatch(p.name)]

    @staticmethod
    def _size(path: Path) -> int:
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())

    def info(self) -> dict[str, Any]:
        """``{"dir": path, "entries": count, "bytes": total size on disk, "unreadable_entries":
        count, "unreadable_bytes": size}``; the unreadable ones are those of another parser
        version (or damaged): this version never reads them, :meth:`prune` removes them."""
        sizes = {e: self._size(e) for e in self._entries()}
        stale = [e for e in sizes if not _readable(e)]
        return {
            "dir": str(self.dir),
            "entries": len(sizes),
            "bytes": sum(sizes.values()),
            "unreadable_entries": len(stale),
            "unreadable_bytes": sum(sizes[e] for e in stale),
        }

    def prune(
        self,
        max_bytes: int | None = None,
        older_than_s: float | None = None,
        *,
        dry_run: bool = False,
        now: float | None = None,
    ) -> dict[str, int]:
        """Remove the entries this version cannot read, then those last used more than
        ``older_than_s`` seconds ago, then the least recently used ones until the cache holds at
        most ``max_bytes``; also temporary directories left by a writer that died (older than an
        hour). An entry's last use is the last time a process opened or read it back (its
        directory's mtime). Entries used in the last :data:`PRUNE_GRACE_S` seconds are never
        removed for size or age: a running session may still read them back (one whose entry is
        gone gets :class:`~analysis.errors.TraceLoadError` saying to open the trace again).

        Returns counts and bytes: ``removed``, ``freed`` (bytes), ``unreadable``, ``unused``
        (removed for age), ``over_size`` (removed for size), ``kept``, ``kept_bytes``,
        ``kept_recent`` (kept beyond ``max_bytes`` because used in the grace period).
        ``dry_run``: count only, remove nothing."""
        now = time.time() if now is None else now
        out = dict.fromkeys(("removed", "freed", "unreadable", "unused", "over_size", "kept",
                             "kept_bytes", "kept_recent"), 0)
        if not self.dir.is_dir():
            return out

        def remove(path: Path, size: int, why: str) -> None:
            if not dry_run:
                shutil.rmtree(path, ignore_errors=True)
            out["removed"] += why != "tmp"
            out["freed"] += size
            if why != "tmp":
                out[why] += 1

        for tmp in self.dir.glob(_TMP_PREFIX + "*"):
            if tmp.is_dir() and now - _used_at(tmp) > 3600:
                remove(tmp, self._size(tmp), "tmp")
        live = []
        for entry in self._entries():
            size = self._size(entry)
            used = _used_at(entry)
            if not _readable(entry):
                remove(entry, size, "unreadable")
            elif (older_than_s is not None and now - used > older_than_s
                  and now - used > PRUNE_GRACE_S):
                remove(entry, size, "unused")
            else:
                live.append((used, size, entry))
        total = sum(size for _, size, _ in live)
        for used, size, entry in sorted(live, key=lambda t: (t[0], t[2].name)):  # oldest first
            if max_bytes is None or total <= max_bytes or now - used <= PRUNE_GRACE_S:
                out["kept"] += 1
                out["kept_bytes"] += size
                # kept only because it was used in the last hour
                out["kept_recent"] += max_bytes is not None and total > max_bytes
                continue
            remove(entry, size, "over_size")
            total -= size
        return out

    def clear(self) -> int:
        """Delete every entry (and leftover temporary directories); returns the bytes freed."""
        if not self.dir.is_dir():
            return 0
        freed = 0
        # Only what put() creates: cache_dir may be shared with other files.
        for path in self._entries() + list(self.dir.glob(_TMP_PREFIX + "*")):
            freed += self._size(path)
            shutil.rmtree(path, ignore_errors=True)
        return freed


# --- per-rank results kept beside the tables ------------------------------------------------------

RESULTS = "results"


def _items_of(value: Any) -> list[Any] | None:
    """The items of a storable result, or None when it is something else: a DataFrame, or a
    tuple (a ``NamedTuple`` of this package included) of DataFrames, texts and Nones (a rank's
    part and the file it came from, say). Each frame needs a plain 0..n-1 index, text column
    names and no ``attrs``: Arrow would keep attrs only as JSON, and a frame read back without
    them is not the frame that was stored."""
    items = [value] if isinstance(value, pd.DataFrame) else list(value) if isinstance(
        value, tuple) else None
    if not items:
        return None
    for f in items:
        if f is None or isinstance(f, str):
            continue
        if not isinstance(f, pd.DataFrame):
            return None
        if not (isinstance(f.index, pd.RangeIndex) and f.index.start == 0 and f.index.step == 1):
            return None
        if not all(isinstance(c, str) for c in f.columns) or f.columns.has_duplicates:
            return None
        if f.attrs:
            return None
    return items


def put_result(entry: str | os.PathLike, key: str, value: Any) -> bool:
    """Store ``value`` (see :func:`_items_of`) in the entry directory under ``key``; False when it
    is not storable. Raises OSError when the entry cannot be written."""
    items = _items_of(value)
    if items is None or not _KEY_RE.fullmatch(key):
        return False
    folder = Path(entry) / RESULTS
    folder.mkdir(parents=True, exist_ok=True)
    kind = type(value)
    frames = [f for f in items if isinstance(f, pd.DataFrame)]
    # per item: ["frame", its frame's position] or ["value", the text or None as it is]
    positions = iter(range(len(frames)))
    record = {
        "frames": len(frames),
        "type": f"{kind.__module__}:{kind.__qualname__}" if isinstance(value, tuple) else None,
        "dtypes": [_dtype_record(f) for f in frames],
        "items": [["frame", next(positions)] if isinstance(f, pd.DataFrame) else ["value", f]
                  for f in items],
    }
    for i, f in enumerate(frames):
        tmp = folder / f"{_TMP_PREFIX}{key}.{i}.arrow"
        try:
            _write_table(f, tmp)
        except pa.ArrowException:  # a column Arrow cannot hold (mixed objects): not stored
            tmp.unlink(missing_ok=True)
            return False
        os.replace(tmp, folder / f"{key}.{i}.arrow")
    tmp = folder / f"{_TMP_PREFIX}{key}.json"
    tmp.write_bytes(msgspec.json.encode(record))
    os.replace(tmp, folder / f"{key}.json")  # last: a result without it is never read
    return True


def has_result(entry: str | os.PathLike, key: str) -> bool:
    """Whether :func:`put_result` stored something under ``key`` (not whether it reads back)."""
    return (Path(entry) / RESULTS / f"{key}.json").is_file()


def get_result(entry: str | os.PathLike, key: str) -> Any | None:
    """The value :func:`put_result` stored under ``key``, or None (absent or unreadable)."""
    folder = Path(entry) / RESULTS
    try:
        record = msgspec.json.decode((folder / f"{key}.json").read_bytes())
        frames = []
        for i in range(record["frames"]):
            frames.append(_read_frame(folder / f"{key}.{i}.arrow", record["dtypes"][i]))
        if record["type"] is None:
            return frames[0]
        items = [frames[v] if what == "frame" else v for what, v in record["items"]]
        module, _, name = record["type"].partition(":")
        kind = tuple
        if module.startswith("analysis."):  # only this package's types are rebuilt
            kind = getattr(importlib.import_module(module), name, tuple)
        return kind._make(items) if hasattr(kind, "_make") else tuple(items)
    except FileNotFoundError:
        return None
    except Exception as exc:  # damaged: computed again (and stored again)
        warnings.warn(f"ignoring unreadable cached result {folder / key} ({exc})", CacheWarning,
                      stacklevel=2)
        return None
