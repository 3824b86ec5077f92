"""The critical-path graph of one rank's window: nodes are event starts and ends, edges carry time.

The rules are HolisticTraceAnalysis 0.5.0's (``hta/analyzers/critical_path_analysis.py``), built
here with array operations instead of per-event Python objects:

- **Window**: CPU events (``stream == -1``) with ``dur > 0`` that start inside the annotation's
  ``[start, end]`` (HTA; the default: ``[start, end)``), plus the GPU events they launched (and, as
  HTA does, every ``Stream Wait Event``).
- **Nodes**: a start and an end node for every CPU operator / runtime / driver call and every GPU
  event on a stream, ordered by time.
- **Operator edges** (``critical_path_operator``): on each CPU thread, the call stack is rebuilt
  (HTA's ordering of starts and ends) and walked depth first; consecutive start/end points of
  operators on the stack are linked, weight = the time between them (zero into the end of a blocking
  call such as ``cudaStreamSynchronize``: that time is the GPU's). Each edge is attributed to the
  operator it lies in.
- **Dependency edges** (zero weight in HTA; the default: the time between them, CPU work the
  profiler did not record): the end of one top-level operator to the start of the next on the
  same thread.
- **GPU edges**: each kernel's own span; a **launch delay** edge from the launching runtime call
  when the stream's queue was empty at the launch and the previous kernel had finished (HTA also
  requires that nothing else was queued by the time the kernel started); otherwise a
  **kernel-kernel** edge from the previous kernel on the stream (weight = the gap).
- **Sync edges** (zero weight in HTA; the default: the time they span): the last kernel of a stream (``Stream Sync``) or of every stream
  (``Context Sync``) to the end of the synchronising runtime call; a kernel recorded by
  ``cudaEventRecord`` to ``cudaEventSynchronize`` (``Event Sync``) or to the first kernel launched
  after ``cudaStreamWaitEvent`` on the waiting stream (``Stream Wait Event``).

- **Queued edges** (default only): a GPU event queued behind work launched before the window
  (at its launch, the GPU event before it on its stream was still queued or running; that event
  not in the graph) gets an edge from its launch call instead of a launch-delay edge, attributed
  to that earlier GPU event: the time until it starts is that work's (HTA: a launch delay when
  the earlier event was running, no edge in at all when it was queued).
- **Hand-off edges** (default only; dependency edges): where a CPU thread idles between two
  top-level calls while another thread's calls fill at least half of the gap, from the thread to
  the other thread's first call in the gap and back from its last (``_handoff_edges``).

The rank-wide facts (links, launches, queue lengths, event records) are
``analysis.metrics.critical_path.critical_path_context``'s. ``hta_compat=True`` keeps HTA's choices exactly; ``False`` (the default analysis) fixes what HTA gets
wrong, see ``docs/deviations.md``: every kernel of a multi-kernel launch (``cudaGraphLaunch``) is
kept and linked, the launch APIs are the ``kernel_launch_stats`` default preset (driver API,
cooperative and ROCm launches), a blocking call without a CUDA sync event (ROCm traces have none)
gets sync edges from the GPU events it waited for, and a launch whose runtime call is outside the
graph falls back to a kernel-kernel edge instead of failing.

All times are integer nanoseconds; weights can be negative here (the path clips them to 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.metrics.critical_path.critical_path_context import RankContext, name_mask

EDGE_TYPES = (
    "critical_path_operator",
    "critical_path_dependency",
    "critical_path_kernel_launch_delay",
    "critical_path_kernel_kernel_delay",
    "critical_path_sync_dependency",
)
OPERATOR, DEPENDENCY, LAUNCH, KERNEL_KERNEL, SYNC = range(5)
HANDOFF_MIN_GAP_NS = 20_000  # a thread's idle gap long enough to be a wait for another thread



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
    parts = [cpu_edges, gpu_edges]
    if not ctx.hta_compat:
        # an operator spanning the whole window (the step annotation itself, recorded as an
        # operator before torch 1.9) hides the thread's gaps: its children are the calls
        whole = (start <= w0) & (end >= w1)
        parts.append(_handoff_edges(ev, pos[keep & is_node & (stream == -1) & ~whole], start,
                                    end, start_node, end_node))  # fmt: skip
    src, dst, w, typ, attr = (np.concatenate(cols) for cols in zip(*parts, strict=True))
    if not ctx.hta_compat:
        # the default counts the time a dependency or sync edge spans (untraced CPU work between
        # two operators of a thread; a wait for another stream or for the CPU's sync call to
        # return), so that the longest path covers the window; HTA gives them weight 0
        spans = (typ == DEPENDENCY) | (typ == SYNC)
        w = np.where(spans, np.maximum(node_ts[dst] - node_ts[src], 0), w)
    return CPGraphArrays(
        events=ev, start=start, end=end, node_event=node_event, node_ts=node_ts,
        node_is_start=node_is_start, edge_src=src, edge_dst=dst, edge_weight=w,
        edge_type=typ.astype(np.int8), edge_event=attr, window=(w0, w1), notes=notes,
    )  # fmt: skip


def search_weights(g: CPGraphArrays) -> np.ndarray:
    """Default analysis: the weights the longest-path search uses, ranking paths first by the time
    they cover (``edge_weight``) and, among those that cover as much, by the recorded work on
    them: CPU operator and GPU event time (``OPERATOR`` edges), not untraced gaps, waits, launch
    delays or gaps between kernels. Every edge of the default graph counts the time it spans, so
    many chains cover the window equally; this picks the one that did the most work (a GPU busy
    with kernels and collectives rather than a CPU thread idle in untraced code).

    Encoded in one int64 as ``time × M + work``, ``M`` a power of two above the most work any path
    can hold; work is counted in units of ``2**shift`` ns, the finest that keeps ``time × M`` in
    range (1 ns for windows up to a few hundred ms, coarser for longer ones).
    """
    w = np.maximum(g.edge_weight, 0).astype(np.int64)
    work = np.where(g.edge_type == OPERATOR, w, 0)
    time_bits = max(int(w.sum()), 1).bit_length()
    shift = max(int(work.sum()).bit_length() - max(62 - time_bits, 0), 0)
    work >>= shift
    work_bits = max(int(work.sum()), 1).bit_length()
    if time_bits + work_bits > 62:  # nothing left for the work: rank by time alone
        return w
    return (w << work_bits) + work


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


def _top_level(ev, rows, start, end):
    """Per CPU thread, its top-level calls among ``rows`` (those no other call of the thread
    contains): ``{(pid, tid): rows in time order}``."""
    df = pd.DataFrame({"row": rows, "pid": ev["pid"].to_numpy()[rows],
                       "tid": ev["tid"].to_numpy()[rows], "s": start[rows], "e": end[rows]})  # fmt: skip
    df = df.sort_values(["pid", "tid", "s", "e"], ascending=[True, True, True, False], kind="stable")
    reach = df.groupby(["pid", "tid"], sort=False)["e"].cummax()
    before = reach.groupby([df["pid"], df["tid"]], sort=False).shift(1)
    top = df[before.isna().to_numpy() | (df["s"].to_numpy() >= before.to_numpy())]
    return {k: g["row"].to_numpy() for k, g in top.groupby(["pid", "tid"], sort=True)}


def _handoff_edges(ev, rows, start, end, start_node, end_node):
    """Default analysis: cross-thread hand-offs. Where a CPU thread is idle between two top-level
    calls for at least ``HANDOFF_MIN_GAP_NS`` and another thread's top-level calls fill at least
    half of that gap (the main thread waiting in ``backward()`` while the autograd thread runs it;
    a collective launched from another thread), the thread waited for the other: dependency edges
    from the end of its call before the gap to the first of the other thread's calls in the gap,
    and from the last of those to its call after the gap. The path may then follow the work that
    thread did (and the GPU work it launched) instead of the idle gap. ``rows`` leave out an
    operator spanning the whole window (torch ≤ 1.8 records ``ProfilerStep#N`` as an operator on
    the main thread: taken as the thread's one call, it hid the wait in ``backward()``)."""
    empty = tuple(np.zeros(0, np.int64) for _ in range(5))
    threads = _top_level(ev, rows, start, end) if len(rows) else {}
    if len(threads) < 2:
        return empty
    src, dst = [], []
    for t, trows in threads.items():
        g0, g1 = end[trows[:-1]], start[trows[1:]]  # the thread's gaps
        big = np.flatnonzero(g1 - g0 >= HANDOFF_MIN_GAP_NS)
        if len(big) == 0:
            continue
        for u, urows in threads.items():
            if u == t:
                continue
            us, ue = start[urows], end[urows]  # top-level calls: both in time order
            busy = np.concatenate([[0], np.cumsum(ue - us)])
            first = np.searchsorted(us, g0[big], side="right")  # starts after the gap opens
            last = np.searchsorted(ue, g1[big], side="left") - 1  # ends before it closes
            ok = first <= last
            fill = busy[np.maximum(last, 0) + 1] - busy[np.minimum(first, len(urows) - 1)]
            ok &= 2 * fill >= (g1 - g0)[big]
            for i, f, la in zip(big[ok].tolist(), first[ok].tolist(), last[ok].tolist(), strict=True):
                src += [end_node[trows[i]], end_node[urows[la]]]
                dst += [start_node[urows[f]], start_node[trows[i + 1]]]
    if not src:
        return empty
    n = len(src)
    return (np.asarray(src, np.int64), np.asarray(dst, np.int64), np.zeros(n, np.int64),
            np.full(n, DEPENDENCY, np.int64), np.full(n, -1, np.int64))  # fmt: skip


def _cumsum_by_group(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Running sum of ``values`` restarting at each change of ``groups`` (groups are contiguous)."""
    c = np.cumsum(values)
    first = np.flatnonzero(np.append(True, groups[1:] != groups[:-1]))
    base = np.repeat(c[first] - values[first], np.diff(np.append(first, len(values))))
    return c - base


def _gpu_edges(ctx: RankContext, keep, start_node, end_node, node_ts, node_event, notes):
    """Kernel, launch-delay, kernel-kernel and sync edges. HTA walks the window's GPU events in
    time order (sync events by their end), keeping the last kernel of each stream; here the kernels
    are handled all at once (a kernel's "last kernel" is its predecessor on the stream in that
    order) and only the sync events one by one. Edges come out in HTA's insertion order (it decides
    ties in the longest path)."""
    start, end, stream = ctx.start, ctx.end, ctx.stream
    rows = np.flatnonzero(keep & ctx.on_device_sync & (ctx.corr != -1))
    is_sync = name_mask(ctx.ev["cat"], ["cuda_sync"])[rows]
    order = np.argsort(np.where(is_sync, end[rows], start[rows]), kind="stable")
    rows, is_sync = rows[order], is_sync[order]
    it = np.arange(len(rows))  # position in the walk
    # kernels: the previous kernel on the same stream in the walk
    k_it = it[~is_sync]
    kr = rows[k_it]
    k_stream = stream[kr]
    by_stream = np.lexsort((k_it, k_stream))
    prev = np.full(len(kr), -1)
    same = np.zeros(len(kr), dtype=bool)  # (no kernel in the window: nothing is "same")
    same[1:] = k_stream[by_stream][1:] == k_stream[by_stream][:-1]
    prev[by_stream[same]] = by_stream[np.flatnonzero(same) - 1]
    last = np.where(prev >= 0, end_node[kr[np.maximum(prev, 0)]], -1)

    edges: list[tuple] = []  # (walk position, sub-order, src, dst, type, attributed event)
    kernel_sync = _walk_sync_events(ctx, rows, is_sync, it, kr, k_it, k_stream, end_node, edges)

    # the kernels' own spans, cross-stream waits, then a launch or a kernel-kernel edge
    s_node, e_node = start_node[kr], end_node[kr]
    inferred = ctx.inferred_stream_waits
    src_k = np.array([kernel_sync.get(j, inferred.get(p, -1))
                      for j, p in zip(k_it.tolist(), kr.tolist(), strict=True)], dtype=np.int64)
    sync_end = np.where(src_k >= 0, end_node[np.maximum(src_k, 0)], -1)
    has_sync = sync_end >= 0
    r = ctx.launcher[kr]
    r_ts = np.where(r >= 0, start[np.maximum(r, 0)], 0)
    r_node = np.where(r >= 0, start_node[np.maximum(r, 0)], -1)
    ts_last = np.where(last >= 0, node_ts[np.maximum(last, 0)], 0)
    ts_sync = np.where(has_sync, node_ts[np.maximum(sync_end, 0)], 0)
    want_launch = (ctx.launch_ok[kr] & ((last < 0) | (ts_last < r_ts))
                   & (~has_sync | (ts_sync < r_ts)))  # fmt: skip
    # default: a GPU event whose stream was busy at its launch (a GPU event before it still
    # queued or running) with work launched before the window, its predecessor not in the graph:
    # a queued edge from its launch call, the time until it starts that earlier work's
    queued = np.zeros(len(kr), bool)
    prev = np.full(len(kr), -1)
    if ctx.prev_on_stream is not None:
        prev = ctx.prev_on_stream[kr]
        pending = ~ctx.launch_ok[kr] | (end[np.maximum(prev, 0)] > r_ts)
        queued = (last < 0) & (prev >= 0) & pending & ~has_sync & (r_node >= 0)
    launched = want_launch & (r_node >= 0) & ~queued
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
    if queued.any():
        n_q = int(queued.sum())
        parts.append((k_it[queued], np.full(n_q, 2), r_node[queued], s_node[queued],
                      np.full(n_q, OPERATOR), prev[queued]))  # fmt: skip
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
