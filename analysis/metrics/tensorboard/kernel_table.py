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

from analysis.errors import NoGPUEventsError
from analysis.kineto.events import rank_has_gpu_events
from analysis.kineto.model import RankTrace
from analysis.metrics.tensorboard.gpu_summary import PluginKernels, plugin_kernels
from analysis.metrics.tensorboard.plugin_steps import column_codes, flags_of

COLUMNS = ["rank", "name", "tensor_cores_used", "calls", "total_us", "mean_us", "max_us",
           "min_us", "mean_blocks_per_sm", "mean_est_achieved_occupancy_pct"]
OP_KEY = ["operator", "grid", "block", "registers_per_thread", "shared_memory"]
OP_COLUMNS = ["rank", "name", *OP_KEY, "tensor_cores_used", "calls", "total_us", "mean_us",
              "max_us", "min_us", "mean_blocks_per_sm", "mean_est_achieved_occupancy_pct"]
NO_OPERATOR = "(none)"


class KernelTables(NamedTuple):
    kernels: pd.DataFrame
    by_operator: pd.DataFrame


def _group_ids(keys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Groups of rows by their combination of ``keys`` (integer codes ≥ -1, -1 for missing):
    ``by`` (the rows, each group's together, in row order within it), ``starts`` (where each
    group begins in ``by``), ``first`` (each group's first row). One stable sort of one integer
    key (the codes in mixed radix)."""
    n = len(keys[0]) if keys else 0
    key = np.zeros(n, dtype=np.int64)
    span = 1
    for codes in keys:
        codes = codes.astype(np.int64) + 1  # -1 (missing) becomes a value of its own
        size = int(codes.max()) + 1 if n else 1
        if span * size >= 1 << 62:  # would overflow: renumber the combinations so far
            _, key = np.unique(key, return_inverse=True)
            span = int(key.max()) + 1
        key, span = key * size + codes, span * size
    by = np.argsort(key, kind="stable")
    sorted_key = key[by]
    starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]]) if n else by[:0]
    return by, starts, by[starts]  # stable: each group's first row


def _stats(k: PluginKernels, by: np.ndarray, starts: np.ndarray) -> dict[str, np.ndarray]:
    """Per group (rows ``by``, groups starting at ``starts``): calls, total/mean/max/min duration
    (µs) and the duration-weighted means of blocks per SM and est. achieved occupancy (a kernel
    without the arg counts as 0; 0 when every weight is 0)."""
    dur = k.dur_ns / 1000
    d = dur[by]
    calls = np.diff(np.r_[starts, len(by)]).astype(np.int64)

    def per_group(ufunc, values: np.ndarray) -> np.ndarray:
        return ufunc.reduceat(values, starts) if len(by) else np.zeros(0)

    total = per_group(np.add, d)
    out = {
        "calls": calls,
        "total_us": total,
        "mean_us": total / np.maximum(calls, 1),
        "max_us": per_group(np.maximum, d),
        "min_us": per_group(np.minimum, d),
    }
    weight = np.where(total > 0, total, np.nan)
    for col, name in (("blocks_per_sm", "mean_blocks_per_sm"),
                      ("occupancy_pct", "mean_est_achieved_occupancy_pct")):
        sums = per_group(np.add, (np.nan_to_num(k.args[col]) * dur)[by])
        out[name] = np.nan_to_num(sums / weight, nan=0.0)
    return out


def _text(codes: np.ndarray, values: list) -> np.ndarray:
    """The values at ``codes`` as text (a missing one reads "nan", as pandas writes it)."""
    table = np.array([str(v) for v in values] + ["nan"], dtype=object)
    return table[codes]


def _table(rank: int, k: PluginKernels, key_columns: dict[str, tuple[np.ndarray, object]],
           columns: list[str]) -> pd.DataFrame:
    """The per-group statistics of ``k`` by ``key_columns`` (``{column: (codes, values)}``:
    codes into a list of text ``values``; or, with ``values`` None, a numeric column, its values
    per row), sorted by total time, descending (first appearance among equals)."""
    by, starts, first = _group_ids([
        codes if values is not None else np.unique(codes, return_inverse=True)[1]
        for codes, values in key_columns.values()
    ])
    stats = _stats(k, by, starts)
    appearance = np.argsort(first, kind="stable")  # the groups in order of first appearance
    order = appearance[np.argsort(-stats["total_us"][appearance], kind="stable")]
    rows = first[order]
    data: dict[str, object] = {"rank": np.full(len(rows), rank, dtype=np.int64)}
    for column, (codes, values) in key_columns.items():
        data[column] = (pd.array(_text(codes[rows], values), dtype="str") if values is not None
                        else codes[rows])
    data["tensor_cores_used"] = k.tensor_cores[k.name_codes[rows]]
    data.update({c: v[order] for c, v in stats.items()})
    return pd.DataFrame(data, columns=columns)


def _last_row_of(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Per ``wanted`` id: the last position of ``ids`` holding it, -1 when none. A table indexed
    by id when the ids are few and small (they count up from 0 in a trace), else a sort."""
    out = np.full(len(wanted), -1, dtype=np.int64)
    if not len(ids) or not len(wanted):
        return out
    low, high = int(min(ids.min(), wanted.min())), int(max(ids.max(), wanted.max()))
    if low >= 0 and high < 4 * (len(ids) + len(wanted)):
        last = np.full(high + 1, -1, dtype=np.int64)
        np.maximum.at(last, ids, np.arange(len(ids)))
        return last[wanted]
    order = np.argsort(ids, kind="stable")
    ids_sorted = ids[order]
    at = np.searchsorted(ids_sorted, wanted, side="right") - 1  # the last of equal ids
    hit = (at >= 0) & (ids_sorted[np.maximum(at, 0)] == wanted)
    out[hit] = order[at[hit]]
    return out


def _launching_operators(rt: RankTrace, external_ids: np.ndarray) -> tuple[np.ndarray, list]:
    """Per kernel: the name of the last CPU operator with its external id (the plugin's link),
    :data:`NO_OPERATOR` when none; as ``(codes, values)``."""
    ev = rt.events
    cpu = np.flatnonzero(flags_of(column_codes(rt, "cat"), lambda v: v == "cpu_op"))
    name_codes, names = column_codes(rt, "name")
    ids = ev["external_id"].to_numpy(np.int64)[cpu]
    last = _last_row_of(ids, external_ids)  # into cpu, -1: no operator with that id
    op_codes = np.full(len(external_ids), len(names), dtype=np.int64)  # NO_OPERATOR
    found = last >= 0
    op_codes[found] = name_codes[cpu[last[found]]]
    op_codes[op_codes < 0] = len(names)  # an operator without a name: read as none
    return op_codes, [*names, NO_OPERATOR]


def kernel_table_rank(rt: RankTrace) -> KernelTables:
    """The rank's two tables; ``NoGPUEventsError`` when it has neither an event of the
    ``kernel`` category nor other GPU work (a CPU-only rank; an MTIA rank's device events get
    empty tables, as in the plugin). The plugin reads kernels by category alone: a kernel whose
    ``stream`` or ``correlation`` arg is missing (an edited trace), which the other GPU analyses
    leave out, is in its table and in this one."""
    k = plugin_kernels(rt)
    if not len(k.dur_ns) and not rank_has_gpu_events(rt):
        raise NoGPUEventsError([rt.rank], "Kernels (TensorBoard)")
    kernels = _table(rt.rank, k, {"name": (k.name_codes, k.names)}, COLUMNS)
    op_codes, op_names = _launching_operators(rt, k.external_id)
    registers = np.nan_to_num(k.args["registers_per_thread"], nan=0.0)
    shared = np.nan_to_num(k.args["shared_memory"], nan=0.0)
    by_op = _table(rt.rank, k, {
        "name": (k.name_codes, k.names),
        "operator": (op_codes, op_names),
        "grid": k.grid,
        "block": k.block,
        "registers_per_thread": (registers, None),
        "shared_memory": (shared, None),
    }, OP_COLUMNS)
    return KernelTables(kernels, by_op)


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
