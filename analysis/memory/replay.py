"""Replaying a memory snapshot's event buffer: allocated and reserved bytes over time, the peak,
what was alive at the peak, fragmentation and out-of-memory events.

The event buffer (``device_traces``) is bounded (``_record_memory_history(max_entries=...)``), so
it usually starts mid-run; the only complete state is the one at the end, which the ``segments``
describe. As torch's viewer does (``MemoryViz.js``, ``process_alloc_data``), the replay runs from
that end state backwards:

- an *allocation* lives from its ``alloc`` to its ``free_completed`` (``free_requested`` only marks
  the request: the memory stays taken until the stream is done with it). A ``free_completed`` with
  no ``alloc`` before it in the buffer is an allocation alive since before the buffer began; an
  ``alloc`` never freed is alive at the snapshot; blocks in the segments that no event touches
  (state ``active_allocated`` or ``active_pending_free``) were alive the whole time.
- *allocated bytes* at a moment are the sum of the requested sizes of the allocations alive then
  (the bytes the program asked for, which torch's viewer plots; the allocator's rounding to 512 B
  blocks is counted as reserved, not allocated).
- *reserved bytes* are the segments' total size at the snapshot, minus each later ``segment_alloc``
  / ``segment_map`` and plus each later ``segment_free`` / ``segment_unmap`` (cudaMalloc'd memory,
  what ``nvidia-smi`` sees of the caching allocator).
- *fragmentation* is reserved − allocated: memory the process holds but no tensor uses.

"Allocated" here is torch's *active* memory, not ``torch.cuda.memory_allocated()``: a block freed
while a stream still uses it (``record_stream``) stays taken until its ``free_completed``, and
torch's allocated counter (and ``_memory_viz.segsum``'s "allocated") drop it at the free request.
:func:`pending_free` gives those blocks at the snapshot; the summary names their bytes.

Moments are *states*: state 0 is the start of the buffer, state ``k`` the moment after event
``k - 1``; a buffer of ``n`` events has ``n + 1`` states. Everything is computed with numpy on
arrays sorted by address, so 100k+ events take well under a second.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.errors import CorruptInputError, NoMemoryEventsError
from analysis.memory.frames import NO_STACK, top_user_frame

MiB = 1024 * 1024

# Action codes of the replay; "free" is the viewer's merged free_requested + free_completed,
# accepted for snapshots that were re-saved from the viewer.
ACTIONS = (
    "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
    "segment_unmap", "snapshot", "oom", "free", "other",
)  # fmt: skip
_CODE = {name: i for i, name in enumerate(ACTIONS)}
_ALLOC, _FREE_COMPLETED, _FREE, _OTHER = _CODE["alloc"], _CODE["free_completed"], _CODE["free"], _CODE["other"]
_SEG_GROW = (_CODE["segment_alloc"], _CODE["segment_map"])
_SEG_SHRINK = (_CODE["segment_free"], _CODE["segment_unmap"])
# Block states that hold memory a program asked for (torch writes "active_pending_free"; its
# docstring says "active_awaiting_free").
_LIVE_BLOCK_STATES = frozenset(("active_allocated", "active_pending_free", "active_awaiting_free"))


@dataclass(frozen=True)
class MemoryReplay:
    """One device's replayed buffer.

    ``timeline``: one row per state: ``state``, ``event`` (index into the device's trace, -1 for
    the start), ``action``, ``time_us`` (the event's ``time_us``, NaN when the snapshot has none),
    ``addr``, ``size`` (bytes), ``allocated_bytes``, ``reserved_bytes``, ``fragmentation_bytes``.

    ``allocations``: one row per allocation seen: ``addr``, ``size`` (requested bytes),
    ``start_state`` (0: alive before the buffer began), ``end_state`` (``n + 1``: alive at the
    snapshot), ``start_time_us``/``end_time_us`` (NaN when unknown), ``stream``, ``frame`` (top
    user frame, see ``analysis.memory.frames``), ``recorded`` (the ``alloc`` is in the buffer).
    """

    device: int
    timeline: pd.DataFrame
    allocations: pd.DataFrame
    source: str = "snapshot"

    @property
    def n_events(self) -> int:
        return len(self.timeline) - 1


def snapshot_devices(snapshot: Mapping[str, Any]) -> list[int]:
    """The devices with events or segments in ``snapshot``, in order."""
    found = {d for d, trace in enumerate(snapshot.get("device_traces") or []) if trace}
    found |= {int(seg.get("device", 0)) for seg in snapshot.get("segments") or []}
    return sorted(found)


def device_overview(snapshot: Mapping[str, Any]) -> pd.DataFrame:
    """Per device of the snapshot (:func:`snapshot_devices`): ``device``, ``reserved_bytes`` (its
    segments' total size at the snapshot), ``memory_events`` (events of the buffer that allocate
    or free: not ``snapshot`` / ``oom`` markers) and ``ooms`` (out-of-memory events)."""
    traces = snapshot.get("device_traces") or []
    reserved: dict[int, int] = {}
    for seg in snapshot.get("segments") or []:
        d = int(seg.get("device", 0))
        reserved[d] = reserved.get(d, 0) + int(seg.get("total_size", 0))
    rows = []
    for d in snapshot_devices(snapshot):
        actions = [e.get("action") for e in (traces[d] if d < len(traces) else [])]
        rows.append({"device": d, "reserved_bytes": reserved.get(d, 0),
                     "memory_events": sum(a not in ("snapshot", "oom") for a in actions),
                     "ooms": sum(a == "oom" for a in actions)})
    return pd.DataFrame(rows, columns=["device", "reserved_bytes", "memory_events", "ooms"])


def _pick_device(snapshot: Mapping[str, Any], device: int | None, source: str) -> int:
    devices = snapshot_devices(snapshot)
    if device is None:
        if not devices:
            raise NoMemoryEventsError(f"{source}: the snapshot has no segments and no events")
        # The device that holds the memory: most reserved at the snapshot, then most allocations
        # and frees (torch writes its "snapshot" marker on the current device, which may hold
        # nothing), then the lowest index.
        overview = device_overview(snapshot)
        best = max(overview.itertuples(index=False),
                   key=lambda r: (r.reserved_bytes, r.memory_events, -r.device))
        return int(best.device)
    if device not in devices:
        raise NoMemoryEventsError(
            f"{source}: the snapshot has nothing for device {device}; devices present: {devices}"
        )
    return device


def _int_array(values, n: int) -> np.ndarray:
    return np.fromiter(values, dtype=np.int64, count=n)


def _live_blocks(segments: list[Mapping], device: int) -> list[tuple[int, int, Any, int]]:
    """(address, requested bytes, frames, stream) of every block holding memory at the snapshot."""
    out = []
    for seg in segments:
        if int(seg.get("device", 0)) != device:
            continue
        addr = int(seg["address"])
        for block in seg["blocks"]:
            # Legacy snapshots give no block address: blocks tile their segment in order.
            block_addr = int(block.get("address", addr))
            if block.get("state") in _LIVE_BLOCK_STATES:
                requested = block.get("requested_size")
                if requested is None and block.get("history"):
                    requested = block["history"][0].get("real_size")
                frames = block.get("frames")
                if frames is None and block.get("history"):
                    frames = block["history"][0].get("frames")
                out.append((block_addr, int(block["size"] if requested is None else requested),
                            frames, int(seg.get("stream", 0))))
            addr = block_addr + int(block["size"])
    return out


def replay_snapshot(
    snapshot: Mapping[str, Any], device: int | None = None, source: str = "snapshot"
) -> MemoryReplay:
    """Replay one device's event buffer from the state the segments imply (see the module doc).

    ``device``: which GPU; default the one holding the most reserved memory at the snapshot (then
    the one with the most allocations and frees). Raises ``CorruptInputError`` when
    the events contradict the segments (reserved bytes would go negative).
    """
    device = _pick_device(snapshot, device, source)
    traces = snapshot.get("device_traces") or []
    entries = traces[device] if device < len(traces) else []
    segments = [s for s in snapshot.get("segments") or [] if int(s.get("device", 0)) == device]
    n = len(entries)
    try:
        action = np.fromiter((_CODE.get(e["action"], _OTHER) for e in entries), np.int8, n)
        addr = _int_array((e.get("addr") or 0 for e in entries), n)
        size = _int_array((e.get("size") or 0 for e in entries), n)
        stream = _int_array((e.get("stream") or 0 for e in entries), n)
        time_us = np.fromiter((e.get("time_us", np.nan) for e in entries), np.float64, n)
    except (TypeError, ValueError, OverflowError, KeyError) as exc:
        raise CorruptInputError(source, f"device {device}: an event has a malformed field ({exc})") from None

    allocations = _allocations(entries, action, addr, size, stream, time_us, segments, device)
    timeline = _timeline(action, addr, size, time_us, allocations, segments, source, device)
    return MemoryReplay(device, timeline, allocations, source)


def _allocations(entries, action, addr, size, stream, time_us, segments, device) -> pd.DataFrame:
    n = len(action)
    is_alloc = action == _ALLOC
    is_free = (action == _FREE_COMPLETED) | (action == _FREE)
    idx = np.flatnonzero(is_alloc | is_free)
    # Sorted by address, then time: an address's events alternate alloc, free, alloc, free...
    s = idx[np.lexsort((idx, addr[idx]))]
    s_addr, s_alloc = addr[s], is_alloc[s]
    m = len(s)  # the [:m] keep the shifted masks empty when the buffer has no alloc/free at all
    same_as_prev = np.r_[False, s_addr[1:] == s_addr[:-1]][:m]
    free_paired = ~s_alloc & same_as_prev & np.r_[False, s_alloc[:-1]][:m]
    alloc_paired = np.r_[free_paired[1:], False][:m]  # paired when the next row pairs back

    pairs = s[alloc_paired]
    paired_free = s[np.flatnonzero(alloc_paired) + 1]
    open_allocs = s[s_alloc & ~alloc_paired]
    early_frees = s[~s_alloc & ~free_paired]

    recorded = np.r_[pairs, open_allocs]
    start = np.r_[pairs + 1, open_allocs + 1, np.zeros(len(early_frees), np.int64)]
    end = np.r_[paired_free + 1, np.full(len(open_allocs), n + 1), early_frees + 1]
    source_event = np.r_[recorded, early_frees]
    frames = [top_user_frame(entries[i].get("frames")) for i in source_event]

    open_addrs = set(addr[open_allocs].tolist())
    untouched = [b for b in _live_blocks(segments, device) if b[0] not in open_addrs]
    table = pd.DataFrame(
        {
            "addr": np.r_[addr[source_event], [b[0] for b in untouched]].astype(np.int64),
            "size": np.r_[size[source_event], [b[1] for b in untouched]].astype(np.int64),
            "start_state": np.r_[start, np.zeros(len(untouched), np.int64)].astype(np.int64),
            "end_state": np.r_[end, np.full(len(untouched), n + 1)].astype(np.int64),
            "stream": np.r_[stream[source_event], [b[3] for b in untouched]].astype(np.int64),
            "frame": frames + [top_user_frame(b[2]) for b in untouched],
            "recorded": np.r_[np.ones(len(recorded), bool), np.zeros(len(early_frees) + len(untouched), bool)],
        }
    )
    state_time = np.r_[time_us[:1] if n else [np.nan], time_us, np.nan]  # time of each state
    table.insert(4, "start_time_us", state_time[table["start_state"].to_numpy()])
    table.insert(5, "end_time_us", state_time[table["end_state"].to_numpy()])
    return table.sort_values(["start_state", "addr"], kind="stable").reset_index(drop=True)


def _timeline(action, addr, size, time_us, allocations, segments, source, device) -> pd.DataFrame:
    n = len(action)
    delta = np.zeros(n + 2, np.int64)
    np.add.at(delta, allocations["start_state"].to_numpy(), allocations["size"].to_numpy())
    np.subtract.at(delta, allocations["end_state"].to_numpy(), allocations["size"].to_numpy())
    allocated = np.cumsum(delta)[: n + 1]

    seg_delta = np.where(np.isin(action, _SEG_GROW), size, 0) - np.where(np.isin(action, _SEG_SHRINK), size, 0)
    reserved_end = sum(int(s["total_size"]) for s in segments)
    later = np.r_[np.cumsum(seg_delta[::-1])[::-1], 0]  # segment growth after each state
    reserved = reserved_end - later
    if n and reserved.min() < 0:
        k = int(np.argmin(reserved))
        raise CorruptInputError(
            source,
            f"device {device}: the segment events contradict the segments: replaying back from "
            f"the snapshot gives {int(reserved[k])} reserved bytes at state {k}",
        )
    names = np.array(ACTIONS, dtype=object)
    return pd.DataFrame(
        {
            "state": np.arange(n + 1, dtype=np.int64),
            "event": np.arange(-1, n, dtype=np.int64),
            "action": pd.Categorical(np.r_[["start"], names[action]], categories=["start", *ACTIONS]),
            "time_us": np.r_[time_us[:1] if n else [np.nan], time_us],
            "addr": np.r_[0, addr].astype(np.int64),
            "size": np.r_[0, size].astype(np.int64),
            "allocated_bytes": allocated,
            "reserved_bytes": reserved.astype(np.int64),
            "fragmentation_bytes": (reserved - allocated).astype(np.int64),
        }
    )


# --- analyses of a replay ---------------------------------------------------------------------


def memory_peak(replay: MemoryReplay) -> pd.DataFrame:
    """The peak of allocated and of reserved bytes in the buffer, and where they happened.

    One row: ``device``, ``peak_allocated_bytes`` (max over states of the requested bytes alive),
    ``peak_allocated_state``/``_event``/``_time_us`` (the first state at that value, the event that
    led to it, its time in µs), the same four for ``peak_reserved``, ``allocated_at_snapshot_bytes``,
    ``reserved_at_snapshot_bytes``, ``max_fragmentation_bytes`` (max of reserved − allocated),
    ``events`` (buffer length), ``allocations`` (seen alive in the buffer), and
    ``peak_allocated_mib``/``peak_reserved_mib`` (÷ 2**20).
    """
    tl = replay.timeline
    row: dict[str, Any] = {"device": replay.device}
    for what in ("allocated", "reserved"):
        values = tl[f"{what}_bytes"].to_numpy()
        k = int(np.argmax(values))
        row[f"peak_{what}_bytes"] = int(values[k])
        row[f"peak_{what}_state"] = k
        row[f"peak_{what}_event"] = int(tl["event"].iat[k])
        row[f"peak_{what}_time_us"] = float(tl["time_us"].iat[k])
    row["allocated_at_snapshot_bytes"] = int(tl["allocated_bytes"].iat[-1])
    row["reserved_at_snapshot_bytes"] = int(tl["reserved_bytes"].iat[-1])
    row["max_fragmentation_bytes"] = int(tl["fragmentation_bytes"].max())
    row["events"] = replay.n_events
    row["allocations"] = len(replay.allocations)
    row["peak_allocated_mib"] = row["peak_allocated_bytes"] / MiB
    row["peak_reserved_mib"] = row["peak_reserved_bytes"] / MiB
    return pd.DataFrame([row])


def alive_at(replay: MemoryReplay, state: int) -> pd.DataFrame:
    """The allocations alive at ``state`` (``start_state <= state < end_state``), largest first."""
    a = replay.allocations
    mask = (a["start_state"] <= state) & (state < a["end_state"])
    return a[mask].sort_values(["size", "addr"], ascending=[False, True], kind="stable").reset_index(drop=True)


def allocations_at_peak(replay: MemoryReplay, top: int | None = 10, state: int | None = None) -> pd.DataFrame:
    """The allocations alive at the allocated peak (or at ``state``), grouped by top user frame.

    Columns: ``frame`` (``file.py:line:function``), ``allocations`` (count), ``bytes`` (requested
    bytes alive), ``largest_bytes`` (the biggest single allocation), ``mib`` (bytes ÷ 2**20),
    ``share_pct`` (% of allocated bytes at that moment). Largest first; ``top`` rows (None: all).
    """
    if state is None:
        state = int(np.argmax(replay.timeline["allocated_bytes"].to_numpy()))
    alive = alive_at(replay, state)
    total = int(alive["size"].sum())
    grouped = (
        alive.groupby("frame", sort=False)["size"]
        .agg(allocations="count", bytes="sum", largest_bytes="max")
        .reset_index()
        .sort_values(["bytes", "frame"], ascending=[False, True], kind="stable")
    )
    grouped["mib"] = grouped["bytes"] / MiB
    grouped["share_pct"] = 100.0 * grouped["bytes"] / total if total else 0.0
    grouped = grouped.astype({"allocations": "int64", "bytes": "int64", "largest_bytes": "int64"})
    return (grouped if top is None else grouped.head(top)).reset_index(drop=True)


def allocated_by_frame(replay: MemoryReplay, top: int = 10) -> pd.DataFrame:
    """Allocated bytes per top user frame over time, for a stacked plot: one row per state.

    Columns: ``state``, ``time_us``, then one int64 column per frame, in the order of each frame's
    first allocation (the oldest, e.g. parameters, first: the floor of a stacked plot). The ``top``
    frames with most bytes at the allocated peak keep their own column; the rest are summed in
    ``"other"`` (present only when there is a rest). Row sums equal ``allocated_bytes``.
    """
    a = replay.allocations
    n_states = len(replay.timeline)
    peak_groups = allocations_at_peak(replay, top=None)["frame"].tolist()
    kept = peak_groups[:top]
    if len(kept) < top:  # the peak can miss frames big elsewhere: fill from overall size
        by_size = a.groupby("frame")["size"].max().sort_values(ascending=False).index
        kept += [f for f in by_size if f not in kept][: top - len(kept)]
    first = a.groupby("frame")["start_state"].min()
    kept = sorted(kept, key=lambda f: (first[f], f))
    has_other = bool((~a["frame"].isin(kept)).any())
    names = kept + (["other"] if has_other else [])
    position = {frame: i for i, frame in enumerate(kept)}
    code = np.fromiter((position.get(f, len(kept)) for f in a["frame"]), np.int64, len(a))
    delta = np.zeros((n_states + 1, len(kept) + 1), np.int64)
    np.add.at(delta, (a["start_state"].to_numpy(), code), a["size"].to_numpy())
    np.subtract.at(delta, (a["end_state"].to_numpy(), code), a["size"].to_numpy())
    stacked = np.cumsum(delta, axis=0)[:n_states, : len(names)]
    out = pd.DataFrame(stacked, columns=names)
    out.insert(0, "state", replay.timeline["state"].to_numpy())
    out.insert(1, "time_us", replay.timeline["time_us"].to_numpy())
    return out


def oom_events(snapshot: Mapping[str, Any], replay: MemoryReplay) -> pd.DataFrame:
    """Out-of-memory events in the buffer: one row each.

    Columns: ``event``, ``time_us``, ``requested_bytes`` (the allocation that failed),
    ``device_free_bytes`` (what CUDA reported free then), ``allocated_bytes`` and ``reserved_bytes``
    (the replayed state at that moment), ``frame`` (top user frame of the failed request).
    """
    tl = replay.timeline
    ooms = tl.index[tl["action"] == "oom"]
    entries = (snapshot.get("device_traces") or [])[replay.device] if ooms.size else []
    rows = []
    for k in ooms:
        e = entries[int(tl["event"].iat[k])]
        rows.append(
            {
                "event": int(tl["event"].iat[k]),
                "time_us": float(tl["time_us"].iat[k]),
                "requested_bytes": int(e.get("size") or 0),
                "device_free_bytes": int(e.get("device_free") or 0),
                "allocated_bytes": int(tl["allocated_bytes"].iat[k]),
                "reserved_bytes": int(tl["reserved_bytes"].iat[k]),
                "frame": top_user_frame(e.get("frames")),
            }
        )
    columns = ["event", "time_us", "requested_bytes", "device_free_bytes", "allocated_bytes",
               "reserved_bytes", "frame"]
    return pd.DataFrame(rows, columns=columns)


def pending_free(snapshot: Mapping[str, Any], device: int) -> tuple[int, int]:
    """(blocks, requested bytes) freed by the program but still in use by a stream at the snapshot
    (state ``active_pending_free``: ``record_stream``). They count as allocated here until their
    ``free_completed``; ``torch.cuda.memory_allocated()`` stopped counting them at the free."""
    blocks = nbytes = 0
    for seg in snapshot.get("segments") or []:
        if int(seg.get("device", 0)) != device:
            continue
        for b in seg["blocks"]:
            if b.get("state") in _LIVE_BLOCK_STATES and b.get("state") != "active_allocated":
                blocks += 1
                nbytes += int(b.get("requested_size", b["size"]))
    return blocks, nbytes


def segment_fragmentation(snapshot: Mapping[str, Any], device: int | None = None) -> pd.DataFrame:
    """Each segment at the snapshot and how its free space is split.

    Columns: ``device``, ``address``, ``total_bytes`` (cudaMalloc'd size), ``allocated_bytes``
    (requested bytes of live blocks), ``free_bytes`` (inactive blocks), ``largest_free_bytes``
    (the biggest inactive block: the largest request the segment can still serve),
    ``free_blocks``, ``fragmentation`` (1 − largest_free / free; 0 when the free space is one
    block or there is none), ``segment_type``, ``stream``. Largest segment first.
    """
    rows = []
    for seg in snapshot.get("segments") or []:
        dev = int(seg.get("device", 0))
        if device is not None and dev != device:
            continue
        free = [int(b["size"]) for b in seg["blocks"] if b.get("state") == "inactive"]
        live = [int(b.get("requested_size", b["size"])) for b in seg["blocks"]
                if b.get("state") in _LIVE_BLOCK_STATES]
        free_bytes = sum(free)
        largest = max(free, default=0)
        rows.append(
            {
                "device": dev,
                "address": int(seg["address"]),
                "total_bytes": int(seg["total_size"]),
                "allocated_bytes": sum(live),
                "free_bytes": free_bytes,
                "largest_free_bytes": largest,
                "free_blocks": len(free),
                "fragmentation": 1.0 - largest / free_bytes if free_bytes else 0.0,
                "segment_type": str(seg.get("segment_type", "")),
                "stream": int(seg.get("stream", 0)),
            }
        )
    columns = ["device", "address", "total_bytes", "allocated_bytes", "free_bytes",
               "largest_free_bytes", "free_blocks", "fragmentation", "segment_type", "stream"]
    out = pd.DataFrame(rows, columns=columns)
    return out.sort_values(["total_bytes", "address"], ascending=[False, True], kind="stable").reset_index(drop=True)


__all__ = [
    "MiB", "NO_STACK", "MemoryReplay", "NoMemoryEventsError", "alive_at", "allocated_by_frame",
    "allocations_at_peak", "device_overview", "memory_peak", "oom_events", "pending_free",
    "replay_snapshot", "segment_fragmentation", "snapshot_devices",
]  # fmt: skip
