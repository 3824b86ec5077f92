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
    names = ev["name"][keep]
    nodes = pd.DataFrame({
        "name": names.astype(str).to_numpy(object),
        "tid": ev["tid"].to_numpy(np.int64)[keep],
        "start": plugin_us(ev["ts"].to_numpy(np.int64)[keep]),
        "op_type": (cpu_op & ~step)[keep],
        "row": ev.index.to_numpy()[keep],
        "module_id": module_id[keep],
    })
    nodes["end"] = nodes["start"] + plugin_us(ev["dur"].to_numpy(np.int64)[keep])
    names_text = nodes["name"].astype(str)
    nodes["is_op"] = nodes["op_type"] & ~(names_text.isin(NOT_OPERATORS)
                                          | names_text.str.startswith("Optimizer.")
                                          | pd.Series(dataloader_names(names_text)))
    nodes = nodes.sort_values("start", kind="stable")  # the plugin's event order
    nodes["neg_end"] = -nodes["end"]
    nodes = nodes.sort_values(["tid", "start", "neg_end"], kind="stable").drop(columns="neg_end")
    return nodes.reset_index(drop=True)


def build_trees(nodes: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The plugin's call trees over ``nodes``: ``parent`` per node (-1: a root child; -2: left out,
    as a node that starts inside another and ends after it), ``runtimes_of`` (whose runtime calls
    each node holds: itself, or the last same-named child it absorbed) and the root children.
    A node whose only child has its name (both operators) absorbs the child (the plugin's
    ``remove_dup_nodes``): the child is left out (-3), its children become the node's, and so do
    its runtime calls (the node's own are dropped, as the plugin does)."""
    # Python lists: the loops below read one element at a time (numpy scalars are slower)
    starts, ends = nodes["start"].to_numpy().tolist(), nodes["end"].to_numpy().tolist()
    tids = nodes["tid"].to_numpy().tolist()
    names = nodes["name"].to_numpy(object).tolist()
    op_type = nodes["op_type"].to_numpy(bool).tolist()
    parent = [-2] * len(nodes)
    children: list[list[int]] = [[] for _ in range(len(nodes))]
    roots: list[int] = []
    stack: list[int] = []
    current_tid = None
    for n in range(len(nodes)):
        if tids[n] != current_tid:
            current_tid, stack = tids[n], []
        while stack and not starts[n] < ends[stack[-1]]:
            stack.pop()
        if stack and ends[n] > ends[stack[-1]]:
            continue  # intersects its would-be parent: the plugin leaves it out
        parent[n] = stack[-1] if stack else -1
        (children[stack[-1]] if stack else roots).append(n)
        stack.append(n)
    runtimes_of = list(range(len(nodes)))
    todo = list(roots)
    while todo:
        n = todo.pop()
        while (len(children[n]) == 1 and op_type[n] and op_type[children[n][0]]
               and names[children[n][0]] == names[n]):
            child = children[n][0]
            parent[child] = -3
            runtimes_of[n] = runtimes_of[child]
            children[n] = children[child]
            for c in children[n]:
                parent[c] = n
        todo.extend(children[n])
    return np.array(parent, np.int64), np.array(runtimes_of, np.int64), roots


