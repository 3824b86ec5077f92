"""Longest path of a weighted DAG, with networkx's ``dag_longest_path`` order and tie-breaking.

The critical path of ``analysis.metrics.critical_path.critical_path`` is this path over its graph. networkx walks
the nodes in ``topological_sort`` order (Kahn's algorithm by generations, nodes and edges in
insertion order), gives each node its best predecessor (ties: the first edge added) and ends at the
first node of that order with the greatest distance. Weights are integers (ns); negative ones count
as 0 (HTA resets them before the search).

Fast path (``_longest_by_chains``): most nodes of a trace graph have exactly one incoming edge, so
their distance is their nearest multi-input ancestor's plus a sum along a chain; those sums come from
pointer jumping (``log2`` array passes), and only the nodes with several inputs (kernel starts, sync
ends) are walked one by one. Ties for the end node go to the smallest generation (networkx's order)
and then to the smaller node id. A cycle sends the graph to the exact one-pass walk, which finds
the nodes left over, so that the caller can break it.
"""

from __future__ import annotations

import numpy as np


def longest_path(
    n_nodes: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray, fast: bool = True
):
    """``(path nodes, path edge indices, cycles_broken)`` of the longest path of a graph.

    Edges are deduplicated as networkx does (first position, last attributes); negative weights
    count as 0 (HTA). The order is networkx's ``topological_sort`` and ties go to the first
    predecessor added and the first end node in that order, as in ``nx.dag_longest_path``.
    """
    if n_nodes == 0:
        return [], np.zeros(0, np.int64), 0
    if len(src) == 0:  # nodes, no edge: networkx's answer is the first node alone
        return [0], np.zeros(0, np.int64), 0
    key = src.astype(np.int64) * n_nodes + dst
    _, first = np.unique(key, return_index=True)
    _, last_rev = np.unique(key[::-1], return_index=True)
    last = len(key) - 1 - last_rev  # aligned with `first` (both sorted by key)
    first_order = np.argsort(first, kind="stable")
    eidx = last[first_order]  # the edge whose attributes count, in insertion order
    u, v = src[first[first_order]], dst[first[first_order]]
    w = np.maximum(weight[eidx], 0)
    cycles_broken = 0
    result = _longest_by_chains(n_nodes, u, v, w) if fast else None
    if result is None:
        result = _longest_in_topological_order(n_nodes, u, v, w)
    if result is None:
        # a cycle: drop the edges that run backwards in time order (node ids are a time order)
        # between nodes that are both downstream and upstream of a cycle (on one, mostly)
        on_cycles = _unresolved(n_nodes, u, v) & _unresolved(n_nodes, v, u)
        back = on_cycles[u] & on_cycles[v] & (u > v)
        cycles_broken = int(back.sum())
        u, v, w, eidx = u[~back], v[~back], w[~back], eidx[~back]
        result = _longest_in_topological_order(n_nodes, u, v, w)
    end_node, best_edge = result
    best_edge = np.asarray(best_edge).tolist()
    ul = u.tolist()
    path_e = []  # the path's edges from its end back to its start
    j = best_edge[end_node]
    while j >= 0:
        path_e.append(j)
        j = best_edge[ul[j]]
    path_e.reverse()
    edges = np.asarray(path_e, dtype=np.int64)
    path = u[edges].tolist() + [end_node]  # each edge's source, then the end
    return path, eidx[edges], cycles_broken


def _longest_in_topological_order(n_nodes, u, v, w):
    """One pass of Kahn's algorithm in networkx's order (FIFO = topological generations) that
    relaxes each edge once. Returns ``(end node, best incoming edge per node)``, or None when a
    cycle leaves nodes unvisited."""
    indeg = np.bincount(v, minlength=n_nodes).tolist()
    by_src = np.argsort(u, kind="stable")
    out_edge = by_src.tolist()
    out_dst = v[by_src].tolist()
    wl = w.tolist()
    starts = np.searchsorted(u[by_src], np.arange(n_nodes + 1)).tolist()
    dist = [0] * n_nodes
    best = [-1] * n_nodes  # best incoming edge: max distance, ties to the first edge added
    queue = [i for i in range(n_nodes) if indeg[i] == 0]
    end_node, end_dist = -1, -1
    for node in queue:  # the list grows while it is walked
        d = dist[node]
        if d > end_dist:
            end_node, end_dist = node, d
        for j in range(starts[node], starts[node + 1]):
            c = out_dst[j]
            e = out_edge[j]
            cand = d + wl[e]
            b = best[c]
            if b < 0 or cand > dist[c] or (cand == dist[c] and e < b):
                dist[c], best[c] = cand, e
            indeg[c] -= 1
            if indeg[c] == 0:
                queue.append(c)
    if len(queue) < n_nodes:
        return None
    return end_node, best


def _unresolved(n_nodes: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Nodes Kahn's algorithm never frees: on a cycle or downstream of one (with the edges
    reversed: on a cycle or upstream of one)."""
    indeg = np.bincount(v, minlength=n_nodes).tolist()
    by_src = np.argsort(u, kind="stable")
    succ = v[by_src].tolist()
    starts = np.searchsorted(u[by_src], np.arange(n_nodes + 1)).tolist()
    queue = [i for i in range(n_nodes) if indeg[i] == 0]
    for node in queue:
        for j in range(starts[node], starts[node + 1]):
            c = succ[j]
            indeg[c] -= 1
            if indeg[c] == 0:
                queue.append(c)
    return np.asarray(indeg) > 0


def _longest_by_chains(n_nodes: int, u: np.ndarray, v: np.ndarray, w: np.ndarray):
    """``(end node, best incoming edge per node)`` as ``_longest_in_topological_order``, walking
    only the nodes with several incoming edges; None on a cycle (see the module docstring)."""
    indeg = np.bincount(v, minlength=n_nodes)
    nodes = np.arange(n_nodes)
    single = indeg == 1
    ein = np.full(n_nodes, -1)
    ein[v[single[v]]] = np.flatnonzero(single[v])
    # pointer jumping: each single-input node's nearest ancestor with 0 or several inputs
    anc = np.where(single, u[np.maximum(ein, 0)], nodes)
    acc = np.where(single, w[np.maximum(ein, 0)], 0)  # weight along the chain from it
    hops = single.astype(np.int64)  # edges along the chain (for generations)
    for _ in range(int(np.log2(max(n_nodes, 2))) + 2):
        nxt = anc[anc]
        if np.array_equal(nxt, anc):
            break
        acc = acc + acc[anc]
        hops = hops + hops[anc]
        anc = nxt
    if single[anc].any():
        return None  # a cycle of single-input nodes
    # the nodes with several inputs, walked in topological order of their root graph
    merge_edges = np.flatnonzero(indeg[v] >= 2)
    mu, mv = anc[u[merge_edges]], v[merge_edges]
    roots = np.flatnonzero(~single)
    dist = np.zeros(n_nodes, np.int64)
    level = np.zeros(n_nodes, np.int64)
    best = ein.copy()
    if len(merge_edges):
        order = np.argsort(mv, kind="stable")  # per target, edges in insertion order
        e_sorted = merge_edges[order].tolist()
        src_root = mu[order].tolist()
        src_acc = (acc[u[merge_edges]] + w[merge_edges])[order].tolist()
        src_hops = (hops[u[merge_edges]] + 1)[order].tolist()
        tgt = mv[order]
        lo = np.searchsorted(tgt, nodes).tolist()
        hi = np.searchsorted(tgt, nodes, side="right").tolist()
        # Kahn over the root graph: a root waits for the roots its inputs hang from
        deps = np.bincount(mv, minlength=n_nodes).tolist()
        by_src = np.argsort(mu, kind="stable")
        succ = mv[by_src].tolist()
        s_lo = np.searchsorted(mu[by_src], nodes).tolist()
        s_hi = np.searchsorted(mu[by_src], nodes, side="right").tolist()
        dist_l = [0] * n_nodes
        level_l = [0] * n_nodes
        best_l = best.tolist()
        queue = [r for r in roots.tolist() if deps[r] == 0]
        for r in queue:  # the list grows while it is walked
            if lo[r] < hi[r]:
                bd, bj, lv = -1, -1, 0
                for k in range(lo[r], hi[r]):
                    a = src_root[k]
                    cand = dist_l[a] + src_acc[k]
                    if cand > bd:
                        bd, bj = cand, e_sorted[k]
                    lv = max(lv, level_l[a] + src_hops[k])
                dist_l[r], best_l[r], level_l[r] = bd, bj, lv
            for k in range(s_lo[r], s_hi[r]):
                c = succ[k]
                deps[c] -= 1
                if deps[c] == 0:
                    queue.append(c)
        if len(queue) < len(roots):
            return None  # a cycle through nodes with several inputs
        dist = np.asarray(dist_l, dtype=np.int64)
        level = np.asarray(level_l, dtype=np.int64)
        best = np.asarray(best_l)
    dist = dist[anc] + acc
    level = level[anc] + hops
    top = dist.max()
    ties = np.flatnonzero(dist == top)
    end = ties[np.lexsort((ties, level[ties]))[0]]
    return int(end), best
