"""Critical path on traces whose answer is known by construction (analysis.testing.critical_path_traces)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from analysis.errors import ConfigError
from analysis.kineto.parse import parse_trace_bytes
from analysis.metrics.critical_path.critical_path import (
    BOUND_BY,
    CriticalPathWarning,
    combine,
    critical_path_rank,
    shorten_name,
)
from analysis.metrics.critical_path.critical_path_graph import KERNEL_KERNEL
from analysis.metrics.critical_path.longest_path import longest_path
from analysis.testing import critical_path_traces as cpt

DOMINANT = {
    "cpu_bound": "cpu_bound",
    "gpu_bound": "gpu_compute_bound",
    "communication_bound": "gpu_communication_bound",
    "launch_bound": "gpu_kernel_launch_overhead",
    "data_loading_bound": "data_loading",
    "cuda_graph": "cpu_bound",
    "triton": "cpu_bound",
    "rocm": "gpu_compute_bound",
    "untraced_gaps": "cpu_untraced",
    "exposed_communication": "gpu_communication_bound",
    "cross_thread_wait": "cpu_bound",
    "stream_wait_on_allreduce": "gpu_communication_bound",
    "stream_wait_on_allreduce_unrecorded": "gpu_communication_bound",
    "queued_behind_earlier_work": "gpu_compute_bound",
    "queued_behind_pending_work": "gpu_compute_bound",
}


def load(scenario: str, steps: int = 3):
    doc, truth = cpt.SCENARIOS[scenario](steps)
    return parse_trace_bytes(json.dumps(doc).encode(), f"{scenario}.json"), truth


def by_bound(graph) -> dict[str, float]:
    s = graph.get_critical_path_breakdown().groupby("bound_by")["duration"].sum()
    return {k: v for k, v in s.items() if k}


@pytest.mark.parametrize("scenario", list(cpt.SCENARIOS))
def test_every_step_has_the_known_path(scenario):
    rt, truth = load(scenario)
    graphs = critical_path_rank(rt)
    assert list(graphs) == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    for g in graphs.values():
        assert g.success
        assert g.path_length_us == truth.length == cpt.STEP_US  # the step's duration
        assert by_bound(g) == truth.bound_by
        summary = g.summary()
        assert summary.idxmax() == DOMINANT[scenario] == truth.dominant
        assert summary.sum() == pytest.approx(100.0)


@pytest.mark.parametrize("scenario", ["cpu_bound", "launch_bound", "gpu_bound", "cuda_graph",
                                      "untraced_gaps", "exposed_communication", "cross_thread_wait",
                                      "stream_wait_on_allreduce",
                                      "stream_wait_on_allreduce_unrecorded",
                                      "queued_behind_earlier_work", "queued_behind_pending_work"])
def test_hta_mode_last_step(scenario):
    """kernel_patterns="hta" reproduces HTA's rules, including its failures (hta_length)."""
    rt, truth = load(scenario)
    g = critical_path_rank(rt, patterns="hta", instance_id=2)["ProfilerStep#3"]
    assert g.path_length_us == (truth.hta_length or truth.length)


def test_hta_window_includes_the_next_steps_first_operator():
    """HTA's window is [start, end]: the next step's operator starting at `end` joins the path."""
    rt, _ = load("cpu_bound")
    hta = critical_path_rank(rt, patterns="hta", instance_id=0)["ProfilerStep#1"]
    ours = critical_path_rank(rt, instance_id=0)["ProfilerStep#1"]
    assert (hta.path_length_us, ours.path_length_us) == (2 * cpt.STEP_US, cpt.STEP_US)


def test_first_kernel_of_a_burst_keeps_its_launch_edge():
    """HTA drops the launch edge when more launches were queued before the kernel started."""
    rt, _ = load("gpu_bound", steps=1)
    ours = critical_path_rank(rt)["ProfilerStep#1"]
    hta = critical_path_rank(rt, patterns="hta")["ProfilerStep#1"]
    assert by_bound(ours)["gpu_kernel_launch_overhead"] == 20
    assert "gpu_kernel_launch_overhead" not in by_bound(hta)
    assert hta.path_length_us == cpt.STEP_US - 30


def phantom_gaps(graph) -> int:
    """Kernel-kernel edges longer than 1 µs: the stream idled, but not because of the GPU."""
    g = graph.graph
    return int(((g.edge_type == KERNEL_KERNEL) & (g.edge_weight > 1000)).sum())


@pytest.mark.parametrize("scenario", ["cuda_graph", "triton"])
def test_no_phantom_gaps(scenario):
    rt, _ = load(scenario, steps=1)
    g = critical_path_rank(rt)["ProfilerStep#1"]
    assert phantom_gaps(g) == 0
    kernels = rt.events["cat"].astype(str).eq("kernel").to_numpy()
    node_events = set(g.graph.node_event.tolist())
    assert all(i in node_events for i in np.flatnonzero(kernels))  # every kernel is in the graph


def test_hta_mode_shows_the_known_failures():
    """HTA #271: cuLaunchKernelEx is no launch, so idle gaps read as kernel-kernel overhead;
    HTA #290: only one kernel of a cudaGraphLaunch is kept."""
    rt, _ = load("triton", steps=1)
    assert phantom_gaps(critical_path_rank(rt, patterns="hta")["ProfilerStep#1"]) == 9
    rt, _ = load("cuda_graph", steps=1)
    g = critical_path_rank(rt, patterns="hta")["ProfilerStep#1"]
    kept = rt.events["name"].astype(str).to_numpy()[np.unique(g.graph.node_event)]
    assert sum(n.startswith("graph_kernel") for n in kept) == 1


def test_combine_has_a_row_per_rank_and_step():
    rt, truth = load("launch_bound")
    table = combine({0: critical_path_rank(rt)})
    assert table["instance"].tolist() == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    assert (table["path_length_us"] == cpt.STEP_US).all()
    for b in BOUND_BY:
        expected = truth.bound_by.get(b, 0.0) / cpt.STEP_US * 100
        assert table[b].tolist() == pytest.approx([expected] * 3)


def test_instance_range_is_one_window():
    rt, _ = load("cpu_bound")
    (g,) = critical_path_rank(rt, instance_id=(0, 1)).values()
    assert g.instance == "ProfilerStep#1..ProfilerStep#2"
    assert g.path_length_us == 2 * cpt.STEP_US


def test_bad_annotation_or_instance_names_rank_and_file():
    rt, _ = load("cpu_bound")
    with pytest.raises(ConfigError, match=r"rank 0: no event named like 'Nope' in cpu_bound\.json"):
        critical_path_rank(rt, annotation="Nope")
    with pytest.raises(ConfigError, match=r"instance 7 of 'ProfilerStep' does not exist \(3 instances\)"):
        critical_path_rank(rt, instance_id=7)


def test_longest_path_breaks_a_cycle_deterministically():
    # 0 -> 1 -> 2 -> 3 with a backward edge 2 -> 1 closing a cycle (HTA #113)
    src = np.array([0, 1, 2, 2])
    dst = np.array([1, 2, 1, 3])
    w = np.array([5, 7, 1, 3])
    path, edges, broken = longest_path(4, src, dst, w)
    assert (path, edges.tolist(), broken) == ([0, 1, 2, 3], [0, 1, 3], 1)


def test_longest_path_ties_go_to_the_first_predecessor_and_negative_weights_count_zero():
    # two equal routes 0->1->3 and 0->2->3; networkx keeps the first predecessor added (1)
    path, _, _ = longest_path(4, np.array([0, 0, 1, 2]), np.array([1, 2, 3, 3]), np.array([2, 2, 1, 1]))
    assert path == [0, 1, 3]
    path, edges, _ = longest_path(2, np.array([0]), np.array([1]), np.array([-5]))
    # -5 counts as 0: both nodes are at distance 0 and networkx ends at the first in topological order
    assert (path, edges.tolist()) == ([0], [])


def test_cycle_in_a_trace_warns(monkeypatch):
    import analysis.metrics.critical_path.critical_path as cp

    real = cp.longest_path

    def with_cycle(n, src, dst, w, **kw):
        return real(n, np.append(src, dst[0]), np.append(dst, src[0]), np.append(w, 0), **kw)

    monkeypatch.setattr(cp, "longest_path", with_cycle)
    rt, _ = load("cpu_bound", steps=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = critical_path_rank(rt)["ProfilerStep#1"]
    assert g.cycles_broken == 1
    assert any(issubclass(w.category, CriticalPathWarning) and "cycle edges dropped" in str(w.message)
               for w in caught)  # fmt: skip


def test_shorten_name_like_hta():
    assert shorten_name("void at::native::vectorized_elementwise_kernel<4, at::native::Foo>(int, float*)") == (
        "at::native::vectorized_elementwise_kernel"
    )
    assert shorten_name("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD (Pageable -> Device)"
    assert shorten_name("aten::mm") == "aten::mm"


@pytest.mark.parametrize("seed", range(20))
def test_chain_fast_path_equals_the_exact_walk_on_random_dags(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 400))
    # mostly chains (like a trace graph) plus random forward edges; node ids are a time order
    src = np.concatenate([np.arange(n - 1), rng.integers(0, n - 1, n // 3)])
    dst = np.concatenate([np.arange(1, n), np.zeros(n // 3, np.int64)])
    dst[n - 1:] = src[n - 1:] + rng.integers(1, 40, n // 3)
    keep = dst < n
    src, dst = src[keep], dst[keep]
    perm = rng.permutation(len(src))  # any insertion order
    src, dst = src[perm], dst[perm]
    w = rng.integers(-3, 50, len(src))
    fast = longest_path(n, src, dst, w)
    exact = longest_path(n, src, dst, w, fast=False)
    assert fast[0] == exact[0]
    assert fast[1].tolist() == exact[1].tolist()


def test_rocm_sync_without_sync_events():
    """AMD traces have no CUDA sync events: HTA reads hipDeviceSynchronize's wait as CPU time."""
    rt, _ = load("rocm", steps=1)
    hta = critical_path_rank(rt, patterns="hta")["ProfilerStep#1"]
    assert by_bound(hta) == {"cpu_bound": cpt.STEP_US}


def test_blocking_call_that_waited_for_nothing_is_cpu_time():
    """A hipDeviceSynchronize while the GPU is idle is not blocking: its time stays on the path."""
    b = cpt._Builder()
    b.cpu("ProfilerStep#1", 0, cpt.STEP_US, cat="user_annotation")
    b.cpu("train_step", 0, cpt.STEP_US)
    b.launch("hipLaunchKernel", 10, 10, [("k", 25, 5)], stream=0)
    b.cpu("hipDeviceSynchronize", 100, 800, cat="cuda_runtime")
    rt = parse_trace_bytes(json.dumps(b.document()).encode(), "idle_sync.json")
    g = critical_path_rank(rt)["ProfilerStep#1"]
    assert g.path_length_us == cpt.STEP_US
    assert by_bound(g) == {"cpu_bound": cpt.STEP_US}


@pytest.mark.parametrize("scenario", ["untraced_gaps", "exposed_communication"])
def test_untraced_time_is_attributed_and_the_path_covers_the_step(scenario):
    """Default: dependency edges and the step's ends count as cpu_untraced; HTA counts nothing."""
    rt, truth = load(scenario)
    table = combine({0: critical_path_rank(rt)})
    assert (table["path_length_us"] == table["step_us"]).all()
    assert (table["past_step_end_us"] == 0).all()
    assert table[list(BOUND_BY)].sum(axis=1).tolist() == pytest.approx([100.0] * 3)
    assert table["cpu_untraced"].tolist() == pytest.approx(
        [truth.bound_by["cpu_untraced"] / cpt.STEP_US * 100] * 3)
    hta = critical_path_rank(rt, patterns="hta", instance_id=0)["ProfilerStep#1"]
    assert "cpu_untraced" not in by_bound(hta)


def test_inferred_stream_wait_needs_a_cuda_stream_wait_event_call():
    """Without a cudaStreamWaitEvent between the launches, a kernel starting just after the
    all-reduce ends is not taken to have waited for it: the second GEMM is not on the path (the
    path runs from the all-reduce to the sync call's return, which inferred a wait on both)."""
    doc, _ = cpt.stream_wait_on_allreduce_unrecorded(1)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e["name"] != "cudaStreamWaitEvent"]
    rt = parse_trace_bytes(json.dumps(doc).encode(), "no-wait.json")
    g = critical_path_rank(rt)["ProfilerStep#1"]
    assert g.graph.events is rt.events
    assert by_bound(g) == {"cpu_bound": 73, "cpu_untraced": 2, "gpu_kernel_launch_overhead": 15,
                           "gpu_communication_bound": 600 + 310}  # fmt: skip


def test_search_weights_rank_time_first_then_work():
    from types import SimpleNamespace

    from analysis.metrics.critical_path.critical_path_graph import (
        DEPENDENCY,
        OPERATOR,
        search_weights,
    )

    # two one-edge routes covering 10 ns: recorded work beats an untraced gap; 11 ns beats both
    g = SimpleNamespace(edge_weight=np.array([10, 10, 11]),
                        edge_type=np.array([DEPENDENCY, OPERATOR, DEPENDENCY]))  # fmt: skip
    w = search_weights(g)
    assert w[0] < w[1] < w[2]
    # an hour-long window: no overflow, time still ranks first
    hour = 3_600 * 10**9
    g = SimpleNamespace(edge_weight=np.array([hour, hour, hour + 1]),
                        edge_type=np.array([DEPENDENCY, OPERATOR, DEPENDENCY]))  # fmt: skip
    w = search_weights(g)
    assert (w >= 0).all() and w[0] <= w[1] < w[2]


def test_a_step_recorded_as_an_operator_does_not_hide_the_backward_thread():
    """torch ≤ 1.8 writes ``ProfilerStep#N`` as an operator spanning the step on the main thread:
    taken as the thread's only call, it hid the thread's wait in backward(), so no hand-off to the
    autograd thread was made and the path ended at the step's end, short of the kernel that thread
    launched (6 real resnet50 traces of Kineto's samples: 7-15 ms short per step)."""
    doc, truth = cpt.step_operator_backward_thread(2)
    rt = parse_trace_bytes(json.dumps(doc).encode(), "step_operator.json")
    graphs = critical_path_rank(rt)
    assert list(graphs) == ["ProfilerStep#1", "ProfilerStep#2"]
    for g in graphs.values():
        assert g.success
        assert g.path_length_us == truth.length == cpt.STEP_US + cpt.STEP_OPERATOR_OVERRUN_US
        assert g.past_step_end_us == cpt.STEP_OPERATOR_OVERRUN_US
        names = set(g.get_critical_path_breakdown()["s_name"].dropna())
        assert {"AddmmBackward", "backward_kernel"} <= names


def test_an_empty_analysed_window_is_no_gpu_events_not_a_missing_annotation():
    """A rank whose analysed window holds nothing (its one profiler step is its last) failed
    with "no event named like ''" (the whole-trace fallback asked for an empty annotation): it
    is left out with the other GPU analyses, saying why."""
    from trace_helpers import rank_trace

    from analysis.errors import NoGPUEventsError
    from analysis.metrics.critical_path.critical_path import critical_path_summary_rank

    with pytest.raises(NoGPUEventsError, match=r"rank\(s\) \[3\].*analysed window holds no event"):
        critical_path_summary_rank(rank_trace([], rank=3))


@pytest.mark.parametrize("patterns", ["default", "hta"])
@pytest.mark.parametrize("scenario", list(cpt.SCENARIOS))
def test_summary_and_length_without_the_breakdown_are_the_breakdowns(scenario, patterns):
    """``summary()`` and ``path_length_us`` read the path's categories without building the
    breakdown table; the same numbers, bit for bit, as from the table."""
    rt, _ = load(scenario)
    for g in critical_path_rank(rt, patterns=patterns).values():
        summary, length = g.summary(), g.path_length_us
        assert g._breakdown is None  # the table was not built for them
        bd = g.get_critical_path_breakdown()
        pd.testing.assert_series_equal(
            summary, bd.groupby("bound_by")["duration"].sum() / bd["duration"].sum() * 100,
            check_exact=True)
        assert length == float(bd["duration"].sum())
        pd.testing.assert_series_equal(g.summary(), summary, check_exact=True)  # table built
