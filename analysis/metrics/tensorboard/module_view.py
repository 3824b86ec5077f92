"""The TensorBoard plugin's module view: the ``nn.Module`` hierarchy with each module's time.

From a trace recorded with ``with_modules=True`` (or ``with_stack=True``): each module's
``forward`` is a ``python_function`` event with a ``Python module id``. The hierarchy comes from the
Python call ids (``Python id`` / ``Python parent id``) of every Python function: a module's parent is
the nearest module up its call chain; identical sub-hierarchies count once; top-level modules
sorted by name. Per module (name and module id), over its calls in the plugin's call trees
(:mod:`.call_tree`, module nodes included): ``occurrences`` (calls), ``operators`` (operator calls
directly inside them), ``host_total_us`` (their durations), ``host_self_us`` (durations minus their
direct children's), ``device_total_us`` / ``device_self_us`` (kernels launched inside them / by
their own runtime calls: 2021 traces only, as the plugin). One row per module of the hierarchy,
in pre-order: ``path`` joins the names from the root, ``depth`` is 0 at the top. Window: the whole
trace.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.errors import NoModulesError
from analysis.kineto.model import RankTrace
from analysis.metrics.tensorboard.call_tree import call_tree, carry_up, child_levels
from analysis.metrics.tensorboard.operator_table import runtime_times

PYTHON = "python_functions"
PREFIX = "nn.Module: "
COLUMNS = ["rank", "module", "module_id", "path", "depth", "occurrences", "operators",
           "host_total_us", "host_self_us", "device_total_us", "device_self_us"]


def _hierarchy(rt: RankTrace) -> list[tuple[str, int, int]]:
    """``(name, module id, depth)`` of the module hierarchy in pre-order (see the module doc)."""
    py = rt.extra(PYTHON)
    ev = rt.events
    order = np.argsort(ev["ts"].reindex(py.index).to_numpy(), kind="stable")
    py = py.iloc[order]
    names = ev["name"].reindex(py.index).astype(str).to_numpy(object)
    ids, parents, modules = (py[c].to_numpy() for c in ("python_id", "parent_id", "module_id"))
    by_id = {int(i): k for k, i in enumerate(ids.tolist())}
    children: dict[int, list[int]] = {}
    for i, p in zip(ids.tolist(), parents.tolist(), strict=True):
        children.setdefault(i, [])
        children.setdefault(p, []).append(i)
    leaves = [k for k, v in children.items() if not v]
    module_parent: dict[int, int | None] = {}
    seen: set = set()
    for leaf in leaves:
        k = by_id.get(leaf)
        current = None
        while k is not None:
            e_id = int(ids[k])
            if modules[k] >= 0:
                if current is not None:
                    module_parent[current] = e_id
                current = e_id
                module_parent.setdefault(e_id, None)
            key = (e_id, current)
            if key in seen:
                break
            seen.add(key)
            k = by_id.get(int(parents[k]))
    child_map: dict[int | None, list[int]] = {}
    for child, parent in module_parent.items():
        child_map.setdefault(child, [])
        child_map.setdefault(parent, []).append(child)

    def tree(e_id: int) -> tuple:
        k = by_id[e_id]
        return (names[k], int(modules[k]), tuple(tree(c) for c in child_map[e_id]))

    # by name as the plugin; roots of one name (a set's order, which changes with the process's
    # hash seed) then by module id and subtree, so every run lists them alike
    roots = sorted({tree(r) for r, p in module_parent.items() if p is None},
                   key=lambda t: (t[0].replace(PREFIX, ""), t))
    out: list[tuple[str, int, int]] = []

    def walk(node: tuple, depth: int) -> None:
        out.append((node[0], node[1], depth))
        for child in node[2]:
            walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    return out


def module_summary_rank(rt: RankTrace) -> tuple[pd.DataFrame | None, str]:
    """One rank's module view (None without module events) and its source."""
    py = rt.extra(PYTHON)
    if not (py["module_id"] >= 0).any():
        return None, rt.meta.source
    nodes = call_tree(rt, modules=True)
    parent = nodes["parent"].to_numpy(np.int64)
    kept = parent >= -1
    dur = (nodes["end"] - nodes["start"]).to_numpy()
    inner = kept & (parent >= 0)
    n = len(nodes)
    child_sum = np.bincount(parent[inner], weights=dur[inner], minlength=n)
    operators = np.bincount(parent[inner & nodes["is_op"].to_numpy(bool)], minlength=n)
    own = runtime_times(rt, nodes)[nodes["runtimes_of"].to_numpy()]
    device_total = carry_up(own[:, 1], parent, child_levels(parent, kept))
    is_module = kept & (nodes["module_id"].to_numpy() >= 0)
    stats = pd.DataFrame({
        "name": nodes["name"].to_numpy(object)[is_module],
        "module_id": nodes["module_id"].to_numpy()[is_module],
        "operators": operators[is_module], "host_total_us": dur[is_module],
        "host_self_us": (dur - child_sum - own[:, 0])[is_module],
        "device_total_us": device_total[is_module], "device_self_us": own[is_module, 1],
    })
    g = stats.groupby(["name", "module_id"])
    agg = g.sum()
    agg["occurrences"] = g.size()
    rows, path = [], []
    for name, module_id, depth in _hierarchy(rt):
        short = name.replace(PREFIX, "")
        path = path[:depth] + [short]
        values = agg.loc[(name, module_id)] if (name, module_id) in agg.index else None
        row = {"rank": rt.rank, "module": short, "module_id": module_id, "path": " / ".join(path),
               "depth": depth}
        for col in COLUMNS[5:]:
            row[col] = values[col] if values is not None else 0
        rows.append(row)
    out = pd.DataFrame(rows, columns=COLUMNS)
    out[["occurrences", "operators"]] = out[["occurrences", "operators"]].astype(np.int64)
    return out, rt.meta.source


def combine(parts: Mapping[int, tuple[pd.DataFrame | None, str]]) -> pd.DataFrame:
    tables = [t for t, _ in parts.values() if t is not None]
    if not tables:
        missing = {r: src for r, (t, src) in parts.items()}
        raise NoModulesError(list(missing), list(missing.values()))
    return pd.concat(tables, ignore_index=True)
