"""The TensorBoard plugin's per-thread call trees of CPU operators (shared by the memory view and the
operator table).

Nodes: CPU operators (``ProfilerStep#N`` included), the step and collective annotations and
Kineto 2021 ``Python`` events, per thread, ordered by start (longest first at equal starts).
A node is a child of the innermost earlier node that contains it; a node that starts inside
another but ends after it is left out (the plugin logs "ranges on the same thread should not
intersect" and drops it); an operator whose only child is an operator of the same name absorbs
that child (the plugin's ``remove_dup_nodes``, as ``torch.autograd.profiler`` does). With
``modules=True`` the ``nn.Module`` (``python_function``) nodes are built too, as in the plugin's
trees: the module view, the operator table and the memory view read them. Times in the plugin's
µs (:func:`.ranges.plugin_us`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.kineto.model import RankTrace
from analysis.metrics.tensorboard.plugin_steps import (
    COMM_NAMES,
    KERNEL_ARGS,
    by_category,
    dataloader_names,
)
from analysis.metrics.tensorboard.ranges import plugin_us

# Operators the plugin does not count as operators (module wrappers; ``Optimizer.*`` too)
NOT_OPERATORS = ("DataParallel.forward", "DistributedDataParallel.forward")


def call_tree(rt: RankTrace, modules: bool = False) -> pd.DataFrame:
    """The rank's call-tree nodes (memoised; do not modify): ``name``, ``tid``, ``start``, ``end``
    (µs), ``op_type`` (an operator, not a step), ``is_op`` (counted as an operator by the plugin's
    views), ``row`` (the event's row label), ``parent``: the parent node's position, -1 for a
    child of the thread's root, -2 for a node left out (intersecting), -3 for an absorbed one; and
    ``runtimes_of``: the node whose runtime calls this node holds (see :func:`build_trees`).

    ``modules=True`` adds the ``nn.Module`` nodes (``python_function`` events with a ``Python module
    id``, from the ``python_functions`` extra; ``module_id`` column, -1 elsewhere), as the plugin's
    trees have them: what the module view reads."""
    def compute():
        nodes = _tree_nodes(rt, modules)
        parent, runtimes_of, _ = build_trees(nodes)
        nodes["parent"] = parent
        nodes["runtimes_of"] = runtimes_of
        return nodes
    return rt.memoised(("tensorboard_call_tree", modules), compute)


def child_levels(parent: np.ndarray, adds: np.ndarray) -> list[np.ndarray]:
    """The nodes of ``adds`` (a mask) that have a parent (``parent >= 0``), grouped by depth,
    deepest first, each group in descending position: carrying values up a level at a time in
    this order (``np.add.at`` over a group) adds each node's children into it in the order of a
    pass over the nodes from the last to the first, so float sums are those of that pass, bit for
    bit, and each child's value is final (its own children were carried before it)."""
    n = len(parent)
    depth = np.full(n, -1, np.int64)
    level = np.flatnonzero(parent < 0)
    depth[level] = 0
    d = 0
    has_parent = parent >= 0
    while len(level):
        d += 1
        reached = np.zeros(n, bool)
        reached[level] = True
        level = np.flatnonzero(has_parent & reached[np.maximum(parent, 0)])
        depth[level] = d
    movers = np.flatnonzero(adds & has_parent & (depth > 0))[::-1]
    if not len(movers):
        return []
    by_depth = movers[np.argsort(-depth[movers], kind="stable")]
    cuts = np.flatnonzero(np.diff(depth[by_depth])) + 1
    return np.split(by_depth, cuts)


def carry_up(values: np.ndarray, parent: np.ndarray, levels: list[np.ndarray]) -> np.ndarray:
    """``values`` (one row per node) summed over each node's subtree, carried along ``levels``
    (:func:`child_levels`, computed once for several carries): a new array."""
    total = values.copy()
    for level in levels:
        np.add.at(total, parent[level], total[level])
    return total


def _tree_nodes(rt: RankTrace, modules: bool = False) -> pd.DataFrame:
    """The events the plugin builds its per-thread call trees from: CPU operators (``ProfilerStep#N``
    included), the step and collective annotations and 2021 ``Python`` events, in the plugin's
    order (by thread, start, longest first). ``is_op``: counted as an operator (a ``cpu_op`` that is
    not a step, a DataLoader ``__next__``, a module wrapper or ``Optimizer.*``); ``op_type``: of the plugin's operator type
    (``cpu_op`` other than a step: only those merge with a same-named only child)."""
    ev = rt.events
    cat = ev["cat"]
    step = by_category(ev["name"], lambda v: v.str.startswith("ProfilerStep#"))
    annotation = (cat.isin(("user_annotation", "gpu_user_annotation")).to_numpy(bool)
                  & (step | ev["name"].isin(COMM_NAMES).to_numpy(bool)))
    legacy_python = np.zeros(len(ev), bool)
    raw = rt.extras.get(KERNEL_ARGS)
    if raw is not None and len(raw):
        python = raw.index[by_category(raw["raw_cat"], lambda v: v.str.lower() == "python")]
        legacy_python[ev.index.get_indexer(python)] = True
    cpu_op = (cat == "cpu_op").to_numpy(bool)
    module_id = np.full(len(ev), -1, np.int64)
    if modules:
        py = rt.extra("python_functions")
        with_module = py[(py["module_id"] >= 0).to_numpy()]
        module_id[ev.index.get_indexer(with_module.index)] = with_module["module_id"].to_numpy()
    keep = cpu_op | annotation | legacy_python | (module_id >= 0)
    names = _names(ev["name"], keep)
    tid = ev["tid"].to_numpy(np.int64)[keep]
    start = plugin_us(ev["ts"].to_numpy(np.int64)[keep])
    end = start + plugin_us(ev["dur"].to_numpy(np.int64)[keep])
    op_type = (cpu_op & ~step)[keep]
    # the plugin's event order (by start), then by thread, start and longest first: one stable
    # sort on the three keys (the first sort only orders equal starts, as the events are)
    order = np.lexsort((-end, start, tid))
    names = names[order]
    op_type = op_type[order]
    # the name tests once per distinct name (string tests on an object Series run per element)
    codes, distinct = pd.factorize(names, use_na_sentinel=False)
    text = pd.Series(distinct, dtype=object)
    not_op = (text.isin(NOT_OPERATORS) | text.str.startswith("Optimizer.")
              | pd.Series(dataloader_names(text))).to_numpy(bool)
    nodes = pd.DataFrame({
        "name": names,
        "tid": tid[order],
        "start": start[order],
        "op_type": op_type,
        "row": ev.index.to_numpy()[keep][order],
        "module_id": module_id[keep][order],
        "end": end[order],
        "is_op": op_type & ~not_op[codes],
    })
    return nodes


def _names(column: pd.Series, keep: np.ndarray) -> np.ndarray:
    """``column[keep]`` as text (``astype(str)``), an object array; a categorical column's from
    its categories (converted once each) when no kept row is missing."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.cat.codes.to_numpy()[keep]
        if not (codes < 0).any():
            categories = pd.Series(column.cat.categories).astype(str).to_numpy(object)
            return categories[codes]
    return column[keep].astype(str).to_numpy(object)


def build_trees(nodes: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The plugin's call trees over ``nodes``: ``parent`` per node (-1: a root child; -2: left out,
    as a node that starts inside another and ends after it), ``runtimes_of`` (whose runtime calls
    each node holds: itself, or the last same-named child it absorbed) and the root children.
    A node whose only child has its name (both operators) absorbs the child (the plugin's
    ``remove_dup_nodes``): the child is left out (-3), its children become the node's, and so do
    its runtime calls (the node's own are dropped, as the plugin does)."""
    starts, ends = nodes["start"].to_numpy(), nodes["end"].to_numpy()
    tids = nodes["tid"].to_numpy()
    parent = _nest(starts, ends, tids)
    roots = np.flatnonzero(parent == -1)
    return (*_absorb(parent, nodes["name"].to_numpy(object), nodes["op_type"].to_numpy(bool)),
            roots.tolist())


def _nest(starts: np.ndarray, ends: np.ndarray, tids: np.ndarray) -> np.ndarray:
    """The plugin's parent of each node (nodes by thread, start, longest first), as its stack
    sweep gives it: a node's parent is the innermost kept earlier node of its thread whose end is
    after the node's start; the node is left out (-2) when it ends after that parent.

    Vectorised: nesting brackets give each node's depth and so its parent (the nearest earlier
    node one level up), exact while every node so far nests (checked: each node inside its
    parent, after its previous sibling's end: then the parent is the sweep's stack top). The
    first node of a thread that fails the check is one the sweep leaves out (its earlier nodes
    are the sweep's, so its bracket parent is the stack top and it ends after it): it is
    dropped and the brackets redone, a few times; a thread with more such nodes (or with
    negative durations, where brackets do not nest) is swept in Python from its first one on."""
    n = len(starts)
    parent = np.full(n, -2, np.int64)
    if not n:
        return parent
    # a thread's position range: nodes come by thread
    first_of = np.r_[0, np.flatnonzero(tids[1:] != tids[:-1]) + 1]
    thread = np.repeat(np.arange(len(first_of)), np.diff(np.r_[first_of, n]))
    sweep_from = np.full(len(first_of), -1, np.int64)  # per thread: where the Python sweep starts
    bad = np.flatnonzero(~(ends >= starts))
    if len(bad):  # negative durations: brackets close before they open
        sweep_from[np.unique(thread[bad])] = first_of[np.unique(thread[bad])]
    active = sweep_from[thread] < 0
    for _ in range(_NEST_ROUNDS):
        idx = np.flatnonzero(active)
        if not len(idx):
            break
        par = _bracket_parents(starts[idx], ends[idx], thread[idx])
        failed = _nest_failures(starts[idx], ends[idx], thread[idx], par)
        parent[idx] = np.where(par >= 0, idx[np.maximum(par, 0)], -1)
        if not len(failed):
            break
        # the first failure of each thread: left out; the thread's later nodes redone
        first = failed[np.r_[True, thread[idx[failed[1:]]] != thread[idx[failed[:-1]]]]]
        active[idx[first]] = False
        parent[idx[first]] = -2
    else:
        if len(idx) and len(failed):  # threads still failing after the rounds: swept in Python
            sweep_from[thread[idx[first]]] = idx[first] + 1
    for t in np.flatnonzero(sweep_from >= 0).tolist():
        _sweep(starts, ends, parent, int(sweep_from[t]),
               int(first_of[t + 1]) if t + 1 < len(first_of) else n, int(first_of[t]))
    return parent


_NEST_ROUNDS = 8


def _bracket_parents(starts, ends, thread) -> np.ndarray:
    """Positions' parents (-1: a root) from their nesting brackets, for nodes that nest: by
    thread and time, closes before opens at the same time (a node ending where the next starts
    does not contain it), inner closes first, a zero-length node's close right after its open;
    a node's depth is the count of open brackets at its open, its parent the nearest earlier
    node one level up."""
    k = len(starts)
    pos = np.arange(k)
    zero = ends == starts
    # brackets: opens (kind 1, then by position), closes of zero-length nodes (kind 1, right
    # after their open), other closes (kind 0: before the opens at their time, inner first)
    time = np.concatenate([starts, ends])
    kind = np.concatenate([np.ones(k, np.int8), zero.astype(np.int8)])
    sub = np.concatenate([pos, np.where(zero, pos, -pos)])
    after = np.concatenate([np.zeros(k, np.int8), np.ones(k, np.int8)])
    order = np.lexsort((after, sub, kind, time, np.concatenate([thread, thread])))
    step = np.where(order < k, 1, -1)
    depth = np.empty(2 * k, np.int64)
    depth[order] = np.cumsum(step)
    depth = depth[:k]  # open brackets at each node's open, itself included
    # the nearest earlier node one level up: the largest (depth, position) key below the node's
    key = depth * k + pos
    sorted_keys = np.sort(key)
    found = sorted_keys[np.maximum(np.searchsorted(sorted_keys, key - k) - 1, 0)]
    # -1 at depth 1 (a root); none found (nodes that do not nest): -3, a failure
    return np.where(depth == 1, -1, np.where(found // k == depth - 1, found % k, -3))


def _nest_failures(starts, ends, thread, par) -> np.ndarray:
    """The positions (in order) whose bracket parent is not the sweep's: a node outside its
    parent, ending after it, or starting before its previous sibling's end. Up to the first
    failure of a thread the brackets give the sweep's tree (the parent then is the nearest
    earlier node that ends after the node's start: the earlier nodes up to it are its
    previous siblings and theirs)."""
    k = len(starts)
    has = par >= 0
    p = np.maximum(par, 0)
    fail = has & ~((starts < ends[p]) & (ends <= ends[p]))
    fail |= par == -3
    # previous siblings: same thread and parent, by position
    order = np.lexsort((np.arange(k), par, thread))
    same = (thread[order[1:]] == thread[order[:-1]]) & (par[order[1:]] == par[order[:-1]])
    later, earlier = order[1:][same], order[:-1][same]
    fail[later[~(ends[earlier] <= starts[later])]] = True
    return np.flatnonzero(fail)


def _sweep(starts, ends, parent, lo: int, hi: int, thread_lo: int) -> None:
    """The plugin's stack sweep over positions ``lo:hi`` of a thread (its first at
    ``thread_lo``), from the stack its earlier nodes leave (the path to the last kept one: the
    nodes it left out since pop nothing the next node does not), into ``parent``."""
    stack: list[int] = []
    kept = np.flatnonzero(parent[thread_lo:lo] >= -1)
    u = thread_lo + int(kept[-1]) if len(kept) else -1
    while u >= 0:
        stack.append(u)
        u = int(parent[u])
    stack.reverse()
    # Python lists: the loop reads one element at a time (numpy scalars are slower)
    ends_l = ends.tolist()
    found = []
    for n, start, end in zip(range(lo, hi), starts[lo:hi].tolist(), ends_l[lo:hi], strict=True):
        while stack and not start < ends_l[stack[-1]]:
            stack.pop()
        if stack and end > ends_l[stack[-1]]:
            found.append(-2)  # intersects its would-be parent: the plugin leaves it out
            continue
        found.append(stack[-1] if stack else -1)
        stack.append(n)
    parent[lo:hi] = found


def _absorb(parent: np.ndarray, names: np.ndarray, op_type: np.ndarray):
    """``remove_dup_nodes`` over the swept tree: ``(parent, runtimes_of)``. An operator's only
    child of its name is absorbed, and so on down the chain such children make (the absorbing
    node's only child is then the absorbed one's): every chain node but the top is left out
    (-3), the bottom's children become the top's and the top holds the bottom's runtime calls."""
    n = len(parent)
    parent = parent.copy()
    runtimes_of = np.arange(n, dtype=np.int64)
    inner = np.flatnonzero(parent >= 0)
    p = parent[inner]
    only = np.bincount(p, minlength=n)[p] == 1
    cand, p = inner[only], p[only]
    same = op_type[cand] & op_type[p]
    cand, p = cand[same], p[same]
    absorbed = cand[names[cand] == names[p]]
    if not len(absorbed):
        return parent, runtimes_of
    top = np.arange(n, dtype=np.int64)
    top[absorbed] = parent[absorbed]
    while True:  # each absorbed node's chain top: pointer jumping
        up = top[top]
        if np.array_equal(up, top):
            break
        top = up
    bottom = np.zeros(n, bool)
    bottom[absorbed] = True
    bottom[parent[absorbed]] = False  # a node absorbing is no chain's bottom
    bottom = np.flatnonzero(bottom)
    runtimes_of[top[bottom]] = bottom
    is_absorbed = np.zeros(n, bool)
    is_absorbed[absorbed] = True
    moved = inner[~is_absorbed[inner]]
    parent[moved] = top[parent[moved]]
    parent[absorbed] = -3
    return parent, runtimes_of
