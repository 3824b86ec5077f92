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
from collections.abc import Mapping
from typing import Any

from isal import igzip

from analysis.errors import CorruptTraceError, NotATraceError, TraceLoadError, UnsafePickleError
from analysis.kineto.sources import read_trace_bytes

_GZIP_MAGIC = b"\x1f\x8b"


class SafeUnpickler(pickle.Unpickler):
    """An unpickler that builds only plain containers and numbers; any import is refused.

    ``find_class`` is the single door through which a pickle reaches code (``GLOBAL``,
    ``STACK_GLOBAL``, ``INST``, ``OBJ`` and the copyreg extension codes all go through it), and
    ``REDUCE``/``BUILD`` need a callable that only it can supply.
    """

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


def decompress(data: bytes, source: str) -> bytes:
    """``data`` gunzipped when it starts with the gzip magic bytes, else as it is."""
    if not data:
        raise CorruptTraceError(source, "the file is empty (0 bytes)")
    if not data.startswith(_GZIP_MAGIC):
        return data
    try:
        return igzip.decompress(data)
    except (OSError, EOFError, ValueError) as exc:
        raise CorruptTraceError(source, f"truncated or corrupt gzip data ({exc})") from None


def unpickle_plain(data: bytes, source: str) -> Any:
    """The object in pickle ``data``, built by :class:`SafeUnpickler` (plain containers only)."""
    try:
        return SafeUnpickler(io.BytesIO(data), source).load()
    except TraceLoadError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError,
            AttributeError, UnicodeDecodeError, MemoryError) as exc:
        raise CorruptTraceError(
            source, f"not a readable pickle ({type(exc).__name__}: {exc})"
        ) from None


def parse_snapshot_bytes(data: bytes, source: str) -> dict[str, Any]:
    """A snapshot dict from the bytes of a (possibly gzipped) snapshot pickle; checked for shape."""
    raw = decompress(data, source)
    # "{" and "[" are no pickle opcodes: such a file is JSON (a Kineto trace, a memory timeline).
    if raw.lstrip()[:1] in (b"{", b"["):
        raise NotATraceError(
            source,
            "not a memory snapshot (JSON); expected the pickle that "
            "torch.cuda.memory._dump_snapshot() writes",
        )
    return check_snapshot(unpickle_plain(raw, source), source)


def check_snapshot(snapshot: Any, source: str = "snapshot") -> dict[str, Any]:
    """``snapshot`` itself if it has the structure torch writes, else ``NotATraceError``/``CorruptTraceError``.

    Required: a dict with ``segments`` (list of dicts with ``address``, ``total_size``, ``blocks``)
    and ``device_traces`` (list of lists of dicts with ``action``). Only the first few items are
    looked at closely; the replay checks the fields it uses as it goes.
    """
    if not isinstance(snapshot, Mapping) or "segments" not in snapshot:
        kind = type(snapshot).__name__
        keys = f" with keys {sorted(map(str, snapshot))[:8]}" if isinstance(snapshot, Mapping) else ""
        raise NotATraceError(
            source, f"not a memory snapshot: a pickled {kind}{keys}, expected a dict with "
            "'segments' and 'device_traces' (torch.cuda.memory._dump_snapshot)"
        )
    segments = snapshot["segments"]
    traces = snapshot.get("device_traces", [])
    if not isinstance(segments, list) or not isinstance(traces, list):
        raise CorruptTraceError(source, "'segments' and 'device_traces' must be lists")
    for i, seg in enumerate(segments[:16]):
        if not isinstance(seg, Mapping) or not {"address", "total_size", "blocks"} <= set(seg):
            raise CorruptTraceError(
                source, f"segment {i} lacks 'address', 'total_size' or 'blocks': {_short(seg)}"
            )
    for d, trace in enumerate(traces):
        if not isinstance(trace, list):
            raise CorruptTraceError(source, f"device_traces[{d}] is not a list")
        for entry in trace[:16]:
            if not isinstance(entry, Mapping) or "action" not in entry:
                raise CorruptTraceError(
                    source, f"device_traces[{d}] has an entry without 'action': {_short(entry)}"
                )
    if "device_traces" not in snapshot:
        snapshot = {**snapshot, "device_traces": []}
    return dict(snapshot)


def load_snapshot(path: str, storage_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Read a memory snapshot pickle (local path or fsspec URL such as ``gs://b/x.pickle``, gzip ok).

    Returns the plain dict torch wrote. Raises ``UnsafePickleError`` for a pickle that would import
    or call anything, ``NotATraceError`` for another kind of file, ``CorruptTraceError`` for damage.
    """
    return parse_snapshot_bytes(read_trace_bytes(str(path), storage_options), str(path))


def _short(value: Any, width: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"
