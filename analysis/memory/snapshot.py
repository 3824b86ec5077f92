"""Loading a CUDA memory snapshot (``torch.cuda.memory._dump_snapshot``) safely, without torch.

A snapshot is a pickle of plain containers: ``{"segments": [...], "device_traces": [[...], ...],
...}`` (the structure is documented in ``torch.cuda.memory._snapshot``). Unpickling an untrusted
file can run any code it names, so :class:`SafeUnpickler` refuses every pickle opcode that imports
a name (``GLOBAL``, ``STACK_GLOBAL``, ``INST``, ``OBJ``, extension codes) and every persistent id.
Without an importable callable the remaining opcodes can only build dicts, lists, tuples, sets,
strings, bytes, numbers, booleans and None, so nothing in the file runs.

Files are read through fsspec (local paths, ``gs://`` and any fsspec URL, with ``storage_options``)
and may be gzipped (detected by the magic bytes, not the name).
"""

from __future__ import annotations

import io
import pickle
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from analysis.errors import (
    CorruptInputError,
    InputFileError,
    UnsafePickleError,
    WrongFileKindError,
)
from analysis.io import gunzip_bounded, read_input_bytes


class _RefuseCode:
    """``find_class`` is the single door through which a pickle reaches code (``GLOBAL``,
    ``STACK_GLOBAL``, ``INST``, ``OBJ`` and the copyreg extension codes all go through it), and
    ``REDUCE``/``BUILD`` need a callable that only it can supply: refusing it leaves only plain
    containers and numbers."""

    def __init__(self, file, source: str):
        super().__init__(file)
        self._source = source

    def find_class(self, module: str, name: str):
        raise UnsafePickleError(
            self._source,
            f"refused to load: the pickle asks to import {module}.{name}; a memory snapshot holds "
            "only plain dicts, lists, strings and numbers, so this file is not one (or was "
            "crafted to run code)",
        )

    def persistent_load(self, pid):
        raise UnsafePickleError(
            self._source, "refused to load: the pickle uses persistent ids (torch.save format?)"
        )


class SafeUnpickler(_RefuseCode, pickle.Unpickler):
    """An unpickler (the C one) that builds only plain containers and numbers; any import is refused."""


class _SafeMemoUnpickler(_RefuseCode, pickle._Unpickler):
    """The same in pure Python, whose memo is a dict: for pickles whose memo indices look forged.

    The C unpickler sizes its memo as an array up to the largest index it is told to store, so a
    4-byte ``LONG_BINPUT`` index of 10**9 alone makes it allocate gigabytes.
    """


_LONG_BINPUT = ord("r")  # opcode followed by a 4-byte little-endian memo index
_TEXT_PUT = re.compile(rb"p\d{8,}\n")  # protocol 0's PUT with a decimal index of 8+ digits
_BINPUT = ord("q")  # a 1-byte memo index
_PUT = ord("p")  # protocol 0: a decimal memo index and a newline
_STOP = ord(".")


def _opcode_arguments() -> dict[int, int]:
    """Per pickle opcode, how its argument is laid out (from :mod:`pickletools`' table): ``n`` ≥ 0
    bytes; -1 a line; -2, -3/-4, -5 a 1-, 4- or 8-byte length and that many bytes; -6 two lines."""
    import pickletools

    out = {}
    for op in pickletools.opcodes:
        arg, code = op.arg, ord(op.code)
        if arg is None:
            out[code] = 0
        elif arg.n == pickletools.UP_TO_NEWLINE:
            out[code] = -6 if arg.name == "stringnl_noescape_pair" else -1
        else:
            out[code] = arg.n
    return out


_ARGUMENTS: dict[int, int] | None = None


def _largest_memo_index(data: bytes) -> int:
    """The largest index a ``PUT`` / ``BINPUT`` / ``LONG_BINPUT`` of the pickle stores, by walking
    its opcodes as the unpickler reads them (up to ``STOP``); ValueError when an opcode is not one
    or an argument runs past the end."""
    global _ARGUMENTS
    if _ARGUMENTS is None:
        _ARGUMENTS = _opcode_arguments()
    arguments, size, to_int = _ARGUMENTS, len(data), int.from_bytes
    pos = largest = 0
    while pos < size:
        op = data[pos]
        pos += 1
        kind = arguments.get(op)
        if kind is None:
            raise ValueError(f"no pickle opcode {op:#04x} at byte {pos - 1}")
        if kind > 0:
            if op == _LONG_BINPUT:
                largest = max(largest, to_int(data[pos:pos + 4], "little"))
            elif op == _BINPUT:
                largest = max(largest, data[pos])
            pos += kind
        elif kind == 0:
            if op == _STOP:
                return largest
        elif kind == -1:
            end = data.index(b"\n", pos)
            if op == _PUT:
                largest = max(largest, int(data[pos:end]))
            pos = end + 1
        elif kind == -2:
            pos += 1 + data[pos]
        elif kind in (-3, -4):
            pos += 4 + to_int(data[pos:pos + 4], "little")
        elif kind == -5:
            pos += 8 + to_int(data[pos:pos + 8], "little")
        else:  # -6
            pos = data.index(b"\n", data.index(b"\n", pos) + 1) + 1
    raise ValueError("no STOP opcode before the end")


def _forged_memo_index(data: bytes) -> bool:
    """True when some memo ``PUT`` of the pickle stores an index beyond any honest memo (larger
    than the file): the C unpickler sizes its memo as an array up to that index.

    A scan of the raw bytes finds every place a ``LONG_BINPUT`` or protocol 0 ``PUT`` with such
    an index could be; only when there is one (text such as ``address`` in a string looks like
    one) are the opcodes walked (:func:`_largest_memo_index`, about a third of the pure-Python
    unpickler's time) to tell a real one from a string's bytes. A pickle the walk cannot read
    counts as forged: the pure-Python unpickler then says what is wrong with it.
    """
    if len(data) < 5:
        return False
    raw = np.frombuffer(data, dtype=np.uint8)
    at = np.flatnonzero(raw[:-4] == _LONG_BINPUT)
    index = (raw[at + 1].astype(np.uint64) | raw[at + 2].astype(np.uint64) << 8
             | raw[at + 3].astype(np.uint64) << 16 | raw[at + 4].astype(np.uint64) << 24)
    if not (index > len(data)).any() and _TEXT_PUT.search(data) is None:
        return False
    try:
        return _largest_memo_index(data) > len(data)
    except (ValueError, IndexError):
        return True


def decompress(data: bytes, source: str) -> bytes:
    """``data`` gunzipped when it starts with the gzip magic bytes, else as it is."""
    if not data:
        raise CorruptInputError(source, "the file is empty (0 bytes)")
    return gunzip_bounded(data, source)


def unpickle_plain(data: bytes, source: str) -> Any:
    """The object in pickle ``data``, built by :class:`SafeUnpickler` (plain containers only)."""
    unpickler = _SafeMemoUnpickler if _forged_memo_index(data) else SafeUnpickler
    try:
        return unpickler(io.BytesIO(data), source).load()
    except InputFileError:
        raise
    except Exception as exc:  # noqa: BLE001 - damaged bytes make the unpickler fail in many ways
        raise CorruptInputError(
            source, f"not a readable pickle ({type(exc).__name__}: {exc})"
        ) from None


def parse_snapshot_bytes(data: bytes, source: str) -> dict[str, Any]:
    """A snapshot dict from the bytes of a (possibly gzipped) snapshot pickle; checked for shape."""
    raw = decompress(data, source)
    # "{" and "[" are no pickle opcodes: such a file is JSON (a Kineto trace, a memory timeline).
    if raw.lstrip()[:1] == b"<":
        raise WrongFileKindError(
            source, "not a memory snapshot (an HTML page); expected the pickle that "
            "torch.cuda.memory._dump_snapshot() writes")
    if raw.lstrip()[:1] in (b"{", b"["):
        raise WrongFileKindError(
            source,
            "not a memory snapshot (JSON); expected the pickle that "
            "torch.cuda.memory._dump_snapshot() writes",
        )
    return check_snapshot(unpickle_plain(raw, source), source)


def check_snapshot(snapshot: Any, source: str = "snapshot") -> dict[str, Any]:
    """``snapshot`` itself if it has the structure torch writes, else ``WrongFileKindError`` /
    ``CorruptInputError`` naming the first bad item and field.

    Required: a dict with ``segments`` (list of dicts with int ``address`` and ``total_size`` and a
    list of ``blocks``, each a dict with an int ``size``) and optionally ``device_traces`` (list of
    lists of dicts with a str ``action``). Every item is checked, as is the type of every field
    the replay reads (``device``, ``stream``, ``addr``, ``size``, ``requested_size``, ``time_us``...),
    so that no later step fails with Python's own errors.
    """
    if not isinstance(snapshot, Mapping) or "segments" not in snapshot:
        kind = type(snapshot).__name__
        keys = f" with keys {sorted(map(str, snapshot))[:8]}" if isinstance(snapshot, Mapping) else ""
        raise WrongFileKindError(
            source, f"not a memory snapshot: a pickled {kind}{keys}, expected a dict with "
            "'segments' and 'device_traces' (torch.cuda.memory._dump_snapshot)"
        )
    segments = snapshot["segments"]
    traces = snapshot.get("device_traces", [])
    if not isinstance(segments, list) or not isinstance(traces, list):
        raise CorruptInputError(source, "'segments' and 'device_traces' must be lists")
    for i, seg in enumerate(segments):
        where = f"segments[{i}]"
        _fields(seg, source, where, required=_SEGMENT_INTS, optional=_SEGMENT_OPTIONAL_INTS)
        blocks = seg.get("blocks")
        if not isinstance(blocks, list):
            raise CorruptInputError(source, f"{where} has no list of 'blocks': {_short(seg)}")
        for j, block in enumerate(blocks):
            _check_block(block, source, f"{where}.blocks[{j}]")
    for d, trace in enumerate(traces):
        if not isinstance(trace, list):
            raise CorruptInputError(source, f"device_traces[{d}] is not a list")
        for k, entry in enumerate(trace):
            where = f"device_traces[{d}][{k}]"
            # the replay reads a null addr/size/stream of an event as 0
            _fields(entry, source, where, required=(), optional=_EVENT_OPTIONAL_INTS, none_ok=True)
            if not isinstance(entry.get("action"), str):
                raise CorruptInputError(source, f"{where} has no 'action' string: {_short(entry)}")
            t = entry.get("time_us")
            if t is not None and (isinstance(t, bool) or not isinstance(t, int | float)):
                raise CorruptInputError(source, f"{where}.time_us is not a number: {_short(t)}")
    if "device_traces" not in snapshot:
        snapshot = {**snapshot, "device_traces": []}
    return dict(snapshot)


# Integer fields the replay reads: required ones, and optional ones (absent or None is fine).
_SEGMENT_INTS = ("address", "total_size")
_SEGMENT_OPTIONAL_INTS = ("device", "stream")
_BLOCK_OPTIONAL_INTS = ("address", "requested_size")
_EVENT_OPTIONAL_INTS = ("addr", "size", "stream", "device_free")
_I64 = 2**63


def _check_block(block: Any, source: str, where: str) -> None:
    _fields(block, source, where, required=("size",), optional=_BLOCK_OPTIONAL_INTS)
    state = block.get("state")
    if state is not None and not isinstance(state, str):
        raise CorruptInputError(source, f"{where}.state is not a string: {_short(state, 60)}")
    history = block.get("history")
    if history is not None:
        if not isinstance(history, list):
            raise CorruptInputError(source, f"{where}.history is not a list: {_short(history, 60)}")
        if history:
            _fields(history[0], source, f"{where}.history[0]", required=(),
                    optional=("real_size",), none_ok=True)


def _fields(item: Any, source: str, where: str, required, optional, none_ok=False) -> None:
    if not isinstance(item, Mapping):
        raise CorruptInputError(source, f"{where} is not a dict: {_short(item)}")
    for key in required:
        if key not in item:
            raise CorruptInputError(source, f"{where} has no '{key}': {_short(item)}")
    for key in (*required, *optional):
        value = item.get(key)
        if key in optional and (key not in item or (value is None and none_ok)):
            continue
        if type(value) is not int or not -_I64 <= value < _I64:
            what = "device index" if key == "device" else "64-bit integer"
            raise CorruptInputError(
                source, f"{where}.{key} must be a {what}, not {_short(value, 60)}"
            )


def load_snapshot(path: str, storage_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Read a memory snapshot pickle (local path or fsspec URL such as ``gs://b/x.pickle``, gzip ok).

    Returns the plain dict torch wrote. Raises ``UnsafePickleError`` for a pickle that would import
    or call anything, ``WrongFileKindError`` for another kind of file, ``CorruptInputError`` for damage.
    """
    data = read_input_bytes(str(path), storage_options, trace=False)
    return parse_snapshot_bytes(data, str(path))


def _short(value: Any, width: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"
