"""What the TensorBoard views share per rank (issue 25's speed): the plugin's view of a rank
(roles, steps, one sort of the events), its kernels as arrays, each GPU's activity; and the
numpy building blocks (interval sets, group statistics). A view computed in a batch, reading
what another view of the batch memoised, equals the view computed alone on a fresh rank; the
building blocks equal their plain definitions on random inputs."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from conftest import SHARED_TRACES

from analysis import TraceAnalysis
from analysis.kineto.extras import attach_extras
from analysis.kineto.parse import parse_trace_bytes
from analysis.kineto.sources import read_trace_bytes
from analysis.metrics.tensorboard import gpu_summary, kernel_table, step_time_breakdown
from analysis.metrics.tensorboard.gpu_summary import _sm_segments, _sm_within, _sm_within_each
from analysis.metrics.tensorboard.kernel_table import _group_ids
from analysis.metrics.tensorboard.ranges import length_within, lengths_within, merge, union
from analysis.testing import tensorboard_traces

GPU_VIEWS = ("gpu_summary", "step_time_breakdown", "kernel_table", "gpu_utilization_timeline")
STEPS = {
    "gpu_summary": gpu_summary.gpu_summary_rank,
    "step_time_breakdown": step_time_breakdown.step_time_breakdown_rank,
    "kernel_table": kernel_table.kernel_table_rank,
    "gpu_utilization_timeline": gpu_summary.gpu_utilization_timeline_rank,
}
REAL = [  # one current-schema H100 trace with kernel args, one 2021-schema V100 trace
    "tracelens/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz",
    "hta/df_index_resolver/df_index_resolver.json.gz",
]


def _equal(a, b) -> None:
    if isinstance(a, tuple):
        for x, y in zip(a, b, strict=True):
            _equal(x, y)
        return
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))


def _facade(path, **options) -> TraceAnalysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(str(path), progress=False, **options)


@pytest.mark.parametrize("legacy", [False, True])
def test_views_in_one_batch_equal_views_one_at_a_time(tmp_path, legacy):
    """The synthetic trace (answers known: test_tensorboard.py): ``run_many`` of the four GPU
    views in one batch gives what four separate facades give, one view each."""
    path = tensorboard_traces.write(tmp_path / "rank0.json.gz", legacy=legacy, tail=True)
    batch = _facade(path, use_cache=False).run_many({v: {} for v in GPU_VIEWS})
    for view in GPU_VIEWS:
        alone = _facade(path, use_cache=False).run_many({view: {}})[view]
        _equal(batch[view], alone)


def _rank(path: str):
    rt = parse_trace_bytes(read_trace_bytes(path), path)
    return attach_extras(rt, ["kernel_args"])


@pytest.mark.parametrize("relpath", REAL)
def test_shared_parts_on_real_traces_equal_fresh_ones(relpath):
    """On real traces: each view computed after the others (reading the plugin view, kernels and
    GPU activity they memoised) equals the view computed first on a freshly parsed rank."""
    path = SHARED_TRACES / relpath
    if not path.is_file():
        pytest.skip(f"real traces not available: {path} does not exist")
    shared = _rank(str(path))
    together = {name: step(shared) for name, step in STEPS.items()}
    for name, step in reversed(STEPS.items()):  # another order, each on a fresh rank
        fresh = replace(shared)  # the same tables, nothing memoised
        assert not fresh._memo
        _equal(together[name], step(fresh))


def test_cached_batch_equals_fresh_batch(tmp_path):
    """Persisted parts read back (a second facade on the same cache) equal the computed ones."""
    (tmp_path / "trace").mkdir()
    path = tensorboard_traces.write(tmp_path / "trace" / "rank0.json.gz")
    first = _facade(path, cache_dir=str(tmp_path / "cache")).run_many({v: {} for v in GPU_VIEWS})
    assert len(list((tmp_path / "cache").glob("*/results/*.json"))) == len(GPU_VIEWS)
    again = _facade(path, cache_dir=str(tmp_path / "cache")).run_many({v: {} for v in GPU_VIEWS})
    for view in GPU_VIEWS:
        _equal(first[view], again[view])


def _intervals(rng, n: int) -> tuple[np.ndarray, np.ndarray]:
    starts = rng.integers(0, 1000, n).astype(float)
    return starts, starts + rng.integers(0, 50, n)


def _covered(starts, ends) -> set[int]:
    """The unit cells [t, t+1) inside some interval (integer endpoints): the union by hand."""
    return {t for s, e in zip(starts, ends, strict=True) for t in range(int(s), int(e))}


def test_merge_and_union_are_the_union():
    rng = np.random.default_rng(25)
    for _ in range(50):
        s, e = _intervals(rng, int(rng.integers(0, 40)))
        m = merge(s, e)
        assert _covered(*m) == _covered(s, e)
        assert (m[0][1:] > m[1][:-1]).all()  # sorted, disjoint, touching ones joined
        order = np.argsort(s, kind="stable")
        presorted = merge(s[order], e[order], by_start=True)
        assert all(np.array_equal(x, y) for x, y in zip(m, presorted, strict=True))
        s2, e2 = _intervals(rng, int(rng.integers(0, 40)))
        u = union(m, merge(s2, e2))
        both = merge(np.r_[s, s2], np.r_[e, e2])
        assert all(np.array_equal(x, y) for x, y in zip(u, both, strict=True))


def test_merge_known_answer():
    s, e = merge([5, 0, 2, 10, 12], [7, 3, 4, 12, 13])
    assert s.tolist() == [0, 5, 10] and e.tolist() == [4, 7, 13]


def test_lengths_and_sm_sweep_per_window_equal_one_window_at_a_time():
    rng = np.random.default_rng(7)
    s, e = _intervals(rng, 60)
    blocks = rng.uniform(0.1, 0.8, 60)
    edges = np.linspace(-10, 1100, 23)
    lo, hi = edges[:-1], edges[1:]
    busy = merge(s, e)
    segments = _sm_segments(s, e, blocks)
    assert np.allclose(lengths_within(busy, lo, hi),
                       [length_within(busy, a, b) for a, b in zip(lo, hi, strict=True)])
    assert np.allclose(_sm_within_each(segments, lo, hi),
                       [_sm_within(segments, a, b) for a, b in zip(lo, hi, strict=True)])


def test_sm_sweep_known_answer():
    """Two kernels of 0.75 blocks per SM overlapping on [5, 10): min(1.5, 1) there, 0.75 on
    [0, 5) and [10, 15): ∫ = 3.75 + 5 + 3.75."""
    segments = _sm_segments(np.array([0.0, 5.0]), np.array([10.0, 15.0]), np.array([0.75, 0.75]))
    assert _sm_within(segments, 0, 15) == pytest.approx(12.5)
    assert _sm_within_each(segments, np.array([0.0, 5.0]), np.array([5.0, 15.0])).tolist() == [
        pytest.approx(3.75), pytest.approx(8.75)]


def test_group_ids_equal_a_pandas_group_by():
    rng = np.random.default_rng(3)
    keys = [rng.integers(-1, 4, 500), rng.integers(-1, 3, 500), rng.integers(0, 7, 500)]
    by, starts, first = _group_ids(keys)
    frame = pd.DataFrame({f"k{i}": k for i, k in enumerate(keys)})
    groups = frame.groupby(list(frame.columns), sort=False, dropna=False).indices
    ours = {tuple(int(k[by[a]]) for k in keys): by[a:b].tolist()
            for a, b in zip(starts, np.r_[starts[1:], len(by)], strict=True)}
    assert ours == {tuple(int(x) for x in key): rows.tolist() for key, rows in groups.items()}
    assert sorted(first.tolist()) == sorted(rows[0] for rows in groups.values())


def test_roles_from_one_sort_equal_each_role_merged_alone():
    """``_roles`` lays the roles out by one stable sort by role of the events in start order:
    each role's ranges equal that role's events merged alone."""
    from analysis.metrics.tensorboard.plugin_steps import ROLES, _roles

    rng = np.random.default_rng(11)
    ts_ns = rng.integers(0, 10**9, 3000)
    ts, end = ts_ns / 1000, ts_ns / 1000 + rng.integers(0, 5000, 3000)
    role = rng.integers(0, len(ROLES) + 1, 3000).astype(np.int8)  # len(ROLES): no role
    got = _roles(role, np.argsort(ts_ns, kind="stable"), ts, end)
    assert list(got) == list(ROLES)
    for i, name in enumerate(ROLES):
        alone = merge(ts[role == i], end[role == i])
        assert all(np.array_equal(x, y) for x, y in zip(got[name], alone, strict=True))


def test_role_table_equals_the_plugins_rules_event_by_event():
    """The role of every combination of category, name and 2021 raw category, read from the
    table worked out per combination, equals the plugin's rules written out per event (the
    module docstring); a combination the rules give two roles (an operator whose 2021 raw
    category is Runtime: the parser never writes one) is marked so, and read role by role."""
    from analysis.metrics.tensorboard.plugin_steps import (
        _LEGACY,
        _MANY,
        _NO_ROLE,
        _ROLE_BITS,
        _STEP,
        ROLES,
        _combination_flags,
        _name_kind,
    )

    cats = ["cpu_op", "user_annotation", "gpu_user_annotation", "kernel", "gpu_memcpy",
            "gpu_memset", "cuda_runtime", "python_function", "Trace"]
    names = ["ProfilerStep#3", "nccl:all_reduce", "gloo:broadcast", "nccl:send",
             "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
             "enumerate(DataPipe)#Mapper", "aten::mm", "sm90_gemm"]
    flags, _ = _combination_flags(cats)
    kinds = _name_kind(names)
    for c, cat in enumerate([*cats, None]):
        for m, name in enumerate([*names, None]):
            for legacy, raw in enumerate(_LEGACY):
                name_s = name or ""
                is_op = cat == "cpu_op"
                is_annotation = cat in ("user_annotation", "gpu_user_annotation")
                is_step = (is_op or is_annotation) and name_s.startswith("ProfilerStep#")
                comm_name = name_s in ("nccl:all_reduce", "gloo:broadcast")
                loader = is_op and not is_step and name_s.startswith("enumerate(Data")
                cpu_like = (is_op and not is_step) or raw == "python"
                comm_op = (cpu_like or is_annotation) and not is_step and comm_name
                expected = [cat == "kernel", cat == "gpu_memcpy", cat == "gpu_memset", comm_op,
                            raw == "runtime", loader, cpu_like and not loader and not comm_op]
                want = (_MANY if sum(expected) > 1 else expected.index(True) if any(expected)
                        else _NO_ROLE)
                code = int(flags[((c << 3) | int(kinds[m])) * len(_LEGACY) + legacy])
                assert code & _ROLE_BITS == want, (cat, name, raw, ROLES)
                assert bool(code & _STEP) == is_step


def test_plugin_us_equals_integer_division():
    """ns → µs without integer division: the same doubles as ``ns // 1000 + ns % 1000 / 1000``,
    for epoch-sized times, remainders 0 and 999, negatives and offsets too large for a float."""
    from analysis.metrics.tensorboard.ranges import plugin_us

    def by_division(ns):
        ns = np.asarray(ns, dtype=np.int64)
        return (ns // 1000).astype(np.float64) + (ns % 1000) / 1000

    rng = np.random.default_rng(5)
    cases = [
        1_700_000_000_000_000_000 + rng.integers(0, 10**12, 10**5),
        rng.integers(0, 10**9, 10**5) * 1000 + 999,
        rng.integers(0, 10**9, 10**5) * 1000,
        np.array([-1001, -1000, -999, -1, 0, 1, 999, 1000, 1001]),
        rng.integers(-10**18, 10**18, 10**4),  # offsets beyond 2**52: integer division
        np.array([], dtype=np.int64),
    ]
    for ns in cases:
        assert np.array_equal(plugin_us(ns), by_division(ns))
    assert plugin_us(1_234_567) == by_division(1_234_567)


def test_an_event_with_two_roles_counts_in_each(tmp_path):
    """An operator whose 2021 raw category says Runtime (the parser never writes one: its
    category comes from the raw one) has two roles by the plugin's rules: it is in both role
    sets, each merged alone, as the rules read per event would have it."""
    from analysis.metrics.tensorboard.plugin_steps import plugin_view

    path = tensorboard_traces.write(tmp_path / "rank0.json.gz", legacy=True)
    rt = _rank(str(path))
    ev = rt.events
    op = int(np.flatnonzero((ev["cat"] == "cpu_op").to_numpy()
                            & ~ev["name"].astype(str).str.startswith("ProfilerStep#").to_numpy()
                            & ~ev["name"].astype(str).str.startswith("enumerate(").to_numpy())[0])
    args = rt.extras["kernel_args"]
    extra = args.iloc[:1].copy()
    extra.index = [ev.index[op]]
    extra["raw_cat"] = pd.Categorical(["Runtime"], categories=args["raw_cat"].cat.categories
                                      .union(["Runtime"]))
    args = args.assign(raw_cat=pd.Categorical(args["raw_cat"].astype(str),
                                              categories=extra["raw_cat"].cat.categories))
    two = replace(rt, extras={**rt.extras, "kernel_args": pd.concat([args, extra]).sort_index()})
    before, after = plugin_view(rt).roles, plugin_view(two).roles
    start, end = plugin_view(two).ts[op], plugin_view(two).end[op]

    def covers(ranges) -> bool:
        return bool(((ranges[0] <= start) & (ranges[1] >= end)).any())

    assert not covers(before["runtime"])  # the operator ran outside every runtime call
    assert covers(after["cpu_exec"])
    grown = union(before["runtime"], (np.array([start]), np.array([end])))
    assert all(np.array_equal(x, y) for x, y in zip(after["runtime"], grown, strict=True))
    for role in ("kernel", "memcpy", "memset", "communication", "dataloader", "cpu_exec"):
        assert all(np.array_equal(x, y) for x, y in zip(before[role], after[role], strict=True))
