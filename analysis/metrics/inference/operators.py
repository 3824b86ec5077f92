"""Where a serving iteration's GPU time goes, by operator and by operator family.

For each iteration (:mod:`analysis.kineto.iterations`) the GPU time of the kernels, memcpy and
memset launched inside it is split by the operator that launched them: the innermost ``cpu_op``
open at the launching call (``gpu_self`` of :mod:`analysis.metrics.operators.operator_summary`;
a graph replay merged with its capture trace has its captured operators there, a graph launch
without one the row ``CUDA graph (<launch call>)``), counting the operators that start on the
iteration's thread inside its ``[ts, ts + dur)``. GPU time launched outside any operator is
``(no operator)``; the rows of an iteration sum to its GPU time (kernel durations summed, µs).

Operator family, by name (first match), as TraceLens's op categories group them
(``ops_summary_by_category.csv``: ``InferenceAttention``, ``GEMM``): ``attention``
(``attention``, ``attn``, ``sdpa``, ``mha_``, ``mla_``, and the KV-cache writes ``store_cache``,
``reshape_and_cache``), ``gemm`` (``gemm``, ``matmul``, ``aten::mm`` / ``addmm`` / ``bmm`` /
``baddbmm`` / ``linear`` / ``_scaled_mm``), ``moe`` (a fused mixture-of-experts layer, ``moe``:
its experts' GEMMs with routing, which TraceLens leaves out of GEMM), else ``other``.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from analysis.kineto.events import kernel_like_mask, runtime_mask
from analysis.metrics.operators.operator_summary import graph_launch_times, operator_times

NO_OPERATOR = "(no operator)"
COLUMNS = ["iteration", "name", "family", "gpu_us"]
FAMILIES = ("attention", "gemm", "moe", "other")
_ATTENTION = re.compile(r"attention|attn|sdpa|mha_|mla_|store_cache|reshape_and_cache",
                        re.IGNORECASE)
_MOE = re.compile(r"moe", re.IGNORECASE)
_GEMM = re.compile(r"gemm|matmul|(^|::)(mm|addmm|bmm|baddbmm|linear|_scaled_mm|scaled_mm)$",
                   re.IGNORECASE)


def operator_family(name: str) -> str:
    """``attention``, ``gemm``, ``moe`` or ``other`` (see the module docstring)."""
    if _ATTENTION.search(name):
        return "attention"
    if _MOE.search(name):
        return "moe"
    return "gemm" if _GEMM.search(name) else "other"


def iteration_operators(events: pd.DataFrame, spans: pd.DataFrame) -> pd.DataFrame:
    """Per iteration (row ``i`` of ``spans``: ``ts``, ``dur``, ``pid``, ``tid``) and operator
    name: its GPU self time (µs) and family; columns ``COLUMNS`` (see the module docstring)."""
    if spans.empty:
        return pd.DataFrame(columns=COLUMNS)
    per_op = pd.concat([operator_times(events), graph_launch_times(events)])
    where = events.loc[per_op.index, ["ts", "pid", "tid"]]
    op_iter = _iteration_of(where, spans)
    ops = pd.DataFrame({"iteration": op_iter, "name": per_op["name"].astype(str).to_numpy(),
                        "gpu_ns": per_op["gpu_self_ns"].to_numpy(np.int64)})
    ops = ops[(ops["iteration"] >= 0) & (ops["gpu_ns"] > 0)]
    # every GPU event launched inside an iteration, whether or not an operator launched it
    calls = events.loc[runtime_mask(events), ["ts", "pid", "tid", "correlation"]]
    calls = calls[calls["correlation"] >= 0]
    call_iter = pd.Series(_iteration_of(calls, spans), index=calls["correlation"].to_numpy())
    call_iter = call_iter[call_iter >= 0]
    call_iter = call_iter[~call_iter.index.duplicated()]
    gpu = events.loc[kernel_like_mask(events), ["dur", "correlation"]]
    gpu_iter = gpu["correlation"].map(call_iter)
    totals = gpu["dur"].groupby(gpu_iter.to_numpy()).sum() if gpu_iter.notna().any() else None
    table = ops.groupby(["iteration", "name"], sort=False)["gpu_ns"].sum().reset_index()
    if totals is not None:
        attributed = table.groupby("iteration")["gpu_ns"].sum()
        rest = totals.astype(np.int64).sub(attributed, fill_value=0)
        rest = rest[rest > 0]
        table = pd.concat([table, pd.DataFrame({
            "iteration": rest.index.astype(np.int64), "name": NO_OPERATOR,
            "gpu_ns": rest.to_numpy(np.int64)})], ignore_index=True)
    table["family"] = [operator_family(n) for n in table["name"]]
    table["gpu_us"] = table["gpu_ns"] / 1000.0
    table["iteration"] = table["iteration"].astype(np.int64)
    table = table.sort_values(["iteration", "gpu_us", "name"], ascending=[True, False, True],
                              kind="stable")
    return table[COLUMNS].reset_index(drop=True)


def _iteration_of(where: pd.DataFrame, spans: pd.DataFrame) -> np.ndarray:
    """For each row of ``where`` (``ts``, ``pid``, ``tid``): the index of the iteration of
    ``spans`` on the same thread whose ``[ts, ts + dur)`` holds its ``ts``, or -1. Iterations of
    one thread do not overlap (one scheduler step at a time)."""
    out = np.full(len(where), -1, dtype=np.int64)
    ts = where["ts"].to_numpy(np.int64)
    pid, tid = where["pid"].to_numpy(), where["tid"].to_numpy()
    for (p, t), group in spans.groupby(["pid", "tid"], sort=False):
        order = group.sort_values("ts", kind="stable")
        starts = order["ts"].to_numpy(np.int64)
        ends = starts + order["dur"].to_numpy(np.int64)
        on_thread = np.flatnonzero((pid == p) & (tid == t))
        pos = np.searchsorted(starts, ts[on_thread], side="right") - 1
        inside = (pos >= 0) & (ts[on_thread] < ends[np.maximum(pos, 0)])
        out[on_thread[inside]] = order.index.to_numpy()[pos[inside]]
    return out


def top_operators(operators: pd.DataFrame, n: int = 3) -> str:
    """``"name 45.1 %; name 20.0 %; ..."``: the ``n`` operators of ``operators`` (rows of one
    iteration or phase: ``name``, ``gpu_us``) with the most GPU time, as shares of its total."""
    grouped = operators.groupby("name", sort=False)["gpu_us"].sum()
    total = float(grouped.sum())
    if total <= 0:
        return ""
    top = grouped.sort_values(ascending=False, kind="stable").head(n)
    return "; ".join(f"{name} {100 * v / total:.1f} %" for name, v in top.items())


def family_shares(operators: pd.DataFrame) -> dict[str, float]:
    """Share (%) of the GPU time of ``operators`` in each family (``FAMILIES``; NaN when the
    rows hold no GPU time)."""
    total = float(operators["gpu_us"].sum()) if len(operators) else 0.0
    by = operators.groupby("family")["gpu_us"].sum() if len(operators) else pd.Series(dtype=float)
    return {f: (100.0 * float(by.get(f, 0.0)) / total if total > 0 else np.nan) for f in FAMILIES}
