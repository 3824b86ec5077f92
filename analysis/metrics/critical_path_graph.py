"""The critical-path graph of one rank's window: nodes are event starts and ends, edges carry time.

The rules are HolisticTraceAnalysis 0.5.0's (``hta/analyzers/critical_path_analysis.py``), built
here with array operations instead of per-event Python objects:

- **Window**: CPU events (``stream == -1``) with ``dur > 0`` that start inside the annotation's
  ``[start, end]`` (HTA; the default: ``[start, end)``), plus the GPU events they launched (and, as HTA does, every ``Stream Wait Event``).
- **Nodes**: a start and an end node for every CPU operator / runtime / driver call and every GPU
  event on a stream, ordered by time.
- **Operator edges** (``critical_path_operator``): on each CPU thread, the call stack is rebuilt
  (HTA's ordering of starts and ends) and walked depth first; consecutive start/end points of
  operators on the stack are linked, weight = the time between them (zero into the end of a blocking
  call such as ``cudaStreamSynchronize``: that time is the GPU's). Each edge is attributed to the
  operator it lies in.
- **Dependency edges** (zero weight): the end of one top-level operator to the start of the next on
  the same thread.
- **GPU edges**: each kernel's own span; a **launch delay** edge from the launching runtime call
  when the stream's queue was empty at the launch and the previous kernel had finished (HTA also
  requires that nothing else was queued by the time the kernel started); otherwise a
  **kernel-kernel** edge from the previous kernel on the stream (weight = the gap).
- **Sync edges** (zero weight): the last kernel of a stream (``Stream Sync``) or of every stream
  (``Context Sync``) to the end of the synchronising runtime call; a kernel recorded by
  ``cudaEventRecord`` to ``cudaEventSynchronize`` (``Event Sync``) or to the first kernel launched
  after ``cudaStreamWaitEvent`` on the waiting stream (``Stream Wait Event``).

``hta_compat=True`` keeps HTA's choices exactly; ``False`` (the default analysis) fixes what HTA gets
wrong, see ``docs/deviations.md``: every kernel of a multi-kernel launch (``cudaGraphLaunch``) is
kept and linked, the launch APIs are the ``kernel_launch_stats`` default preset (driver API,
cooperative and ROCm launches), a blocking call without a CUDA sync event (ROCm traces have none)
gets sync edges from the GPU events it waited for, and a launch whose runtime
call is outside the graph falls back to a kernel-kernel edge instead of failing.

All times are integer nanoseconds; weights can be negative here (the path clips them to 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.kineto.events import DEVICE_SYNC_NAMES, gpu_mask
from analysis.kineto.model import RankTrace
from analysis.metrics.kernel_launch_stats import DEFAULT_LAUNCH_APIS
from analysis.metrics.timebase import Rounding, event_bounds_ns

EDGE_TYPES = (
    "critical_path_operator",
    "critical_path_dependency",
    "critical_path_kernel_launch_delay",
    "critical_path_kernel_kernel_delay",
    "critical_path_sync_dependency",
)
OPERATOR, DEPENDENCY, LAUNCH, KERNEL_KERNEL, SYNC = range(5)

# hta/common/trace_symbol_table.py get_runtime_launch_events_query, HTA 0.5.0
HTA_LAUNCH_CALLS = (
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync",
    "cudaMemsetAsync", "runFunction - job_prep_and_submit_for_execution", "hipLaunchKernel",
    "hipExtModuleLaunchKernel", "hipMemcpyAsync", "hipMemsetAsync", "hipMemcpyWithStream",
)  # fmt: skip
DEFAULT_LAUNCH_CALLS = tuple(
    dict.fromkeys(HTA_LAUNCH_CALLS + DEFAULT_LAUNCH_APIS.kernel + DEFAULT_LAUNCH_APIS.memory)
)
# CPGraph.BLOCKING_SYNC_CALLS, HTA 0.5.0
HTA_BLOCKING_CALLS = (
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery", "cudaEventSynchronize",
    "cudaMemcpy", "cudaMemcpyAsync",
)  # fmt: skip
DEFAULT_BLOCKING_CALLS = HTA_BLOCKING_CALLS + (
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cuMemcpy",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventQuery", "hipEventSynchronize",
    "hipMemcpy", "hipMemcpyAsync", "hipMemcpyWithStream",
)  # fmt: skip
_CPU_NODE_CATS = ("cpu_op", "cuda_runtime", "cuda_driver")


@dataclass
class CPGraphArrays:
    """Nodes and edges of one window's graph (positions into ``events`` are row positions)."""

    events: pd.DataFrame  # the rank's event table (the analysed window)
    start: np.ndarray  # per event, ns (rounded as asked)
    end: np.ndarray
    node_event: np.ndarray  # per node: row position of its event
    node_ts: np.ndarray  # per node: ns
    node_is_start: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge_weight: np.ndarray  # ns, may be negative
    edge_type: np.ndarray  # int8 code into EDGE_TYPES
    edge_event: np.ndarray  # row position of the attributed event, -1 for none
    window: tuple[int, int]
    notes: dict[str, int] = field(default_factory=dict)  # counts of dropped/repaired things


def _last_by_key(keys: np.ndarray, values: np.ndarray) -> pd.Series:
    """{key: the last value (in order) with that key}."""
    s = pd.Series(values, index=keys)
    return s[~s.index.duplicated(keep="last")]


@dataclass
class RankContext:
    """What the graph needs from a whole rank, computed once for all of its windows (HTA also
    computes queue lengths and event-record matches on the whole trace, not the window)."""

    ev: pd.DataFrame
    hta_compat: bool
    start: np.ndarray  # ns
    end: np.ndarray
    stream: np.ndarray
    corr: np.ndarray
    is_cpu_node_cat: np.ndarray
    is_swe: np.ndarray  # "Stream Wait Event"
    sync_kind: np.ndarray  # per row: 0, or 1..4 = Stream Wait Event, Event Sync, Stream/Context Sync
    on_device_sync: np.ndarray  # stream != -1 or a device-level sync name
    blocking: np.ndarray
    gpu_to_cpu: np.ndarray
    cpu_to_gpu: np.ndarray
    launcher: np.ndarray  # per GPU event: the launch call linked by a launch edge, -1 if none
    launch_ok: np.ndarray  # per GPU event: launched onto an idle stream (see _launch_info)
    record_src: dict[int, int]
    wait_dest: dict[int, int]
    wait_record: np.ndarray
    # default analysis: blocking calls without a CUDA sync event (ROCm, cudaMemcpy) -> the GPU
    # events they waited for (see _inferred_waits)
    inferred_waits: dict[int, list[int]] = field(default_factory=dict)


_SYNC_KINDS = {"Stream Wait Event": 1, "Event Sync": 2, "Stream Sync": 3, "Context Sync": 4}


def _name_mask(names: pd.Series, wanted) -> np.ndarray:
    """``names.isin(wanted)`` through the categories (names are categorical in the model)."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        cats = np.asarray(names.cat.categories.astype(str))
        hit = np.append(np.isin(cats, list(wanted)), False)
        return hit[names.cat.codes.to_numpy()]
    return names.astype(str).isin(list(wanted)).to_numpy()


def rank_context(rt: RankTrace, *, hta_compat: bool, rounding: Rounding = "exact") -> RankContext:
    """The rank-wide arrays behind every window's graph."""
    ev = rt.events
    n = len(ev)
    start, end = event_bounds_ns(
        ev["ts"].to_numpy(), ev["dur"].to_numpy(), rounding,
        float_timestamps=rt.meta.float_timestamps,
    )  # fmt: skip
    stream = ev["stream"].to_numpy()
    corr = ev["correlation"].to_numpy()
    names = ev["name"]
    pos = np.arange(n)
    # correlation: CPU call <-> GPU event (HTA's index_correlation; the last match wins)
    is_gpu = gpu_mask(ev) if n else np.zeros(0, bool)
    has_corr = corr != -1
    cpu_c, gpu_c = pos[~is_gpu & has_corr], pos[is_gpu & has_corr]
    gpu_to_cpu = np.full(n, -1)
    cpu_to_gpu = np.full(n, -1)
    if len(cpu_c) and len(gpu_c):
        m = _last_by_key(corr[cpu_c], cpu_c)
        gpu_to_cpu[gpu_c] = m.reindex(corr[gpu_c]).fillna(-1).to_numpy(np.int64)
        m = _last_by_key(corr[gpu_c], gpu_c)
        cpu_to_gpu[cpu_c] = m.reindex(corr[cpu_c]).fillna(-1).to_numpy(np.int64)
    sync_kind = np.zeros(n, np.int8)
    for kind_name, code in _SYNC_KINDS.items():
        sync_kind[_name_mask(names, [kind_name])] = code
    sync_kind[~_name_mask(ev["cat"], ["cuda_sync"])] = 0
    launch_calls = HTA_LAUNCH_CALLS if hta_compat else DEFAULT_LAUNCH_CALLS
    is_launch = ~is_gpu & _name_mask(names, launch_calls) & (cpu_to_gpu >= 0)
    ctx = RankContext(
        ev=ev, hta_compat=hta_compat, start=start, end=end, stream=stream, corr=corr,
        is_cpu_node_cat=_name_mask(ev["cat"], _CPU_NODE_CATS),
        is_swe=_name_mask(names, ["Stream Wait Event"]), sync_kind=sync_kind,
        on_device_sync=(stream != -1) | _name_mask(names, DEVICE_SYNC_NAMES),
        blocking=_name_mask(names, HTA_BLOCKING_CALLS if hta_compat else DEFAULT_BLOCKING_CALLS),
        gpu_to_cpu=gpu_to_cpu, cpu_to_gpu=cpu_to_gpu, launcher=np.full(n, -1),
        launch_ok=np.zeros(n, bool), record_src={}, wait_dest={},
        wait_record=ev["wait_on_record"].to_numpy() if "wait_on_record" in ev else np.full(n, -1),
    )  # fmt: skip
    if n:
        _launch_info(ctx, is_launch, names)
    if n and not hta_compat:
        _inferred_waits(ctx)
    return ctx


def _inferred_waits(ctx: RankContext) -> None:
    """Blocking calls that have no CUDA sync event (ROCm traces have none; a synchronous memcpy
    neither): the call waited for the GPU events it launched itself, or else for the last GPU
    event of each stream that ended while it ran. Those get a sync edge into the call's end; a
    blocking call that waited for nothing is not blocking (its time is the CPU's)."""
    ev, start, end, stream = ctx.ev, ctx.start, ctx.end, ctx.stream
    is_sync_event = _name_mask(ev["cat"], ["cuda_sync"]) | (ctx.sync_kind > 0)
    partner = ctx.cpu_to_gpu
    has_sync = (partner >= 0) & is_sync_event[np.maximum(partner, 0)]
    calls = np.flatnonzero(ctx.blocking & (stream == -1) & ~has_sync)
    work = np.flatnonzero((stream != -1) & ~is_sync_event & (ctx.corr != -1))
    by_stream = {s: work[stream[work] == s] for s in np.unique(stream[work]).tolist()}
    by_stream = {s: w[np.argsort(end[w], kind="stable")] for s, w in by_stream.items()}
    corr = ctx.corr
    for c in calls.tolist():
        c0, c1 = start[c], end[c]
        if partner[c] >= 0:  # it ran GPU work itself (a synchronous memcpy)
            own = work[(corr[work] == corr[c])]
            src = [g for g in own.tolist() if c0 < end[g] <= c1]
        else:
            src = []
            for w in by_stream.values():
                j = int(np.searchsorted(end[w], c1, side="right")) - 1
                if j >= 0 and end[w[j]] > c0:
                    src.append(int(w[j]))
        if src:
            ctx.inferred_waits[c] = src
        else:
            ctx.blocking[c] = False


def build_graph(ctx: RankContext, window: tuple[int, int]) -> CPGraphArrays:
    """The critical-path graph of a rank's events in ``window`` (ns)."""
    ev, start, end, stream = ctx.ev, ctx.start, ctx.end, ctx.stream
    n = len(ev)
    pos = np.arange(n)
    notes: dict[str, int] = {}
    w0, w1 = window
    # HTA keeps events starting exactly at the window's end (the next step's first operator);
    # the default leaves them to the next step
    in_window = (start <= w1) if ctx.hta_compat else (start < w1)
    keep_cpu = (stream == -1) & (start >= w0) & in_window & (end - start > 0)
    keep = keep_cpu.copy()
    on_stream = stream != -1
    if ctx.hta_compat:
        launched = ctx.cpu_to_gpu[keep_cpu & (ctx.cpu_to_gpu >= 0)]
        keep[launched[on_stream[launched]]] = True
        keep |= on_stream & ctx.is_swe
    else:
        launcher = ctx.gpu_to_cpu
        keep |= on_stream & (launcher >= 0) & keep_cpu[np.maximum(launcher, 0)]

    # nodes: a start and an end per operator / runtime call / GPU event on a stream, by time
    is_node = keep & (ctx.is_cpu_node_cat | (on_stream & (ctx.corr != -1)))
    node_pos = pos[is_node]
    k = len(node_pos)
    all_ts = np.concatenate([start[node_pos], end[node_pos]])
    order = np.argsort(all_ts, kind="stable")
    node_event = np.concatenate([node_pos, node_pos])[order]
    node_is_start = np.concatenate([np.ones(k, bool), np.zeros(k, bool)])[order]
    node_ts = all_ts[order]
    start_node = np.full(n, -1)
    end_node = np.full(n, -1)
    ids = np.arange(2 * k)
    start_node[node_event[node_is_start]] = ids[node_is_start]
    end_node[node_event[~node_is_start]] = ids[~node_is_start]

    cpu_edges = _cpu_edges(ev, pos[keep], start, end, stream, is_node, ctx.blocking,
                           start_node, end_node, node_ts)  # fmt: skip
    gpu_edges = _gpu_edges(ctx, keep, start_node, end_node, node_ts, node_event, notes)
    src, dst, w, typ, attr = (np.concatenate([a, b]) for a, b in zip(cpu_edges, gpu_edges, strict=False))
    return CPGraphArrays(
        events=ev, start=start, end=end, node_event=node_event, node_ts=node_ts,
        node_is_start=node_is_start, edge_src=src, edge_dst=dst, edge_weight=w,
        edge_type=typ.astype(np.int8), edge_event=attr, window=(w0, w1), notes=notes,
    )  # fmt: skip


def _cpu_edges(ev, rows, start, end, stream, is_node, blocking, start_node, end_node, node_ts):
    """Operator and dependency edges from each CPU thread's call stack (see the module docstring).

    HTA sorts a thread's starts and ends (same time: ends first; starts longest first; ends
    shortest first), pushes on start and pops the top on end, and walks the resulting tree depth
    first. Preorder is the start order; a node is exited when the next preorder node is not deeper.
    """
    empty = tuple(np.zeros(0, np.int64) for _ in range(5))
    if len(rows) == 0:
        return empty
    pid = ev["pid"].to_numpy()[rows]
    tid = ev["tid"].to_numpy()[rows]
    by_thread = np.lexsort((tid, pid))  # thread ids in (pid, tid) order, as pandas' groupby
    new_thread = np.append(True, (np.diff(pid[by_thread]) != 0) | (np.diff(tid[by_thread]) != 0))
    grp = np.empty(len(rows), np.int64)
    grp[by_thread] = np.cumsum(new_thread) - 1
    # a thread is a CPU call stack when all its kept events have stream < 0 (HTA's device type)
    cpu_thread = pd.Series(stream[rows] < 0).groupby(grp).transform("all").to_numpy()
    rows, grp = rows[cpu_thread], grp[cpu_thread]
    if len(rows) == 0:
        return empty
    m = len(rows)
    s, e = start[rows], end[rows]
    d = e - s
    # points: START (type 1) and END (type 0) of each row
    p_row = np.concatenate([np.arange(m), np.arange(m)])
    p_start = np.concatenate([np.ones(m, bool), np.zeros(m, bool)])
    p_time = np.concatenate([s, e])
    p_grp = np.concatenate([grp, grp])
    p_dur = np.concatenate([d, d])
    p_idx = np.concatenate([rows, rows])
    k1 = np.where(p_start, -p_dur, p_dur)
    k2 = np.where(p_start, p_idx, -p_idx)
    order = np.lexsort((k2, k1, p_start, p_time, p_grp))
    p_row, p_start, p_grp = p_row[order], p_start[order], p_grp[order]
    delta = np.where(p_start, 1, -1)
    depth_after = _cumsum_by_group(delta, p_grp)
    level = (depth_after - 1)[p_start]  # stack position of each pushed row (0 = under the root)
    seq = np.flatnonzero(p_start)  # preorder: starts in sorted order
    pre_row, pre_grp = p_row[seq], p_grp[seq]

    # the most recent start at (group, level) at or before a preorder position
    lmax = int(level.max()) + 2
    key = (pre_grp.astype(np.int64) * lmax + level) * (len(seq) + 1) + np.arange(len(seq))
    key_order = np.argsort(key, kind="stable")
    sorted_key = key[key_order]

    def last_at(g, lev, at):
        q = (g.astype(np.int64) * lmax + lev) * (len(seq) + 1) + at
        j = np.searchsorted(sorted_key, q, side="right") - 1
        hit = (j >= 0) & (sorted_key[np.maximum(j, 0)] // (len(seq) + 1) == g * lmax + lev)
        return np.where(hit, key_order[np.maximum(j, 0)], -1)

    at = np.arange(len(seq))
    parent_pre = np.where(level > 0, last_at(pre_grp, level - 1, at), -1)
    parent_row = np.where(parent_pre >= 0, pre_row[np.maximum(parent_pre, 0)], -1)
    parent_event = np.where(parent_row >= 0, rows[np.maximum(parent_row, 0)], -1)  # per preorder

    # Euler tour: after preorder node i, exit levels level[i] .. level[next] (0 after the last)
    nxt_level = np.append(level[1:], 0)
    nxt_level[np.append(pre_grp[1:] != pre_grp[:-1], True)] = 0
    n_exit = level - nxt_level + 1
    ex_src = np.repeat(at, n_exit)
    ex_k = np.arange(len(ex_src)) - np.repeat(np.cumsum(n_exit) - n_exit, n_exit)
    ex_level = level[ex_src] - ex_k
    ex_pre = last_at(pre_grp[ex_src], ex_level, ex_src)
    # the walk: (preorder pos, sub-order): enter at sub 0, exits at 1, 2, ...
    w_pre = np.concatenate([at, ex_pre])
    w_major = np.concatenate([at, ex_src])
    w_minor = np.concatenate([np.zeros(len(at), np.int64), ex_k + 1])
    w_enter = np.concatenate([np.ones(len(at), bool), np.zeros(len(ex_pre), bool)])
    worder = np.lexsort((w_minor, w_major))
    w_pre, w_enter = w_pre[worder], w_enter[worder]
    w_event = rows[pre_row[w_pre]]
    w_grp = pre_grp[w_pre]
    w_parent = parent_event[w_pre]
    # keep only graph nodes (operators, runtime calls): the callbacks skip everything else
    keep = is_node[w_event]
    w_event, w_enter, w_grp, w_parent = w_event[keep], w_enter[keep], w_grp[keep], w_parent[keep]
    if len(w_event) < 2:
        return empty
    w_node = np.where(w_enter, start_node[w_event], end_node[w_event])
    op_depth = _cumsum_by_group(np.where(w_enter, 1, -1), w_grp)
    a, b = np.arange(len(w_event) - 1), np.arange(1, len(w_event))
    same = w_grp[a] == w_grp[b]
    a, b = a[same], b[same]
    is_op = op_depth[a] > 0
    src, dst = w_node[a], w_node[b]
    weight = node_ts[dst] - node_ts[src]
    weight[~is_op | (~w_enter[b] & blocking[w_event[b]])] = 0
    attr = np.where(
        w_enter[a], w_event[a], np.where(~w_enter[b], w_event[b], w_parent[a])
    )
    attr[~is_op] = -1
    typ = np.where(is_op, OPERATOR, DEPENDENCY)
    return src, dst, weight, typ, attr


def _cumsum_by_group(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Running sum of ``values`` restarting at each change of ``groups`` (groups are contiguous)."""
    c = np.cumsum(values)
    first = np.flatnonzero(np.append(True, groups[1:] != groups[:-1]))
    base = np.repeat(c[first] - values[first], np.diff(np.append(first, len(values))))
    return c - base


def _launch_pairs(ev, is_launch, corr, stream):
    """(runtime position, GPU position) for each GPU event on a stream launched by a launch call."""
    r = np.flatnonzero(is_launch)
    g = np.flatnonzero(stream != -1)
    left = pd.DataFrame({"r": r, "corr": corr[r]})
    right = pd.DataFrame({"g": g, "corr": corr[g]})
    pairs = left.merge(right, on="corr", how="inner", sort=False)
    return pairs["r"].to_numpy(), pairs["g"].to_numpy()


def _launch_info(ctx: RankContext, is_launch: np.ndarray, names: pd.Series) -> None:
    """Fill ``ctx`` with the launch links, idle-stream launches and event-record matches.

    Queue length per stream (HTA's ``TraceCounters``): +1 at each launch call per GPU event it
    launched, -1 when a GPU event starts. A launch edge needs an empty queue just before the launch
    and the GPU event to be the first its call ran on that stream (HTA: and nothing else queued by
    the time it starts).
    """
    ev, start, stream, corr = ctx.ev, ctx.start, ctx.stream, ctx.corr
    pid = ev["pid"].to_numpy()
    tid = ev["tid"].to_numpy()
    pr, pg = _launch_pairs(ev, is_launch, corr, stream)
    if ctx.hta_compat:  # the graph links a launch call to one GPU event only (index_correlation)
        single = ctx.cpu_to_gpu[pr] == pg
        gr_r, gr_g = pr[single], pg[single]
    else:
        gr_r, gr_g = pr, pg
    # queue length per stream: +1 at each launch (per GPU event launched), -1 at each GPU start
    g_rows = np.unique(pg)  # each launched GPU event once, in file order
    q = pd.DataFrame({
        "stream": np.concatenate([stream[pg], stream[g_rows]]),
        "ts": np.concatenate([start[pr], start[g_rows]]),
        "kind": np.concatenate([np.zeros(len(pg), np.int8), np.ones(len(g_rows), np.int8)]),
        "delta": np.concatenate([np.ones(len(pg), np.int64), -np.ones(len(g_rows), np.int64)]),
        "r": np.concatenate([pr, np.full(len(g_rows), -1)]),
        "g": np.concatenate([pg, g_rows]),
    })  # fmt: skip
    if ctx.hta_compat:
        # HTA sorts launches then GPU events by time with an unstable quicksort: ties (a launch
        # at the very time a kernel starts) fall as that sort leaves them
        q = q.iloc[np.argsort(q["ts"].to_numpy(), kind="quicksort")]
        q = q.iloc[np.argsort(q["stream"].to_numpy(), kind="stable")]
    else:  # at equal times, launches first
        q = q.sort_values(["stream", "ts", "kind"], kind="stable")
    q["queue"] = q.groupby("stream", sort=False)["delta"].cumsum()
    inc, dec = q[q["kind"] == 0], q[q["kind"] == 1]
    # per (runtime, stream): queue before its first launch on the stream, and its GPU events there
    per_rs = inc.groupby(["r", "stream"], sort=False).agg(first_q=("queue", "first"),
                                                         n_own=("queue", "size"))  # fmt: skip
    q_gpu = _last_by_key(dec["g"].to_numpy(), dec["queue"].to_numpy())
    launch_ok = ctx.launch_ok
    if len(gr_g):
        rs = pd.MultiIndex.from_arrays([gr_r, stream[gr_g]])
        info = per_rs.reindex(rs)
        q_before = info["first_q"].to_numpy() - 1
        n_own = info["n_own"].to_numpy()
        first_own = (
            pd.DataFrame({"r": pr, "s": stream[pg], "ts": start[pg], "g": pg})
            .sort_values("ts", kind="stable").drop_duplicates(["r", "s"])["g"].to_numpy()
        )  # fmt: skip
        is_first = np.isin(gr_g, first_own)
        qg = q_gpu.reindex(gr_g).to_numpy()
        launch_ok[gr_g] = (q_before == 0) & is_first
        if ctx.hta_compat:  # HTA also wants nothing else queued by the time the kernel starts
            launch_ok[gr_g] &= qg == n_own - 1
    ctx.launcher[gr_g] = gr_r

    # cudaEventRecord -> the GPU event it records (the last launched before it on its stream)
    ctx.record_src = _event_record_sources(ev, names, corr, start, stream, pid, gr_r, gr_g)
    # cudaStreamWaitEvent -> the first GPU event launched after it on the waiting stream
    ctx.wait_dest = _stream_wait_destinations(ctx.is_swe, start, stream, pid, tid, ctx.gpu_to_cpu, gr_r, gr_g)



def _gpu_edges(ctx: RankContext, keep, start_node, end_node, node_ts, node_event, notes):
    """Kernel, launch-delay, kernel-kernel and sync edges. HTA walks the window's GPU events in
    time order (sync events by their end), keeping the last kernel of each stream; here the kernels
    are handled all at once (a kernel's "last kernel" is its predecessor on the stream in that
    order) and only the sync events one by one. Edges come out in HTA's insertion order (it decides
    ties in the longest path)."""
    start, end, stream = ctx.start, ctx.end, ctx.stream
    rows = np.flatnonzero(keep & ctx.on_device_sync & (ctx.corr != -1))
    is_sync = _name_mask(ctx.ev["cat"], ["cuda_sync"])[rows]
    order = np.argsort(np.where(is_sync, end[rows], start[rows]), kind="stable")
    rows, is_sync = rows[order], is_sync[order]
    it = np.arange(len(rows))  # position in the walk
    # kernels: the previous kernel on the same stream in the walk
    k_it = it[~is_sync]
    kr = rows[k_it]
    k_stream = stream[kr]
    by_stream = np.lexsort((k_it, k_stream))
    prev = np.full(len(kr), -1)
    same = np.append(False, k_stream[by_stream][1:] == k_stream[by_stream][:-1])
    prev[by_stream[same]] = by_stream[np.flatnonzero(same) - 1]
    last = np.where(prev >= 0, end_node[kr[np.maximum(prev, 0)]], -1)

    edges: list[tuple] = []  # (walk position, sub-order, src, dst, type, attributed event)
    kernel_sync = _walk_sync_events(ctx, rows, is_sync, it, kr, k_it, k_stream, end_node, edges)

    # the kernels' own spans, cross-stream waits, then a launch or a kernel-kernel edge
    s_node, e_node = start_node[kr], end_node[kr]
    src_k = np.array([kernel_sync.get(j, -1) for j in k_it.tolist()], dtype=np.int64)
    sync_end = np.where(src_k >= 0, end_node[np.maximum(src_k, 0)], -1)
    has_sync = sync_end >= 0
    r = ctx.launcher[kr]
    r_ts = np.where(r >= 0, start[np.maximum(r, 0)], 0)
    r_node = np.where(r >= 0, start_node[np.maximum(r, 0)], -1)
    ts_last = np.where(last >= 0, node_ts[np.maximum(last, 0)], 0)
    ts_sync = np.where(has_sync, node_ts[np.maximum(sync_end, 0)], 0)
    want_launch = (ctx.launch_ok[kr] & ((last < 0) | (ts_last < r_ts))
                   & (~has_sync | (ts_sync < r_ts)))  # fmt: skip
    launched = want_launch & (r_node >= 0)
    kk = ~launched & (last >= 0) & (~has_sync | (ts_sync < ts_last))
    missing_runtime = int((want_launch & (r_node < 0)).sum())
    n_k = len(kr)
    parts = [
        (k_it, np.zeros(n_k, np.int64), s_node, e_node, np.full(n_k, OPERATOR), kr),
        (k_it[has_sync], np.ones(int(has_sync.sum()), np.int64), sync_end[has_sync],
         s_node[has_sync], np.full(int(has_sync.sum()), SYNC), np.full(int(has_sync.sum()), -1)),
        (k_it[launched], np.full(int(launched.sum()), 2), r_node[launched], s_node[launched],
         np.full(int(launched.sum()), LAUNCH), np.full(int(launched.sum()), -1)),
        (k_it[kk], np.full(int(kk.sum()), 2), last[kk], s_node[kk],
         np.full(int(kk.sum()), KERNEL_KERNEL), node_event[np.maximum(last[kk], 0)]),
    ]  # fmt: skip
    if edges:
        parts.append(tuple(np.asarray(c, dtype=np.int64) for c in zip(*edges, strict=True)))
    walk, sub, src, dst, typ, attr = (np.concatenate([p[i] for p in parts]) for i in range(6))
    # inferred waits (default analysis) come last
    extra = [(int(end_node[g]), int(end_node[c])) for c, gs in ctx.inferred_waits.items()
             if end_node[c] >= 0 for g in gs if end_node[g] >= 0]  # fmt: skip
    if extra:
        eu, ev_ = np.asarray(extra, dtype=np.int64).T
        walk = np.concatenate([walk, np.full(len(eu), len(rows))])
        sub = np.concatenate([sub, np.arange(len(eu))])
        src, dst = np.concatenate([src, eu]), np.concatenate([dst, ev_])
        typ = np.concatenate([typ, np.full(len(eu), SYNC)])
        attr = np.concatenate([attr, np.full(len(eu), -1)])
    o = np.lexsort((sub, walk))
    src, dst, typ, attr = src[o], dst[o], typ[o], attr[o]
    wt = np.where((typ == SYNC) | (typ == DEPENDENCY), 0, node_ts[dst] - node_ts[src])
    if missing_runtime:
        notes["launch_without_runtime_node"] = missing_runtime
    return (src.astype(np.int64), dst.astype(np.int64), wt.astype(np.int64),
            typ.astype(np.int64), attr.astype(np.int64))  # fmt: skip


def _walk_sync_events(ctx, rows, is_sync, it, kr, k_it, k_stream, end_node, edges) -> dict:
    """The sync events, in walk order: their GPU->CPU edges go to ``edges``; returns the
    cross-stream waits ``{walk position of the waiting kernel: the GPU event it waits for}``."""
    s_it = it[is_sync]
    if len(s_it) == 0:
        return {}
    pos_of = {p: i for i, p in zip(k_it.tolist(), kr.tolist(), strict=True)}
    # per stream: walk positions and end nodes of its kernels; streams in order of first kernel
    streams = list(dict.fromkeys(k_stream.tolist()))
    per_stream = {s: (k_it[k_stream == s], end_node[kr[k_stream == s]]) for s in streams}
    first_seen = {s: int(per_stream[s][0][0]) for s in streams}
    waits: dict[int, tuple[int, int]] = {}  # kernel walk position -> (sync walk position, source)
    for i in s_it.tolist():
        p = int(rows[i])
        knd = int(ctx.sync_kind[p])
        rt = ctx.gpu_to_cpu[p]
        rt_end = int(end_node[rt]) if rt >= 0 else -1
        if knd in (1, 2):  # Stream Wait Event, Event Sync: wait on a cudaEventRecord's kernel
            src_k = ctx.record_src.get(int(ctx.wait_record[p]), -1)
            if src_k < 0:
                continue
            if knd == 1:
                dest = ctx.wait_dest.get(p, -1)
                j = pos_of.get(dest, -1)
                if j > i:  # the waiting kernel comes later in the walk
                    waits[j] = (i, src_k)
            elif end_node[src_k] >= 0 and rt_end >= 0:
                edges.append((i, 0, int(end_node[src_k]), rt_end, SYNC, -1))
        elif knd in (3, 4) and rt_end >= 0:  # Stream Sync, Context Sync
            chosen = streams if knd == 4 else [int(ctx.stream[p])]
            for n, s in enumerate(chosen):
                if s not in per_stream or first_seen[s] > i:
                    continue
                its, ends = per_stream[s]
                j = int(np.searchsorted(its, i)) - 1
                if j >= 0:
                    edges.append((i, n, int(ends[j]), rt_end, SYNC, -1))
    return {j: src for j, (_, src) in waits.items()}


def _event_record_sources(ev, names, corr, start, stream, pid, gr_r, gr_g) -> dict[int, int]:
    """{correlation of a cudaEventRecord: position of the GPU event it records}."""
    if "wait_on_stream" not in ev or "wait_on_record" not in ev:
        return {}  # a hand-built table without the sync-wait columns
    waits = ev.loc[ev["wait_on_stream"].to_numpy() > -1]
    rec = np.flatnonzero(_name_mask(names, ["cudaEventRecord"]))
    if waits.empty or len(rec) == 0 or len(gr_g) == 0:
        return {}
    rec_stream = (
        pd.DataFrame({"c": waits["wait_on_record"].to_numpy(), "stream": waits["wait_on_stream"].to_numpy(),
                      "gpu": waits["pid"].to_numpy()})
        .drop_duplicates("c").set_index("c")
    )  # fmt: skip
    recs = pd.DataFrame({"c": corr[rec], "ts": start[rec]}).join(rec_stream, on="c").dropna()
    if recs.empty:
        return {}
    launches = pd.DataFrame({"ts": start[gr_r], "gpu": pid[gr_g], "stream": stream[gr_g],
                             "g": gr_g, "gts": start[gr_g]})  # fmt: skip
    launches = launches.sort_values(["ts", "gts"], kind="stable").drop_duplicates(
        ["ts", "gpu", "stream"], keep="last"
    )
    recs = recs.astype({"gpu": np.int64, "stream": np.int64}).sort_values("ts", kind="stable")
    m = pd.merge_asof(recs, launches, on="ts", by=["gpu", "stream"], direction="backward")
    m = m.dropna(subset=["g"])
    return dict(zip(m["c"].astype(np.int64).tolist(), m["g"].astype(np.int64).tolist(), strict=False))


def _stream_wait_destinations(is_swe, start, stream, pid, tid, gpu_to_cpu, gr_r, gr_g) -> dict:
    """{position of a Stream Wait Event: the first GPU event launched after its cudaStreamWaitEvent
    from the same thread onto the waiting stream}."""
    waits = np.flatnonzero(is_swe & (gpu_to_cpu >= 0))
    if len(waits) == 0 or len(gr_g) == 0:
        return {}
    w_rt = gpu_to_cpu[waits]
    wdf = pd.DataFrame({"w": waits, "ts": start[w_rt], "pid": pid[w_rt], "tid": tid[w_rt],
                        "stream": stream[waits]}).sort_values("ts", kind="stable")  # fmt: skip
    launches = pd.DataFrame({"ts": start[gr_r], "pid": pid[gr_r], "tid": tid[gr_r],
                             "stream": stream[gr_g], "g": gr_g, "gts": start[gr_g]})  # fmt: skip
    launches = launches.sort_values(["ts", "gts"], kind="stable").drop_duplicates(
        ["ts", "pid", "tid", "stream"], keep="first"
    )
    m = pd.merge_asof(wdf, launches, on="ts", by=["pid", "tid", "stream"], direction="forward")
    m = m.dropna(subset=["g"])
    return dict(zip(m["w"].tolist(), m["g"].astype(np.int64).tolist(), strict=False))
