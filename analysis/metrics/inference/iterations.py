"""A serving engine's iterations (one scheduler step: one forward pass over a batch), per rank.

Inference traces have no ``ProfilerStep#N``. Iterations, their phase (prefill / decode / mixed),
tokens, batch size and the steady-state flag are the engine's CPU annotations as
:mod:`analysis.kineto.iterations` defines them (the one definition, which the analysed window
``window="iterations"`` reads too).

GPU side of an iteration: the kernels, memcpy and memset launched by runtime calls made on the
annotation's thread inside its ``[ts, ts + dur)`` (by correlation id; a graph launch's kernels
all count). Columns (times µs):

- ``gpu_start_us`` / ``gpu_end_us``: first start and last end of those GPU events (absolute);
- ``gpu_busy_us``: the union of their intervals (overlapping streams counted once);
- ``idle_inside_us``: ``gpu_end - gpu_start - gpu_busy``: the GPU waits inside the iteration;
- ``idle_before_us``: the gap from the previous iteration's ``gpu_end`` to this ``gpu_start``
  (idle *between* iterations: scheduler and host time); NaN for the first iteration;
- ``cpu_us``: the annotation's duration; ``kernels``: GPU events counted;
- ``steady``: in the steady state (not warm-up; :mod:`analysis.kineto.iterations`);
- ``attention_us`` / ``gemm_us``: GPU time of the iteration's attention / GEMM operators;
  ``top_operators``: its three operators with the most GPU time, with their shares
  (:mod:`analysis.metrics.inference.operators`, which defines the operator split and families).

The table's ``attrs["operators"]`` holds the split itself: one row per rank, iteration and
operator (``rank``, ``iteration``, ``name``, ``family``, ``gpu_us``); :func:`phase_summary` reads it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.kineto.iterations import gpu_work_iterations, serving_iterations
from analysis.kineto.model import RankTrace
from analysis.metrics.inference import operators as op_split

COLUMNS = ["rank", "iteration", "name", "phase", "tokens", "batch_size", "cpu_start_us", "cpu_us",
           "gpu_start_us", "gpu_end_us", "gpu_busy_us", "idle_inside_us", "idle_before_us",
           "kernels", "steady", "attention_us", "gemm_us", "top_operators"]
_BASE = COLUMNS[:COLUMNS.index("steady")]
OPERATOR_COLUMNS = ["rank", *op_split.COLUMNS]


def iterations_rank(rt: RankTrace) -> pd.DataFrame:
    """One row per iteration of this rank (columns ``COLUMNS``; see the module docstring)."""
    ev = rt.events
    spans = serving_iterations(rt)
    if spans.empty:
        return _with_operators(pd.DataFrame(columns=COLUMNS), pd.DataFrame(columns=OPERATOR_COLUMNS))
    table = _gpu_side(ev, spans)
    n = len(spans)
    table.insert(0, "rank", rt.rank)
    table.insert(1, "iteration", np.arange(n))
    table.insert(2, "name", spans["name"].to_numpy())
    table.insert(3, "phase", spans["phase"].to_numpy())
    table.insert(4, "tokens", spans["tokens"].to_numpy())
    table.insert(5, "batch_size", spans["batch_size"].to_numpy())
    table.insert(6, "cpu_start_us", spans["ts"].to_numpy(np.int64) / 1000)
    table.insert(7, "cpu_us", spans["dur"].to_numpy(np.int64) / 1000)
    table = table[_BASE]
    table["steady"] = spans["steady"].to_numpy(dtype=bool)
    ops = op_split.iteration_operators(ev, spans)
    by_family = ops.pivot_table(index="iteration", columns="family", values="gpu_us",
                                aggfunc="sum", fill_value=0.0)
    for family in ("attention", "gemm"):
        values = by_family[family] if family in by_family else pd.Series(dtype=float)
        table[f"{family}_us"] = table["iteration"].map(values).fillna(0.0).to_numpy(float)
    top = op_split.top_operators_by(ops, "iteration")
    table["top_operators"] = table["iteration"].map(top).fillna("").to_numpy(object)
    return _with_operators(table[COLUMNS], ops.assign(rank=rt.rank)[OPERATOR_COLUMNS])


def _gpu_side(ev: pd.DataFrame, spans: pd.DataFrame) -> pd.DataFrame:
    """Per iteration (row of ``spans``): ``gpu_start_us``, ``gpu_end_us``, ``gpu_busy_us``,
    ``idle_inside_us``, ``idle_before_us``, ``kernels`` (see the module docstring), vectorised:
    the busy union is a sweep over each iteration's GPU events sorted by start."""
    it = gpu_work_iterations(ev, spans)
    work = pd.DataFrame({"it": it.to_numpy(), "start": ev.loc[it.index, "ts"].to_numpy(np.int64)})
    work["end"] = work["start"] + ev.loc[it.index, "dur"].to_numpy(np.int64)
    work = work.sort_values(["it", "start"], kind="stable")
    # the part of each event past every earlier event of its iteration: their sum is the union
    reach = work.groupby("it")["end"].cummax().groupby(work["it"]).shift()
    fresh = work["end"] - np.maximum(work["start"], reach.fillna(work["start"]))
    work["fresh"] = fresh.clip(lower=0)
    g = work.groupby("it")
    per = pd.DataFrame({"g0": g["start"].min(), "g1": g["end"].max(), "busy": g["fresh"].sum(),
                        "kernels": g.size()}).reindex(np.arange(len(spans)))
    g0, g1 = per["g0"].to_numpy(float), per["g1"].to_numpy(float)
    # idle before: from the previous iteration that launched GPU work
    prev_end = pd.Series(g1).ffill().shift().to_numpy(float)
    has = ~np.isnan(g0)
    return pd.DataFrame({
        "gpu_start_us": g0 / 1000, "gpu_end_us": g1 / 1000,
        "gpu_busy_us": np.where(has, per["busy"].to_numpy(float), 0.0) / 1000,
        "idle_inside_us": (g1 - g0 - per["busy"].to_numpy(float)) / 1000,
        "idle_before_us": np.where(has, g0 - prev_end, np.nan) / 1000,
        "kernels": per["kernels"].fillna(0).to_numpy(np.int64),
    })


def _with_operators(table: pd.DataFrame, operators: pd.DataFrame) -> pd.DataFrame:
    table.attrs["operators"] = operators
    return table


def combine(frames: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    parts = [f for f in frames.values() if len(f)]
    ops = [f.attrs["operators"] for f in parts if len(f.attrs.get("operators", ()))]
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)
    table.attrs = {}
    return _with_operators(table, pd.concat(ops, ignore_index=True) if ops
                           else pd.DataFrame(columns=OPERATOR_COLUMNS))


def phase_summary(iterations: pd.DataFrame) -> pd.DataFrame:
    """Per rank and phase, over the steady-state iterations: count, mean CPU and GPU-busy time,
    summed idle inside and before iterations (µs), mean tokens and batch size, the shares (%) of
    the phase's GPU time in attention, GEMM and MoE operators and its top operators (from
    ``iterations.attrs["operators"]``; NaN / empty without it)."""
    cols = ["rank", "phase", "iterations", "cpu_us_mean", "gpu_busy_us_mean", "idle_inside_us",
            "idle_before_us", "tokens_mean", "batch_size_mean", "attention_pct", "gemm_pct",
            "moe_pct", "top_operators"]
    steady = iterations[iterations["steady"].astype(bool)]
    if steady.empty:
        return pd.DataFrame(columns=cols)
    g = steady.groupby(["rank", "phase"], sort=True)
    out = pd.DataFrame({
        "iterations": g.size(),
        "cpu_us_mean": g["cpu_us"].mean(),
        "gpu_busy_us_mean": g["gpu_busy_us"].mean(),
        "idle_inside_us": g["idle_inside_us"].sum(),
        "idle_before_us": g["idle_before_us"].sum(min_count=1),
        "tokens_mean": g["tokens"].mean(),
        "batch_size_mean": g["batch_size"].mean(),
    }).reset_index()
    shares = [phase_operators(iterations, rank, phase)
              for rank, phase in zip(out["rank"], out["phase"], strict=True)]
    out["attention_pct"] = [op_split.family_shares(o)["attention"] for o in shares]
    out["gemm_pct"] = [op_split.family_shares(o)["gemm"] for o in shares]
    out["moe_pct"] = [op_split.family_shares(o)["moe"] for o in shares]
    out["top_operators"] = [op_split.top_operators(o) for o in shares]
    return out[cols]


def phase_operators(iterations: pd.DataFrame, rank: int, phase: str) -> pd.DataFrame:
    """The operator rows (``attrs["operators"]``) of ``rank``'s steady ``phase`` iterations."""
    ops = iterations.attrs.get("operators")
    if ops is None or not len(ops):
        return pd.DataFrame(columns=OPERATOR_COLUMNS)
    chosen = iterations[(iterations["rank"] == rank) & (iterations["phase"] == phase)
                        & iterations["steady"].astype(bool)]["iteration"]
    return ops[(ops["rank"] == rank) & ops["iteration"].isin(chosen)]
