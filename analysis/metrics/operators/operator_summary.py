"""Per CPU operator: how often it ran, its CPU time, and the GPU time of the kernels it launched.

Definitions (all times in µs, summed over every call of the operator name):

- CPU operators are the ``cpu_op`` events. On each thread (``pid``, ``tid``) they nest by time;
  an operator's *parent* is the innermost operator whose ``[ts, ts + dur)`` contains its start.
- ``cpu_total_us``: the operator's duration. ``cpu_self_us``: its duration minus the durations of
  its direct children. (A name that nests inside itself is counted at each level, as
  ``torch.profiler``'s ``key_averages`` does.)
- A runtime call (``cuda_runtime`` / ``cuda_driver``: ``cudaLaunchKernel``, ``cudaMemcpyAsync``...)
  belongs to the operators of its thread that are open when it starts; it launched the GPU events
  (kernels, memcpy, memset; not sync events, which wait rather than work) that share its
  ``correlation`` id.
- ``gpu_self_us``: GPU time launched by runtime calls whose innermost open operator is this one.
  ``gpu_total_us``: GPU time launched by runtime calls made while the operator was open (its own
  and its descendants'), i.e. the calls on its thread that start within ``[ts, ts + dur)``.

- CUDA/HIP graph launches (``cudaGraphLaunch`` / ``hipGraphLaunch``) that no operator encloses
  (a serving engine replays its graphs from Python) get a row of their own, named
  ``CUDA graph (<launch call>)``: ``calls`` is the number of launches, ``gpu_self_us`` and
  ``gpu_total_us`` the GPU time of their kernels, CPU times the launch calls' durations. With the
  capture traces (``analysis.kineto.cuda_graphs``) those kernels belong to captured operators
  instead.

Runtime calls are matched to operators by time on the thread rather than by ``External id``: time
works for every trace vintage, whereas External ids are missing in old traces and shared by
Python-function events in new ones. Nesting is computed with sorts, cumulative sums and
``searchsorted``; there is no per-event Python loop.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.kineto.events import cat_mask, kernel_like_mask, runtime_mask
from analysis.kineto.model import RankTrace

COLUMNS = ["name", "calls", "cpu_total_us", "cpu_self_us", "gpu_total_us", "gpu_self_us"]
CPU_OP_CATS = ("cpu_op",)


def operator_summary_rank(rank_trace: RankTrace, top: int | None = 20) -> pd.DataFrame:
    """One row per CPU operator name (columns ``COLUMNS``; see the module docstring for each metric,
    µs), sorted by ``gpu_total_us`` then ``cpu_self_us``, descending; the first ``top`` rows
    (``None``: all)."""
    events = rank_trace.events
    per_op = pd.concat([operator_times(events), graph_launch_times(events)])
    if per_op.empty:
        return pd.DataFrame({c: pd.Series(dtype="object" if c == "name" else "float64") for c in COLUMNS})
    grouped = per_op.groupby("name", observed=True, sort=False)
    table = pd.DataFrame(
        {
            "calls": grouped.size(),
            "cpu_total_us": grouped["cpu_total_ns"].sum() / 1000.0,
            "cpu_self_us": grouped["cpu_self_ns"].sum() / 1000.0,
            "gpu_total_us": grouped["gpu_total_ns"].sum() / 1000.0,
            "gpu_self_us": grouped["gpu_self_ns"].sum() / 1000.0,
        }
    ).reset_index()
    table["name"] = table["name"].astype(str)
    table["calls"] = table["calls"].astype("int64")
    table = table.sort_values(
        ["gpu_total_us", "cpu_self_us", "name"], ascending=[False, False, True], kind="stable"
    )
    if top is not None:
        table = table.head(top)
    return table[COLUMNS].reset_index(drop=True)


def combine(frames: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Per-rank ``operator_summary`` tables → one table with a leading ``rank`` column."""
    parts = [table.assign(rank=rank)[["rank", *COLUMNS]] for rank, table in frames.items()]
    if not parts:
        return pd.DataFrame(columns=["rank", *COLUMNS])
    return pd.concat(parts, ignore_index=True)


GRAPH_LAUNCH_SUFFIX = "GraphLaunch"
GRAPH_ROW = "CUDA graph ({})"


def graph_launch_times(events: pd.DataFrame) -> pd.DataFrame:
    """One row per graph launch call that no ``cpu_op`` of its thread encloses, shaped like
    ``operator_times`` (name ``CUDA graph (<call>)``, no parent, depth 0)."""
    is_rt = runtime_mask(events)
    names = events["name"].astype(str)
    launches = events.loc[is_rt & names.str.endswith(GRAPH_LAUNCH_SUFFIX).to_numpy()]
    empty = pd.DataFrame(columns=["name", "parent", "depth", "cpu_total_ns", "cpu_self_ns",
                                  "gpu_total_ns", "gpu_self_ns"])
    if launches.empty:
        return empty
    ops = events.loc[cat_mask(events, CPU_OP_CATS)]
    gpu = events.loc[kernel_like_mask(events)]
    gpu_by_corr = gpu.groupby("correlation", sort=False)["dur"].sum()
    enclosed = np.zeros(len(launches), dtype=bool)
    call_ts = launches["ts"].to_numpy(np.int64)
    for (pid, tid), same in ops.groupby(["pid", "tid"], sort=False, observed=True):
        on_thread = np.flatnonzero((launches["pid"].to_numpy() == pid)
                                   & (launches["tid"].to_numpy() == tid))
        if not len(on_thread):
            continue
        # an operator of the thread is open at t iff the latest end among those started by t
        # lies after t
        same = same.sort_values("ts", kind="stable")
        starts = same["ts"].to_numpy(np.int64)
        reach = np.maximum.accumulate(starts + same["dur"].to_numpy(np.int64))
        pos = np.searchsorted(starts, call_ts[on_thread], side="right") - 1
        enclosed[on_thread] = (pos >= 0) & (reach[np.maximum(pos, 0)] > call_ts[on_thread])
    if enclosed.all():
        return empty
    rows = launches.loc[~enclosed]
    gpu_ns = rows["correlation"].map(gpu_by_corr).fillna(0).to_numpy(dtype=np.int64)
    return pd.DataFrame(
        {
            "name": [GRAPH_ROW.format(n) for n in rows["name"].astype(str)],
            "parent": -1,
            "depth": 0,
            "cpu_total_ns": rows["dur"].to_numpy(np.int64),
            "cpu_self_ns": rows["dur"].to_numpy(np.int64),
            "gpu_total_ns": gpu_ns,
            "gpu_self_ns": gpu_ns,
        },
        index=rows.index,
    )


def operator_times(events: pd.DataFrame) -> pd.DataFrame:
    """One row per ``cpu_op`` event (indexed like ``events``): ``name``, ``parent`` (index label
    of the innermost enclosing operator, -1 at the top), ``depth`` (operators enclosing it),
    ``cpu_total_ns``, ``cpu_self_ns``, ``gpu_total_ns``, ``gpu_self_ns`` (see the module
    docstring; nanoseconds)."""
    is_op = cat_mask(events, CPU_OP_CATS)
    is_rt = runtime_mask(events) & ~is_op
    ops = events.loc[is_op]
    calls = events.loc[is_rt]
    n_ops, n_calls = len(ops), len(calls)

    # GPU work launched by each runtime call, joined on correlation id
    gpu = events.loc[kernel_like_mask(events)]
    gpu_by_corr = gpu.groupby("correlation", sort=False)["dur"].sum()
    call_corr = calls["correlation"].to_numpy(np.int64)
    call_gpu = calls["correlation"].map(gpu_by_corr).fillna(0).to_numpy(dtype=np.int64)
    call_gpu = np.where(call_corr >= 0, call_gpu, 0)  # -1 means "no correlation id"

    ts = np.concatenate([ops["ts"].to_numpy(np.int64), calls["ts"].to_numpy(np.int64)])
    dur = np.concatenate([ops["dur"].to_numpy(np.int64), calls["dur"].to_numpy(np.int64)])
    pid = np.concatenate([ops["pid"].to_numpy(np.int64), calls["pid"].to_numpy(np.int64)])
    tid = np.concatenate([ops["tid"].to_numpy(np.int64), calls["tid"].to_numpy(np.int64)])
    pid_code, _ = pd.factorize(pid)
    tid_code, _ = pd.factorize(tid)
    thread = pid_code.astype(np.int64) * (tid_code.max(initial=0) + 1) + tid_code
    item = np.arange(n_ops + n_calls)

    depth, (start_pos, end_pos, item_pos), parent = _nest(thread, ts, dur, item, n_ops)

    # GPU time of the runtime calls: self → their innermost operator; total → every open operator,
    # i.e. the calls placed between the operator's start and end in the sweep order.
    call_parent = parent[n_ops:]
    attributed = call_parent >= 0
    gpu_self = np.bincount(call_parent[attributed], weights=call_gpu[attributed], minlength=n_ops)
    sweep_gpu = np.zeros(n_ops * 2 + n_calls + 1, dtype=np.int64)
    sweep_gpu[item_pos[n_ops:] + 1] = call_gpu
    cumulative = np.cumsum(sweep_gpu)
    gpu_total = cumulative[end_pos + 1] - cumulative[start_pos + 1]

    op_parent = parent[:n_ops]
    op_dur = dur[:n_ops]
    nested = op_parent >= 0
    children_dur = np.bincount(op_parent[nested], weights=op_dur[nested], minlength=n_ops)
    rows = ops.index.to_numpy()
    return pd.DataFrame(
        {
            "name": ops["name"].to_numpy(),
            "parent": np.where(nested, rows[np.maximum(op_parent, 0)], -1),
            "depth": depth[:n_ops],
            "cpu_total_ns": op_dur,
            "cpu_self_ns": op_dur - children_dur.astype(np.int64),
            "gpu_total_ns": gpu_total.astype(np.int64),
            "gpu_self_ns": gpu_self.astype(np.int64),
        },
        index=ops.index,
    )


def _nest(thread, ts, dur, item, n_ops):
    """Sweep each thread's operator starts/ends and runtime-call starts in time order.

    Returns ``depth`` (number of operators open at each item's start, itself excluded),
    ``(op_start_pos, op_end_pos, item_pos)`` positions in the sweep, and ``parent`` (item id of the
    innermost open operator, -1 if none) for every item: operators first, then runtime calls.
    """
    n = len(ts)
    is_op = item < n_ops
    op_items = item[is_op]
    # Sweep points: every item's start, plus each operator's end. At equal time an end comes
    # before a start (touching operators are siblings, not nested); among starts the longer one
    # first (it encloses the shorter); a zero-length operator ends right after it starts.
    zero = dur[op_items] == 0
    time = np.concatenate([ts, ts[op_items] + dur[op_items]])
    kind = np.concatenate([np.ones(n, np.int8), np.where(zero, 1, 0).astype(np.int8)])
    longer_first = np.concatenate([-dur, np.zeros(len(op_items), np.int64)])
    who = np.concatenate([item, op_items])
    after_start = np.concatenate([np.zeros(n, np.int8), np.ones(len(op_items), np.int8)])
    step = np.concatenate([is_op.astype(np.int64), -np.ones(len(op_items), np.int64)])
    th = np.concatenate([thread, thread[op_items]])
    order = np.lexsort((after_start, who, longer_first, kind, time, th))

    sweep_pos = np.empty(len(order), dtype=np.int64)
    sweep_pos[order] = np.arange(len(order))
    item_pos = sweep_pos[:n]
    end_pos = sweep_pos[n:]
    open_after = np.cumsum(step[order])
    depth = (open_after - step[order])[item_pos]  # open operators just before each start

    # The innermost open operator at an item's start is the latest operator start at depth - 1
    # before it: search a (depth, position) key among operator starts.
    span = len(order) + 1
    op_key = depth[:n_ops] * span + item_pos[:n_ops]
    key_order = np.argsort(op_key, kind="stable")
    sorted_keys = op_key[key_order]
    query = (depth - 1) * span + item_pos
    found = np.searchsorted(sorted_keys, query, side="right") - 1
    candidate = key_order[np.maximum(found, 0)] if n_ops else np.zeros(n, np.int64)
    ok = (depth >= 1) & (found >= 0)
    if n_ops:
        ok &= depth[candidate] == depth - 1
    parent = np.where(ok, candidate, -1)
    return depth, (item_pos[:n_ops], end_pos, item_pos), parent
