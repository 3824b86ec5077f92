"""Decoded ``traceEvents`` → the columns of a ``RankTrace``, one chunk of events at a time.

``analysis.kineto.parse`` cuts the ``traceEvents`` array into chunks (``analysis.kineto.chunks``);
``decode_chunk`` turns one chunk's JSON into an :class:`EventChunk` (plain numpy columns, and
categories with codes for the text columns) and lets go of the decoded structs, so a parse never
holds more than one chunk's structs at a time, and chunks can be decoded in other processes.
``assemble`` joins the chunks, in file order, into the tables: the same tables, to the ns, as
decoding the whole array at once (the whole array is simply a single chunk).

Which rows are kept follows HolisticTraceAnalysis 0.5.0: events with both ``dur`` and ``cat``, minus
the profiler's own ``cat == "Trace"`` span, in file order. A kept event without ``ts`` cannot be
placed on a timeline and is dropped too (HTA would keep it with a NaN start).

Timestamps are kept exactly as written: ``ts``/``dur`` are read as raw JSON literals and converted
in bulk to integer nanoseconds (µs × 1000, fractions kept), so ``1700000000000000.123`` stays exact
where a float64 would be off by up to 0.125 µs.
"""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from operator import attrgetter, itemgetter
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

from analysis.errors import CorruptTraceError
from analysis.kineto import kernel_args
from analysis.kineto.ints import I64_MAX as _I64_MAX
from analysis.kineto.ints import I64_MIN as _I64_MIN
from analysis.kineto.ints import int_or_none
from analysis.kineto.model import (
    COLLECTIVE_COLUMNS,
    EVENT_COLUMNS,
    FLOW_COLUMNS,
    LEGACY_CATEGORIES,
    empty_frame,
)

_NULL = msgspec.Raw(b"null")
# The largest |µs| whose ×1000 still fits in int64 (about year 2262 as an epoch time).
_US_LIMIT = _I64_MAX // 1000
_COLLECTIVE_EVENT = "record_param_comms"
# gloo's CPU collectives are annotated "gloo:all_reduce", ... on its worker thread, with shapes only
_GLOO_PREFIX = "gloo:"
# ProcessGroupNCCL's annotation of a collective (nccl:all_reduce, nccl:_all_gather_base...): its
# inputs' shapes give the size where the kernels carry no collective args (torch < 2.2)
_NCCL_PREFIX = "nccl:"
_SHAPED_PREFIXES = (_GLOO_PREFIX, _NCCL_PREFIX)
_FLOW_PHASES = frozenset(("s", "f", "t"))
# the device events whose queue stands in for a missing stream (Intel GPUs: ``_stream_column``)
_QUEUE_CATS = frozenset(("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"))

# Numbers in args: Kineto writes ints, some writers strings ("stream": "7") or floats.
_Num = int | float | str | None


class _Args(msgspec.Struct, gc=False):
    """The ``args`` keys the model uses; every other key is skipped by the decoder."""

    stream: _Num = -1
    # Intel GPUs write no "stream" on kernels: Kineto's XPU plugin writes the SYCL queue id as
    # "sycl queue", the earlier XPU plugin (Intel's c10::kineto_plugin::xpu) as "queue"
    sycl_queue: _Num = msgspec.field(default=-1, name="sycl queue")
    queue: _Num = -1
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
    # kernels: launch configuration and CUPTI's occupancy estimates (the ``kernel_args`` table);
    # any JSON value is accepted (a odd value is a missing number, never a rejected file)
    blocks_per_sm: Any = msgspec.field(default=None, name="blocks per SM")
    warps_per_sm: Any = msgspec.field(default=None, name="warps per SM")
    occupancy: Any = msgspec.field(default=None, name="est. achieved occupancy %")
    grid: msgspec.Raw = _NULL
    block: msgspec.Raw = _NULL
    registers: Any = msgspec.field(default=None, name="registers per thread")
    shared_memory: Any = msgspec.field(default=None, name="shared memory")
    # Kineto's 2021 GPU and runtime events write "external id" (the model reads "External id")
    external_id_lower: Any = msgspec.field(default=None, name="external id")


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
EVENTS_DECODER = msgspec.json.Decoder(list[_Event])
_INT_LIST_DECODER = msgspec.json.Decoder(list[int])
_ENCODER = msgspec.json.Encoder()
# characters of a JSON array of integer literals, and of any JSON numbers
_INTEGER_CHARS = b"-0123456789,[]"
_NUMBER_CHARS = b"-+.0123456789eE,[]"
_COMMA_TO_NEWLINE = bytes.maketrans(b",", b"\n")

# A text column of one chunk: its distinct values in order of first appearance, and int32 codes.
Codes = tuple[list[str], np.ndarray]


@dataclass
class EventChunk:
    """The columns of one chunk of ``traceEvents`` (a run of consecutive events, file order).

    ``events``/``flows`` map column names to int64 arrays or :data:`Codes`; ``collectives`` has
    ``event`` as row numbers among this chunk's kept events. Small enough to pickle back from a
    worker process; no decoded structs inside.
    """

    float_ts: bool  # some event's ts is not a JSON integer (or is missing)
    span: tuple[int, int] | None  # the first profiler span (cat "Trace") of the chunk, ns
    kept: int
    size: int  # events in the chunk, kept or not
    events: dict
    flows: dict
    collectives: dict
    kernel_args: dict = field(default_factory=dict)  # ``row`` as positions among kept events
    # data anomalies, counted (see ``anomaly_notes``): events dropped for lack of cat / ts (and
    # how many of those are GPU events), negative durations by name and the lowest one (ns)
    no_cat: tuple[int, int] = (0, 0)
    no_ts: tuple[int, int] = (0, 0)
    negative: dict = field(default_factory=dict)
    lowest_dur: int = 0


class BadChunk(Exception):
    """A chunk that does not decode on its own (the file is split elsewhere or is invalid)."""


def decode_chunk(piece: bytes) -> EventChunk:
    """One chunk, as the bytes of a JSON array of events → its columns. Runs in worker processes.

    Raises :class:`BadChunk` for anything wrong with the chunk: the caller then decodes the whole
    array at once, which either succeeds (the cut was in the wrong place) or raises the file's
    error with positions counted from the start of ``traceEvents``.
    """
    try:
        events = EVENTS_DECODER.decode(piece)
        return chunk_columns(events, "")
    except (msgspec.DecodeError, UnicodeDecodeError, CorruptTraceError, RecursionError) as exc:
        raise BadChunk(str(exc)) from None


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
    import pyarrow.compute as pc  # only traces with fractional times need it

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
            raise _BadNumber(i, f"expected a number, got {shorten(literal)}")
        try:
            ns = int((Decimal(literal.decode()) * 1000).to_integral_value(ROUND_HALF_EVEN))
        except (InvalidOperation, ValueError):
            raise _BadNumber(i, f"expected a number, got {shorten(literal)}") from None
        if not _I64_MIN <= ns <= _I64_MAX:
            raise _BadNumber(i, f"{shorten(literal)} µs is out of range")
        out[i] = ns
    return out


def shorten(literal: bytes) -> str:
    text = literal.decode("utf-8", "replace")
    return text if len(text) <= 40 else text[:37] + "..."


def _column_ns(rows: list[_Event], field: str, events: list[_Event], source: str) -> np.ndarray:
    try:
        return _ns_values(list(map(attrgetter(field), rows)))
    except _BadNumber as bad:
        index = next(i for i, e in enumerate(events) if e is rows[bad.position])
        raise CorruptTraceError(source, f"traceEvents[{index}].{field}: {bad.reason}") from None


# --- one chunk -------------------------------------------------------------------------------

_get_ts = attrgetter("ts")
_get_cat = attrgetter("cat")


def _normalised(raw: Codes) -> Codes:
    """Category codes with Kineto's 2021 names mapped to today's (distinct names merged, in
    order of first appearance, as if the mapped column had been coded)."""
    names, codes = raw
    mapped = [LEGACY_CATEGORIES.get(n, n) for n in names]
    categories = list(dict.fromkeys(mapped))
    position = {c: i for i, c in enumerate(categories)}
    remap = np.array([position[m] for m in mapped], dtype=np.int32)
    return categories, remap[codes] if len(codes) else codes


def chunk_columns(events: list[_Event], source: str) -> EventChunk:
    """The columns of a run of decoded events; errors name ``traceEvents[i]`` within ``events``."""
    ts_raw = list(map(_get_ts, events))
    all_ts = _ENCODER.encode(ts_raw)
    del ts_raw
    # HTA's ts column turns float64 (and gets rounded) as soon as one ts is not a JSON integer
    float_ts = bool(all_ts.translate(None, _INTEGER_CHARS))
    # With integer timestamps only, every ts is converted at once and the tables take slices.
    ts_ns = None if float_ts else _integer_ns(all_ts)

    keep = kept_rows(events)
    flow = [i for i, e in enumerate(events) if e.ph in _FLOW_PHASES and e.ts != _NULL]
    found = next((e for e in events if e.cat == "Trace" and e.dur != _NULL and e.ts != _NULL), None)
    span = None
    if found is not None:
        ts, dur = (_column_ns([found], f, events, source)[0] for f in ("ts", "dur"))
        span = (int(ts), int(dur))

    kept = list(map(events.__getitem__, keep))
    flows = list(map(events.__getitem__, flow))
    kept_ts = ts_ns[keep] if ts_ns is not None else _column_ns(kept, "ts", events, source)
    flow_ts = ts_ns[flow] if ts_ns is not None else _column_ns(flows, "ts", events, source)
    args = [e.args if e.args is not None else _NO_ARGS for e in kept]
    columns = _event_columns(kept, args, kept_ts, events, source)
    negative, lowest = _checked_durations(columns, kept, keep, events, source)
    no_cat, no_ts = _dropped_without_ts_or_cat(events)
    return EventChunk(
        float_ts=float_ts,
        span=span,
        kept=len(kept),
        size=len(events),
        events=columns,
        flows=_flow_columns(flows, flow_ts),
        collectives=_collective_columns(args, columns, keep),
        kernel_args=_kernel_arg_columns(kept, args, columns),
        no_cat=no_cat,
        no_ts=no_ts,
        negative=negative,
        lowest_dur=lowest,
    )


# --- data anomalies: counted per chunk, described in meta.anomalies, never silent --------------


def _is_gpu_event(e: _Event) -> bool:
    if e.args is None:
        return False
    return _as_int(e.args.stream) >= 0 or (
        e.cat in _QUEUE_CATS and max(_as_int(e.args.sycl_queue), _as_int(e.args.queue)) >= 0)


def _dropped_without_ts_or_cat(events: list[_Event]) -> tuple[tuple[int, int], tuple[int, int]]:
    """Events with a ``dur`` dropped for lack of ``cat`` or of ``ts`` (HTA drops them too):
    ``(count, of which GPU events)`` for each."""
    suspects = [e for e in events if (e.cat is None or e.ts == _NULL) and e.dur != _NULL]
    no_cat = [e for e in suspects if e.cat is None]
    no_ts = [e for e in suspects if e.cat not in (None, "Trace") and e.ts == _NULL]
    return ((len(no_cat), sum(map(_is_gpu_event, no_cat))),
            (len(no_ts), sum(map(_is_gpu_event, no_ts))))


def _checked_durations(columns: dict, kept, keep, events, source: str) -> tuple[dict, int]:
    """Negative durations set to 0 in ``columns`` (returned: count by name, and the lowest); an
    event whose end (ts + dur) passes int64 ns rejects the file (rows are never dropped here:
    ``kept_rows`` is the one row filter)."""
    if not columns:
        return {}, 0
    dur, ts = columns["dur"], columns["ts"]
    negative = dur < 0
    names: dict = {}
    lowest = 0
    if negative.any():
        names = dict(Counter(kept[j].name or "" for j in np.flatnonzero(negative).tolist()))
        lowest = int(dur.min())
        dur = np.where(negative, 0, dur)
        columns["dur"] = dur
    overflow = np.flatnonzero(ts > _I64_MAX - dur)  # dur >= 0 now: only an upper overflow
    if len(overflow):
        j = int(overflow[0])
        raise CorruptTraceError(
            source,
            f"traceEvents[{keep[j]}] ends after {_I64_MAX} ns, the int64 nanosecond range (about "
            f"the year 2262): ts {shorten(bytes(kept[j].ts))} µs + dur "
            f"{shorten(bytes(kept[j].dur))} µs ({len(overflow)} such event(s))",
        )
    return names, lowest


def anomaly_notes(chunks: list[EventChunk]) -> tuple[list[str], dict[str, int]]:
    """The chunks' anomaly counts as ``meta.anomalies`` sentences and negative durations by name."""
    notes = []
    for field_name, what in (("no_cat", "cat"), ("no_ts", "ts")):
        count = sum(getattr(c, field_name)[0] for c in chunks)
        gpu = sum(getattr(c, field_name)[1] for c in chunks)
        if count:
            notes.append(
                f"dropped {count} event(s) that have a 'dur' but no '{what}' "
                f"({gpu} of them GPU events, with args.stream); the analyses do not see them"
            )
    negative: Counter = Counter()
    for c in chunks:
        negative.update(c.negative)
    if negative:
        lowest = min(c.lowest_dur for c in chunks)
        notes.append(
            f"{sum(negative.values())} event(s) have a negative 'dur' (lowest {lowest / 1000:g}"
            " µs); set to 0"
        )
    return notes, dict(negative)


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


def _event_columns(
    kept: list[_Event], args: list[_Args], ts_ns: np.ndarray, events: list[_Event], source: str
) -> dict:
    if not kept:
        return {}
    raw_cats = _codes(list(map(_get_cat, kept)))
    cats = _normalised(raw_cats)
    return {
        "ts": ts_ns,
        "dur": _column_ns(kept, "dur", events, source),
        "cat": cats,
        "raw_cat": raw_cats,  # as written: taken out by _kernel_arg_columns
        "name": _codes([e.name if e.name is not None else "" for e in kept]),
        "pid": _int_column(kept, "pid"),
        "tid": _int_column(kept, "tid"),
        "stream": _stream_column(args, cats),
        "correlation": _int_column(args, "correlation"),
        "external_id": _int_column(args, "external_id"),
        "device": _int_column(args, "device"),
        "wait_on_stream": _int_column(args, "wait_on_stream"),
        "wait_on_record": _int_column(args, "wait_on_record"),
    }


def _flow_columns(flows: list[_Event], ts_ns: np.ndarray) -> dict:
    if not flows:
        return {}
    return {
        "id": _int_column(flows, "id"),
        "ph": _codes(list(map(attrgetter("ph"), flows))),
        "cat": _codes(
            [LEGACY_CATEGORIES.get(e.cat, e.cat) if e.cat is not None else "" for e in flows]
        ),
        "ts": ts_ns,
        "pid": _int_column(flows, "pid"),
        "tid": _int_column(flows, "tid"),
    }


def _collective_columns(all_args: list[_Args], columns: dict, keep: list[int]) -> dict:
    """One row per event that describes a collective: ``record_param_comms`` CPU ops, GPU kernels
    carrying Kineto's collective args (``Collective name``, ...), and gloo's ``gloo:*`` and
    ProcessGroupNCCL's ``nccl:*`` annotations (``shape_event``: their position in the chunk's
    events, for ``fill_annotation_shapes``; else -1)."""
    if not columns:
        return {}
    names, name_codes = columns["name"]
    wanted = np.array(
        [n == _COLLECTIVE_EVENT or (isinstance(n, str) and n.startswith(_SHAPED_PREFIXES))
         for n in names],
        dtype=bool,
    )
    shaped = np.array([isinstance(n, str) and n.startswith(_SHAPED_PREFIXES) for n in names],
                      dtype=bool)
    rows_mask = wanted[name_codes]
    # kernels: only those whose args name a collective (checked on the kernel rows alone)
    cats, cat_codes = columns["cat"]
    kernel_rows = np.flatnonzero(cat_codes == cats.index("kernel")).tolist() if "kernel" in cats else []
    if kernel_rows:
        # Kineto writes "In msg nelems" with "Collective name": an int test is the cheap one
        on_kernels = _pick(all_args, kernel_rows)
        described = (_int_column(on_kernels, "in_nelems") >= 0) | (
            _int_column(on_kernels, "group_size") >= 0
        )
        rows_mask[np.array(kernel_rows)[described]] = True
    else:
        described = np.zeros(0, bool)
    rows = np.flatnonzero(rows_mask)
    if not len(rows):
        return {}
    args = _pick(all_args, rows.tolist())
    is_shaped = shaped[name_codes[rows]]
    nccl = np.array([isinstance(n, str) and n.startswith(_NCCL_PREFIX) for n in names], dtype=bool)
    return {
        "nccl_annotation": nccl[name_codes[rows]],
        "described_kernels": int(described.sum()),
        "event": rows.astype(np.int64),
        "collective": _text_values([a.collective for a in args]),
        "in_nelems": _int_column(args, "in_nelems"),
        "out_nelems": _int_column(args, "out_nelems"),
        "dtype": _text_values([a.dtype for a in args]),
        "group_size": _int_column(args, "group_size"),
        "pg_name": _text_values([a.pg_name for a in args]),
        "pg_desc": [""] * len(rows),
        "pg_ranks": _text_values([a.pg_ranks for a in args]),
        "seq": _int_column(args, "seq"),
        "shape_event": np.where(is_shaped, np.array(keep, dtype=np.int64)[rows], -1),
    }


def _kernel_arg_columns(kept: list[_Event], args: list[_Args], columns: dict) -> dict:
    """The chunk's part of the ``kernel_args`` table (:mod:`analysis.kineto.kernel_args`): its
    kernels, and its runtime / Python events written under the 2021 names."""
    if not columns:
        return {}
    raw, codes = columns.pop("raw_cat")
    wanted = np.array([c in kernel_args.RAW_CATEGORIES for c in raw], dtype=bool)
    rows = np.flatnonzero(wanted[codes]).tolist() if wanted.any() else []
    return kernel_args.chunk_columns(_pick(raw, codes[rows].tolist()), rows, _pick(args, rows))


def _pick(items: list, indices: list[int]) -> list:
    """``[items[i] for i in indices]``, in C."""
    if not indices:
        return []
    picked = itemgetter(*indices)(items)
    return [picked] if len(indices) == 1 else list(picked)


def _as_int(value) -> int:
    number = int_or_none(value)
    return -1 if number is None else number


def _stream_column(args: list[_Args], cats: Codes) -> np.ndarray:
    """``args.stream``; on a kernel, copy or set without one, the queue it ran on: an Intel GPU
    event's ``args["sycl queue"]`` (Kineto's XPU plugin; also the event's ``tid``), or the earlier
    XPU plugin's ``args.queue``."""
    stream = _int_column(args, "stream")
    names, codes = cats
    device = [i for i, c in enumerate(names) if c in _QUEUE_CATS]
    rows = np.flatnonzero((stream < 0) & np.isin(codes, device)) if device else ()
    if not len(rows):  # every device event has its stream (CUDA, ROCm): nothing to look up
        return stream
    without = [args[i] for i in rows.tolist()]
    for name in ("sycl_queue", "queue"):
        queue = _int_column(without, name)
        missing = stream[rows] < 0
        stream[rows[missing & (queue >= 0)]] = queue[missing & (queue >= 0)]
    return stream


def _int_column(rows: list, field: str) -> np.ndarray:
    values = list(map(attrgetter(field), rows))
    if set(map(type, values)) <= {int}:
        try:
            return np.fromiter(values, dtype=np.int64, count=len(values))
        except OverflowError:
            pass
    return np.array([_as_int(v) for v in values], dtype=np.int64)


def _codes(values: list[str]) -> Codes:
    # dicts find the distinct values and codes in C loops; much faster than pandas inferring a
    # string dtype for every value first
    categories = list(dict.fromkeys(values))
    code_of = {value: code for code, value in enumerate(categories)}
    codes = np.fromiter(map(code_of.__getitem__, values), dtype=np.int32, count=len(values))
    return categories, codes


def _text_values(raws: list[msgspec.Raw]) -> list[str]:
    """A JSON string's value, any other JSON value as written, "" when absent or null."""
    try:  # one decode for the whole column
        decoded = msgspec.json.decode(_ENCODER.encode(raws))
    except (msgspec.DecodeError, UnicodeDecodeError):
        decoded = None
    if decoded is not None and set(map(type, decoded)) <= {str, type(None)}:
        return ["" if v is None else v for v in decoded]
    values = []
    for raw in raws:
        literal = bytes(raw)
        if literal == b"null":
            values.append("")
        elif literal.startswith(b'"'):
            try:
                values.append(msgspec.json.decode(literal))
            except UnicodeDecodeError:  # a label is not worth rejecting the trace for
                values.append(literal[1:-1].decode("utf-8", "replace"))
        else:
            values.append(literal.decode("utf-8", "replace"))
    return values


# --- the chunks of one file → its tables -----------------------------------------------------


@dataclass
class Tables:
    events: pd.DataFrame
    flows: pd.DataFrame
    collectives: pd.DataFrame
    float_ts: bool
    span: tuple[int, int] | None
    # the gloo:* and nccl:* annotations whose shapes give their size: their rows in
    # ``collectives`` and positions in ``traceEvents`` (fill_annotation_shapes)
    shaped_rows: np.ndarray
    shaped_events: np.ndarray
    anomalies: list[str] = field(default_factory=list)  # see ``anomaly_notes``
    negative_durations: dict = field(default_factory=dict)
    kernel_args: pd.DataFrame | None = None  # analysis.kineto.kernel_args


def _kernels_described(chunks: list[EventChunk]) -> bool:
    """Does some kernel of the chunks carry Kineto's collective args (torch 2.2 and later)?"""
    return any(c.collectives and c.collectives["described_kernels"] > 0 for c in chunks)


def needs_annotation_shapes(chunks: list[EventChunk]) -> bool:
    """Do the chunks hold annotations whose shapes the collectives need (``fill_annotation_shapes``):
    gloo's, or NCCL's where no kernel carries Kineto's collective args (``assemble`` drops the
    ``nccl:*`` rows otherwise, so that such a trace pays no second decode)."""
    described = _kernels_described(chunks)
    return any(
        c.collectives and ((c.collectives["shape_event"] >= 0)
                           & (~c.collectives["nccl_annotation"] | (not described))).any()
        for c in chunks)


def assemble(chunks: list[EventChunk], process_groups: list) -> Tables:
    """Join the chunks of one file, in file order, into its tables; ``process_groups`` is
    ``distributedInfo.pg_config`` (the groups' descriptions by name)."""
    events = _frame([c.events for c in chunks], EVENT_COLUMNS)
    flows = _frame([c.flows for c in chunks], FLOW_COLUMNS)
    notes, negative = anomaly_notes(chunks)
    kept_offsets = np.cumsum([0] + [c.kept for c in chunks[:-1]])
    event_offsets = np.cumsum([0] + [c.size for c in chunks[:-1]])
    parts = [
        (c.collectives, kept, first)
        for c, kept, first in zip(chunks, kept_offsets, event_offsets, strict=True)
        if c.collectives
    ]
    comms = _frame([{**p, "event": p["event"] + kept} for p, kept, _ in parts], COLLECTIVE_COLUMNS)
    shaped = (
        np.concatenate([np.where(p["shape_event"] >= 0, p["shape_event"] + first, -1) for p, _, first in parts])
        if parts
        else np.empty(0, dtype=np.int64)
    )
    if parts and _kernels_described(chunks):  # the kernels say it all: no nccl:* rows
        nccl = np.concatenate([p["nccl_annotation"] for p, _, _ in parts])
        if nccl.any():
            comms = comms[~nccl].reset_index(drop=True)
            shaped = shaped[~nccl]
    if len(comms):
        comms = comms.astype(COLLECTIVE_COLUMNS)
        descriptions = {
            str(pg.get("pg_name")): pg.get("pg_desc")
            for pg in process_groups
            if isinstance(pg, dict) and isinstance(pg.get("pg_desc"), str)
        }
        if descriptions:
            comms["pg_desc"] = comms["pg_name"].map(descriptions).fillna("").astype(object)
    return Tables(
        events=events,
        flows=flows,
        collectives=comms,
        float_ts=any(c.float_ts for c in chunks),
        span=next((c.span for c in chunks if c.span is not None), None),
        shaped_rows=np.flatnonzero(shaped >= 0),
        shaped_events=shaped[shaped >= 0],
        anomalies=notes,
        negative_durations=negative,
        kernel_args=kernel_args.table([c.kernel_args for c in chunks], kept_offsets.tolist()),
    )


class _ShapeArgs(msgspec.Struct, gc=False):
    input_dims: msgspec.Raw = msgspec.field(default=_NULL, name="Input Dims")
    input_dims_1_8: msgspec.Raw = msgspec.field(default=_NULL, name="Input dims")  # PyTorch <= 1.8
    input_type: msgspec.Raw = msgspec.field(default=_NULL, name="Input type")


class _ShapeEvent(msgspec.Struct, gc=False):
    args: _ShapeArgs | None = None


_SHAPES_DECODER = msgspec.json.Decoder(list[_ShapeEvent])


def fill_annotation_shapes(tables: Tables, events_json: msgspec.Raw) -> None:
    """``in_nelems`` and ``dtype`` of gloo's annotations (the first input: the tensor gloo works
    on) and of ProcessGroupNCCL's ``nccl:*`` ones (the largest input: an all-gather's output, a
    reduce-scatter's input, nccl-tests' size). A second, narrow decode of the events, paid only
    by traces with such rows (``needs_annotation_shapes``)."""
    if not len(tables.shaped_rows):
        return
    try:
        shaped = _SHAPES_DECODER.decode(events_json)
    except (msgspec.DecodeError, UnicodeDecodeError):  # the first decode accepted these bytes
        return
    events = tables.collectives.loc[tables.shaped_rows, "event"].to_numpy()
    is_nccl = tables.events["name"].astype(str).to_numpy()[events]
    is_nccl = np.char.startswith(is_nccl.astype(str), _NCCL_PREFIX)
    nelems, dtypes = [], []
    for index, nccl in zip(tables.shaped_events.tolist(), is_nccl.tolist(), strict=True):
        a = shaped[index].args or _ShapeArgs()
        dims = _decode_or_none(a.input_dims if a.input_dims != _NULL else a.input_dims_1_8)
        types = _decode_or_none(a.input_type)
        dims = dims if isinstance(dims, list) else []
        types = types if isinstance(types, list) else []
        sizes = [
            int(np.prod(d, dtype=np.int64))
            if isinstance(d, list) and d and all(type(x) is int and x >= 0 for x in d) else -1
            for d in (dims if nccl else dims[:1])
        ]
        at = int(np.argmax(sizes)) if sizes else -1
        nelems.append(sizes[at] if at >= 0 else -1)
        dtypes.append(
            types[at] if 0 <= at < len(types) and isinstance(types[at], str) else ""
        )
    out, where = tables.collectives, tables.shaped_rows
    out.loc[where, "in_nelems"] = np.array(nelems, dtype=np.int64)
    out.loc[where, "dtype"] = pd.Series(dtypes, index=where, dtype=object)


def _decode_or_none(raw: msgspec.Raw):
    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None


def _frame(parts: list[dict], dtypes: dict[str, str]) -> pd.DataFrame:
    parts = [p for p in parts if p]
    if not parts:
        return empty_frame(dtypes)
    columns = {}
    for name in dtypes:
        values = [p[name] for p in parts]
        first = values[0]
        if isinstance(first, tuple):
            columns[name] = _merge_codes(values)
        elif isinstance(first, list):
            columns[name] = pd.Series([v for part in values for v in part], dtype=object)
        else:
            columns[name] = values[0] if len(values) == 1 else np.concatenate(values)
    return pd.DataFrame(columns)


def _merge_codes(parts: list[Codes]) -> pd.Categorical:
    """One categorical from the chunks' codes; categories in order of first appearance, exactly
    as if the whole column had been coded at once."""
    if len(parts) == 1:
        categories, codes = parts[0]
    else:
        categories = list(dict.fromkeys(c for part_categories, _ in parts for c in part_categories))
        index = {c: i for i, c in enumerate(categories)}
        codes = np.concatenate(
            [
                np.array([index[c] for c in part_categories], dtype=np.int32)[part_codes]
                for part_categories, part_codes in parts
            ]
        )
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories))
