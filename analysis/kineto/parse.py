"""One Kineto trace file's bytes → a ``RankTrace`` (the columnar model of ``analysis.kineto.model``).

The outside world is decoded once, here: ``msgspec`` reads the JSON into typed structs that hold only
the fields the model needs (no Python dict per event), and the columns are built from those in bulk.

Which rows are kept follows HolisticTraceAnalysis 0.5.0: events with both ``dur`` and ``cat``, minus
the profiler's own ``cat == "Trace"`` span, in file order. A kept event without ``ts`` cannot be placed
on a timeline and is dropped too (HTA would keep it with a NaN start).

Timestamps are kept exactly as written: ``ts``/``dur`` are read as raw JSON literals and converted in
bulk to integer nanoseconds (µs × 1000, fractions kept), so ``1700000000000000.123`` stays exact
where a float64 would be off by up to 0.125 µs.

Every failure caused by the input raises ``CorruptTraceError`` or ``NotATraceError`` naming the file.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from operator import attrgetter, itemgetter
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from analysis.errors import CorruptTraceError, NotATraceError
from analysis.kineto.model import (
    COLLECTIVE_COLUMNS,
    EVENT_COLUMNS,
    FLOW_COLUMNS,
    LEGACY_CATEGORIES,
    RankMeta,
    RankTrace,
    empty_frame,
)
from analysis.kineto.sources import gunzip_bounded

_UTF8_BOM = b"\xef\xbb\xbf"
_NULL = msgspec.Raw(b"null")
_I64_MAX = 2**63 - 1
_I64_MIN = -(2**63)
# The largest |µs| whose ×1000 still fits in int64 (about year 2262 as an epoch time).
_US_LIMIT = _I64_MAX // 1000
# Top-level keys larger than this (serialised) stay out of ``RankMeta.other``: metadata, not payload.
_OTHER_MAX_BYTES = 64 * 1024
_COLLECTIVE_EVENT = "record_param_comms"
# gloo's CPU collectives are annotated "gloo:all_reduce", ... on its worker thread, with shapes only
_GLOO_PREFIX = "gloo:"
_FLOW_PHASES = frozenset(("s", "f", "t"))
_KNOWN_TOP_KEYS = frozenset(
    ("traceEvents", "distributedInfo", "deviceProperties", "schemaVersion", "baseTimeNanoseconds")
)

# Numbers in args: Kineto writes ints, some writers strings ("stream": "7") or floats.
_Num = int | float | str | None


class _Args(msgspec.Struct, gc=False):
    """The ``args`` keys the model uses; every other key is skipped by the decoder."""

    stream: _Num = -1
    correlation: _Num = -1
    external_id: _Num = msgspec.field(default=-1, name="External id")
    device: _Num = -1
    # CUDA sync events ("Stream Wait Event", "Event Sync"): the stream and the cudaEventRecord waited on
    wait_on_stream: _Num = -1
    wait_on_record: _Num = msgspec.field(default=-1, name="wait_on_cuda_event_record_corr_id")
    # record_param_comms (NCCL collectives); kept raw, only those few rows are decoded further
    collective: msgspec.Raw = msgspec.field(default=_NULL, name="Collective name")
    in_nelems: _Num = msgspec.field(default=-1, name="In msg nelems")
    out_nelems: _Num = msgspec.field(default=-1, name="Out msg nelems")
    dtype: msgspec.Raw = _NULL
    group_size: _Num = msgspec.field(default=-1, name="Group size")
    pg_name: msgspec.Raw = msgspec.field(default=_NULL, name="Process Group Name")
    # the collective's sequence number in its group. "Process Group Description" is not decoded:
    # distributedInfo.pg_config gives it by name, and every field here costs every event time
    seq: _Num = msgspec.field(default=-1, name="Seq")
    pg_ranks: msgspec.Raw = msgspec.field(default=_NULL, name="Process Group Ranks")


class _Event(msgspec.Struct, gc=False):
    """One element of ``traceEvents``, only the fields the model needs."""

    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    # pid/tid are ints, but Kineto's own metadata rows use strings ("Spans", "Traces", "")
    pid: _Num = -1
    tid: _Num = -1
    # raw literals, converted exactly and in bulk by _ns_values
    ts: msgspec.Raw = _NULL
    dur: msgspec.Raw = _NULL
    id: _Num = -1
    args: _Args | None = None


_NO_ARGS = _Args()
_EVENTS_DECODER = msgspec.json.Decoder(list[_Event])
_INT_LIST_DECODER = msgspec.json.Decoder(list[int])
_ENCODER = msgspec.json.Encoder()
# characters of a JSON array of integer literals, and of any JSON numbers
_INTEGER_CHARS = b"-0123456789,[]"
_NUMBER_CHARS = b"-+.0123456789eE,[]"
_COMMA_TO_NEWLINE = bytes.maketrans(b",", b"\n")
_TOP_DECODER = msgspec.json.Decoder(dict[str, msgspec.Raw])


def parse_trace_bytes(data: bytes, source: str) -> RankTrace:
    """Parse one Kineto trace file (gzip or plain JSON, detected by content) into a ``RankTrace``.

    ``source`` is the path or URL the bytes came from; it names the file in errors and
    ``meta.source``. ``meta.rank`` is ``distributedInfo.rank``, or -1 with
    ``meta.rank_origin == "unknown"`` when the trace does not say.

    Raises ``CorruptTraceError`` (bad gzip, invalid JSON, values of impossible types) or
    ``NotATraceError`` (valid JSON without ``traceEvents``).
    """
    if not isinstance(data, bytes):
        data = bytes(data)
    text = _decompress(data, source)
    top = _decode_top(text, source)
    events = _decode_events(top["traceEvents"], source)
    meta = _meta(top, source)
    return _build(events, meta, source, top["traceEvents"])


# --- bytes → JSON ---------------------------------------------------------------------------


def _decompress(data: bytes, source: str) -> bytes:
    if not data:
        raise CorruptTraceError(source, "the file is empty (0 bytes)")
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


def _decode_events(raw: msgspec.Raw, source: str) -> list[_Event]:
    try:
        return _EVENTS_DECODER.decode(raw)
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
    rank = _int_or_none(dist.get("rank"))
    anomalies = []
    if "rank" in dist and (rank is None or rank < 0):
        anomalies.append(
            f"distributedInfo.rank is {_shorten(_ENCODER.encode(dist['rank']))}, not a rank "
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
        world_size=_int_or_none(dist.get("world_size")),
        backend=backend if isinstance(backend, str) else None,
        rank_origin="unknown" if rank is None else "distributedInfo",
        distributed_info=dist,
        device_properties=devices,
        schema_version=_decode_any(top.get("schemaVersion"), source),
        base_time_ns=_int_or_none(_decode_any(top.get("baseTimeNanoseconds"), source)),
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


def _int_or_none(value: Any) -> int | None:
    """An int, an integral float or a numeric string as an int64 value; anything else None.

    This is HTA's ``int(stream)`` (with -1 for failures applied by ``_as_int``), also used for ids.
    """
    if type(value) is int:
        return value if _I64_MIN <= value <= _I64_MAX else None
    if type(value) is float:
        return int(value) if value.is_integer() and _I64_MIN <= value <= _I64_MAX else None
    if type(value) is str:
        try:
            number = int(value)
        except ValueError:
            return None
        return number if _I64_MIN <= number <= _I64_MAX else None
    return None  # bool, null, lists, objects


def _as_int(value: Any) -> int:
    number = _int_or_none(value)
    return -1 if number is None else number


# --- timestamps ------------------------------------------------------------------------------


class _BadNumber(Exception):
    """Raised by _ns_values: the literal at ``position`` is not a usable µs number."""

    def __init__(self, position: int, reason: str):
        self.position = position
        self.reason = reason


def _ns_values(raws: list[msgspec.Raw]) -> np.ndarray:
    """JSON number literals in µs → exact int64 ns (fractions below 1 ns rounded half to even)."""
    if not raws:
        return np.empty(0, dtype=np.int64)
    # one JSON array holding the literals exactly as written, e.g. b"[1.5,17,2e3]"
    literals = _ENCODER.encode(raws)
    if not literals.translate(None, _INTEGER_CHARS):
        ns = _integer_ns(literals)
        if ns is not None:
            return ns
    elif not literals.translate(None, _NUMBER_CHARS):
        ns = _decimal_ns(literals)
        if ns is not None and len(ns) == len(raws):
            return ns
    return _ns_values_slow(raws)


def _integer_ns(literals: bytes) -> np.ndarray | None:
    """A JSON array of integer µs → ns; None when a value is out of range (or not an integer)."""
    try:
        us = np.array(_INT_LIST_DECODER.decode(literals), dtype=np.int64)
    except (msgspec.ValidationError, OverflowError):
        return None
    if ((us > _US_LIMIT) | (us < -_US_LIMIT)).any():
        return None
    return us * 1000


def _decimal_ns(literals: bytes) -> np.ndarray | None:
    """A JSON array of µs numbers with fractions or exponents → exact ns, via a decimal column.

    None when pyarrow cannot represent one exactly (over 9 decimals, out of range).
    """
    try:
        table = pacsv.read_csv(
            io.BytesIO(literals[1:-1].translate(_COMMA_TO_NEWLINE)),
            read_options=pacsv.ReadOptions(column_names=["us"], use_threads=False),
            parse_options=pacsv.ParseOptions(quote_char=False),
            convert_options=pacsv.ConvertOptions(
                column_types={"us": pa.decimal128(30, 9)}, null_values=[]
            ),
        )
        ns = pc.round(
            pc.multiply(table.column(0), pa.scalar(Decimal(1000), pa.decimal128(4, 0))),
            ndigits=0,
            round_mode="half_to_even",
        )
        return pc.cast(ns, pa.int64()).to_numpy()
    except (pa.ArrowException, ValueError):
        return None


def _ns_values_slow(raws: list[msgspec.Raw]) -> np.ndarray:
    out = np.empty(len(raws), dtype=np.int64)
    for i, raw in enumerate(raws):
        literal = bytes(raw)
        if literal[:1] in (b'"', b"{", b"[", b"t", b"f", b"n"):
            raise _BadNumber(i, f"expected a number, got {_shorten(literal)}")
        try:
            ns = int((Decimal(literal.decode()) * 1000).to_integral_value(ROUND_HALF_EVEN))
        except (InvalidOperation, ValueError):
            raise _BadNumber(i, f"expected a number, got {_shorten(literal)}") from None
        if not _I64_MIN <= ns <= _I64_MAX:
            raise _BadNumber(i, f"{_shorten(literal)} µs is out of range")
        out[i] = ns
    return out


def _shorten(literal: bytes) -> str:
    text = literal.decode("utf-8", "replace")
    return text if len(text) <= 40 else text[:37] + "..."


def _column_ns(rows: list[_Event], field: str, events: list[_Event], source: str) -> np.ndarray:
    try:
        return _ns_values(list(map(attrgetter(field), rows)))
    except _BadNumber as bad:
        index = next(i for i, e in enumerate(events) if e is rows[bad.position])
        raise CorruptTraceError(source, f"traceEvents[{index}].{field}: {bad.reason}") from None


# --- tables ----------------------------------------------------------------------------------


def _build(
    events: list[_Event], meta: RankMeta, source: str, raw_events: msgspec.Raw | None = None
) -> RankTrace:
    ts_raw = list(map(_get_ts, events))
    all_ts = _ENCODER.encode(ts_raw)
    # HTA's ts column turns float64 (and gets rounded) as soon as one ts is not a JSON integer
    meta.float_timestamps = bool(all_ts.translate(None, _INTEGER_CHARS))
    # With integer timestamps only, every ts is converted at once and the tables take slices.
    ts_ns = None if meta.float_timestamps else _integer_ns(all_ts)

    keep = kept_rows(events)
    flow = [i for i, e in enumerate(events) if e.ph in _FLOW_PHASES and e.ts != _NULL]
    span = next((e for e in events if e.cat == "Trace" and e.dur != _NULL and e.ts != _NULL), None)
    if span is not None:
        ts, dur = (_column_ns([span], f, events, source)[0] for f in ("ts", "dur"))
        meta.profiler_span = (int(ts), int(dur))

    kept = list(map(events.__getitem__, keep))
    flows = list(map(events.__getitem__, flow))
    kept_ts = ts_ns[keep] if ts_ns is not None else _column_ns(kept, "ts", events, source)
    flow_ts = ts_ns[flow] if ts_ns is not None else _column_ns(flows, "ts", events, source)
    kept_dur = _column_ns(kept, "dur", events, source) if kept else np.empty(0, np.int64)
    meta.anomalies += _dropped_without_ts_or_cat(events)
    kept_dur = _checked_times(kept, kept_ts, kept_dur, meta, events, source)
    args = [e.args if e.args is not None else _NO_ARGS for e in kept]
    table = _events_table(kept, kept_ts, kept_dur, args)
    return RankTrace(
        meta=meta,
        events=table,
        flows=_flows_table(flows, flow_ts),
        collectives=_collectives_table(args, table, keep, raw_events, meta),
    )


# --- data anomalies: counted, described in meta.anomalies, never silent ------------------------


def _is_gpu_event(e: _Event) -> bool:
    return e.args is not None and _as_int(e.args.stream) >= 0


def _dropped_without_ts_or_cat(events: list[_Event]) -> list[str]:
    """Events with a ``dur`` that are dropped for lack of ``cat`` or ``ts`` (HTA drops them too)."""
    notes = []
    # one pass over all events; the few suspects are then split by what they lack
    suspects = [e for e in events if (e.cat is None or e.ts == _NULL) and e.dur != _NULL]
    for field, dropped in (
        ("cat", [e for e in suspects if e.cat is None]),
        ("ts", [e for e in suspects if e.cat not in (None, "Trace") and e.ts == _NULL]),
    ):
        if dropped:
            gpu = sum(map(_is_gpu_event, dropped))
            notes.append(
                f"dropped {len(dropped)} event(s) that have a 'dur' but no '{field}' "
                f"({gpu} of them GPU events, with args.stream); the analyses do not see them"
            )
    return notes


def _checked_times(kept, ts: np.ndarray, dur: np.ndarray, meta: RankMeta, events, source: str):
    """Negative durations set to 0 (counted in ``meta``); an event whose end (ts + dur) passes
    int64 ns rejects the file. Rows are never dropped here: ``kept_rows`` is the one row filter."""
    negative = dur < 0
    if negative.any():
        names = Counter(kept[j].name or "" for j in np.flatnonzero(negative).tolist())
        meta.negative_durations = dict(names)
        meta.anomalies.append(
            f"{int(negative.sum())} event(s) have a negative 'dur' (lowest {int(dur.min()) / 1000:g}"
            " µs); set to 0"
        )
        dur = np.where(negative, 0, dur)
    # ts + dur in int64 ns wraps around past _I64_MAX; dur >= 0 here, so only an upper overflow.
    overflow = np.flatnonzero(ts > _I64_MAX - dur)
    if len(overflow):
        j = int(overflow[0])
        index = next(i for i, e in enumerate(events) if e is kept[j])
        raise CorruptTraceError(
            source,
            f"traceEvents[{index}] ends after {_I64_MAX} ns, the int64 nanosecond range (about "
            f"the year 2262): ts {_shorten(bytes(kept[j].ts))} µs + dur "
            f"{_shorten(bytes(kept[j].dur))} µs ({len(overflow)} such event(s))",
        )
    return dur


_get_ts = attrgetter("ts")


def kept_rows(events: list) -> list[int]:
    """Positions in ``traceEvents`` of the events that become rows of ``RankTrace.events``.

    The row filter of the module docstring, in one place: ``analysis.kineto.extras`` decodes other
    fields of the same events and aligns them with this. ``events`` are any structs with ``cat``,
    ``dur`` and ``ts`` (``dur``/``ts`` as ``msgspec.Raw``, null when absent).
    """
    return [
        i
        for i, e in enumerate(events)
        if e.cat is not None and e.dur != _NULL and e.ts != _NULL and e.cat != "Trace"
    ]


def _events_table(
    kept: list[_Event], ts_ns: np.ndarray, dur_ns: np.ndarray, args: list[_Args]
) -> pd.DataFrame:
    if not kept:
        return empty_frame(EVENT_COLUMNS)
    columns = {
        "ts": ts_ns,
        "dur": dur_ns,
        "cat": _categorical([LEGACY_CATEGORIES.get(e.cat, e.cat) for e in kept]),
        "name": _categorical([e.name if e.name is not None else "" for e in kept]),
        "pid": _int_column(kept, "pid"),
        "tid": _int_column(kept, "tid"),
        "stream": _int_column(args, "stream"),
        "correlation": _int_column(args, "correlation"),
        "external_id": _int_column(args, "external_id"),
        "device": _int_column(args, "device"),
        "wait_on_stream": _int_column(args, "wait_on_stream"),
        "wait_on_record": _int_column(args, "wait_on_record"),
    }
    return pd.DataFrame(columns)


def _flows_table(flows: list[_Event], ts_ns: np.ndarray) -> pd.DataFrame:
    if not flows:
        return empty_frame(FLOW_COLUMNS)
    columns = {
        "id": _int_column(flows, "id"),
        "ph": _categorical(list(map(attrgetter("ph"), flows))),
        "cat": _categorical(
            [LEGACY_CATEGORIES.get(e.cat, e.cat) if e.cat is not None else "" for e in flows]
        ),
        "ts": ts_ns,
        "pid": _int_column(flows, "pid"),
        "tid": _int_column(flows, "tid"),
    }
    return pd.DataFrame(columns)


def _int_column(rows: list, field: str) -> np.ndarray:
    values = list(map(attrgetter(field), rows))
    if set(map(type, values)) <= {int}:
        try:
            return np.fromiter(values, dtype=np.int64, count=len(values))
        except OverflowError:
            pass
    return np.array([_as_int(v) for v in values], dtype=np.int64)


def _categorical(values: list[str]) -> pd.Categorical:
    # dicts find the distinct values and codes in C loops; much faster than pandas inferring a
    # string dtype for every value first
    categories = list(dict.fromkeys(values))
    code_of = {value: code for code, value in enumerate(categories)}
    codes = np.fromiter(map(code_of.__getitem__, values), dtype=np.int32, count=len(values))
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories))


def _collectives_table(
    all_args: list[_Args], table: pd.DataFrame, keep: list[int], raw_events: msgspec.Raw | None,
    meta: RankMeta,
) -> pd.DataFrame:
    """One row per event that describes a collective: ``record_param_comms`` CPU ops, GPU kernels
    carrying Kineto's collective args (``Collective name``, ...), and gloo's ``gloo:*`` annotations
    (whose only description is their input shape and type, decoded here, for those rows only)."""
    if table.empty:
        return empty_frame(COLLECTIVE_COLUMNS)
    names = table["name"]
    categories = names.cat.categories
    name_codes = names.cat.codes.to_numpy()
    wanted = np.zeros(len(categories), dtype=bool)
    if _COLLECTIVE_EVENT in categories:
        wanted[categories.get_loc(_COLLECTIVE_EVENT)] = True
    gloo = np.array([isinstance(c, str) and c.startswith(_GLOO_PREFIX) for c in categories])
    rows_mask = wanted[name_codes] | gloo[name_codes]
    # kernels: only those whose args name a collective (checked on the kernel rows alone)
    cats = table["cat"].cat.categories
    kernel_rows = (
        np.flatnonzero(table["cat"].cat.codes.to_numpy() == cats.get_loc("kernel")).tolist()
        if "kernel" in cats else []
    )
    if kernel_rows:
        # Kineto writes "In msg nelems" with "Collective name": an int test is the cheap one
        kernel_args = _pick(all_args, kernel_rows)
        described = (_int_column(kernel_args, "in_nelems") >= 0) | (
            _int_column(kernel_args, "group_size") >= 0)
        rows_mask[np.array(kernel_rows)[described]] = True
    rows = np.flatnonzero(rows_mask).tolist()
    if not rows:
        return empty_frame(COLLECTIVE_COLUMNS)
    args = _pick(all_args, rows)
    columns = {
        "event": np.array(rows, dtype=np.int64),
        "collective": _text_column([a.collective for a in args]),
        "in_nelems": _int_column(args, "in_nelems"),
        "out_nelems": _int_column(args, "out_nelems"),
        "dtype": _text_column([a.dtype for a in args]),
        "group_size": _int_column(args, "group_size"),
        "pg_name": _text_column([a.pg_name for a in args]),
        "pg_desc": "",
        "pg_ranks": _text_column([a.pg_ranks for a in args]),
        "seq": _int_column(args, "seq"),
    }
    out = pd.DataFrame(columns)
    descriptions = {str(pg.get("pg_name")): pg.get("pg_desc") for pg in meta.process_groups
                    if isinstance(pg, dict) and isinstance(pg.get("pg_desc"), str)}
    if descriptions:
        out["pg_desc"] = out["pg_name"].map(descriptions).fillna("")
    is_gloo = gloo[name_codes[rows]]
    if is_gloo.any() and raw_events is not None:
        _fill_gloo_shapes(out, is_gloo, [keep[rows[i]] for i in np.flatnonzero(is_gloo)],
                          raw_events)
    return out.astype(COLLECTIVE_COLUMNS)


def _pick(items: list, indices: list[int]) -> list:
    """``[items[i] for i in indices]``, in C."""
    if not indices:
        return []
    picked = itemgetter(*indices)(items)
    return [picked] if len(indices) == 1 else list(picked)


class _ShapeArgs(msgspec.Struct, gc=False):
    input_dims: msgspec.Raw = msgspec.field(default=_NULL, name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=_NULL, name="Input type")


class _ShapeEvent(msgspec.Struct, gc=False):
    args: _ShapeArgs | None = None


_SHAPES_DECODER = msgspec.json.Decoder(list[_ShapeEvent])


def _fill_gloo_shapes(
    out: pd.DataFrame, is_gloo: np.ndarray, event_indices: list[int], raw_events: msgspec.Raw
) -> None:
    """``in_nelems`` (product of the first input's dims) and ``dtype`` (its type) of gloo's
    annotations. A second, narrow decode of the events, paid only by traces with gloo rows."""
    try:
        shaped = _SHAPES_DECODER.decode(raw_events)
    except (msgspec.DecodeError, UnicodeDecodeError):  # the first decode accepted these bytes
        return
    nelems, dtypes = [], []
    for index in event_indices:
        a = shaped[index].args or _ShapeArgs()
        dims = _decode_or_none(a.input_dims)
        types = _decode_or_none(a.input_type)
        first = dims[0] if isinstance(dims, list) and dims and isinstance(dims[0], list) else None
        ok = first is not None and all(type(d) is int and d >= 0 for d in first)
        nelems.append(int(np.prod(first, dtype=np.int64)) if ok else -1)
        dtypes.append(types[0] if isinstance(types, list) and types and
                      isinstance(types[0], str) else "")
    where = np.flatnonzero(is_gloo)
    out.loc[where, "in_nelems"] = np.array(nelems, dtype=np.int64)
    out.loc[where, "dtype"] = pd.Series(dtypes, index=where, dtype=object)


def _decode_or_none(raw: msgspec.Raw):
    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None


def _text_column(raws: list[msgspec.Raw]) -> pd.Series:
    """A JSON string's value, any other JSON value as written, "" when absent or null."""
    try:  # one decode for the whole column
        values = msgspec.json.decode(_ENCODER.encode(raws))
    except (msgspec.DecodeError, UnicodeDecodeError):
        values = None
    if values is not None and set(map(type, values)) <= {str, type(None)}:
        return pd.Series(["" if v is None else v for v in values], dtype=object)
    out = []
    for raw in raws:
        literal = bytes(raw)
        if literal == b"null":
            out.append("")
        elif literal.startswith(b'"'):
            try:
                out.append(msgspec.json.decode(literal))
            except UnicodeDecodeError:  # a label is not worth rejecting the trace for
                out.append(literal[1:-1].decode("utf-8", "replace"))
        else:
            out.append(literal.decode("utf-8", "replace"))
    return pd.Series(out, dtype=object)
