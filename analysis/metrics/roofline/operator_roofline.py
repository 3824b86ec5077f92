"""How close each operator gets to the hardware: FLOPs, bytes, achieved TFLOPS/TB/s, roofline, MFU.

For each CPU operator call (``cpu_op`` event) with recorded shapes (``record_shapes=True``; read
through the ``op_shapes`` extra, :mod:`analysis.kineto.extras`) that has a performance model
(:mod:`analysis.metrics.roofline.perf_model`):

- ``gflops`` and ``data_moved_mb`` per call, from the model (MB = 2**20 bytes, as TraceLens);
- its *kernel time*: the busy time (union of intervals) of the GPU kernels, memcpys and memsets
  launched by the runtime calls made on the operator's thread while it was open (``[ts, ts+dur)``),
  i.e. by it and by every operator nested in it; TraceLens's definition;
- per op group (same name, input dims, types, strides and concrete inputs), over the selected
  ranks: ``count``, ``kernel_time_us_sum/_mean/_median``, achieved ``tflops_per_s`` and
  ``tb_per_s`` = summed FLOPs (bytes) / summed kernel time;
- against the GPU's peaks (:mod:`analysis.metrics.roofline.gpu_specs`, from ``deviceProperties`` or the
  ``gpu=`` override): ``roofline_time_us`` = max(FLOPs / peak FLOP/s at the op's precision,
  bytes / peak bandwidth) per call (bandwidth only for memory-bound families); ``bound``
  ("compute"/"memory"); ``pct_of_peak`` = 100 × roofline time / kernel time (the achieved share
  of the bound ceiling); ``time_lost_us`` = kernel time − roofline time, summed (NaN for a group
  whose calls launched no kernel time; 0 for one faster than its roofline, e.g. small tensors
  served from L2, whose ``pct_of_peak`` is then above 100: a warning counts them). An op's precision is its first input's dtype; a trace does
  not say whether TF32 was allowed, so fp32 ops are held to the fp32 peak, except a GEMM /
  convolution / attention group that ran faster than that peak on a GPU with TF32 tensor cores
  (fp32 units cannot): it used TF32 (cuDNN allows it by default) and is held to the TF32 peak,
  ``precision`` "tf32" (a warning says how many groups); pass ``gpu={"fp32": <TF32 peak>}`` to
  hold every fp32 op to TF32;
- ``innermost``: no modelled operator runs inside its calls. Nested modelled ops share kernels
  (``linear`` → ``matmul`` → ``mm``): every level has a row, as in TraceLens; the innermost rows
  (``mm``) alone count each kernel once.

Per profiler step and rank, ``mfu_pct`` (model FLOPs utilisation) = FLOPs of the modelled
operators started in the step (outermost modelled ones only, so ``linear`` → ``addmm`` counts once)
/ (step duration, from the CPU-side ``ProfilerStep#N`` annotation, × the GPU's dense peak at the
precision carrying most of the modelled FLOPs). A rank without
``ProfilerStep`` annotations gives one row, ``step`` -1, over its events' time span.

``coverage`` says how much GPU time the models explain: per rank, ``coverage_pct`` = kernel time
(sum of kernel durations) launched inside a modelled operator / kernel time launched in the trace
(kernels whose launching runtime call is not in the trace, typically queued before the profiler
started, are counted apart in ``launched_before_trace_us``); ``unmodelled`` lists the innermost
operators that launched the rest ("(no operator)" for launches outside any operator).
Window: the analysed profiler steps. Times in µs.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, NamedTuple

import msgspec
import numpy as np
import pandas as pd

from analysis.errors import NoShapesError
from analysis.kineto.events import kernel_like_mask, runtime_mask
from analysis.kineto.model import RankTrace
from analysis.metrics.operators.operator_summary import rank_operator_times
from analysis.metrics.roofline.gpu_specs import GpuSpec, gpu_spec
from analysis.metrics.roofline.op_call import NoModel, OpCall
from analysis.metrics.roofline.perf_model import op_cost

EXTRA = "op_shapes"
KEY = ["name", "input_dims", "input_types", "input_strides", "concrete_inputs"]
MB = 2**20  # TraceLens's "MB"
OP_COLUMNS = [
    *KEY,
    "family",
    "precision",
    "count",
    "gflops",
    "data_moved_mb",
    "flops_per_byte",
    "kernel_time_us_sum",
    "kernel_time_us_mean",
    "kernel_time_us_median",
    "tflops_per_s",
    "tb_per_s",
    "roofline_time_us",
    "bound",
    "pct_of_peak",
    "time_lost_us",
    "innermost",
]
STEP_COLUMNS = [
    "rank",
    "step",
    "step_time_us",
    "model_tflop",
    "achieved_tflops_per_s",
    "peak_tflops",
    "precision",
    "mfu_pct",
]
COVERAGE_COLUMNS = [
    "rank",
    "gpu_kernel_time_us",
    "launched_before_trace_us",
    "modelled_kernel_time_us",
    "coverage_pct",
]
NO_OPERATOR = "(no operator)"
# MFU counts only the modelled operators' FLOPs: with less than this share (%) of the GPU kernel
# time modelled (GEMMs without recorded shapes, kernels no operator launched) it says more about
# the models' coverage than about the run (the report card says "a lower bound", the findings
# report no low MFU)
MFU_MIN_COVERAGE_PCT = 50.0


class RooflineResult(NamedTuple):
    """``get_operator_roofline``'s result: the per-op table and the step, coverage tables."""

    ops: pd.DataFrame
    steps: pd.DataFrame
    coverage: pd.DataFrame
    unmodelled: pd.DataFrame
    gpu: GpuSpec | None  # the peaks used (None: unknown GPU, no roofline)


def operator_roofline_rank(rt: RankTrace) -> dict[str, Any]:
    """One rank's modelled calls (``calls``), ``steps``, ``coverage`` and ``unmodelled`` time."""
    ev = rt.events
    shapes = rt.extra(EXTRA)
    frame = shapes.assign(name=ev["name"].reindex(shapes.index).astype(str).to_numpy())
    costs = _group_costs(frame)
    modelled = frame.index[costs["ok"].to_numpy()] if len(frame) else frame.index
    calls = pd.concat([frame.loc[modelled, KEY], costs.loc[modelled].drop(columns="ok")], axis=1)
    calls["kernel_ns"] = launched_busy_ns(ev, modelled)

    tree = rank_operator_times(rt)[0]
    is_modelled = tree.index.isin(modelled)
    # each operator's parent as a position in ``tree`` (-1 at the top of its thread)
    up = pd.Series(np.arange(len(tree)), index=tree.index).reindex(tree["parent"]).fillna(-1)
    up = up.to_numpy(np.int64)
    inside = _inside_modelled(up, is_modelled)
    calls["outermost"] = ~pd.Series(inside, index=tree.index).reindex(modelled).to_numpy(bool)
    holds = _holds_modelled(up, is_modelled)
    calls["innermost"] = ~pd.Series(holds, index=tree.index).reindex(modelled).to_numpy(bool)
    covered = is_modelled | inside
    kernels = ev.loc[kernel_like_mask(ev), ["correlation", "dur"]]
    launched = kernels["correlation"].isin(ev.loc[runtime_mask(ev), "correlation"]).to_numpy()
    kernel_ns = int(kernels["dur"].sum())
    no_launch_ns = int(kernels["dur"].to_numpy()[~launched].sum())
    gpu_self = tree["gpu_self_ns"]
    uncovered = gpu_self[~covered & (gpu_self.to_numpy() > 0)]
    unmodelled = uncovered.groupby(tree.loc[uncovered.index, "name"].astype(str)).agg(
        ["sum", "size"]
    )
    outside = kernel_ns - no_launch_ns - int(gpu_self.sum())
    if outside > 0:
        unmodelled.loc[NO_OPERATOR] = [outside, 0]
    steps = rt.profiler_steps()[["step", "ts", "dur"]]  # CPU-side annotations, one per step
    if steps.empty and len(ev):
        end = int((ev["ts"] + ev["dur"]).max())
        steps = pd.DataFrame(
            {"step": [-1], "ts": [int(ev["ts"].min())], "dur": [end - int(ev["ts"].min())]}
        )
    calls["step"] = _step_of(ev.loc[modelled, "ts"].to_numpy(np.int64), steps)
    return {
        "calls": calls.reset_index(drop=True),
        "steps": steps,
        "coverage": (kernel_ns, no_launch_ns, int(gpu_self[covered].sum())),
        "unmodelled": unmodelled,
        "gpu": rt.meta.gpu_names[0] if rt.meta.gpu_names else None,
        "shaped_ops": len(frame),
        "source": rt.meta.source,
    }


def combine(parts: Mapping[int, dict[str, Any]], gpu: Any = None) -> RooflineResult:
    """Per-rank parts → the op table over all of them, MFU per (rank, step), coverage per rank.

    ``gpu``: the peak table override (:func:`analysis.metrics.roofline.gpu_specs.gpu_spec`). Ranks whose
    operators have no recorded shapes (traces recorded without ``record_shapes=True``) are named
    in a warning; ``NoShapesError`` when no rank has any.
    """
    unshaped = [rank for rank, p in parts.items() if not p["shaped_ops"]]
    if parts and len(unshaped) == len(parts):
        raise NoShapesError(unshaped, [parts[r]["source"] for r in unshaped])
    if unshaped:
        warnings.warn(
            f"operator roofline: rank(s) {unshaped} have no operator with recorded shapes, so no "
            "FLOPs or bytes: record traces with torch.profiler.profile(record_shapes=True)",
            stacklevel=3,
        )
    names = [p["gpu"] for p in parts.values() if p["gpu"]]
    spec = gpu_spec(names[0] if names else None, gpu)
    calls = pd.concat([p["calls"] for p in parts.values()], ignore_index=True) if parts else None
    calls = _tf32_where_faster_than_fp32(calls, spec)
    ops = _op_table(calls, spec)
    steps = _step_table(parts, spec, calls)
    rows = []
    for rank, p in parts.items():
        total, no_launch, modelled = p["coverage"]
        share = 100.0 * modelled / (total - no_launch) if total > no_launch else np.nan
        rows.append((rank, total / 1e3, no_launch / 1e3, modelled / 1e3, share))
    coverage = pd.DataFrame(rows, columns=COVERAGE_COLUMNS)
    frames = [p["unmodelled"] for p in parts.values() if len(p["unmodelled"])]
    if frames:
        total = pd.concat(frames).groupby(level=0).sum()
        unmodelled = pd.DataFrame(
            {
                "name": total.index,
                "count": total["size"].to_numpy(np.int64),
                "kernel_time_us": total["sum"].to_numpy() / 1e3,
            }
        ).sort_values(["kernel_time_us", "name"], ascending=[False, True], ignore_index=True)
    else:
        unmodelled = pd.DataFrame({"name": [], "count": [], "kernel_time_us": []})
    return RooflineResult(ops, steps, coverage, unmodelled, spec)


def key_numbers(result: RooflineResult) -> list[tuple[str, str]]:
    """Report cards: the mean MFU and the share of GPU time the models explain. MFU counts only
    the modelled operators' FLOPs: below ``MFU_MIN_COVERAGE_PCT`` of the GPU time modelled, the
    card says it is a lower bound."""
    cards = []
    if result.steps["mfu_pct"].notna().any():
        label = "model FLOPs utilisation"
        if not result.coverage["coverage_pct"].mean() >= MFU_MIN_COVERAGE_PCT:
            label += " (a lower bound: most GPU time has no perf model)"
        cards.append((label, f"{result.steps['mfu_pct'].mean():.1f} %"))
    if result.coverage["coverage_pct"].notna().any():
        cards.append(
            ("GPU time with a perf model", f"{result.coverage['coverage_pct'].mean():.1f} %")
        )
    return cards


# --- per rank ---------------------------------------------------------------------------------


def _group_costs(frame: pd.DataFrame) -> pd.DataFrame:
    """Each call's model result (``ok``, family, precision, memory_bound, flops, bytes), computed
    once per distinct (name, shapes) group."""
    columns = ["ok", "family", "precision", "memory_bound", "flops", "bytes"]
    if frame.empty:
        return pd.DataFrame({c: [] for c in columns}, index=frame.index)
    group = frame.groupby(KEY, observed=True, sort=False).ngroup().to_numpy()
    firsts = frame.iloc[pd.Series(np.arange(len(frame))).groupby(group).first().to_numpy()]
    results = [_cost_row(row) for row in firsts[KEY].itertuples(index=False)]
    table = pd.DataFrame(results, columns=columns)
    out = table.iloc[group].set_axis(frame.index)
    return out.astype({"ok": bool, "memory_bound": bool, "flops": "int64", "bytes": "int64"})


def _cost_row(row) -> tuple:
    try:
        call = OpCall(
            name=row.name,
            dims=_json(row.input_dims, []),
            types=_json(row.input_types, []),
            strides=_json(row.input_strides, []),
            concrete=_json(row.concrete_inputs, []),
        )
        cost = op_cost(call)
    except NoModel:
        return (False, None, None, False, 0, 0)
    return (True, cost.family, cost.precision, cost.memory_bound, int(cost.flops), int(cost.bytes))


def _json(text: str, default):
    return msgspec.json.decode(text) if text else default


def launched_busy_ns(events: pd.DataFrame, op_rows: pd.Index) -> np.ndarray:
    """For each operator row of ``op_rows``: busy time (ns, union of intervals) of the GPU events
    launched by runtime calls on its thread that start within ``[ts, ts + dur)``."""
    out = np.zeros(len(op_rows), dtype=np.int64)
    if not len(op_rows):
        return out
    is_call = runtime_mask(events) & (events["correlation"].to_numpy() >= 0)
    calls = events.loc[is_call, ["pid", "tid", "ts", "correlation"]]
    ops = events.loc[op_rows, ["pid", "tid", "ts", "dur"]]
    pair_op, pair_corr = [], []
    op_thread = ops.groupby(["pid", "tid"], sort=False).indices
    for thread, group in calls.groupby(["pid", "tid"], sort=False):
        positions = op_thread.get(thread)
        if positions is None:
            continue
        group = group.sort_values("ts", kind="stable")
        call_ts = group["ts"].to_numpy(np.int64)
        op_ts = ops["ts"].to_numpy(np.int64)[positions]
        lo = np.searchsorted(call_ts, op_ts, side="left")
        hi = np.searchsorted(call_ts, op_ts + ops["dur"].to_numpy(np.int64)[positions], side="left")
        counts = hi - lo
        which = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        pair_op.append(np.repeat(positions, counts))
        pair_corr.append(group["correlation"].to_numpy(np.int64)[which])
    if not pair_op:
        return out
    pairs = pd.DataFrame({"op": np.concatenate(pair_op), "correlation": np.concatenate(pair_corr)})
    gpu = events.loc[kernel_like_mask(events), ["correlation", "ts", "dur"]]
    hits = pairs.merge(gpu, on="correlation").sort_values(["op", "ts"], kind="stable")
    if hits.empty:
        return out
    start = hits["ts"].to_numpy(np.int64)
    end = start + hits["dur"].to_numpy(np.int64)
    op = hits["op"].to_numpy(np.int64)
    reach = pd.Series(end).groupby(op).cummax().to_numpy()
    first = np.r_[True, op[1:] != op[:-1]]
    before = np.where(first, np.iinfo(np.int64).min, np.r_[0, reach[:-1]])
    busy = np.clip(end - np.maximum(start, before), 0, None)
    np.add.at(out, op, busy)
    return out


def _inside_modelled(up: np.ndarray, modelled: np.ndarray) -> np.ndarray:
    """Whether each operator has a modelled ancestor (``up``: parent positions, -1 at the top)."""
    inside = np.zeros(len(up), dtype=bool)
    has_parent = up >= 0
    for _ in range(len(up)):  # each pass settles one more level of nesting
        new = has_parent & (modelled[np.maximum(up, 0)] | inside[np.maximum(up, 0)])
        if (new == inside).all():
            break
        inside = new
    return inside


def _holds_modelled(up: np.ndarray, modelled: np.ndarray) -> np.ndarray:
    """Whether each operator has a modelled operator nested inside it (at any depth)."""
    holds = np.zeros(len(up), dtype=bool)
    frontier = np.unique(up[modelled & (up >= 0)])
    while len(frontier):
        frontier = frontier[~holds[frontier]]  # ancestors already marked need no second walk
        holds[frontier] = True
        frontier = np.unique(up[frontier][up[frontier] >= 0])
    return holds


def _step_of(ts: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    """The step whose ``[ts, ts + dur)`` holds each time, -2 when none does."""
    out = np.full(len(ts), -2, dtype=np.int64)
    for step, start, dur in steps[["step", "ts", "dur"]].itertuples(index=False):
        out[(ts >= start) & (ts < start + dur)] = step
    return out


# --- combine ----------------------------------------------------------------------------------


TENSOR_CORE_FAMILIES = ("gemm", "conv", "attention")


def _tf32_where_faster_than_fp32(calls: pd.DataFrame | None, spec) -> pd.DataFrame | None:
    """``calls`` with the precision of each fp32 GEMM / convolution / attention group (``KEY``)
    whose summed FLOPs over its summed kernel time pass the GPU's fp32 peak set to "tf32", where
    the GPU has a higher TF32 peak: such a group ran on TF32 tensor cores (fp32 units cannot go
    faster than their peak). A warning says how many groups."""
    if calls is None or calls.empty or spec is None:
        return calls
    fp32, tf32 = spec.peak_tflops("fp32"), spec.peak_tflops("tf32")
    if not tf32 > fp32:
        return calls
    candidates = (calls["precision"] == "fp32") & calls["family"].isin(TENSOR_CORE_FAMILIES)
    if not candidates.any():
        return calls
    c = calls[candidates]
    g = c.assign(kernel_s=c["kernel_ns"] / 1e9).groupby(KEY, observed=True, sort=False, dropna=False)
    sums = g[["flops", "kernel_s"]].sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        achieved = np.where(sums["kernel_s"] > 0, sums["flops"] / sums["kernel_s"] / 1e12, np.nan)
    faster = sums.index[achieved > fp32]
    if not len(faster):
        return calls
    hit = pd.MultiIndex.from_frame(c[KEY]).isin(faster)
    calls = calls.copy()
    calls.loc[c.index[hit], "precision"] = "tf32"
    warnings.warn(
        f"operator roofline: {len(faster)} fp32 GEMM/convolution/attention group(s) ran faster "
        f"than the GPU's fp32 peak ({fp32:g} TFLOP/s): they used TF32 tensor cores (allow_tf32) "
        f"and are held to the TF32 peak ({tf32:g} TFLOP/s), precision 'tf32'",
        stacklevel=3,
    )
    return calls


def _op_table(calls: pd.DataFrame | None, spec) -> pd.DataFrame:
    if calls is None or calls.empty:  # typed, so that ``ops[ops["innermost"]]`` still selects rows
        text = {*KEY, "family", "precision", "bound"}
        return pd.DataFrame({c: pd.Series(dtype="bool" if c == "innermost" else "int64"
                                          if c == "count" else object if c in text else "float64")
                             for c in OP_COLUMNS})
    calls = calls.assign(kernel_us=calls["kernel_ns"] / 1e3)
    g = calls.groupby(KEY, observed=True, sort=False)
    t = g[["family", "precision", "memory_bound", "flops", "bytes"]].first()
    t["innermost"] = g["innermost"].all()
    t["count"] = g.size()
    t["kernel_time_us_sum"] = g["kernel_us"].sum()
    t["kernel_time_us_mean"] = g["kernel_us"].mean()
    t["kernel_time_us_median"] = g["kernel_us"].median()
    t = t.reset_index()
    seconds = t["kernel_time_us_sum"].to_numpy() / 1e6
    with np.errstate(divide="ignore", invalid="ignore"):
        total_flops = t["flops"].to_numpy(np.float64) * t["count"].to_numpy()
        total_bytes = t["bytes"].to_numpy(np.float64) * t["count"].to_numpy()
        t["gflops"] = t["flops"] / 1e9
        t["data_moved_mb"] = t["bytes"] / MB
        t["flops_per_byte"] = np.where(t["bytes"] > 0, t["flops"] / t["bytes"], np.nan)
        t["tflops_per_s"] = np.where(seconds > 0, total_flops / seconds / 1e12, np.nan)
        t["tb_per_s"] = np.where(seconds > 0, total_bytes / seconds / 1e12, np.nan)
        peak = np.array([spec.peak_tflops(p) if spec else np.nan for p in t["precision"]])
        bw = spec.memory_tb_s if spec else np.nan
        memory_us = t["bytes"].to_numpy(np.float64) / (bw * 1e6)
        compute_us = t["flops"].to_numpy(np.float64) / (peak * 1e6)
        memory_bound = t["memory_bound"].to_numpy(bool)
        roofline = np.where(memory_bound, memory_us, np.fmax(compute_us, memory_us))
        roofline = np.where(memory_bound | ~np.isnan(compute_us), roofline, np.nan)
        t["roofline_time_us"] = roofline
        bound = np.where(memory_bound | (memory_us >= compute_us), "memory", "compute")
        t["bound"] = np.where(np.isnan(roofline), None, bound)
        busy = t["kernel_time_us_sum"].to_numpy()
        t["pct_of_peak"] = np.where(busy > 0, 100.0 * roofline * t["count"] / busy, np.nan)
        lost = np.where(busy > 0, busy - roofline * t["count"], np.nan)
        beyond = lost < 0  # faster than the ceiling: no time lost, and the model says why
        if beyond.any():
            memory = int((beyond & (bound == "memory")).sum())
            warnings.warn(
                f"operator roofline: {int(beyond.sum())} op group(s) ran faster than their "
                f"roofline ({memory} memory-bound: their data came from the caches, so their "
                "modelled bytes overstate the DRAM traffic; the others: a peak too low for how "
                "they ran). Their pct_of_peak is above 100 and their time_lost_us 0",
                stacklevel=3)
        t["time_lost_us"] = np.where(beyond, 0.0, lost)
    t = t.sort_values(["kernel_time_us_sum", "name"], ascending=[False, True], kind="stable")
    return t[OP_COLUMNS].reset_index(drop=True)


def _step_table(parts, spec, calls) -> pd.DataFrame:
    rows = []
    if calls is not None and not calls.empty:
        outer = calls[calls["outermost"]]
        by_precision = outer.groupby("precision", dropna=True)["flops"].sum()
        precision = by_precision.idxmax() if len(by_precision) else None
    else:
        precision = None
    peak = spec.peak_tflops(precision) if spec else np.nan
    for rank, p in parts.items():
        c = p["calls"]
        flops = c[c["outermost"]].groupby("step")["flops"].sum()
        for step, _ts, dur in p["steps"][["step", "ts", "dur"]].itertuples(index=False):
            f = float(flops.get(step, 0))
            seconds = dur / 1e9
            achieved = f / seconds / 1e12 if seconds > 0 else np.nan
            rows.append(
                (
                    rank,
                    int(step),
                    dur / 1e3,
                    f / 1e12,
                    achieved,
                    peak,
                    precision,
                    100.0 * achieved / peak if peak and not np.isnan(peak) else np.nan,
                )
            )
    return pd.DataFrame(rows, columns=STEP_COLUMNS)
