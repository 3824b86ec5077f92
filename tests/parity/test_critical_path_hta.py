"""Critical path vs HolisticTraceAnalysis 0.5.0 on HTA's own critical-path test traces.

HTA 0.5.0's critical path raises under pandas 3, so it runs in a separate pandas<3 environment
(``scripts/make-hta-oracle-venv.sh``, built once per user into ``~/.cache/trace-analysis/venvs``,
outside the checkout) through ``hta_critical_path_oracle.py``. Its answers are stored in
``tests/data/hta_oracle/`` by ``scripts/hta_oracle_snapshot.py`` (the only place that builds that
environment); ``HTA_LIVE=1`` runs it live instead (see ``tests/hta_oracle.py``). With
``kernel_patterns="hta"`` we must produce the same graph
(every edge: endpoints, weight, type, attributed event), the same path and the same breakdown.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hta_oracle import MODE, hta_answer

from analysis.kineto.model import Trace
from analysis.kineto.parse import parse_trace_bytes
from analysis.kineto.window import profiler_step_window
from analysis.metrics.critical_path.critical_path import critical_path_rank
from analysis.metrics.critical_path.critical_path_graph import EDGE_TYPES
from tests.conftest import HTA_TRACES, REPO_ROOT

ORACLE = Path(__file__).with_name("hta_critical_path_oracle.py")

CASES = {
    # HTA's tests/test_critical_path_analysis.py uses these annotations and instances
    "critical_path/simple_add": ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1),
    "critical_path/alexnet": ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1),
    "critical_path/cuda_event_sync": ("ProfilerStep", 0),
    "critical_path/cuda_event_sync_multi_stream": ("", 0),
    # more real traces: AMD (hip*), nanosecond timestamps, CUDA graphs and five streams
    "amd_trace": ("ProfilerStep", 0),
    "ns_resolution_trace": ("ProfilerStep", 0),
    "negative_queue_length_values_check": ("ProfilerStep", 0),
}


@cache
def hta_python() -> Path:
    """The pandas<3 venv with HTA 0.5.0 (``HTA_ORACLE_PYTHON``, or built on first use: needs PyPI)."""
    if os.environ.get("HTA_ORACLE_PYTHON"):
        return Path(os.environ["HTA_ORACLE_PYTHON"])
    try:
        built = subprocess.run(
            [str(REPO_ROOT / "scripts" / "make-hta-oracle-venv.sh")],
            check=True, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        pytest.skip(f"cannot build the HTA 0.5.0 + pandas<3 oracle venv: {e}")
    return Path(built.stdout.strip().splitlines()[-1])


def trace_file(case: str) -> Path:
    folder = HTA_TRACES / case
    if not folder.is_dir():
        pytest.skip(f"real GPU traces not available: {folder} does not exist")
    return next(folder.glob("*.json*"))


def run_hta(path: Path, annotation: str, instance: int) -> dict:
    """HTA's critical path of ``path`` as JSON (stored answer; ``HTA_LIVE=1``: live)."""

    def live():
        out = subprocess.run(
            [str(hta_python()), str(ORACLE), str(path), annotation, str(instance)],
            check=True, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        h = json.loads(out.stdout)
        for timing in ("load_s", "critical_path_s"):  # seconds, not part of the answer
            h.pop(timing, None)
        return h

    return hta_answer([path], f"critical_path_analysis({annotation!r}, {instance})", live)


def ours(path: Path, annotation: str, instance: int):
    rt = parse_trace_bytes(path.read_bytes(), str(path))
    rt = profiler_step_window(Trace({rt.rank: rt}))[rt.rank]  # HTA's analysed steps
    (graph,) = critical_path_rank(
        rt, annotation=annotation, instance_id=instance, patterns="hta", rounding="hta"
    ).values()
    return rt, graph


def _key(g, names, p):
    if p < 0:
        return None
    ev, start, end = g.events, g.start[p], g.end[p]  # ns, rounded as HTA rounds
    return (names[p], int(start) // 1000, int(end - start) // 1000,
            int(ev["pid"].iat[p]), int(ev["tid"].iat[p]))  # fmt: skip


def our_edges(graph) -> Counter:
    g = graph.graph
    ev = g.events
    names = ev["name"].astype(str).to_numpy()
    on_path = set(graph.path_edges.tolist())
    out = Counter()
    for i in range(len(g.edge_src)):
        u, v = g.edge_src[i], g.edge_dst[i]
        out[(
            _key(g, names, g.node_event[u]), bool(g.node_is_start[u]),
            _key(g, names, g.node_event[v]), bool(g.node_is_start[v]),
            int(g.edge_weight[i]) // 1000, EDGE_TYPES[g.edge_type[i]],
            _key(g, names, g.edge_event[i]), i in on_path,
        )] += 1  # fmt: skip
    return out


def hta_edges(h: dict) -> Counter:
    t = lambda k: None if k is None else tuple(k)  # noqa: E731
    return Counter(
        (t(e["src"]), e["src_start"], t(e["dst"]), e["dst_start"], e["weight"], e["type"],
         t(e["event"]), e["critical"])
        for e in h["edges"]
    )  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_same_graph_path_and_breakdown_as_hta(case):
    path = trace_file(case)
    annotation, instance = CASES[case]
    _assert_same_as_hta(path, annotation, instance)


@pytest.mark.parametrize("builder", ["overlapping_kernels", "sub_microsecond_kernel"])
def test_negative_edge_weights_count_in_the_breakdown_as_in_hta(tmp_path, builder):
    """HTA searches the path with negative edge weights at 0 but reports them as they are in its
    breakdown (a negative share): the HTA preset clipped them there, and its breakdown summed to
    15 / 1 µs more than HTA's here (8, 7, 2 and 15 µs on four real traces of a sweep)."""
    from analysis.testing import critical_path_traces

    doc, _ = getattr(critical_path_traces, builder)()
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(doc))
    graph = _assert_same_as_hta(path, "ProfilerStep", 0)
    breakdown = graph.get_critical_path_breakdown()
    assert (breakdown["duration"] < 0).any()
    assert graph.path_length_us == pytest.approx(breakdown["duration"].sum())


def test_a_graph_without_edges_is_no_path_not_a_crash(tmp_path):
    """A window holding only a ``Stream Wait Event``: two nodes, no edge. HTA fails (its assert);
    the HTA preset raised IndexError (Kineto's own docs traces, whole-trace window)."""
    import warnings

    from analysis.testing.critical_path_traces import edgeless

    doc, _ = edgeless()
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(doc))
    h = run_hta(path, "", 0)
    assert h["success"] is False
    rt = parse_trace_bytes(path.read_bytes(), str(path))
    for kw in ({}, {"patterns": "hta"}, {"patterns": "hta", "rounding": "hta"}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (graph,) = critical_path_rank(rt, annotation="", instance_id=0, **kw).values()
        assert not graph.success and graph.reason, kw
        if kw:  # HTA's graph: the event's two nodes (the default preset leaves the event out)
            assert (graph.num_nodes, graph.num_edges) == (2, 0)
            assert "2 node(s) and no edge" in graph.reason


_QUEUE_EDGES = {"critical_path_kernel_launch_delay", "critical_path_kernel_kernel_delay"}


def _assert_same_edges(ours: Counter, theirs: Counter) -> None:
    """The same edges; or, against HTA's stored answer, the same up to the GPU events whose
    queue HTA finds empty or not at a launch at the very instant a kernel starts: HTA orders those
    ties with numpy's unstable quicksort, whose order differs between CPUs (docs/deviations.md;
    HTA run live on the same machine gives our edges exactly). Each such event then has a
    launch edge in one graph and a kernel-to-kernel edge in the other, into the same node."""
    if ours == theirs or MODE != "stored":
        assert ours == theirs
        return
    mine, hers = ours - theirs, theirs - ours
    assert sum(mine.values()) == sum(hers.values()) <= 4, (mine, hers)
    # (destination node, its start or end, on the path, edge type) of each edge
    into = lambda edges: sorted((e[2], e[3], e[7], e[5]) for e in edges.elements())  # noqa: E731
    for *node, kind in into(mine):
        matching = [other for *other_node, other in into(hers) if other_node == node]
        assert matching and {kind, *matching} == _QUEUE_EDGES, (node, kind, matching)


def _assert_same_as_hta(path: Path, annotation: str, instance: int):
    """Every comparison with HTA's answer: graph, path, path events, summary, breakdown."""
    h = run_hta(path, annotation, instance)
    rt, graph = ours(path, annotation, instance)
    assert h["success"] and graph.success
    assert graph.num_nodes == h["nodes"]
    assert len(graph.critical_path_nodes) == h["path_nodes"]
    assert len(graph.path_edges) == h["path_edges"]
    _assert_same_edges(our_edges(graph), hta_edges(h))
    ev = rt.events
    names = ev["name"].astype(str).to_numpy()
    labels = {lab: i for i, lab in enumerate(ev.index)}
    events = sorted((_key(graph.graph, names, labels[lab]) for lab in graph.critical_path_events_set),
                    key=lambda k: (k[1], k[0], k[3]))  # fmt: skip
    assert events == [tuple(k) for k in h["path_events"]]
    s = graph.summary()
    assert set(s.index) == set(h["summary"])
    for k, v in h["summary"].items():
        assert s[k] == pytest.approx(v, abs=1e-9)
    assert graph.get_critical_path_breakdown()["duration"].sum() == h["breakdown_total"]
    return graph


def test_simple_add_counts_from_hta_test_file(hta_traces_dir):
    """HTA's own test documents 315 path nodes, 159 critical events and 314 critical edges."""
    path = trace_file("critical_path/simple_add")
    _, graph = ours(path, *CASES["critical_path/simple_add"])
    assert (len(graph.critical_path_nodes), len(graph.critical_path_events_set),
            len(graph.path_edges)) == (315, 159, 314)  # fmt: skip
    bd = graph.get_critical_path_breakdown()
    assert np.isclose(bd["duration"].sum(), graph.path_length_us)


def test_out_of_order_call_stack_cycle(tmp_path):
    """HTA #113: an operator ending after its parent makes the graph cyclic; HTA raises
    ``ValueError: Graph is not valid``, we break the cycle (the same way every time) and go on."""
    import gzip
    import warnings

    from analysis.testing.critical_path_traces import out_of_order_stack

    doc, _ = out_of_order_stack()
    path = tmp_path / "rank0.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    h = run_hta(path, "ProfilerStep", 0)
    assert h["success"] is False and "Graph is not valid" in h["error"]
    rt = parse_trace_bytes(path.read_bytes(), str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (graph,) = critical_path_rank(rt, patterns="hta", instance_id=0).values()
    assert graph.success and graph.cycles_broken == 1
    again = critical_path_rank(rt, patterns="hta", instance_id=0)
    assert next(iter(again.values())).critical_path_nodes == graph.critical_path_nodes
