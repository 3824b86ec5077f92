"""One Kineto trace file's bytes → a ``RankTrace`` (the columnar model of ``analysis.kineto.model``).

The outside world is decoded once, here: ``msgspec`` reads the JSON into typed structs that hold only
the fields the model needs (no Python dict per event), and the columns are built from those in bulk
(``analysis.kineto.columns``, which also says which rows are kept and how times stay exact).

Large files are decoded in chunks of events (``analysis.kineto.chunks`` finds the cuts with a byte
search), so that only one chunk's structs exist at a time, and the chunks can be decoded in other
processes (``map_chunks``). Files written in another layout (compact JSON, other tools) are decoded
whole. Either way the tables are identical, to the ns.

Every failure caused by the input raises ``CorruptTraceError`` or ``NotATraceError`` naming the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

from analysis.errors import CorruptTraceError, NotATraceError
from analysis.io import gunzip_bounded
from analysis.kineto import kernel_args
from analysis.kineto.chunks import CHUNK_BYTES, chunk_json, cut_points
from analysis.kineto.columns import (
    EVENTS_DECODER,
    BadChunk,
    EventChunk,
    Tables,
    assemble,
    chunk_columns,
    decode_chunk,
    fill_annotation_shapes,
    int_or_none,
    kept_rows,  # noqa: F401  (re-exported: analysis.kineto.extras aligns its rows with it)
    needs_annotation_shapes,
    shorten,
)
from analysis.kineto.events import KERNEL_CATS, MEMCPY_CATS, MEMSET_CATS, cat_mask, gpu_mask
from analysis.kineto.model import RankMeta, RankTrace

_UTF8_BOM = b"\xef\xbb\xbf"
# Top-level keys larger than this (serialised) stay out of ``RankMeta.other``: metadata, not payload.
_OTHER_MAX_BYTES = 64 * 1024
_KNOWN_TOP_KEYS = frozenset(
    ("traceEvents", "distributedInfo", "deviceProperties", "schemaVersion", "baseTimeNanoseconds")
)
_TOP_DECODER = msgspec.json.Decoder(dict[str, msgspec.Raw])

# How chunks are decoded: ``map`` itself, or e.g. a process pool's ordered, bounded map.
ChunkMap = Callable[[Callable[[bytes], EventChunk], Iterable[bytes]], Iterator[EventChunk]]


def parse_trace_bytes(
    data: bytes,
    source: str,
    *,
    map_chunks: ChunkMap | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> RankTrace:
    """Parse one Kineto trace file (gzip or plain JSON, detected by content) into a ``RankTrace``.

    ``source`` is the path or URL the bytes came from; it names the file in errors and
    ``meta.source``. ``meta.rank`` is ``distributedInfo.rank``, or -1 with
    ``meta.rank_origin == "unknown"`` when the trace does not say. ``map_chunks`` decodes the
    chunks of ``traceEvents`` (about ``chunk_bytes`` of JSON each; default: one after another in
    this process); it must return ``analysis.kineto.columns.decode_chunk``'s results in order.

    Raises ``CorruptTraceError`` (bad gzip, invalid JSON, values of impossible types) or
    ``NotATraceError`` (valid JSON without ``traceEvents``).
    """
    if not isinstance(data, bytes):
        data = bytes(data)
    text = _decompress(data, source)
    top = _decode_top(text, source)
    meta = _meta(top, source)
    # only the events' JSON stays referenced, so that it can be let go of once decoded
    events_json = [top.pop("traceEvents")]
    del top, text
    tables = _event_tables(events_json, source, map_chunks or map, chunk_bytes, meta)
    meta.float_timestamps = tables.float_ts
    meta.profiler_span = tables.span
    meta.anomalies += tables.anomalies
    meta.unseen_gpu_events, busy = _unseen_gpu_events(tables.events)
    if meta.unseen_gpu_events:
        meta.anomalies.append(
            f"{meta.unseen_gpu_events} of {busy} kernel / memcpy / memset event(s) have no "
            "'stream' or no 'correlation' arg (which the profiler always writes: was the trace "
            "edited?); most GPU analyses do not count them as GPU work (the TensorBoard views "
            "do: the plugin reads kernels by category; with kernel_patterns='hta' the temporal "
            "and kernel breakdowns count those with a stream, as HTA does)")
    meta.negative_durations = tables.negative_durations
    return RankTrace(
        meta=meta, events=tables.events, flows=tables.flows, collectives=tables.collectives,
        extras={kernel_args.NAME: tables.kernel_args},
    )


def _unseen_gpu_events(events) -> tuple[int, int]:
    """(kernels, copies and sets without a ``stream`` or a ``correlation`` arg, all of them).
    Every GPU event Kineto writes carries both: GPU work is what runs on a stream and is linked
    to its launch (HTA's rule, :func:`analysis.kineto.events.gpu_mask`), so the analyses do not
    see these. Only traces edited after recording lack them (TraceLens's evaluation traces: their
    args stripped to an ``External id``); the parse says so instead of a silent "no GPU events"."""
    busy = cat_mask(events, KERNEL_CATS + MEMCPY_CATS + MEMSET_CATS)
    return int((busy & ~gpu_mask(events)).sum()), int(busy.sum())


def _event_tables(
    events_json: list[msgspec.Raw],
    source: str,
    map_chunks: ChunkMap,
    chunk_bytes: int,
    meta: RankMeta,
) -> Tables:
    """The tables of ``events_json[0]``, the ``traceEvents`` array; the list is emptied as soon
    as the JSON is no longer needed, so that the text is freed before the tables are joined (when
    this holds the last reference to it: a gzip file's decompressed text)."""
    array = memoryview(events_json[0])
    ranges = cut_points(array, chunk_bytes)
    chunks = None
    if ranges is not None:
        try:
            chunks = list(map_chunks(decode_chunk, (chunk_json(array, r) for r in ranges)))
        except BadChunk:
            pass  # cut inside an event, or the file is invalid: the whole decode tells which
    array.release()
    if chunks is None:
        chunks = [chunk_columns(_decode_events(events_json[0], source), source)]
    if not needs_annotation_shapes(chunks):  # the annotations' shapes need a second look at the JSON
        events_json.clear()
    tables = assemble(chunks, meta.process_groups)
    without_cat = sum(c.no_cat[0] for c in chunks)
    if not len(tables.events) and without_cat:
        raise NotATraceError(
            source, f"a Chrome trace, not a Kineto one: none of its {without_cat} complete "
            "events has a 'cat' (JAX's and TensorFlow's profiler write such a trace.json.gz "
            "beside the .xplane.pb it was made from: read the .xplane.pb)")
    if events_json:
        fill_annotation_shapes(tables, events_json.pop())
    return tables


# --- bytes → JSON ---------------------------------------------------------------------------


def _decompress(data: bytes, source: str) -> bytes:
    if not data:
        raise CorruptTraceError(source, "the file is empty (0 bytes)")
    # several gzip members, zero padding, damage, and output capped relative to memory
    return gunzip_bounded(data, source, error=CorruptTraceError)


def _decode_top(text: bytes, source: str) -> dict[str, msgspec.Raw]:
    if text.startswith(_UTF8_BOM):
        text = text[len(_UTF8_BOM) :]
    try:
        top = _TOP_DECODER.decode(text)
    except msgspec.ValidationError as exc:  # valid JSON, but not an object
        found = re.search(r"got `(\w+)`", str(exc))
        kind = found.group(1) if found else "value"
        hint = (
            " (a memory timeline from export_memory_timeline looks like this)"
            if kind == "array"
            else ""
        )
        raise NotATraceError(
            source, f"the JSON is a top-level {kind}, not a Kineto trace object{hint}"
        ) from None
    except msgspec.DecodeError as exc:
        raise CorruptTraceError(source, _json_error(text, str(exc))) from None
    except UnicodeDecodeError as exc:
        raise _not_utf8(source, exc) from None
    except RecursionError:
        raise _too_deep(source) from None
    if "traceEvents" not in top:
        raise NotATraceError(source, _what_it_looks_like(top))
    return top


def _json_error(text: bytes, message: str) -> str:
    """msgspec's decode error with the line and column of the byte offset it names."""
    if "truncated" in message:
        return f"invalid JSON: the text ends early at byte {len(text)} (the file was cut off?)"
    found = re.search(r"\(byte (\d+)\)", message)
    if found:
        offset = int(found.group(1))
        line = text.count(b"\n", 0, offset) + 1
        column = offset - (text.rfind(b"\n", 0, offset) + 1) + 1
        message = message.replace(found.group(0), f"(byte {offset}, line {line}, column {column})")
    return f"invalid JSON: {message}"


def _what_it_looks_like(top: dict[str, msgspec.Raw]) -> str:
    if "nodes" in top and "schema" in top:
        return (
            "no 'traceEvents': this is a PyTorch execution trace (ExecutionTraceObserver), "
            "not a Kineto profiler trace"
        )
    keys = ", ".join(repr(k) for k in list(top)[:8]) or "none"
    return f"no 'traceEvents' key, so not a Kineto profiler trace (top-level keys: {keys})"


def _decode_events(raw: msgspec.Raw, source: str) -> list:
    try:
        return EVENTS_DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        # msgspec's path is relative to the traceEvents value (and absent when it is that value)
        message = str(exc)
        where = (
            message.replace("`$", "`$.traceEvents")
            if "`$" in message
            else (f"{message} - at `$.traceEvents`")
        )
        raise CorruptTraceError(source, f"unexpected trace structure: {where}") from None
    except UnicodeDecodeError as exc:
        raise _not_utf8(source, exc) from None
    except RecursionError:
        raise _too_deep(source) from None


def _too_deep(source: str) -> CorruptTraceError:
    return CorruptTraceError(
        source, "invalid trace: the JSON is nested too deeply (thousands of levels of [ or {)"
    )


def _not_utf8(source: str, exc: UnicodeDecodeError) -> CorruptTraceError:
    return CorruptTraceError(source, f"invalid JSON: a string is not UTF-8 text ({exc.reason})")


# --- metadata --------------------------------------------------------------------------------


def _meta(top: dict[str, msgspec.Raw], source: str) -> RankMeta:
    dist = _decode_any(top.get("distributedInfo"), source)
    if not isinstance(dist, dict):
        dist = {}
    rank = int_or_none(dist.get("rank"))
    anomalies = []
    if "mergedRanks" in top:  # written by trace-analysis merge: several ranks in one file
        merged = _decode_any(top.get("mergedRanks"), source)
        n = len(merged) if isinstance(merged, dict | list) else "several"
        anomalies.append(
            f"a merged trace of {n} ranks (trace-analysis merge): read here as one rank, every "
            "rank's events together; analyse the original files, or split it with "
            "analysis.kineto.merge.read_merged_trace")
    if "rank" in dist and (rank is None or rank < 0):
        anomalies.append(
            f"distributedInfo.rank is {shorten(msgspec.json.encode(dist['rank']))}, not a rank "
            "(an integer from 0); ignored"
        )
        rank = None
    devices = _decode_any(top.get("deviceProperties"), source)
    devices = [d for d in devices if isinstance(d, dict)] if isinstance(devices, list) else []
    backend = dist.get("backend")
    other = {
        key: _decode_any(raw, source)
        for key, raw in top.items()
        if key not in _KNOWN_TOP_KEYS and len(raw) <= _OTHER_MAX_BYTES
    }
    return RankMeta(
        rank=-1 if rank is None else rank,
        source=source,
        world_size=int_or_none(dist.get("world_size")),
        backend=backend if isinstance(backend, str) else None,
        rank_origin="unknown" if rank is None else "distributedInfo",
        distributed_info=dist,
        device_properties=devices,
        schema_version=_decode_any(top.get("schemaVersion"), source),
        base_time_ns=int_or_none(_decode_any(top.get("baseTimeNanoseconds"), source)),
        other=other,
        anomalies=anomalies,
    )


def _decode_any(raw: msgspec.Raw | None, source: str) -> Any:
    # _decode_top checked the JSON syntax, but not the UTF-8 of strings inside skipped values.
    try:
        return None if raw is None else msgspec.json.decode(raw)
    except UnicodeDecodeError as exc:
        raise _not_utf8(source, exc) from None
    except RecursionError:
        raise _too_deep(source) from None
