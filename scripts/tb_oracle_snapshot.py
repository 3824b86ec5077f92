"""Snapshots of the retired TensorBoard profiler plugin's views, for the tensorboard parity tests.

Runs torch-tb-profiler 0.4.3 (the oracle; build its venv with ``scripts/make-tb-oracle-venv.sh``)
headless on every Kineto trace under ``../shared/traces`` and writes, per trace, a compact JSON
file ``tests/data/tb_oracle/<trace-id>.json`` with the plugin's raw (unrounded) numbers: overview
steps, GPU summary, tensor-core share, kernel table, kernel x operator table, operator tables by
name and by name + input shape, the stack view (operators by name [+ input shape] + call stack),
memory peaks / curve / operator stats / events, and module view.
The tests read the snapshots (no TensorBoard in the project's venv, fast) and skip when
``../shared`` is absent.

Usage (the oracle venv's python runs this file):
    VENV=$(scripts/make-tb-oracle-venv.sh)
    $VENV/bin/python scripts/tb_oracle_snapshot.py [--traces ../shared/traces] [--out tests/data/tb_oracle] [ID ...]

No shared trace has a non-empty ``Call stack`` arg (the plugin's stack view), so that view is also
snapshotted on synthetic traces (``tests/data/tb_oracle_synthetic``, read by
``tests/parity/test_tensorboard_stacks.py``, which says how they are written):
    $VENV/bin/python scripts/tb_oracle_snapshot.py --out tests/data/tb_oracle_synthetic \
        --file stacks=/tmp/stacks/rank0.json --file stacks_legacy=/tmp/stacks_legacy/rank0.json

and so are two traces as PyTorch 1.8 / 1.9 wrote them (``tests/parity/test_tensorboard_old_pytorch.py``):
``autograd_1_8`` (``tensorboard_traces.write(path, legacy=True, steps=False, shapes=True,
dims_key="Input dims")``) and ``memory_1_9`` (``legacy=True, old_memory=True``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import multiprocessing
import sys
import tempfile
from pathlib import Path

# files under traces/ that are not Kineto traces, or are not worth a snapshot
_SKIP_PARTS = ("perf_csvs", "xplane", "rocprof", "nsys", "execution_details", "_et.json")


def trace_id(path: Path, root: Path) -> str:
    """``hta/df_index_resolver/df_index_resolver.json.gz`` → ``hta__df_index_resolver__df_index_resolver``."""
    rel = path.relative_to(root).as_posix()
    for suffix in (".json.gz", ".json"):
        if rel.endswith(suffix):
            rel = rel[: -len(suffix)]
    return rel.replace("/", "__")


def kineto_traces(root: Path) -> list[Path]:
    out = []
    for path in sorted(root.rglob("*.json*")):
        if not path.name.endswith((".json", ".json.gz")) or any(p in str(path) for p in _SKIP_PARTS):
            continue
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", errors="replace") as f:
            head = f.read(1 << 16)
        if '"traceEvents"' in head or '"schemaVersion"' in head:
            out.append(path)
    return out


def _num(x):
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else round(x, 6)


def _stack_view(d) -> dict:
    """The stack view: per operator name (and input shape), one row per distinct "Call stack"."""
    stacks: dict = {}
    for key, table in (("op_stack_by_name", d.stack_lists_group_by_name),
                       ("op_stack_by_name_input", d.stack_lists_group_by_name_input)):
        rows = sorted((agg for aggs in (table or {}).values() for agg in aggs),
                      key=lambda o: (-o.self_device_duration, -o.self_host_duration))
        stacks[key] = {
            "n_rows": len(rows),
            "rows": [
                {
                    "name": o.name,
                    "input_shape": str(o.input_shape) if key == "op_stack_by_name_input" else None,
                    "call_stack": next(iter(o.callstacks)),
                    "calls": o.calls,
                    "host_total": _num(o.host_duration),
                    "host_self": _num(o.self_host_duration),
                    "device_total": _num(o.device_duration),
                    "device_self": _num(o.self_device_duration),
                    "tc_eligible": bool(o.tc_eligible),
                }
                for o in rows[:400]
            ],
        }
    return stacks


def _snapshot(path: str) -> dict:
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    with tempfile.TemporaryDirectory() as tmp:
        d = RunProfileData.parse("worker0", None, path, tmp)  # parse() processes and analyses
        stacks = _stack_view(d)  # before the generator, which pops the aggregates' stacks
        p = RunGenerator("worker0", None, d).generate_run_profile()
    out: dict = {"file": path, **stacks}
    steps = p.overview["steps"]
    names = [c["name"] for c in steps["columns"] if c.get("role") != "tooltip"]
    out["overview_steps"] = {
        "columns": names,
        "rows": [[r[0]] + [_num(v) for v in r[1::2]] for r in steps["rows"]],
    }
    out["recommendations"] = p.overview["recommendations"]
    g = d.gpu_metrics_parser
    out["gpu_summary"] = [
        {
            "gpu": gpu,
            "gpu_utilization": _num(g.gpu_utilization[gpu]),
            "sm_efficiency": _num(g.avg_approximated_sm_efficiency_per_device[gpu]),
            "achieved_occupancy": _num(g.avg_occupancy_per_device[gpu]),
            "tc_ratio": _num(d.tc_ratio[gpu]) if d.tc_ratio is not None else None,
        }
        for gpu in sorted(g.gpu_ids)
    ]
    out["gpu_summary_rows"] = p.gpu_summary
    out["tc_used_ratio"] = _num(d.tc_used_ratio)
    out["tc_eligible_ops_kernel_ratio"] = _num(d.tc_eligible_ops_kernel_ratio)
    if d.kernel_stat is not None:
        ks = d.kernel_stat.reset_index()
        out["kernel_stat"] = [
            {
                "name": r["name"],
                "tc_used": bool(r["tc_used"]),
                "count": int(r["count"]),
                "sum": _num(r["sum"]),
                "mean": _num(r["mean"]),
                "max": _num(r["max"]),
                "min": _num(r["min"]),
                "blocks_per_sm": _num(r["blocks_per_sm"]),
                "occupancy": _num(r["occupancy"]),
            }
            for _, r in ks.iterrows()
        ]
    if p.kernel_op_table is not None:
        t = p.kernel_op_table["data"]
        out["kernel_op_table"] = {
            "columns": [c["name"] for c in t["columns"]],
            "rows": t["rows"][:300],
            "n_rows": len(t["rows"]),
        }
    for key, table in (("op_by_name", d.op_list_groupby_name),
                       ("op_by_name_input", d.op_list_groupby_name_input)):
        rows = sorted(table, key=lambda o: (-o.self_device_duration, -o.self_host_duration))
        out[key] = {
            "n_rows": len(rows),
            "rows": [
                {
                    "name": o.name,
                    "input_shape": str(o.input_shape) if key == "op_by_name_input" else None,
                    "calls": o.calls,
                    "host_total": _num(o.host_duration),
                    "host_self": _num(o.self_host_duration),
                    "device_total": _num(o.device_duration),
                    "device_self": _num(o.self_device_duration),
                    "tc_eligible": bool(o.tc_eligible),
                    "tc_self_ratio": _num(o.tc_self_ratio),
                    "tc_total_ratio": _num(o.tc_total_ratio),
                }
                for o in rows[:400]
            ],
        }
    snap = d.memory_snapshot
    if snap is not None:
        peaks = snap.get_peak_memory()
        out["memory_peaks"] = [
            {"device_type": int(k[0]) if k[0] is not None else None, "device_id": k[1], "peak": _num(v)}
            for k, v in peaks.items()
        ]
        stats = snap.get_memory_statistics(d.tid2tree)
        # [SelfIncreaseSize, SelfAllocationSize, SelfAllocationCount, IncreaseSize, AllocationSize,
        #  AllocationCount, Calls] per device and operator, bytes
        out["memory_stats"] = {dev: {op: list(v) for op, v in ops.items()} for dev, ops in stats.items()}
        curve = p.get_memory_curve(time_metric="us", memory_metric="B", patch_for_step_plot=False)
        out["memory_curve"] = {
            "peaks": curve["metadata"]["peaks"],
            "first_ts": curve["metadata"].get("first_ts"),
            "rows": {dev: rows[:: max(1, len(rows) // 300)] for dev, rows in curve["rows"].items()},
            "n_rows": {dev: len(rows) for dev, rows in curve["rows"].items()},
        }
        ev = p.get_memory_events(time_metric="us", memory_metric="B")
        out["memory_events"] = {
            "columns": [c["name"] for c in ev["columns"]],
            "rows": {dev: rows[:300] for dev, rows in ev["rows"].items()},
            "n_rows": {dev: len(rows) for dev, rows in ev["rows"].items()},
        }
        out["profiler_start_ts"] = _num(d.profiler_start_ts)
    out["module_view"] = p.get_module_view()
    return out


def _run_one(args) -> tuple[str, str | None]:
    path, rel, dest = args
    try:
        snap = _snapshot(str(path))
    except Exception as exc:  # the plugin crashes on some traces: that is a fact worth keeping
        snap = {"error": f"{type(exc).__name__}: {exc}"}
    snap["file"] = rel  # relative to the traces folder: the same in every checkout
    Path(dest).write_text(json.dumps(snap, separators=(",", ":"), default=str))
    return str(path), snap.get("error")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", default="../shared/traces")
    ap.add_argument("--out", default="tests/data/tb_oracle")
    ap.add_argument("--file", action="append", default=[], metavar="ID=PATH",
                    help="snapshot this trace file as <out>/ID.json instead of the traces folder "
                         "(e.g. the synthetic traces of analysis.testing)")
    ap.add_argument("ids", nargs="*", help="only these trace ids")
    a = ap.parse_args(argv)
    root, out = Path(a.traces), Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = []
    for item in a.file:
        tid, _, path = item.partition("=")
        jobs.append((Path(path), Path(path).name, out / f"{tid}.json"))
    for path in kineto_traces(root) if not a.file else []:
        tid = trace_id(path, root)
        if a.ids and tid not in a.ids:
            continue
        jobs.append((path, path.relative_to(root).as_posix(), out / f"{tid}.json"))
    # one process per trace: the plugin keeps everything in memory and logs a lot
    with multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=1) as pool:
        for path, error in pool.imap(_run_one, jobs):
            print(("FAILED " + error + " " if error else "ok ") + path, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
