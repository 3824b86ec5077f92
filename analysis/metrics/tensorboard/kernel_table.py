"""The TensorBoard plugin's kernel view: per kernel name, and per kernel × launching operator.

Per rank and kernel name, over every kernel of the trace (the plugin's window for this view is the
whole trace): ``calls``, ``total_us``, ``mean_us``, ``max_us``, ``min_us`` of the kernel durations;
``tensor_cores_used`` (the name carries a tensor-core marker, :data:`.gpu_summary.TC_MARKERS`);
``mean_blocks_per_sm`` and ``mean_est_achieved_occupancy_pct``: the ``blocks per SM`` and
``est. achieved occupancy %`` args averaged weighted by kernel duration, a kernel without the arg
counting as 0 (the plugin's rule); 0 when every weight is 0. Sorted by ``total_us``, descending.

:func:`kernel_op_table` is the plugin's second kernel table: per kernel name, launching operator
(the CPU operator whose ``External id`` the kernel carries, ``"(none)"`` when none), ``grid``,
``block``, ``registers_per_thread`` and ``shared_memory``, with the same statistics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import pandas as pd

from analysis.kineto.model import RankTrace
from analysis.metrics.tensorboard.gpu_summary import kernels_with_args, uses_tensor_cores
from analysis.metrics.tensorboard.plugin_steps import by_category

COLUMNS = ["rank", "name", "tensor_cores_used", "calls", "total_us", "mean_us", "max_us",
           "min_us", "mean_blocks_per_sm", "mean_est_achieved_occupancy_pct"]
OP_KEY = ["operator", "grid", "block", "registers_per_thread", "shared_memory"]
OP_COLUMNS = ["rank", "name", *OP_KEY, "tensor_cores_used", "calls", "total_us", "mean_us",
              "max_us", "min_us", "mean_blocks_per_sm", "mean_est_achieved_occupancy_pct"]
NO_OPERATOR = "(none)"


class KernelTables(NamedTuple):
    kernels: pd.DataFrame
    by_operator: pd.DataFrame


def _group_ids(frame: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """One id per distinct combination of ``keys`` (missing values included), numbered in order
    of first appearance: a group-by on one integer column instead of several."""
    ids = np.zeros(len(frame), dtype=np.int64)
    for k in keys:
        col = frame[k]
        if isinstance(col.dtype, pd.CategoricalDtype):
            codes, size = col.cat.codes.to_numpy(np.int64) + 1, len(col.cat.categories) + 1
        else:
            codes, uniques = pd.factorize(col.to_numpy(), use_na_sentinel=False)
            size = len(uniques)
        ids = pd.factorize(ids * size + codes)[0].astype(np.int64)
    return ids


def _stats(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    dur = frame["dur"].to_numpy(np.int64) / 1000
    ids = _group_ids(frame, keys)
    f = pd.DataFrame({"dur": dur})
    for col, out in (("blocks_per_sm", "b"), ("occupancy_pct", "o")):
        f[out + "w"] = np.nan_to_num(frame[col].to_numpy(float)) * dur
    g = f.groupby(ids, sort=False)
    out = g["dur"].agg(calls="count", total_us="sum", mean_us="mean", max_us="max", min_us="min")
    weight = out["total_us"].where(out["total_us"] > 0)
    out["mean_blocks_per_sm"] = (g["bw"].sum() / weight).fillna(0.0)
    out["mean_est_achieved_occupancy_pct"] = (g["ow"].sum() / weight).fillna(0.0)
    first = pd.Series(np.arange(len(ids))).groupby(ids, sort=False).first().to_numpy()
    out = out.reset_index(drop=True)
    for i, k in enumerate(keys):  # each group's key values, categories as plain text
        values = frame[k].iloc[first].reset_index(drop=True)
        out.insert(i, k, values.astype(str) if isinstance(values.dtype, pd.CategoricalDtype)
                   else values)
    out.insert(keys.index("name") + 1 if "name" in keys else 0, "tensor_cores_used",
               uses_tensor_cores(frame["name"].iloc[first]))  # categorical: once per name
    return out.sort_values("total_us", ascending=False, kind="stable")


def _launching_operators(rt: RankTrace, external_ids: np.ndarray) -> pd.Categorical:
    """Per kernel: the name of the last CPU operator with its external id (the plugin's link),
    :data:`NO_OPERATOR` when none."""
    ev = rt.events
    cpu = np.flatnonzero(by_category(ev["cat"], lambda v: v == "cpu_op"))
    ids = ev["external_id"].to_numpy()[cpu][::-1]  # reversed: np.unique finds the last one
    codes = ev["name"].cat.codes.to_numpy()[cpu][::-1]
    unique, first = np.unique(ids, return_index=True)
    at = np.minimum(np.searchsorted(unique, external_ids), max(len(unique) - 1, 0))
    found = (unique[at] == external_ids) if len(unique) else np.zeros(len(external_ids), bool)
    labels = np.array([*ev["name"].cat.categories.astype(str), NO_OPERATOR], dtype=object)
    op_codes = np.full(len(external_ids), len(labels) - 1, dtype=np.int64)
    op_codes[found] = codes[first[at[found]]]
    return pd.Categorical(labels[op_codes])


def kernel_table_rank(rt: RankTrace) -> KernelTables:
    k = kernels_with_args(rt)
    with_op = k.assign(operator=_launching_operators(rt, k["external_id"].to_numpy()))
    with_op["registers_per_thread"] = with_op["registers_per_thread"].fillna(0)
    with_op["shared_memory"] = with_op["shared_memory"].fillna(0)
    kernels = _stats(k, ["name"])
    by_op = _stats(with_op, ["name", *OP_KEY])
    kernels.insert(0, "rank", rt.rank)
    by_op.insert(0, "rank", rt.rank)
    return KernelTables(kernels[COLUMNS].reset_index(drop=True), by_op[OP_COLUMNS].reset_index(drop=True))


def combine(parts: Mapping[int, KernelTables]) -> KernelTables:
    parts = list(parts.values())
    return KernelTables(
        pd.concat([p.kernels for p in parts], ignore_index=True),
        pd.concat([p.by_operator for p in parts], ignore_index=True),
    )


def tensor_core_share(result: KernelTables) -> pd.DataFrame:
    """Per rank: kernel time in tensor-core kernels and the rest (µs), for the share figure."""
    k = result.kernels
    g = k.groupby(["rank", "tensor_cores_used"])["total_us"].sum().unstack(fill_value=0.0)
    return pd.DataFrame({
        "rank": g.index,
        "tensor_core_us": g.get(True, pd.Series(0.0, index=g.index)).to_numpy(),
        "other_us": g.get(False, pd.Series(0.0, index=g.index)).to_numpy(),
    }).reset_index(drop=True)
