"""The TensorBoard plugin's views on a trace whose answers are known by hand
(``analysis.testing.tensorboard_traces``: its docstring derives every number below; the plugin
itself, torch-tb-profiler 0.4.3, gives the same on these files)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from analysis import TraceAnalysis
from analysis.errors import ConfigError, NoMemoryProfileError
from analysis.testing import tensorboard_traces
from analysis.testing.tensorboard_traces import LOADER


def facade(tmp_path, **options) -> TraceAnalysis:
    path = tensorboard_traces.write(tmp_path / "rank0.json.gz", **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(str(path), use_cache=False, progress=False)


def _x(name, cat, ts, dur, **args) -> dict:
    """A complete event of a hand-written trace (µs)."""
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": args}


def _open(path, events) -> TraceAnalysis:
    """``events`` written as a Kineto trace at ``path``, opened (load warnings ignored)."""
    import json

    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(str(path), use_cache=False, progress=False)


@pytest.fixture(scope="module")
def ta(tmp_path_factory):
    return facade(tmp_path_factory.mktemp("tb"))


def test_gpu_summary(ta):
    s = ta.get_gpu_summary(visualize=False)
    assert list(s.columns) == ["rank", "gpu", "gpu_utilization_pct", "sm_efficiency_pct",
                               "achieved_occupancy_pct", "tensor_core_pct"]
    row = s.iloc[0]
    assert (row["rank"], row["gpu"]) == (0, 0)
    assert row["gpu_utilization_pct"] == pytest.approx(45.0)
    assert row["sm_efficiency_pct"] == pytest.approx(27.5)
    assert row["achieved_occupancy_pct"] == pytest.approx(32500 / 900)
    assert row["tensor_core_pct"] == pytest.approx(100 / 9)


def test_step_time_breakdown_partitions_each_step(ta):
    b = ta.get_step_time_breakdown(visualize=False)
    assert list(b.columns[:10]) == ["rank", "step", "kernel_us", "memcpy_us", "memset_us",
                                    "runtime_us", "dataloader_us", "cpu_exec_us", "other_us",
                                    "total_us"]
    assert b["step"].tolist() == [1, 2]
    cols = ["kernel_us", "memcpy_us", "memset_us", "runtime_us", "dataloader_us", "cpu_exec_us",
            "other_us", "total_us"]
    assert b[cols].to_numpy().tolist() == [[400, 50, 0, 0, 100, 100, 350, 1000],
                                           [500, 0, 20, 0, 100, 100, 280, 1000]]
    parts = b[cols[:-1] + ["communication_us"]].sum(axis=1)
    assert np.allclose(parts, b["total_us"])


def test_2021_schema_counts_runtime_and_moves_steps_to_the_device(tmp_path):
    """Kineto's 2021 names: runtime calls count, step 2 ends with its last kernel (3050), step 3
    (no GPU work) is dropped, the window shrinks to [1000, 3050): 900 / 2050 busy."""
    legacy = facade(tmp_path, legacy=True, tail=True)
    b = legacy.get_step_time_breakdown(visualize=False)
    assert b["step"].tolist() == [1, 2]
    assert b[["runtime_us", "cpu_exec_us", "other_us", "total_us"]].to_numpy().tolist() == [
        [10, 90, 350, 1000], [30, 70, 330, 1050]]
    s = legacy.get_gpu_summary(visualize=False).iloc[0]
    assert s["gpu_utilization_pct"] == pytest.approx(100 * 900 / 2050)
    assert s["sm_efficiency_pct"] == pytest.approx(100 * 550 / 2050)


def test_current_schema_keeps_every_annotated_step(tmp_path):
    modern = facade(tmp_path, tail=True)
    b = modern.get_step_time_breakdown(visualize=False)
    assert b["step"].tolist() == [1, 2, 3]
    assert b["runtime_us"].eq(0).all()  # the plugin does not read cuda_runtime events
    assert b.iloc[2][["kernel_us", "other_us", "total_us"]].tolist() == [50, 50, 100]


def test_kernel_table(ta):
    k = ta.get_kernel_table(visualize=False)
    assert list(k.kernels.columns) == ["rank", "name", "tensor_cores_used", "calls", "total_us",
                                       "mean_us", "max_us", "min_us", "mean_blocks_per_sm",
                                       "mean_est_achieved_occupancy_pct"]
    top = k.kernels.iloc[0]
    assert top["name"] == "sgemm_kernel" and not top["tensor_cores_used"]
    assert (top["calls"], top["total_us"], top["max_us"], top["min_us"]) == (2, 700, 400, 300)
    assert top["mean_blocks_per_sm"] == pytest.approx(0.5)
    tc = k.kernels.set_index("name").loc["ampere_h16816gemm_kernel"]
    assert tc["tensor_cores_used"] and tc["mean_est_achieved_occupancy_pct"] == 100
    by_op = k.by_operator.set_index(["name", "operator"])
    row = by_op.loc[("sgemm_kernel", "aten::mm")]
    assert (row["grid"], row["block"], row["registers_per_thread"]) == ("[66, 1, 1]", "[128, 1, 1]", 32)
    assert by_op.loc[("elementwise_kernel", "aten::add"), "calls"] == 1


def test_memory_peaks_timeline_and_operators(ta):
    peaks = ta.get_memory_peaks().set_index("device")
    assert peaks.loc["GPU0", ["peak_allocated_bytes", "peak_time_us", "step"]].tolist() == [4500, 2150, 2]
    assert peaks.loc["CPU", "peak_allocated_bytes"] == 64
    tl = ta.get_memory_timeline()
    assert list(tl.columns) == ["rank", "device", "time_us", "allocated_bytes", "reserved_bytes"]
    assert tl[tl["device"] == "GPU0"]["allocated_bytes"].tolist() == [1000, 1500, 500, 4500]
    ops = ta.get_operator_memory().set_index(["device", "operator"])
    mm = ops.loc[("GPU0", "aten::mm")]
    # its own +4000 (step 2) and the +1000 of the aten::empty it calls (step 1)
    assert mm[["calls", "size_increase_bytes", "self_size_increase_bytes", "allocation_count",
               "self_allocation_count", "allocation_bytes", "self_allocation_bytes"]].tolist() == [
        2, 5000, 4000, 2, 1, 5000, 4000]
    assert ops.loc[("GPU0", "aten::add"), "self_size_increase_bytes"] == -500  # +500, frees 1000


def test_memory_events_pair_allocations_with_frees(ta):
    ev = ta.get_memory_events()
    first = ev.iloc[0]
    assert (first["operator"], first["bytes"], first["allocated_us"], first["freed_us"],
            first["lifetime_us"], first["freed"]) == ("aten::mm (aten::empty)", 1000, 1110, 1350, 240, True)
    assert ev["freed"].tolist() == [True, False, False, False]
    assert ev.loc[~ev["freed"], "freed_us"].isna().all()


def test_a_top_level_empty_allocates_under_its_own_name(tmp_path):
    """An ``aten::empty*`` inside an operator allocates for it (``"aten::add (aten::empty)"``, the
    plugin's rule); one at the top of the stack is just ``aten::empty``, where the plugin names
    its tree's root: ``"CallTreeRoot (aten::empty)"`` (the B200 DeepSeek-V3 trace of
    wbing520/ai-performance-engineering; docs/deviations.md)."""
    import json

    def op(name, ts, dur):
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                "args": {"External id": ts}}

    def memory(ts, nbytes, total, addr):
        return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1,
                "tid": 1, "ts": ts, "args": {"Total Reserved": 1 << 20, "Total Allocated": total,
                                             "Bytes": nbytes, "Device Id": 0, "Device Type": 1,
                                             "Addr": addr}}

    events = [op("aten::empty", 100, 10), memory(105, 512, 512, 1),
              op("aten::add", 200, 50), op("aten::empty", 205, 10), memory(210, 256, 768, 2),
              memory(300, -512, 256, 1)]
    (tmp_path / "rank0.json").write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    ev = TraceAnalysis(str(tmp_path), use_cache=False, progress=False).get_memory_events()
    assert ev[["operator", "bytes", "freed"]].values.tolist() == [
        ["aten::empty", 512, True], ["aten::add (aten::empty)", 256, False]]


def test_no_memory_events_says_how_to_record_them(tmp_path):
    no_memory = facade(tmp_path, memory=False)
    with pytest.raises(NoMemoryProfileError, match=r"profile_memory=True"):
        no_memory.get_memory_peaks()
    with pytest.raises(NoMemoryProfileError, match=r"rank0.json.gz"):
        no_memory.get_memory_view(visualize=False)
    assert len(no_memory.get_gpu_summary(visualize=False)) == 1  # the other views still work


def test_memory_events_are_read_only_when_asked(tmp_path):
    """The [memory] events are an extra: a plain load does not decode them."""
    fresh = facade(tmp_path)
    assert all("memory_events" not in rt.extras for rt in fresh.full_trace.values())
    fresh.get_memory_peaks()
    assert all("memory_events" in rt.extras for rt in fresh.full_trace.values())


def test_utilization_timeline_buckets(ta):
    t = ta.get_gpu_utilization_timeline(visualize=False)
    # the profiler span [900, 3100): 10 µs would give 220 buckets, so 100 µs buckets, 22 of them
    assert len(t) == 22 and t["start_us"].iloc[0] == 900
    busy = (t["gpu_utilization_pct"] / 100 * (t["end_us"] - t["start_us"])).sum()
    assert busy == pytest.approx(900)


def test_figures_draw(ta):
    from analysis.figures import gpu_summary, kernel_table, memory_view, step_time_breakdown

    figs = {**gpu_summary.draw(ta.get_gpu_summary(visualize=False)),
            **step_time_breakdown.draw(ta.get_step_time_breakdown(visualize=False)),
            **kernel_table.draw(ta.get_kernel_table(visualize=False)),
            **memory_view.draw(ta.get_memory_view(visualize=False))}
    assert set(figs) == {"gpu_summary", "step_time_breakdown", "tensor_core_share",
                         "kernel_table", "memory_view"}
    mem = figs["memory_view"]
    assert {t.name for t in mem.data} == {"allocated", "reserved", "peak"}
    assert any("peak 4.39 KiB" in (t.text or [""])[0] for t in mem.data if t.name == "peak")
    stacked = figs["step_time_breakdown"]
    assert sum(sum(t.y) for t in stacked.data) == pytest.approx(2.0)  # ms over both steps


def test_operator_table_2021_schema(tmp_path):
    """Host self = duration - children - own runtime calls; device = the kernels, copies and sets
    its runtime calls launched (2021 traces: the plugin links them through ``Runtime`` events)."""
    table = facade(tmp_path, legacy=True).get_operator_table(visualize=False)
    ops = table.set_index("name")
    assert list(table.columns) == ["rank", "name", "calls",
                                               "host_self_us", "host_total_us", "device_self_us",
                                               "device_total_us", "tc_eligible", "tc_self_pct",
                                               "tc_total_pct"]
    mm = ops.loc["aten::mm"]
    # 200 - 10 (aten::empty) - 10 (a launch), and 200 - 3 launches of 10
    assert mm[["calls", "host_total_us", "host_self_us", "device_self_us"]].tolist() == [2, 400, 350, 820]
    assert mm["tc_eligible"] and mm["tc_self_pct"] == pytest.approx(100 * 100 / 820)
    assert ops.loc["aten::add", ["host_self_us", "device_total_us"]].tolist() == [80, 150]
    assert LOADER not in ops.index  # the plugin's DataLoader node is not an operator


def test_operator_table_current_schema_and_shapes(tmp_path):
    """Today's traces: no device time (the plugin does not read cuda_runtime); grouped by shapes,
    an operator without recorded shapes is "[]"."""
    t = facade(tmp_path)
    ops = t.get_operator_table(visualize=False).set_index("name")
    assert ops["device_total_us"].eq(0).all()
    assert ops.loc["aten::mm", ["host_self_us", "host_total_us"]].tolist() == [390, 400]
    by_shape = t.get_operator_table(group_by="name_and_input_shape", visualize=False)
    assert set(by_shape["input_shape"]) == {"[]"} and by_shape.columns[2] == "input_shape"
    with pytest.raises(ConfigError, match="group_by"):
        t.get_operator_table(group_by="shape", visualize=False)


def test_operator_table_by_call_stack(tmp_path):
    """``Call stack`` args (the generator's STACKS): one row per operator and distinct stack;
    aten::empty's empty stack gives no row; by shape too."""
    t = facade(tmp_path, stacks=True)
    s = t.get_operator_table(group_by="name_and_stack", visualize=False)
    assert list(s.columns[:4]) == ["rank", "name", "call_stack", "calls"]
    rows = s[["name", "call_stack", "calls", "host_total_us", "host_self_us"]].to_numpy().tolist()
    assert rows == [
        ["aten::mm", tensorboard_traces.STACKS[20][0], 1, 200, 200],
        ["aten::mm", tensorboard_traces.STACKS[10][0], 1, 200, 190],  # holds aten::empty
        ["aten::add", tensorboard_traces.STACKS[11][0], 1, 100, 100],
    ]
    by_shape = t.get_operator_table(group_by="name_and_input_shape_and_stack", visualize=False)
    assert list(by_shape.columns[1:4]) == ["name", "input_shape", "call_stack"]
    assert by_shape["input_shape"].tolist() == ["[[8, 16], [16, 4]]"] * 2 + ["[[8, 4], [8, 4]]"]


def test_module_summary(tmp_path):
    """``with_modules=True``: the hierarchy and each module's calls, operators and host times
    (the generator's docstring derives them; the plugin gives the same)."""
    m = facade(tmp_path, modules=True).get_module_summary(visualize=False)
    assert list(m.columns) == ["rank", "module", "module_id", "path", "depth", "occurrences",
                               "operators", "host_total_us", "host_self_us", "device_total_us",
                               "device_self_us"]
    assert m["path"].tolist() == ["Net_0", "Net_0 / Linear_0"]
    assert m[["occurrences", "operators", "host_total_us", "host_self_us"]].to_numpy().tolist() == [
        [2, 1, 520, 20], [2, 2, 400, 0]]


def test_module_summary_without_modules_says_how_to_record_them(ta):
    from analysis.errors import NoModulesError

    with pytest.raises(NoModulesError, match="with_modules=True"):
        ta.get_module_summary(visualize=False)


@pytest.mark.parametrize("device_type, name", [(6, "GPU0"), (12, "GPU0"), (19, "MTIA0"),
                                               (42, "type42:0")])
def test_memory_of_every_device_type_is_kept(tmp_path, device_type, name):
    """ROCm builds record their GPU's memory as ``Device Type`` 6 (HIP): every real AMD trace with
    memory events of a sweep (10 of 10). Its events were named "" and left out of the curve, the
    operator table and the report's GPU peak; the plugin crashes on them. Any device type is kept
    now, the GPUs' (HIP, XPU, MPS) as ``GPU<id>``, with the numbers a CUDA device gets."""
    import gzip
    import json

    (tmp_path / "cuda").mkdir()
    cuda = tensorboard_traces.write(tmp_path / "cuda" / "rank0.json", memory=True)
    doc = json.loads(cuda.read_text())
    for e in doc["traceEvents"]:
        if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1:
            e["args"]["Device Type"] = device_type
    other = tmp_path / "other" / "rank0.json.gz"
    other.parent.mkdir()
    other.write_bytes(gzip.compress(json.dumps(doc).encode()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = TraceAnalysis(str(cuda.parent), use_cache=False, progress=False)
        b = TraceAnalysis(str(other.parent), use_cache=False, progress=False)
    for method in ("get_memory_peaks", "get_memory_timeline", "get_operator_memory",
                   "get_memory_events"):
        want = getattr(a, method)().replace({"device": {"GPU0": name}})
        got = getattr(b, method)()
        pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True),
                                      check_dtype=False, obj=method)
    assert name in set(b.get_memory_timeline()["device"])


def test_kernel_table_lists_kernels_without_stream_or_correlation(tmp_path):
    """An edited trace whose kernels kept only an ``External id`` (amd-sriram/Frameworks101's
    profile): the other GPU analyses do not count them (no stream), but the plugin's kernel view
    reads kernels by category and lists them; it raised NoGPUEventsError here. A trace without
    any kernel still does."""
    from analysis.errors import NoGPUEventsError

    events = [_x("aten::mm", "cpu_op", 0, 50, **{"External id": 5}),
              _x("igemm_wrw_kernel", "kernel", 60, 4, **{"External id": 5}),
              _x("igemm_wrw_kernel", "kernel", 70, 6, **{"External id": 5}),
              _x("SubTensorOpWithScalar1d", "kernel", 80, 2)]
    ta = _open(tmp_path / "edited.json", events)
    k = ta.get_kernel_table(visualize=False)
    assert k.kernels[["name", "calls", "total_us"]].values.tolist() == [
        ["igemm_wrw_kernel", 2, 10.0], ["SubTensorOpWithScalar1d", 1, 2.0]]
    assert k.by_operator.set_index("name").loc["igemm_wrw_kernel", "operator"] == "aten::mm"
    with pytest.raises(NoGPUEventsError):
        ta.get_idle_time_breakdown(visualize=False)  # HTA's GPU work: none counted
    no_gpu = _open(tmp_path / "cpu.json", events[:1])
    with pytest.raises(NoGPUEventsError, match="Kernels"):
        no_gpu.get_kernel_table(visualize=False)


def test_gpu_utilization_without_steps_or_cpu_events_is_nan(tmp_path):
    """Runtime calls and kernels only (no ProfilerStep, no operator): no window to measure the
    utilization over. The plugin shows -0.0 % (0 over its one step's negative span); NaN here
    (docs/deviations.md), and the report shows no card for it."""
    from analysis.metrics.tensorboard.gpu_summary import key_numbers

    events = [_x("cudaLaunchKernel", "cuda_runtime", 0, 5, correlation=1),
              _x("gemm_kernel", "kernel", 10, 40, device=0, stream=7, correlation=1,
                **{"blocks per SM": 2.0, "est. achieved occupancy %": 50})]
    summary = _open(tmp_path / "gpu_only.json", events).get_gpu_summary(visualize=False)
    assert np.isnan(summary["gpu_utilization_pct"].iloc[0])
    assert np.isnan(summary["sm_efficiency_pct"].iloc[0])
    assert summary["tensor_core_pct"].iloc[0] == 0  # kernel time, no window needed
    assert key_numbers(summary) == []


def test_roots_of_one_name_are_listed_alike_in_every_process(tmp_path):
    """Root modules of one name (here four ``Net_0`` instances, no parent id) came in the order
    of a set of tuples, which changes with each process's hash seed: the module view of one
    trace differed between two runs. Ordered by name, then module id (and subtree) now."""
    events = []
    for k, module_id in enumerate((3, 1, 2, 0)):
        ts = 1000 + 100 * k
        events.append({"ph": "X", "cat": "python_function", "name": "nn.Module: Net_0",
                       "pid": 1, "tid": 1, "ts": ts, "dur": 50,
                       "args": {"Python id": k + 1, "Python module id": module_id}})
        events.append(_x("aten::mm", "cpu_op", ts + 10, 20))
    m = _open(tmp_path / "t.json", events).get_module_summary(visualize=False)
    assert m["module_id"].tolist() == [0, 1, 2, 3]


def test_memory_views_of_a_rank_without_operators(tmp_path):
    """``[memory]`` events but no CPU operator (CPU activity not recorded): every memory view
    raised IndexError ("a bug"); the records are in no operator now, as the plugin's."""
    mem = {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1}
    events = [
        _x("k", "kernel", 10, 5, device=0, stream=7, correlation=1),
        mem | {"ts": 5, "args": {"Addr": 1, "Bytes": 512, "Total Allocated": 512,
                                 "Total Reserved": 2048, "Device Type": 1, "Device Id": 0}},
        mem | {"ts": 20, "args": {"Addr": 1, "Bytes": -512, "Total Allocated": 0,
                                  "Total Reserved": 2048, "Device Type": 1, "Device Id": 0}},
    ]
    t = _open(tmp_path / "t.json", events)
    assert t.get_memory_timeline()["allocated_bytes"].tolist() == [512, 0]
    assert t.get_memory_peaks()["peak_allocated_bytes"].tolist() == [512]
    assert t.get_operator_memory().empty
    ev = t.get_memory_events()
    assert ev[["bytes", "lifetime_us", "freed"]].values.tolist() == [[512, 15.0, True]]


def test_memory_figure_shades_each_panels_steps_as_add_vrect_would(ta):
    """The steps' shading and labels are set at once (plotly's add_vrect per step took 13 s for
    the 80 steps of an 8-rank trace): the same shapes and annotations add_vrect gives."""
    from plotly.subplots import make_subplots

    from analysis.figures import memory_view

    result = ta.get_memory_view(visualize=False)
    fig = memory_view.memory_over_time(result)
    panels = list(result.timeline.groupby(["rank", "device"], sort=True))
    assert len(panels) >= 1 and len(result.steps)
    reference = make_subplots(rows=len(panels), cols=1,
                              vertical_spacing=min(0.3, 0.45 / len(panels)),
                              subplot_titles=[f"rank {int(r)} · {d}" for (r, d), _ in panels])
    for i, ((rank, _), g) in enumerate(panels, start=1):
        reference.add_scatter(x=[0], y=[0], row=i, col=1)  # a panel with data, as the figure's
        t0 = g["time_us"].min()
        for s in result.steps[result.steps["rank"] == rank].itertuples(index=False):
            reference.add_vrect(x0=(s[2] - t0) / 1000, x1=(s[3] - t0) / 1000,
                                fillcolor=memory_view.STEP_FILL, line_width=0, row=i, col=1,
                                annotation_text=f"step {int(s[1])}",
                                annotation_position="top left", annotation_font_size=10)
    assert [s.to_plotly_json() for s in fig.layout.shapes] == [
        s.to_plotly_json() for s in reference.layout.shapes]
    assert [a.to_plotly_json() for a in fig.layout.annotations] == [
        a.to_plotly_json() for a in reference.layout.annotations]


def test_memory_curves_keep_every_columns_first_last_lowest_and_highest_point():
    import numpy as np

    from analysis.figures.memory_view import columns_kept

    rng = np.random.default_rng(11)
    for _ in range(200):
        n = int(rng.integers(1, 3000))
        t = np.sort(rng.integers(0, int(rng.integers(1, 10**6)), n)).astype(float)
        a, b = rng.integers(0, 50, n), rng.integers(-10**9, 10**9, n)
        columns = int(rng.integers(1, 200))
        kept = columns_kept(t, a, b, columns=columns)
        if n <= 4 * columns or t[-1] == t[0]:
            assert kept.tolist() == list(range(n))
            continue
        assert (np.diff(kept) > 0).all() and len(kept) <= 6 * columns
        col = np.minimum(((t - t[0]) / (t[-1] - t[0]) * columns).astype(int), columns - 1)
        for c in np.unique(col):
            here = np.flatnonzero(col == c)
            mine = kept[col[kept] == c]
            assert mine[0] == here[0] and mine[-1] == here[-1]
            for y in (a, b):  # the column's extremes, at their first position
                assert here[np.argmax(y[here])] in mine and here[np.argmin(y[here])] in mine
    t = np.array([0.0, 2.0, 1.0] * 3000)  # not sorted: everything drawn
    assert len(columns_kept(t, t, columns=10)) == len(t)
