"""TensorBoard plugin parity: our tensorboard analyses against torch-tb-profiler 0.4.3 on every
Kineto trace of ../shared/traces (the plugin's numbers are snapshots in tests/data/tb_oracle,
written by scripts/tb_oracle_snapshot.py; no TensorBoard needed here).

Targets (issue 25): GPU utilization, est. SM efficiency, est. achieved occupancy and tensor-core
share within 0.05 percentage points; every step's categories within 1 µs; memory peaks per device
and every operator's memory stats within 1 KB; the top 20 kernels' calls, total time, tensor-core
flag and mean blocks per SM equal (to float rounding).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import SHARED_TRACES
from parity.tensorboard_oracle import (
    differences,
    load_snapshot,
    module_differences,
    operator_differences,
    rank_trace,
    snapshots,
)

from analysis.metrics.tensorboard import gpu_summary, kernel_table, memory_view, step_time_breakdown

PP = 0.05
US = 1.0
KB = 1024
EQUAL = 1e-6  # the snapshots keep 6 decimals
LIMITS = {
    "steps": 0, "step_categories_us": US,
    "gpu_utilization_pct": PP, "sm_efficiency_pct": PP, "achieved_occupancy_pct": PP,
    "tensor_core_pct": PP,
    "kernel_calls": 0, "kernel_total_us": EQUAL, "kernel_tc_flag": 0, "kernel_blocks_per_sm": EQUAL,
    "memory_peak_bytes": KB, "operator_memory": KB, "operator_memory_rows": 0,
    "memory_event_rows": 0, "memory_event_mismatches": 0, "memory_event_time_us": US,
    "memory_curve_peak_bytes": KB,
}
SNAPS = [(p, load_snapshot(p)) for p in snapshots()]


def _trace(snap) -> str:
    path = SHARED_TRACES / snap["file"]
    if not path.is_file():
        pytest.skip(f"real traces not available: {path} does not exist")
    return str(path)


@pytest.mark.parametrize("snap", [pytest.param(s, id=p.stem[:60]) for p, s in SNAPS if "error" not in s])
def test_matches_the_plugin(snap):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diffs = differences(snap, _trace(snap))
    over = {k: v for k, v in diffs.items() if not (v <= LIMITS[k] or np.isnan(v))}
    assert not over, f"{snap['file']}: over the limits: {over}"


@pytest.mark.parametrize("snap", [pytest.param(s, id=p.stem[:60]) for p, s in SNAPS if "error" not in s])
def test_operator_tables_match_the_plugin(snap):
    """Every operator (by name, and by name and input shapes): calls and the tensor-core flag
    equal, host and device times within 1 µs; the same rows."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diffs = operator_differences(snap, _trace(snap))
    def limit(key: str) -> float:
        return US if key.endswith("_us") else 0  # rows, calls / flag, missing operators: none

    over = {k: v for k, v in diffs.items() if not v <= limit(k)}
    assert not over, f"{snap['file']}: over the limits: {over}"


@pytest.mark.parametrize("snap", [pytest.param(s, id=p.stem[:60]) for p, s in SNAPS
                                  if "error" not in s and s.get("module_view")])
def test_module_view_matches_the_plugin(snap):
    """The same hierarchy (names, ids, depths, calls, operators) and times within 1 µs."""
    diffs = module_differences(snap, _trace(snap))
    assert diffs["module_mismatches"] == 0 and diffs["module_time_us"] <= US, diffs


def test_the_oracle_covers_the_views():
    """The snapshots hold what the targets need: steps everywhere, GPU numbers on 20+ traces,
    memory on the 5 profile_memory traces the plugin reads (the 6th crashes it)."""
    ok = [s for _, s in SNAPS if "error" not in s]
    if not ok:
        pytest.skip("no snapshots")
    assert sum(bool(s["gpu_summary"]) for s in ok) >= 20
    assert sum("memory_peaks" in s for s in ok) == 5
    assert sum(any(g["achieved_occupancy"] is not None for g in s["gpu_summary"]) for s in ok) >= 15


@pytest.mark.parametrize("snap", [pytest.param(s, id=p.stem[:60]) for p, s in SNAPS if "error" in s])
def test_traces_the_plugin_crashes_on_still_analyse(snap):
    """The plugin raises on these (its error is in the snapshot); we give every view."""
    rt = rank_trace(_trace(snap))
    assert len(step_time_breakdown.step_time_breakdown_rank(rt))
    assert len(gpu_summary.gpu_summary_rank(rt))
    assert len(kernel_table.kernel_table_rank(rt).kernels)
    view, _ = memory_view.memory_view_rank(rt)
    assert view is not None and len(view.peaks)


def test_a_module_called_inside_an_operator_is_its_child(tmp_path):
    """With ``with_modules=True`` the plugin's trees hold the ``nn.Module`` nodes: an operator
    around a module call (a user's ``record_function``; SGLang's ``sglang_profiler::*`` ranges
    around ``RMSNorm``, activation checkpointing's ``ReluBackward0`` around recomputed modules)
    has the whole module as a child, so its self time excludes the module's Python time too, and
    its tensor-core eligibility does not come through the module. Synthetic
    ``tensorboard_traces(modules=True, wrapper=True)`` against the plugin's snapshot
    ``tests/data/tb_oracle_synthetic/module_in_operator.json``."""
    from parity.tensorboard_oracle import SNAPSHOTS

    from analysis import TraceAnalysis
    from analysis.testing import tensorboard_traces

    snap = load_snapshot(SNAPSHOTS.parent / "tb_oracle_synthetic" / "module_in_operator.json")
    path = tensorboard_traces.write(tmp_path / "rank0.json", modules=True, wrapper=True)
    diffs = operator_differences(snap, str(path))
    assert not {k: v for k, v in diffs.items() if not v <= (US if k.endswith("_us") else 0)}, diffs
    assert module_differences(snap, str(path)) == {"module_mismatches": 0, "module_time_us": 0.0}
    ops = TraceAnalysis(str(tmp_path), use_cache=False, progress=False).get_operator_table(
        visualize=False).set_index("name")
    wrapper = ops.loc["my_wrapper"]
    assert (wrapper["host_total_us"], wrapper["host_self_us"]) == (320, 320 - 310)
    assert not wrapper["tc_eligible"]


def test_memory_inside_a_module_but_no_operator_belongs_to_none(tmp_path):
    """The plugin's trees hold the ``nn.Module`` nodes for the memory view too: an allocation
    inside a module but in none of its operators has no operator (``<unknown>``), although an
    operator encloses the module (``my_wrapper``: its self memory stays 0). Synthetic
    ``tensorboard_traces(modules=True, wrapper=True, module_memory=True)`` against the plugin's
    snapshot ``memory_in_module.json``."""
    from parity.tensorboard_oracle import SNAPSHOTS

    from analysis import TraceAnalysis
    from analysis.testing import tensorboard_traces

    snap = load_snapshot(SNAPSHOTS.parent / "tb_oracle_synthetic" / "memory_in_module.json")
    path = tensorboard_traces.write(tmp_path / "rank0.json", modules=True, wrapper=True,
                                    module_memory=True)
    diffs = differences(snap, str(path))
    over = {k: v for k, v in diffs.items() if not (v <= LIMITS[k] or np.isnan(v))}
    assert not over, over
    ta = TraceAnalysis(str(tmp_path), use_cache=False, progress=False)
    ops = ta.get_operator_memory().set_index(["device", "operator"])
    wrapper = ops.loc[("GPU0", "my_wrapper")]
    assert (wrapper["self_allocation_bytes"], wrapper["allocation_bytes"]) == (0, 1500)
    events = ta.get_memory_events()
    assert events.loc[events["bytes"] == 256, "operator"].tolist() == ["<unknown>"]


def test_the_comparison_counts_a_missing_value_beside_a_number():
    """``max(worst, abs(nan - x))`` keeps ``worst``: NaN against a number passed unseen (GPU
    utilization NaN here, -0.0 % in the plugin, on three traces of a sweep)."""
    from parity.tensorboard_oracle import gap

    assert gap(np.nan, 5.0) == gap(5.0, None) == np.inf
    assert gap(np.nan, None) == gap(None, np.nan) == 0.0
    assert gap(3.0, 5.5) == 2.5
