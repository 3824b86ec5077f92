"""The vectorised call trees and memory-record lookups of ``analysis.metrics.tensorboard`` against
the plugin's own stack sweeps (written out here as the reference), on random threads of nested,
intersecting, zero-length and negative-length nodes and same-named only-child chains."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.metrics.tensorboard import call_tree as ct
from analysis.metrics.tensorboard.memory_view import device_names


def _reference_trees(nodes: pd.DataFrame):
    """The plugin's sweep and ``remove_dup_nodes``, one node at a time."""
    starts, ends = nodes["start"].tolist(), nodes["end"].tolist()
    tids, names = nodes["tid"].tolist(), nodes["name"].tolist()
    op_type = nodes["op_type"].tolist()
    parent = [-2] * len(nodes)
    children: list[list[int]] = [[] for _ in range(len(nodes))]
    roots: list[int] = []
    stack: list[int] = []
    current = None
    for n in range(len(nodes)):
        if tids[n] != current:
            current, stack = tids[n], []
        while stack and not starts[n] < ends[stack[-1]]:
            stack.pop()
        if stack and ends[n] > ends[stack[-1]]:
            continue
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


def _random_nodes(rng, n: int, negative: bool) -> pd.DataFrame:
    start = rng.integers(0, 60, n).astype(float) + rng.choice([0, 0, 0.5], n)
    dur = rng.integers(0, 25, n).astype(float) * rng.choice([0, 1, 1, 1], n)
    if negative:
        dur[rng.random(n) < 0.05] = -3
    nodes = pd.DataFrame({"name": rng.choice(["a", "b", "c"], n).astype(object),
                          "tid": rng.integers(0, 3, n), "start": start, "end": start + dur,
                          "op_type": rng.random(n) < 0.8})
    order = np.lexsort((-nodes["end"].to_numpy(), nodes["start"].to_numpy(),
                        nodes["tid"].to_numpy()))
    return nodes.iloc[order].reset_index(drop=True)


@pytest.mark.parametrize("rounds", [1, 2, ct._NEST_ROUNDS])
def test_build_trees_is_the_plugins_sweep(monkeypatch, rounds):
    """Every round count: the Python sweep that finishes threads with many left-out nodes too."""
    monkeypatch.setattr(ct, "_NEST_ROUNDS", rounds)
    rng = np.random.default_rng(rounds)
    left_out = absorbed = 0
    for i in range(400):
        nodes = _random_nodes(rng, int(rng.integers(0, 80)), negative=i % 7 == 0)
        parent, runtimes_of, roots = ct.build_trees(nodes)
        ref_parent, ref_runtimes, ref_roots = _reference_trees(nodes)
        np.testing.assert_array_equal(parent, ref_parent)
        np.testing.assert_array_equal(runtimes_of, ref_runtimes)
        assert roots == ref_roots
        left_out += int((ref_parent == -2).sum())
        absorbed += int((ref_parent == -3).sum())
    assert left_out and absorbed  # the cases were there


def _reference_enclosing(nodes: pd.DataFrame, parent, rec_ts, rec_tid):
    """The plugin's record sweep: the innermost open node of the record's thread."""
    starts, ends, parent_l = nodes["start"].tolist(), nodes["end"].tolist(), parent.tolist()
    tids = nodes["tid"].to_numpy()
    in_tree = np.flatnonzero(parent >= -1)
    node_of = np.full(len(rec_ts), -1, np.int64)
    for tid in np.unique(rec_tid).tolist():
        recs = np.flatnonzero(rec_tid == tid)
        recs = recs[np.argsort(rec_ts[recs], kind="stable")]
        own = in_tree[tids[in_tree] == tid].tolist()
        stack: list[int] = []
        i, found = 0, []
        for t in rec_ts[recs].tolist():
            while i < len(own) and starts[own[i]] <= t:
                n = own[i]
                while stack and stack[-1] != parent_l[n]:
                    stack.pop()
                stack.append(n)
                i += 1
            while stack and not t < ends[stack[-1]]:
                stack.pop()
            found.append(stack[-1] if stack else -1)
        node_of[recs] = found
    return node_of


def test_records_find_the_sweeps_innermost_node(monkeypatch):
    from analysis.metrics.tensorboard import memory_view

    rng = np.random.default_rng(7)
    for _ in range(300):
        nodes = _random_nodes(rng, int(rng.integers(1, 60)), negative=False)
        parent, runtimes_of, _ = ct.build_trees(nodes)
        nodes["parent"], nodes["runtimes_of"] = parent, runtimes_of
        k = int(rng.integers(0, 40))
        # records at node starts and ends, inside, and outside every node (thread 5: no nodes)
        edges = np.r_[nodes["start"].to_numpy(), nodes["end"].to_numpy(), -1.0, 100.0]
        ts_us = np.where(rng.random(k) < 0.5, rng.choice(edges, k), rng.uniform(-1, 90, k))
        ts_us = np.round(ts_us * 1000) / 1000
        m = pd.DataFrame({"ts": np.round(ts_us * 1000).astype(np.int64),
                          "tid": rng.choice([0, 1, 2, 5], k)})
        monkeypatch.setattr(memory_view, "call_tree", lambda rt, modules, nodes=nodes: nodes)
        node_of, parent_of, out = memory_view._enclosing_operators(None, m)
        rec_ts = memory_view.plugin_us(m["ts"].to_numpy(np.int64))
        expected = _reference_enclosing(nodes, parent, rec_ts, m["tid"].to_numpy(np.int64))
        np.testing.assert_array_equal(node_of, expected)
        np.testing.assert_array_equal(parent_of, np.where(expected >= 0,
                                                          parent[np.maximum(expected, 0)], -1))
        visited = np.zeros(len(nodes), bool)
        for n in np.unique(expected[expected >= 0]).tolist():
            while n >= 0 and not visited[n]:
                visited[n] = True
                n = parent[n]
        np.testing.assert_array_equal(out["visited"].to_numpy(), visited)


def test_carried_subtree_sums_are_the_childrens_first_pass():
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(1, 50))
        parent = np.array([-1 if i == 0 or rng.random() < 0.2 else int(rng.integers(0, i))
                           for i in range(n)], np.int64)
        mine = np.unique(rng.integers(0, n, int(rng.integers(0, 8))))
        values = np.zeros((n, 3), np.int64)
        values[mine] = rng.integers(-10**12, 10**12, (len(mine), 3))
        expected = values.copy()
        for c in range(n - 1, -1, -1):  # children come after their parents
            if parent[c] >= 0:
                expected[parent[c]] += expected[c]
        levels = ct.child_levels(parent, np.ones(n, bool))
        np.testing.assert_array_equal(ct.carry_up(values, parent, levels), expected)


def test_device_names_of_every_pair():
    types = np.array([0, 1, 6, 15, 7, 1, 0, 2**40])
    ids = np.array([-1, 0, 3, 2, 5, 0, -1, 1])
    assert device_names(types, ids).tolist() == [
        "CPU", "GPU0", "GPU3", "HPU2", "type7:5", "GPU0", "CPU", f"type{2**40}:1"]
    assert device_names(np.zeros(0, np.int64), np.zeros(0, np.int64)).tolist() == []


def test_child_levels_carry_float_sums_as_the_last_to_first_pass():
    """Carrying values up ``child_levels`` gives the sums of a pass over the nodes from the last
    to the first, bit for bit (the operator table's and module view's device totals)."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(1, 60))
        # -1 roots, -2/-3 nodes left out (they still receive their children's values)
        parent = np.array([int(rng.choice([-1, -2, -3])) if i == 0 or rng.random() < 0.15
                           else int(rng.integers(0, i)) for i in range(n)], np.int64)
        kept = parent >= -1
        values = rng.random(n) * 10 ** rng.integers(0, 9, n)
        flags = rng.random(n) < 0.2
        op = rng.random(n) < 0.7
        expected, expected_flags = values.copy(), flags.copy()
        for c in np.flatnonzero(kept)[::-1].tolist():
            p = parent[c]
            if p >= 0:
                expected[p] += expected[c]
                if op[p] and expected_flags[c]:
                    expected_flags[p] = True
        total, got_flags = values.copy(), flags.copy()
        for level in ct.child_levels(parent, kept):
            up = parent[level]
            np.add.at(total, up, total[level])
            got_flags[up[op[up] & got_flags[level]]] = True
        np.testing.assert_array_equal(total, expected)  # exact, not approximate
        np.testing.assert_array_equal(got_flags, expected_flags)
