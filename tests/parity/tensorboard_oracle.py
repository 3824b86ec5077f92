"""Our tensorboard analyses next to the TensorBoard plugin's snapshots (tests/data/tb_oracle).

Shared by the parity tests and ``benchmarks``-style reporting: :func:`differences` gives, per
trace, the largest absolute difference per metric between our numbers and the plugin's.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.kineto.extras import attach_extras
from analysis.kineto.parse import parse_trace_bytes
from analysis.kineto.sources import read_trace_bytes
from analysis.metrics.tensorboard import gpu_summary, kernel_table, memory_view, step_time_breakdown

SNAPSHOTS = Path(__file__).resolve().parents[1] / "data" / "tb_oracle"
CATEGORIES = {"Kernel": "kernel_us", "Memcpy": "memcpy_us", "Memset": "memset_us",
              "Communication": "communication_us", "Runtime": "runtime_us",
              "DataLoader": "dataloader_us", "CPU Exec": "cpu_exec_us", "Other": "other_us"}
TOP_KERNELS = 20


def snapshots() -> list[Path]:
    return sorted(SNAPSHOTS.glob("*.json"))


def load_snapshot(path: Path) -> dict:
    return json.loads(path.read_text())


def gap(ours, theirs) -> float:
    """|ours - theirs|; 0 when both are missing (None or NaN), infinite when one is: a NaN
    beside a number is a difference (``max(worst, nan)`` would drop it silently)."""
    missing = [v is None or (isinstance(v, float | np.floating) and np.isnan(v))
               for v in (ours, theirs)]
    if all(missing):
        return 0.0
    if any(missing):
        return np.inf
    return float(abs(ours - theirs))


@cache
def rank_trace(trace_path: str):
    rt = parse_trace_bytes(read_trace_bytes(trace_path), trace_path)
    return attach_extras(rt, ["kernel_args", "memory_events", "python_functions"], use_cache=False)


def differences(snap: dict, trace_path: str) -> dict[str, float]:
    """Largest absolute difference per metric (percentage points, µs, bytes, counts)."""
    rt = rank_trace(trace_path)
    out: dict[str, float] = {}
    steps = step_time_breakdown.step_time_breakdown_rank(rt)
    theirs = snap["overview_steps"]
    cols = theirs["columns"]
    out["steps"] = float(len(steps) != len(theirs["rows"]))
    worst = 0.0
    for ours, row in zip(steps.itertuples(index=False), theirs["rows"], strict=False):
        if str(ours.step) != row[0]:
            worst = np.inf
        for name, value in zip(cols[1:], row[1:], strict=True):
            worst = max(worst, gap(getattr(ours, CATEGORIES[name]), value))
        # categories the plugin does not show (no kernel: no GPU columns) must be 0 here
        for name, col in CATEGORIES.items():
            if name not in cols:
                worst = max(worst, gap(getattr(ours, col), 0.0))
    out["step_categories_us"] = worst
    kt = kernel_table.kernel_table_rank(rt).kernels if "kernel_stat" in snap else None
    summary = gpu_summary.gpu_summary_rank(rt) if snap["gpu_summary"] else None
    if summary is not None:
        mine = summary.set_index("gpu")
        for key, col, scale in (("gpu_utilization", "gpu_utilization_pct", 100),
                                ("sm_efficiency", "sm_efficiency_pct", 100),
                                ("achieved_occupancy", "achieved_occupancy_pct", 1)):
            worst = 0.0
            for g in snap["gpu_summary"]:
                theirs_v = g[key]
                ours_v = mine.loc[g["gpu"], col] if g["gpu"] in mine.index else np.nan
                if theirs_v == 0 and np.copysign(1, theirs_v) < 0 and np.isnan(ours_v):
                    # the plugin's -0.0: 0 over its one step's negative span (no CPU event to
                    # span, no ProfilerStep); NaN here (docs/deviations.md, TensorBoard)
                    continue
                worst = max(worst, gap(ours_v, None if theirs_v is None else theirs_v * scale))
            out[col] = worst
        if snap.get("tc_used_ratio") is not None and len(mine) == 1:
            out["tensor_core_pct"] = gap(mine["tensor_core_pct"].iloc[0], 100 * snap["tc_used_ratio"])
    if kt is not None:
        theirs_k = pd.DataFrame(snap["kernel_stat"]).head(TOP_KERNELS)
        ours_k = kt.set_index("name")
        worst = {"kernel_calls": 0.0, "kernel_total_us": 0.0, "kernel_tc_flag": 0.0,
                 "kernel_blocks_per_sm": 0.0}
        for r in theirs_k.itertuples(index=False):
            if r.name not in ours_k.index:
                worst = dict.fromkeys(worst, np.inf)
                break
            o = ours_k.loc[r.name]
            worst["kernel_calls"] = max(worst["kernel_calls"], gap(o.calls, r.count))
            worst["kernel_total_us"] = max(worst["kernel_total_us"], gap(o.total_us, r.sum))
            worst["kernel_tc_flag"] = max(worst["kernel_tc_flag"], float(o.tensor_cores_used != r.tc_used))
            worst["kernel_blocks_per_sm"] = max(worst["kernel_blocks_per_sm"],
                                                gap(o.mean_blocks_per_sm, r.blocks_per_sm))
        out.update(worst)
    if "memory_peaks" in snap:
        view, _ = memory_view.memory_view_rank(rt)
        names = {(p["device_type"], p["device_id"]): p["peak"] for p in snap["memory_peaks"]}
        mine_peaks = view.peaks.set_index("device")["peak_allocated_bytes"]
        worst = 0.0
        for (dtype, did), peak in names.items():
            dev = "CPU" if dtype == 0 else f"GPU{did}"
            worst = max(worst, gap(mine_peaks.get(dev, np.inf), peak))
        out["memory_peak_bytes"] = worst
        worst = 0.0
        ops = view.operators.set_index(["device", "operator"])
        order = ["self_size_increase_bytes", "self_allocation_bytes", "self_allocation_count",
                 "size_increase_bytes", "allocation_bytes", "allocation_count", "calls"]
        theirs_n = 0
        for dev, table in snap["memory_stats"].items():
            for op, values in table.items():
                theirs_n += 1
                if (dev, op) not in ops.index:
                    worst = np.inf
                    continue
                mine_v = ops.loc[(dev, op), order].to_numpy(float)
                worst = max(worst, max(map(gap, mine_v, np.array(values, float))))
        out["operator_memory"] = worst
        out["operator_memory_rows"] = abs(len(view.operators) - theirs_n)
        n_events = sum(snap["memory_events"]["n_rows"].values())
        out["memory_event_rows"] = abs(len(view.events) - n_events)
        start = snap["profiler_start_ts"]
        worst_t, mismatched = 0.0, 0
        for dev, rows in snap["memory_events"]["rows"].items():
            mine = view.events[view.events["device"] == dev].head(len(rows))
            for ours, theirs in zip(mine.itertuples(index=False), rows, strict=True):
                mismatched += (ours.operator != _plugin_operator(theirs[0])) or (
                    ours.bytes != theirs[1])
                for value, ref in ((ours.allocated_us, theirs[2]), (ours.freed_us, theirs[3])):
                    if ref is not None:  # the plugin rounds times to whole µs
                        worst_t = max(worst_t, gap(value - start, ref))
        out["memory_event_mismatches"] = mismatched
        out["memory_event_time_us"] = worst_t
        peak_curve = {dev: float(text.split(": ")[1].rstrip("B")) for dev, text
                      in snap["memory_curve"]["peaks"].items()}
        tl = view.timeline.groupby("device")["allocated_bytes"].max()
        out["memory_curve_peak_bytes"] = max((gap(tl.get(d, np.inf), v) for d, v in peak_curve.items()), default=0.0)
    return out


def _plugin_operator(name: str) -> str:
    """The plugin's memory-event operator as ours names it: a top-level ``aten::empty*`` is
    ``"CallTreeRoot (aten::empty)"`` there (its tree's root as the parent), ``aten::empty`` here
    (docs/deviations.md)."""
    if name.startswith("CallTreeRoot (aten::empty") and name.endswith(")"):
        return name[len("CallTreeRoot ("):-1]
    return name


def operator_differences(snap: dict, trace_path: str) -> dict[str, float]:
    """Largest absolute differences of the operator tables (by name; by name and input shape)."""
    from analysis.kineto.extras import attach_extras

    rt = attach_extras(rank_trace(trace_path), ["op_shapes", "python_functions"], use_cache=False)
    return table_differences(snap, rt, (("op_by_name", "name"),
                                        ("op_by_name_input", "name_and_input_shape")))


def stack_differences(snap: dict, rt) -> dict[str, float]:
    """The same for the plugin's stack view (by name / name and input shape, and call stack)."""
    from analysis.kineto.extras import attach_extras

    rt = attach_extras(rt, ["op_shapes", "op_stacks", "python_functions"], use_cache=False)
    return table_differences(snap, rt, (("op_stack_by_name", "name_and_stack"),
                                        ("op_stack_by_name_input", "name_and_input_shape_and_stack")))


def table_differences(snap: dict, rt, tables) -> dict[str, float]:
    """Per ``(snapshot key, group_by)`` of ``tables``: row count difference, and over the
    plugin's rows the largest time difference (µs), calls / tensor-core flag difference and the
    number of its rows we do not have."""
    from analysis.metrics.tensorboard import operator_table

    out: dict[str, float] = {}
    for key, group in tables:
        ours = operator_table.operator_table_rank(rt, group_by=group)
        index = ["name"] + ["input_shape"] * ("input_shape" in group) + ["call_stack"] * (
            group.endswith("_stack"))
        ours = ours.set_index(index)
        theirs = snap[key]
        out[f"{key}_rows"] = abs(len(ours) - theirs["n_rows"])
        worst_t, worst_n, missing = 0.0, 0.0, 0
        for r in theirs["rows"]:
            k = tuple(r[c] for c in index) if len(index) > 1 else r["name"]
            if k not in ours.index:
                missing += 1
                continue
            o = ours.loc[k]
            worst_n = max(worst_n, abs(o["calls"] - r["calls"]), float(o["tc_eligible"] != r["tc_eligible"]))
            for mine, ref in (("host_total_us", "host_total"), ("host_self_us", "host_self"),
                              ("device_total_us", "device_total"), ("device_self_us", "device_self")):
                worst_t = max(worst_t, gap(o[mine], r[ref]))
        out[f"{key}_us"] = worst_t
        out[f"{key}_calls_or_flag"] = worst_n
        out[f"{key}_missing"] = missing
    return out


def module_differences(snap: dict, trace_path: str) -> dict[str, float]:
    """The module view against the plugin's, module by module in pre-order."""
    from analysis.kineto.extras import attach_extras
    from analysis.metrics.tensorboard import module_view

    rt = attach_extras(rank_trace(trace_path), ["python_functions"], use_cache=False)
    ours, _ = module_view.module_summary_rank(rt)
    flat: list[tuple] = []

    def walk(node: dict, depth: int) -> None:
        flat.append((node["name"], node["id"], depth, node["occurences"], node["operators"],
                     node["host_duration"], node["self_host_duration"], node["device_duration"],
                     node["self_device_duration"]))
        for child in node["children"]:
            walk(child, depth + 1)

    for node in snap["module_view"]["data"]:
        walk(node, 0)
    mismatched, worst = abs(len(ours) - len(flat)), 0.0
    for o, t in zip(ours.itertuples(index=False), flat, strict=False):
        mismatched += (o.module, o.module_id, o.depth, o.occurrences, o.operators) != t[:5]
        worst = max(worst, gap(o.host_total_us, t[5]), gap(o.host_self_us, t[6]),
                    gap(o.device_total_us, t[7]), gap(o.device_self_us, t[8]))
    return {"module_mismatches": mismatched, "module_time_us": worst}
