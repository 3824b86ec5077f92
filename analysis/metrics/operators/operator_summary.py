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
- Other GPU work that no operator launched (a custom CUDA extension or a ctypes/CuPy kernel
  launched outside ``torch`` operators; a GPU event whose launching call is not in the trace, when
  the window keeps it: ``gpu_events="all"``) gets a row per launching call and GPU event name,
  ``<launch call>-><kernel>`` (``(no launch call)-><kernel>``): ``calls`` is the number of GPU
  events, CPU times the launch calls' durations (0 without one). So the rows' ``gpu_self_us``
  sum to the GPU time of the rank's kernels, memcpy and memset in the window.

Grouped by ``name`` (the default) or, with ``group_by="name_and_input_shape"``, by the launching
operator's name and its recorded arguments (``record_shapes=True``: ``input_dims``, ``input_types``,
``input_strides``, ``concrete_inputs``, compact JSON as :mod:`analysis.kineto.extras` keeps them;
"" without), as TraceLens's ``unified_perf_summary`` groups its rows. That table is GPU time by
*launcher*: an operator call is counted there only if it launched GPU work itself (``calls`` =
such calls; a graph replay merged with its capture trace has the operator recorded at capture),
``kernels`` lists the GPU events it launched (name and count, most GPU time first), and GPU work
launched outside every operator gets a row per launching call and event name,
``<launch call>-><kernel>`` (``(no launch call)->...`` when no runtime call carries its
correlation id; a graph launch without capture keeps its ``CUDA graph (<launch call>)`` row), so
that the rows' ``gpu_self_us`` sum to the GPU time of the rank's kernels, memcpy and memset. It is
sorted by ``gpu_self_us``. See ``docs/deviations.md`` for where TraceLens's rows differ.

Runtime calls are matched to operators by time on the thread rather than by ``External id``: time
works for every trace vintage, whereas External ids are missing in old traces and shared by
Python-function events in new ones. Nesting is computed with sorts, cumulative sums and
``searchsorted``; there is no per-event Python loop.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.errors import ConfigError
from analysis.kineto.events import cat_mask, kernel_like_mask, name_mask, runtime_mask
from analysis.kineto.model import RankTrace

COLUMNS = ["name", "calls", "cpu_total_us", "cpu_self_us", "gpu_total_us", "gpu_self_us"]
CPU_OP_CATS = ("cpu_op",)
GROUPS = ("name", "name_and_input_shape")
SHAPES = "op_shapes"
SHAPE_COLUMNS = ["input_dims", "input_types", "input_strides", "concrete_inputs"]
SHAPE_TABLE_COLUMNS = ["name", *SHAPE_COLUMNS, *COLUMNS[1:], "kernels"]
NO_LAUNCH_CALL = "(no launch call)"


def extras(options: Mapping[str, object]) -> tuple[str, ...]:
    """The event args the rank step reads: the recorded shapes when grouped by them."""
    return (SHAPES,) if options.get("group_by", "name") == "name_and_input_shape" else ()


def operator_summary_rank(rank_trace: RankTrace, top: int | None = 20,
                          group_by: str = "name") -> pd.DataFrame:
    """One row per CPU operator name (columns ``COLUMNS``; see the module docstring for each metric,
    µs), sorted by ``gpu_total_us`` then ``cpu_self_us``, descending; the first ``top`` rows
    (``None``: all). With ``group_by="name_and_input_shape"``: one row per launching operator
    name and recorded arguments (columns ``SHAPE_TABLE_COLUMNS``, sorted by ``gpu_self_us``)."""
    if group_by not in GROUPS:
        raise ConfigError(f"group_by must be one of {GROUPS}, not {group_by!r}")
    events = rank_trace.events
    if group_by == "name_and_input_shape":
        table = _by_input_shape(events, rank_trace.extras.get(SHAPES),
                                rank_operator_times(rank_trace))
        return table if top is None else table.head(top).reset_index(drop=True)
    ops, call_rows, call_owner = rank_operator_times(rank_trace)
    per_op = pd.concat([ops, graph_launch_times(events)])
    # GPU work that no operator launched, outside graph launches (their rows are above): a row
    # per launching call and GPU event name, ``<call>-><kernel>``, as in the shape table
    unowned = _launched(events, call_rows, call_owner, owned=False)
    graph = unowned["call"].astype(object).fillna("").astype(str).str.endswith(GRAPH_LAUNCH_SUFFIX)
    loose = _without_operator(events, unowned[~graph.to_numpy(bool)])
    if per_op.empty and loose.empty:
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
    if len(loose):
        table = pd.concat([table, loose[COLUMNS]], ignore_index=True) if len(table) else loose[
            COLUMNS].reset_index(drop=True)
    table["calls"] = table["calls"].astype("int64")
    table = table.sort_values(
        ["gpu_total_us", "cpu_self_us", "name"], ascending=[False, False, True], kind="stable"
    )
    if top is not None:
        table = table.head(top)
    return table[COLUMNS].reset_index(drop=True)


def combine(frames: Mapping[int, pd.DataFrame], group_by: str = "name") -> pd.DataFrame:
    """Per-rank ``operator_summary`` tables → one table with a leading ``rank`` column."""
    columns = SHAPE_TABLE_COLUMNS if group_by == "name_and_input_shape" else COLUMNS
    parts = [table.assign(rank=rank)[["rank", *columns]] for rank, table in frames.items()]
    if not parts:
        return pd.DataFrame(columns=["rank", *columns])
    return pd.concat(parts, ignore_index=True)


def _by_input_shape(events: pd.DataFrame, shapes: pd.DataFrame | None,
                    times: tuple[pd.DataFrame, np.ndarray, np.ndarray]) -> pd.DataFrame:
    """The ``group_by="name_and_input_shape"`` table (see the module docstring; ``times``:
    ``_operator_times(events)``)."""
    per_op, call_rows, call_owner = times
    launched = _launched(events, call_rows, call_owner)
    owner = launched["owner"].fillna(-1).to_numpy(np.int64)
    in_op = owner >= 0
    gpu_names = launched["name"].astype(str).to_numpy()
    by_op = pd.DataFrame({"op": owner[in_op], "kernel": gpu_names[in_op],
                          "dur": launched["dur"].to_numpy(np.int64)[in_op]})
    ops = per_op.loc[np.unique(by_op["op"].to_numpy())]  # launchers only
    args = (shapes.reindex(ops.index) if shapes is not None and len(shapes)
            else pd.DataFrame(index=ops.index, columns=SHAPE_COLUMNS))
    ops = ops.assign(**{c: args[c].astype(object).fillna("").astype(str).to_numpy()
                        for c in SHAPE_COLUMNS})
    key = ["name", *SHAPE_COLUMNS]
    ops["name"] = ops["name"].astype(str)
    ops["group"] = ops.groupby(key, sort=False).ngroup()
    by_op["group"] = ops["group"].reindex(by_op["op"].to_numpy()).to_numpy()
    grouped = ops.groupby("group", sort=True)
    table = grouped[key].first().assign(
        calls=grouped.size(),
        cpu_total_us=grouped["cpu_total_ns"].sum() / 1000.0,
        cpu_self_us=grouped["cpu_self_ns"].sum() / 1000.0,
        gpu_total_us=grouped["gpu_total_ns"].sum() / 1000.0,
        gpu_self_us=grouped["gpu_self_ns"].sum() / 1000.0,
        kernels=_kernel_lists(by_op, "group"),
    )
    rows = [table, _without_operator(events, launched[~in_op])]
    table = pd.concat([r for r in rows if len(r)], ignore_index=True) if any(
        len(r) for r in rows) else pd.DataFrame(columns=SHAPE_TABLE_COLUMNS)
    table["calls"] = table["calls"].astype("int64")
    table = table.sort_values(["gpu_self_us", "name"], ascending=[False, True], kind="stable")
    return table[SHAPE_TABLE_COLUMNS].reset_index(drop=True)


def _launched(events: pd.DataFrame, call_rows: np.ndarray, call_owner: np.ndarray,
              owned: bool | None = None) -> pd.DataFrame:
    """Each GPU event (``name``, ``dur``, ``correlation``) with its launching runtime call
    (``call``: its name, ``call_dur``: its duration, NaN when none carries the correlation id)
    and that call's innermost open operator (``owner``: its index label, -1 or NaN when none);
    ``owned``: only the events an operator launched (True) or only the others (False)."""
    gpu = events.loc[kernel_like_mask(events), ["name", "dur", "correlation"]]
    calls = events.loc[call_rows, ["name", "correlation", "dur"]].assign(owner=call_owner)
    calls = calls[calls["correlation"].to_numpy(np.int64) >= 0]
    calls = calls[~calls["correlation"].duplicated()].set_index("correlation")
    launched = gpu.join(calls.rename(columns={"name": "call", "dur": "call_dur"}),
                        on="correlation")
    if owned is None:
        return launched
    in_op = launched["owner"].fillna(-1).to_numpy(np.int64) >= 0
    return launched[in_op if owned else ~in_op]


def _kernel_lists(launched: pd.DataFrame, by: str) -> pd.Series:
    """Per value of ``by``: ``"kernel ×n; ..."`` over the GPU events of ``launched`` (``kernel``,
    ``dur``), most GPU time first."""
    per = launched.groupby([by, "kernel"], sort=False)["dur"].agg(["sum", "size"]).reset_index()
    per = per.sort_values([by, "sum", "kernel"], ascending=[True, False, True], kind="stable")
    text = per["kernel"] + " ×" + per["size"].astype(str)
    return text.groupby(per[by].to_numpy(), sort=True).agg("; ".join)


def _without_operator(events: pd.DataFrame, launched: pd.DataFrame) -> pd.DataFrame:
    """Rows for GPU events no operator launched: ``<launch call>-><kernel>`` per call name and
    event name (``calls`` = events), one ``CUDA graph (<call>)`` row per graph launch call name
    (``calls`` = launches)."""
    if launched.empty:
        return pd.DataFrame(columns=SHAPE_TABLE_COLUMNS)
    call = launched["call"].astype(object).fillna(NO_LAUNCH_CALL).astype(str)
    kernel = launched["name"].astype(str)
    graph = call.str.endswith(GRAPH_LAUNCH_SUFFIX).to_numpy()
    name = np.where(graph, [GRAPH_ROW.format(c) for c in call], call + "->" + kernel)
    call_ns = launched["call_dur"].fillna(0).to_numpy(np.int64)
    part = pd.DataFrame({"name": name, "kernel": kernel.to_numpy(),
                         "dur": launched["dur"].to_numpy(np.int64),
                         "launch": np.where(graph, launched["correlation"].to_numpy(np.int64),
                                            np.arange(len(launched))),
                         # a graph's launch calls are counted once, from graph_launch_times
                         "call_ns": np.where(graph, 0, call_ns)})
    grouped = part.groupby("name", sort=True)
    gpu_us = grouped["dur"].sum() / 1000.0
    graph_calls = graph_launch_times(events)
    cpu_us = (graph_calls.groupby("name")["cpu_total_ns"].sum() / 1000.0
              if len(graph_calls) else pd.Series(dtype=float))
    cpu_us = cpu_us.reindex(gpu_us.index).fillna(0.0) + grouped["call_ns"].sum() / 1000.0
    table = pd.DataFrame({
        "name": gpu_us.index, **{c: "" for c in SHAPE_COLUMNS},
        "calls": grouped["launch"].nunique().to_numpy(),
        "cpu_total_us": cpu_us.to_numpy(), "cpu_self_us": cpu_us.to_numpy(),
        "gpu_total_us": gpu_us.to_numpy(), "gpu_self_us": gpu_us.to_numpy(),
        "kernels": _kernel_lists(part, "name").reindex(gpu_us.index).to_numpy(),
    })
    return table


GRAPH_LAUNCH_SUFFIX = "GraphLaunch"
GRAPH_ROW = "CUDA graph ({})"


def graph_launch_times(events: pd.DataFrame) -> pd.DataFrame:
    """One row per graph launch call that no ``cpu_op`` of its thread encloses, shaped like
    ``operator_times`` (name ``CUDA graph (<call>)``, no parent, depth 0)."""
    is_rt = runtime_mask(events)
    launches = events.loc[is_rt & name_mask(events, lambda s: s.str.endswith(GRAPH_LAUNCH_SUFFIX))]
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
    return _operator_times(events)[0]


def rank_operator_times(rt: RankTrace) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """``_operator_times`` of the rank's events, memoised on the rank (read-only: the operator
    summary, its shape table and the roofline read it)."""
    return rt.memoised("operator_times", lambda: _operator_times(rt.events))


def _operator_times(events: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """``operator_times``, the index labels of the runtime calls, and for each call the index
    label of its innermost open operator (-1: none)."""
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
    call_owner = np.where(attributed, rows[np.maximum(call_parent, 0)], -1) if n_ops else \
        np.full(n_calls, -1, dtype=np.int64)
    table = pd.DataFrame(
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
    return table, calls.index.to_numpy(), call_owner.astype(np.int64)


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
