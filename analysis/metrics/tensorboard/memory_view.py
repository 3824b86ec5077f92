"""The TensorBoard plugin's memory view, from the ``[memory]`` events of ``profile_memory=True``.

Each ``[memory]`` instant event records one allocation (``Bytes`` > 0) or free (``Bytes`` ≤ 0) at
``Addr`` on a device (``Device Type`` 0: ``"CPU"``; 1: ``"GPU<Device Id>"``; see
:func:`device_names` for the others: ROCm's HIP, 6, is a GPU too), with the allocator's
``Total Allocated`` and ``Total Reserved`` bytes after it. Read through the ``memory_events`` extra
(decoded only when a memory analysis asks). Window: the whole trace, as the plugin.

- :func:`timeline`: per device, every event with an address and both totals, in time order:
  ``time_us`` (as written, µs), ``allocated_bytes``, ``reserved_bytes``;
- :func:`peaks`: per device, the largest ``Total Allocated`` of any of its events
  (``peak_allocated_bytes``), the first time it is reached (``peak_time_us``) and the profiler step
  that contains that time (``step``, -1 outside every step), plus the largest ``Total Reserved``;
- :func:`operator_memory`: per device and operator name, over the operator's calls: the bytes
  allocated minus freed (``size_increase_bytes``), allocated (``allocation_bytes``) and the number of
  allocations (``allocation_count``), each by the calls themselves (``self_*``: events whose
  innermost enclosing node of the plugin's call tree on the same thread is the call; the tree
  has the ``nn.Module`` nodes of ``with_modules=True`` traces) and including every operator
  nested in them; ``calls`` counts the operator's calls. An event whose innermost node is no CPU
  operator (none, or a module) belongs to none (the plugin's ``<unknown>``); operators with all
  six numbers 0 are left out;
- :func:`memory_events`: each allocation paired with the next free of its address (in time order;
  an address allocated again before a free replaces the earlier, unfreed allocation, as the
  plugin): ``operator`` (the allocating call's operator, ``"<parent> (aten::empty...)"`` for an
  ``aten::empty*`` inside another operator), ``bytes``, ``allocated_us``, ``freed_us``,
  ``lifetime_us``, ``freed`` (False: still allocated at the end of the trace; rows with no
  allocation are frees whose allocation the trace does not have).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import pandas as pd

from analysis.errors import NoMemoryProfileError
from analysis.kineto.model import RankTrace
from analysis.metrics.tensorboard.call_tree import call_tree, carry_up, child_levels
from analysis.metrics.tensorboard.ranges import plugin_us

EXTRA = "memory_events"
UNKNOWN = "<unknown>"
TIMELINE_COLUMNS = ["rank", "device", "time_us", "allocated_bytes", "reserved_bytes"]
PEAK_COLUMNS = ["rank", "device", "peak_allocated_bytes", "peak_time_us", "step",
                "peak_reserved_bytes"]
OP_COLUMNS = ["rank", "device", "operator", "calls", "size_increase_bytes",
              "self_size_increase_bytes", "allocation_count", "self_allocation_count",
              "allocation_bytes", "self_allocation_bytes"]
EVENT_COLUMNS = ["rank", "device", "operator", "bytes", "allocated_us", "freed_us", "lifetime_us",
                 "freed"]


class MemoryView(NamedTuple):
    """One rank's memory view (each table has a ``rank`` column)."""

    timeline: pd.DataFrame
    peaks: pd.DataFrame
    operators: pd.DataFrame
    events: pd.DataFrame


# c10::DeviceType codes of GPUs: CUDA, HIP (ROCm builds that record their GPU as HIP: TraceLens's
# MI300X traces, 10 of 10 AMD traces with memory events of a sweep), XPU (Intel), MPS (Apple)
_GPU_TYPES = (1, 6, 12, 13)
# other accelerators, named by their c10::DeviceType
_ACCELERATORS = {15: "HPU", 19: "MTIA", 20: "PrivateUse1"}


def device_names(device_type: np.ndarray, device_id: np.ndarray) -> np.ndarray:
    """``"CPU"``; ``"GPU<id>"`` for CUDA and the other GPUs (``Device Type`` 1, HIP 6, XPU 12,
    MPS 13: the plugin names only 1 and crashes on 6); ``"HPU<id>"``, ``"MTIA<id>"``,
    ``"PrivateUse1<id>"``; ``"type<N>:<id>"`` for any other type, so that no device's events are
    dropped."""
    device_type = np.asarray(device_type, np.int64)
    device_id = np.asarray(device_id, np.int64)
    small = 1 << 31
    if len(device_type) and (np.abs(device_type).max() < small and np.abs(device_id).max() < small):
        # one int64 key per (type, id) pair: np.unique of a 1-D array (of rows is slow)
        keys, inverse = np.unique(device_type * (1 << 32) + (device_id + small),
                                  return_inverse=True)  # names made once each
        types, ids = keys >> 32, keys % (1 << 32) - small
        names = np.array([_device_name(t, i) for t, i in zip(types.tolist(), ids.tolist(),
                                                              strict=True)], dtype=object)
        return names[inverse]
    pairs = np.stack([device_type, device_id], axis=1)
    distinct, inverse = np.unique(pairs, axis=0, return_inverse=True)  # names made once each
    names = np.array([_device_name(int(t), int(i)) for t, i in distinct], dtype=object)
    return names[inverse.reshape(-1)] if len(pairs) else names


def _device_name(device_type: int, device_id: int) -> str:
    if device_type == 0:
        return "CPU"
    if device_type in _GPU_TYPES:
        return f"GPU{device_id}"
    if device_type in _ACCELERATORS:
        return f"{_ACCELERATORS[device_type]}{device_id}"
    return f"type{device_type}:{device_id}"


class MemoryRecords(NamedTuple):
    """A rank's ``[memory]`` events (``records``) and the operator calls they refer to by
    position (``nodes``: the call tree with ``parent``, ``counted`` and ``visited``). Kept apart,
    not in ``records.attrs``: pandas deep-copies attrs on every operation on a frame."""

    records: pd.DataFrame
    nodes: pd.DataFrame


def memory_records(rt: RankTrace) -> MemoryRecords | None:
    """The rank's ``[memory]`` events in time order with ``device`` names and the innermost
    enclosing operator call (``node``) and its parent call (``parent_node``), and the calls, or
    None when the rank has none (memoised)."""
    return rt.memoised("tensorboard_memory_records", lambda: _records(rt))


def _records(rt: RankTrace) -> MemoryRecords | None:
    m = rt.extras.get(EXTRA)
    if m is None:
        m = rt.extra(EXTRA)  # raises MissingExtraError
    if not len(m):
        return None
    m = m.sort_values("ts", kind="stable")
    m = m.reset_index(drop=True)
    m["device"] = device_names(m["device_type"].to_numpy(), m["device_id"].to_numpy())
    node, parent, nodes = _enclosing_operators(rt, m)
    m["node"] = node
    m["parent_node"] = parent
    return MemoryRecords(m, nodes)


def _enclosing_operators(rt: RankTrace, m: pd.DataFrame):
    """For each record: the innermost node of its thread's call tree that contains it (position in
    the nodes table, -1 for none) and that node's parent (-1); and the nodes table with
    ``parent`` and ``counted`` (the operators the plugin counts calls of: root children, and
    children of nodes on the way to some record)."""
    nodes = call_tree(rt, modules=True).copy()
    parent = nodes["parent"].to_numpy(np.int64)
    starts, ends = nodes["start"].to_numpy(), nodes["end"].to_numpy()
    tids = nodes["tid"].to_numpy()
    rec_ts = plugin_us(m["ts"].to_numpy(np.int64))
    rec_tid = m["tid"].to_numpy(np.int64)
    node_of = np.full(len(m), -1, np.int64)
    # The plugin sweeps each thread's tree in pre-order (start, longest first) with the records
    # in time order, a stack holding the open nodes: at a record, the path from the root to the
    # last node started by then, less the nodes ended by then (a node's children start before
    # it ends, so they are pushed before it is popped). So a record's node is the innermost
    # node on that path that ends after it: found by searchsorted and a walk up the parents.
    in_tree = np.flatnonzero(parent >= -1)
    for tid in np.unique(rec_tid).tolist():
        recs = np.flatnonzero(rec_tid == tid)
        own = in_tree[tids[in_tree] == tid]
        if not len(own):
            continue  # a thread without operators: its records are in none
        last = np.searchsorted(starts[own], rec_ts[recs], side="right") - 1
        found = np.where(last >= 0, own[np.maximum(last, 0)], -1)
        t = rec_ts[recs]
        open_ = np.flatnonzero(found >= 0)
        while len(open_):  # up from the nodes that ended by their record's time
            ended = open_[ends[found[open_]] <= t[open_]]
            found[ended] = parent[found[ended]]
            open_ = ended[found[ended] >= 0]
        node_of[recs] = found
    visited = np.zeros(len(nodes), bool)
    path = np.unique(node_of[node_of >= 0])
    while len(path):  # the paths down to each record's node
        path = path[~visited[path]]
        visited[path] = True
        path = np.unique(parent[path[parent[path] >= 0]])
    parent_of_record = np.full(len(m), -1, np.int64)  # (a rank may have no operator at all)
    parent_of_record[node_of >= 0] = parent[node_of[node_of >= 0]]
    counted = (parent == -1) | ((parent >= 0) & visited[np.maximum(parent, 0)])
    nodes["parent"] = parent
    nodes["counted"] = counted
    nodes["visited"] = visited
    return node_of, parent_of_record, nodes


def timeline(mr: MemoryRecords, rank: int) -> pd.DataFrame:
    m = mr.records
    ok = m["has_addr"] & m["total_allocated"].notna() & m["total_reserved"].notna()
    t = m[ok.to_numpy()]
    return pd.DataFrame({
        "rank": rank, "device": t["device"].to_numpy(), "time_us": t["ts"].to_numpy() / 1000,
        "allocated_bytes": t["total_allocated"].to_numpy(), "reserved_bytes": t["total_reserved"].to_numpy(),
    }, columns=TIMELINE_COLUMNS)


def peaks(mr: MemoryRecords, rank: int, steps: pd.DataFrame) -> pd.DataFrame:
    m = mr.records
    rows = []
    valid = m[m["total_allocated"].notna().to_numpy()]
    for (dtype, did), g in valid.groupby(["device_type", "device_id"], sort=True):
        at = int(np.argmax(g["total_allocated"].to_numpy()))
        ts = int(g["ts"].iloc[at])
        inside = steps[(steps["ts"] <= ts) & (ts < steps["ts"] + steps["dur"])]
        rows.append({
            "rank": rank, "device": device_names(np.array([dtype]), np.array([did]))[0],
            "peak_allocated_bytes": float(g["total_allocated"].iloc[at]), "peak_time_us": ts / 1000,
            "step": int(inside["step"].iloc[0]) if len(inside) else -1,
            "peak_reserved_bytes": float(g["total_reserved"].max()),
        })
    return pd.DataFrame(rows, columns=PEAK_COLUMNS)


def operator_memory(mr: MemoryRecords, rank: int) -> pd.DataFrame:
    m, nodes = mr
    is_op = nodes["is_op"].to_numpy(bool)
    parent = nodes["parent"].to_numpy(np.int64)
    calls = nodes.loc[is_op & nodes["counted"].to_numpy(bool), "name"].value_counts()
    node = m["node"].to_numpy(np.int64)
    use = node >= 0
    use[use] = is_op[node[use]]  # records inside an operator (a rank may have none)
    r = m[use]
    nbytes = r["bytes"].to_numpy(np.int64)
    alloc = nbytes > 0
    own = pd.DataFrame({"device": r["device"].to_numpy(), "node": r["node"].to_numpy(np.int64),
                        "size": nbytes, "alloc_bytes": np.where(alloc, nbytes, 0),
                        "alloc_count": alloc.astype(np.int64)})
    self_sums = own.groupby(["device", "node"]).sum()
    names = nodes["name"].to_numpy(object)
    rows = []
    levels = child_levels(parent, np.ones(len(parent), bool))  # every device's carry
    for device, table in self_sums.groupby(level="device"):
        values = np.zeros((len(nodes), 3), np.int64)
        values[table.index.get_level_values("node").to_numpy()] = table.to_numpy(np.int64)
        total = carry_up(values, parent, levels)
        ops = np.flatnonzero(is_op & (values.any(axis=1) | total.any(axis=1)))
        frame = pd.DataFrame({"operator": names[ops]})
        for i, col in enumerate(("size_increase_bytes", "allocation_bytes", "allocation_count")):
            frame[col] = total[ops, i]
            frame["self_" + col] = values[ops, i]
        frame = frame.groupby("operator", sort=True).sum().reset_index()
        frame = frame[frame.drop(columns="operator").to_numpy().any(axis=1)]
        frame.insert(0, "device", device)
        rows.append(frame)
    if not rows:
        return pd.DataFrame(columns=OP_COLUMNS)
    out = pd.concat(rows, ignore_index=True)
    out.insert(0, "rank", rank)
    out["calls"] = out["operator"].map(calls).fillna(0).astype(np.int64)
    return out[OP_COLUMNS]


def memory_events(mr: MemoryRecords, rank: int) -> pd.DataFrame:
    m, nodes = mr
    r = m[m["has_addr"].to_numpy()]
    ts = r["ts"].to_numpy(np.int64)
    nbytes = r["bytes"].to_numpy(np.int64)
    addr = r["addr"].to_numpy(np.int64)
    dev = r["device"].to_numpy(object)
    k = len(r)
    # The plugin's pairing, a pass over the events in time order with two dicts (address →
    # allocation, address → unpaired free), computed per address from each event's previous
    # event at its address: the allocation dict holds an address after an allocation and not
    # after a free, so a free pairs with the allocation just before it at its address
    alloc = nbytes > 0
    by_addr = np.lexsort((np.arange(k), addr))
    same = addr[by_addr[1:]] == addr[by_addr[:-1]]
    prev = np.full(k, -1, np.int64)
    prev[by_addr[1:][same]] = by_addr[:-1][same]
    after_alloc = (prev >= 0) & alloc[np.maximum(prev, 0)]
    paired = np.flatnonzero(~alloc & after_alloc)  # rows in the order of their frees
    # still allocated at the end: addresses whose last event allocates, in the dict's order (an
    # address enters it at an allocation after none or a free; another allocation replaces the
    # value in place), that of the first allocation of its last run
    # (by address: the latest such allocation up to an address's last event is of its group)
    last = np.r_[~same, True] if k else np.zeros(0, bool)
    entered = np.where((alloc & ~after_alloc)[by_addr], np.arange(k), -1)
    entered = np.maximum.accumulate(entered) if k else entered
    ends = np.flatnonzero(last & alloc[by_addr])
    unfreed = by_addr[ends][np.argsort(by_addr[entered[ends]], kind="stable")]
    # frees of no allocation: per address the last one, in the order of its first one
    lone = np.flatnonzero(~alloc & ~after_alloc)
    lone = lone[np.lexsort((lone, addr[lone]))]
    group = np.r_[True, addr[lone[1:]] != addr[lone[:-1]]] if len(lone) else np.zeros(0, bool)
    firsts = np.flatnonzero(group)
    lasts = np.r_[firsts[1:] - 1, len(lone) - 1] if len(lone) else firsts
    frees = lone[lasts][np.argsort(lone[firsts], kind="stable")]
    if not len(paired) + len(unfreed) + len(frees):
        out = pd.DataFrame([], columns=EVENT_COLUMNS[1:])
        out.insert(0, "rank", rank)
        return out
    us = ts / 1000
    a = np.concatenate([prev[paired], unfreed])
    nan_u, nan_f = np.full(len(unfreed), np.nan), np.full(len(frees), np.nan)
    out = pd.DataFrame({
        "device": np.concatenate([dev[a], dev[frees]]).tolist(),
        "operator": _operators(r, nodes, a) + [UNKNOWN] * len(frees),
        "bytes": np.concatenate([-nbytes[paired], nbytes[unfreed], -nbytes[frees]]),
        "allocated_us": np.concatenate([us[a], np.full(len(frees), np.nan)]),
        "freed_us": np.concatenate([us[paired], nan_u, us[frees]]),
        "lifetime_us": np.concatenate([(ts[paired] - ts[prev[paired]]).astype(np.float64) / 1000,
                                       nan_u, nan_f]),
        "freed": np.concatenate([np.ones(len(paired), bool), np.zeros(len(unfreed), bool),
                                 np.ones(len(frees), bool)]),
    }, columns=EVENT_COLUMNS[1:])
    out.insert(0, "rank", rank)
    return out


def _operators(r: pd.DataFrame, nodes: pd.DataFrame, rows: np.ndarray) -> list[str]:
    """The allocating operator of each of ``rows`` (positions in ``r``): its node's name,
    ``"<parent> (aten::empty...)"`` for an ``aten::empty*`` inside another operator, and
    ``<unknown>`` outside every operator."""
    names = nodes["name"].to_numpy(object)
    node = r["node"].to_numpy(np.int64)[rows]
    parent = r["parent_node"].to_numpy(np.int64)[rows]
    ok = node >= 0
    ok[ok] = nodes["is_op"].to_numpy(bool)[node[ok]]
    out = np.full(len(rows), UNKNOWN, object)
    out[ok] = names[node[ok]]
    empty = np.flatnonzero(ok & (parent >= 0))
    empty = empty[[name.startswith("aten::empty") for name in out[empty].tolist()]]
    out[empty] = [f"{p} ({name})" for p, name in zip(names[parent[empty]].tolist(),
                                                        out[empty].tolist(), strict=True)]
    return out.tolist()


# What a table needs of the [memory] events, and what is missing without it. PyTorch 1.9 and
# earlier recorded only each event's device and bytes (no address, no allocator totals).
_TOTALS = ("Total Allocated", "total_allocated")
_ADDR = ("Addr", "has_addr")
_OLD_MEMORY_EVENTS = ("the [memory] events carry no {arg} (PyTorch 1.9 and earlier recorded only "
                      "each event's device and bytes): {table}; the operator memory is still "
                      "counted, from the bytes (the TensorBoard plugin shows the same)")


def _rank_part(rt: RankTrace, table, needs: tuple[str, str] | None = None,
               what: str = "") -> tuple[pd.DataFrame | None, str, str | None]:
    """``(table, source, note)``: the rank's table (None without ``[memory]`` events), its file,
    and why the table is empty although the rank has ``[memory]`` events (``needs``: the arg
    and the column it is read into; None: a table the events always give)."""
    m = memory_records(rt)
    if m is None:
        return None, rt.meta.source, None
    note = None
    if needs is not None:
        column = m.records[needs[1]]  # has_addr (bool) or total_allocated (NaN when absent)
        present = column.notna() if column.dtype.kind == "f" else column.astype(bool)
        if not present.any():
            note = _OLD_MEMORY_EVENTS.format(arg=f"'{needs[0]}'", table=what)
    return table(m, rt), rt.meta.source, note


def memory_timeline_rank(rt: RankTrace):
    return _rank_part(rt, lambda m, rt: timeline(m, rt.rank), _TOTALS, "no memory curve")


def memory_peaks_rank(rt: RankTrace):
    return _rank_part(rt, lambda m, rt: peaks(m, rt.rank, rt.profiler_steps()), _TOTALS,
                      "no memory peaks")


def operator_memory_rank(rt: RankTrace):
    return _rank_part(rt, lambda m, rt: operator_memory(m, rt.rank))


def memory_events_rank(rt: RankTrace):
    return _rank_part(rt, lambda m, rt: memory_events(m, rt.rank), _ADDR,
                      "no allocation is paired with its free")


def memory_view_rank(rt: RankTrace) -> tuple[MemoryView | None, str]:
    """One rank's whole memory view (None without ``[memory]`` events) and its source."""
    m = memory_records(rt)
    if m is None:
        return None, rt.meta.source
    view = MemoryView(timeline(m, rt.rank), peaks(m, rt.rank, rt.profiler_steps()),
                      operator_memory(m, rt.rank), memory_events(m, rt.rank))
    return view, rt.meta.source


def combine(parts: Mapping[int, tuple[pd.DataFrame | None, str, str | None]]) -> pd.DataFrame:
    """The ranks' tables joined; ranks without ``[memory]`` events are left out with a warning,
    and ``NoMemoryProfileError`` (saying how to record them) when no rank has any. Ranks whose
    events cannot give the table (PyTorch 1.9 and earlier: no totals, no addresses) are named in
    a warning that says so."""
    missing = {r: part[1] for r, part in parts.items() if part[0] is None}
    tables = [part[0] for part in parts.values() if part[0] is not None]
    if not tables:
        raise NoMemoryProfileError(list(missing), list(missing.values()))
    if missing:
        warnings.warn(f"memory view: rank(s) {list(missing)} left out: no [memory] events "
                      "(recorded without profile_memory=True)", stacklevel=3)
    notes: dict[str, list[int]] = {}
    for r, part in parts.items():
        if part[0] is not None and part[2] is not None:
            notes.setdefault(part[2], []).append(r)
    for note, ranks in notes.items():
        warnings.warn(f"memory view: rank(s) {ranks}: {note}", stacklevel=3)
    return pd.concat(tables, ignore_index=True)


class MemoryReport(NamedTuple):
    """What the report's memory section shows: the curve, the peaks, the operators, the steps."""

    timeline: pd.DataFrame
    peaks: pd.DataFrame
    operators: pd.DataFrame
    steps: pd.DataFrame  # rank, step, start(us), end(us)


REQUIRES = {"memory_timeline": {}, "memory_peaks": {}, "operator_memory": {},
            "profiler_step_table": {}}


def memory_report(results: Mapping[str, object]) -> MemoryReport:
    """The report's memory view from the memory analyses' results (their error re-raised)."""
    for name in ("memory_timeline", "memory_peaks", "operator_memory"):
        if isinstance(results[name], Exception):
            raise results[name]
    steps = results["profiler_step_table"]
    steps = steps if not isinstance(steps, Exception) else pd.DataFrame(
        columns=["rank", "step", "start(us)", "end(us)"])
    return MemoryReport(results["memory_timeline"], results["memory_peaks"],
                        results["operator_memory"], steps[["rank", "step", "start(us)", "end(us)"]])


def key_numbers(result: MemoryReport) -> list[tuple[str, str]]:
    gpu = result.peaks[result.peaks["device"].str.startswith("GPU")]
    if gpu.empty:
        return []
    top = gpu.loc[gpu["peak_allocated_bytes"].idxmax()]
    return [("Peak GPU memory allocated", f"{top['peak_allocated_bytes'] / 2**30:.2f} GiB "
             f"(rank {int(top['rank'])}, {top['device']})")]


def top_operators(result: MemoryReport, top: int = 20) -> pd.DataFrame:
    """The operators that allocate most (``allocation_bytes``), per device, for the page."""
    ops = result.operators.sort_values("self_allocation_bytes", ascending=False, kind="stable")
    return ops.groupby(["rank", "device"], sort=False).head(top).reset_index(drop=True)
