"""The files of ``torch.profiler.profile.export_memory_timeline``: memory by category over time.

Two JSON layouts (gzipped or not, detected by content, read through fsspec):

- *raw* (``*.raw.json.gz``): ``[[time_ns, action, bytes, category], ...]``, one row per tensor
  event, ``time_ns == -1`` for tensors that existed before profiling, ``bytes`` signed (negative
  for a destroy), ``category`` an index into :data:`CATEGORIES` (torch's ``_CATEGORY_TO_INDEX``).
- *coalesced* (``*.json(.gz)``): ``[[time_us, ...], [[0, bytes per category...], ...]]``.

Both become one row per timestamp with the bytes alive per category, as torch and
HolisticTraceAnalysis coalesce them: consecutive rows with the same timestamp are one moment, and
the pre-existing tensors are placed at the earliest positive timestamp.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from analysis.errors import CorruptInputError, WrongFileKindError
from analysis.io import read_input_bytes
from analysis.memory.snapshot import decompress, parse_snapshot_bytes

# torch.profiler._memory_profiler._CATEGORY_TO_INDEX order; the last is tensors of no category.
CATEGORIES = (
    "parameter", "optimizer_state", "input", "temporary", "activation", "gradient",
    "autograd_detail", "unknown",
)  # fmt: skip
# torch.profiler._memory_profiler.Action values as written in raw files.
ACTIONS = {1: "preexisting", 2: "create", 3: "increment_version", 4: "destroy"}

_raw_rows = msgspec.json.Decoder(list[tuple[int, int, int, int]])
_coalesced = msgspec.json.Decoder(tuple[list[int], list[list[int]]])


def parse_memory_timeline_bytes(data: bytes, source: str) -> pd.DataFrame:
    """The bytes of an ``export_memory_timeline`` file → the table of :func:`load_memory_timeline`."""
    text = decompress(data, source)
    try:
        rows = _raw_rows.decode(text)
    except msgspec.DecodeError:
        rows = None
    if rows is not None:
        return _from_raw(rows)
    try:
        times, sizes = _coalesced.decode(text)
    except msgspec.DecodeError as exc:
        if text.lstrip()[:1] == b"{" and b'"traceEvents"' in text[:1 << 20]:
            raise WrongFileKindError(
                source, "a Kineto profiler trace, not a memory timeline from "
                "export_memory_timeline: its [memory] events are read by `trace-analysis "
                "memory-timeline` (and the report's memory view)") from None
        if text.lstrip()[:1] in (b"[", b"{"):
            raise WrongFileKindError(
                source, f"not a memory timeline from export_memory_timeline ({exc})"
            ) from None
        raise CorruptInputError(source, f"not JSON: {exc}") from None
    return _from_coalesced(times, sizes, source)


def _from_raw(rows: list[tuple[int, int, int, int]]) -> pd.DataFrame:
    if not rows:
        return _table(np.zeros(0, np.int64), np.zeros((0, len(CATEGORIES)), np.int64))
    arr = np.asarray(rows, dtype=np.int64)
    t, nbytes, category = arr[:, 0], arr[:, 2], arr[:, 3]
    category = np.where((category >= 0) & (category < len(CATEGORIES)), category, len(CATEGORIES) - 1)
    delta = np.zeros((len(arr), len(CATEGORIES)), np.int64)
    delta[np.arange(len(arr)), category] = nbytes
    alive = np.cumsum(delta, axis=0)
    last_of_run = np.r_[t[1:] != t[:-1], True]  # a moment ends where the next timestamp differs
    times = t[last_of_run]
    positive = t[t > 0]
    t_min = positive.min() if positive.size else 0
    return _table(np.where(times < 0, t_min, times), alive[last_of_run])


def _from_coalesced(times: list[int], sizes: list[list[int]], source: str) -> pd.DataFrame:
    if len(times) != len(sizes) or any(len(row) != len(CATEGORIES) + 1 for row in sizes):
        raise CorruptInputError(
            source, f"a coalesced memory timeline needs one row of {len(CATEGORIES) + 1} sizes per time"
        )
    arr = np.asarray(sizes, dtype=np.int64).reshape(len(sizes), len(CATEGORIES) + 1)
    # Column 0 is always 0 in torch's writer (an offset for stacking); times are in µs.
    return _table(np.asarray(times, dtype=np.int64) * 1000, arr[:, 1:])


def _table(time_ns: np.ndarray, alive: np.ndarray) -> pd.DataFrame:
    out = pd.DataFrame(alive, columns=list(CATEGORIES)).astype("int64")
    out.insert(0, "time_ns", time_ns.astype(np.int64))
    out["total_bytes"] = alive.sum(axis=1).astype(np.int64)
    return out


def load_memory_timeline(path: str, storage_options: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Read an ``export_memory_timeline`` JSON file (raw or coalesced; gzip ok; local or fsspec URL).

    One row per moment: ``time_ns`` (int64, ns since the epoch as the profiler wrote it), one int64
    column per category of :data:`CATEGORIES` (bytes alive in that category), ``total_bytes``.
    """
    data = read_input_bytes(str(path), storage_options, trace=False)
    return parse_memory_timeline_bytes(data, str(path))


def load_memory_file(path: str, storage_options: Mapping[str, Any] | None = None
                     ) -> tuple[str, Any]:
    """A file of torch's memory tools, whatever its name, by its content: ``("timeline",
    table)`` for an ``export_memory_timeline`` JSON file (:func:`load_memory_timeline`),
    ``("snapshot", dict)`` for a ``_dump_snapshot`` pickle (``analysis.memory.load_snapshot``).
    An HTML page (the ``.html`` export, torch's viewer) raises ``WrongFileKindError`` saying what
    to export instead."""
    data = read_input_bytes(str(path), storage_options, trace=False)
    raw = decompress(data, str(path))
    head = raw.lstrip()[:16].lower()
    if head.startswith(b"<"):  # <!DOCTYPE html>, <html>
        raise WrongFileKindError(
            str(path), "an HTML page, which holds a picture, not the data: export the memory "
            "timeline as .json or .raw.json.gz (prof.export_memory_timeline('mem.raw.json.gz')), "
            "or give the snapshot pickle (torch.cuda.memory._dump_snapshot)")
    if head[:1] in (b"[", b"{"):
        return "timeline", parse_memory_timeline_bytes(raw, str(path))
    return "snapshot", parse_snapshot_bytes(raw, str(path))


def memory_timeline_peak(timeline: pd.DataFrame) -> pd.DataFrame:
    """The moment with the most bytes alive: one row, ``time_ns``, ``total_bytes``, the categories.

    ``total_bytes`` is the sum over categories; the first moment wins a tie. Empty in, empty out.
    """
    if timeline.empty:
        return timeline.head(0).reset_index(drop=True)
    k = int(np.argmax(timeline["total_bytes"].to_numpy()))
    return timeline.iloc[[k]].reset_index(drop=True)
