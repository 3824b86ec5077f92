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

from analysis.kineto.iterations import gpu_work_iterations, iteration_of
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
    op_iter = iteration_of(where, spans)
    ops = pd.DataFrame({"iteration": op_iter, "name": per_op["name"].astype(str).to_numpy(),
                        "gpu_ns": per_op["gpu_self_ns"].to_numpy(np.int64)})
    ops = ops[(ops["iteration"] >= 0) & (ops["gpu_ns"] > 0)]
    # every GPU event launched inside an iteration, whether or not an operator launched it
    gpu_iter = gpu_work_iterations(events, spans)
    totals = (events.loc[gpu_iter.index, "dur"].groupby(gpu_iter.to_numpy()).sum()
              if len(gpu_iter) else None)
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


def top_operators_by(operators: pd.DataFrame, key: str, n: int = 3) -> pd.Series:
    """:func:`top_operators` of each group of ``operators`` by ``key`` (e.g. ``iteration``), as a
    Series indexed by the key's values (vectorised: one pass, not one call per group)."""
    if operators.empty:
        return pd.Series(dtype=object)
    per = operators.groupby([key, "name"], sort=False)["gpu_us"].sum().reset_index()
    per["total"] = per.groupby(key)["gpu_us"].transform("sum")
    per = per[per["total"] > 0].sort_values([key, "gpu_us", "name"],
                                            ascending=[True, False, True], kind="stable")
    top = per.groupby(key, sort=False).head(n)
    text = top["name"].astype(str) + " " + (100 * top["gpu_us"] / top["total"]).map("{:.1f} %".format)
    return text.groupby(top[key].to_numpy(), sort=False).agg("; ".join)


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
