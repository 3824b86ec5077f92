"""Comparing two runs: each rank's per-step profile, and the deltas between two sets of profiles.

Per rank, over the analysed window (complete profiler steps), ``trace_diff_rank`` measures:

- **Breakdown** (ns): the time covered by the rank's ``ProfilerStep#N`` CPU annotations
  (``step_time``, the union of the steps) split into a partition of the GPU timeline:
  ``computation`` (a COMPUTATION kernel runs), ``exposed_communication`` (communication runs, no
  computation), ``exposed_memory`` (a memcpy/memset runs, neither of the above), ``other`` (only
  OTHER-type GPU work, e.g. sync waits with ``kernel_patterns="hta"``) and ``idle`` (no GPU work).
  The five parts add up to ``step_time`` exactly. GPU work is what the kernel patterns select and
  classify (:func:`analysis.metrics.kernel_types.classified_gpu_events`); work that runs outside
  the steps' time is not counted. A rank without profiler steps uses the span of its GPU work as
  one "step" (``steps == 0`` says so).
- **Kernels**: per kernel name and type, the number of GPU events and their summed duration.
- **Operators**: per CPU operator name, its calls and the *exclusive* GPU time of the kernels it
  launched (``gpu_self`` of :mod:`analysis.metrics.operators.operator_summary`: a kernel counts only for the
  innermost operator open when its launch call ran, so nested operators are never counted twice).
  GPU time launched outside any operator, or by no launch call in the trace (kept with
  ``gpu_events="all"``), is the row ``NO_OPERATOR``. Operators are matched by name, and by name + input dims + input types when
  asked (``shapes=True``) and the rank carries the recorded shapes (``rt.extras["op_shapes"]``,
  traces recorded with ``record_shapes=True``); ``input_dims``/``input_types`` are ``""`` otherwise.

The deltas (``breakdown_deltas``, ``kernel_deltas``, ``operator_deltas``) compare *per profiler
step* values, so runs with different numbers of steps compare fairly: each rank's totals are divided
by its own number of steps, then summed over the compared ranks (kernels, operators) or averaged over
them (breakdown). All reported times are µs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.kineto.events import kernel_like_mask
from analysis.kineto.model import RankTrace
from analysis.metrics.intervals import merge, time_by_state
from analysis.metrics.kernel_types import KernelPatterns, classified_gpu_events
from analysis.metrics.operators.operator_summary import operator_times
from analysis.metrics.steps.profiler_steps import profiler_steps_rank
from analysis.metrics.timebase import Rounding

CATEGORIES = ("computation", "exposed_communication", "exposed_memory", "other", "idle")
BREAKDOWN_ROWS = ("step_time", *CATEGORIES)
NO_OPERATOR = "[no CPU operator]"
CHANGES = ("added", "removed", "slower", "faster", "unchanged")
# A change smaller than this (in % of the base time) is noise: "unchanged".
DEFAULT_MIN_CHANGE_PCT = 5.0

_KERNEL_KEY = ["kernel_type", "name"]
_OPERATOR_KEY = ["operator", "input_dims", "input_types"]
SHAPES_EXTRA = "op_shapes"  # analysis.kineto.extras kind: input_dims, input_types per cpu_op row


@dataclass
class RankProfile:
    """One rank's per-step profile (see the module docstring). Times are integer ns totals."""

    rank: int
    steps: int  # complete profiler steps in the window; 0: none (the GPU span is one "step")
    breakdown: dict[str, int]  # BREAKDOWN_ROWS → ns over the whole window
    kernels: pd.DataFrame  # kernel_type, name, count, time_ns
    operators: pd.DataFrame  # operator, input_dims, input_types, count, gpu_time_ns
    gpus: list[str] = field(default_factory=list)

    @property
    def divisor(self) -> int:
        return max(self.steps, 1)


def trace_diff_rank(
    rt: RankTrace, *, patterns: str | KernelPatterns = "default", rounding: Rounding = "exact",
    shapes: bool = False,
) -> RankProfile:
    """One rank's profile over its analysed window (the per-rank step of the comparison).

    ``shapes``: match operators by input dims and types too, from the recorded shapes the rank
    carries (``rt.extras["op_shapes"]``). Off through the registry, which declares no extras for
    this analysis: shapes another analysis attached to the rank earlier must not change the profile.
    """
    gpu = classified_gpu_events(rt, patterns, rounding)
    steps = profiler_steps_rank(rt, rounding=rounding)
    return RankProfile(
        rank=rt.rank,
        steps=len(steps),
        breakdown=_breakdown(gpu, steps),
        kernels=_kernels(gpu),
        operators=_operators(rt, shapes),
        gpus=list(rt.meta.gpu_names),
    )


def _breakdown(gpu: pd.DataFrame, steps: pd.DataFrame) -> dict[str, int]:
    if len(steps):
        s_s, s_e = merge(steps["start"].to_numpy(), steps["end"].to_numpy())
    elif len(gpu):
        s_s, s_e = np.array([gpu["start"].min()]), np.array([gpu["end"].max()])
    else:
        s_s, s_e = np.array([], np.int64), np.array([], np.int64)
    sets = [(s_s, s_e)]
    for kind in ("COMPUTATION", "COMMUNICATION", "MEMORY", "OTHER"):
        part = gpu[gpu["kernel_type"] == kind]
        sets.append(merge(part["start"].to_numpy(), part["end"].to_numpy()))
    out = dict.fromkeys(BREAKDOWN_ROWS, 0)
    for state, ns in time_by_state(sets).items():
        if state < 0 or not state & 1:  # outside the steps
            continue
        out["step_time"] += ns
        if state & 0b10:
            out["computation"] += ns
        elif state & 0b100:
            out["exposed_communication"] += ns
        elif state & 0b1000:
            out["exposed_memory"] += ns
        elif state & 0b10000:
            out["other"] += ns
        else:
            out["idle"] += ns
    return out


def _kernels(gpu: pd.DataFrame) -> pd.DataFrame:
    df = pd.DataFrame({
        "kernel_type": gpu["kernel_type"].astype(str).to_numpy(),
        "name": gpu["name"].astype(str).to_numpy(),
        "time_ns": (gpu["end"] - gpu["start"]).to_numpy(np.int64),
    })
    grouped = df.groupby(_KERNEL_KEY, sort=True)["time_ns"]
    return pd.DataFrame({"count": grouped.size(), "time_ns": grouped.sum()}).reset_index()


def _operators(rt: RankTrace, use_shapes: bool) -> pd.DataFrame:
    ev = rt.events
    ops = operator_times(ev)
    dims = types = np.full(len(ops), "", dtype=object)
    shapes = (getattr(rt, "extras", None) or {}).get(SHAPES_EXTRA) if use_shapes else None
    if shapes is not None and len(ops):
        aligned = shapes.reindex(ops.index)
        dims = aligned["input_dims"].astype(object).fillna("").astype(str).to_numpy()
        types = aligned["input_types"].astype(object).fillna("").astype(str).to_numpy()
    df = pd.DataFrame({"operator": ops["name"].astype(str).to_numpy(), "input_dims": dims,
                       "input_types": types, "gpu_time_ns": ops["gpu_self_ns"].to_numpy(np.int64)})
    grouped = df.groupby(_OPERATOR_KEY, sort=True)["gpu_time_ns"]
    table = pd.DataFrame({"count": grouped.size(), "gpu_time_ns": grouped.sum()}).reset_index()
    launched = int(ev.loc[kernel_like_mask(ev), "dur"].sum())
    rest = launched - int(table["gpu_time_ns"].sum())
    if rest > 0:
        table = pd.concat([table, pd.DataFrame(
            {"operator": [NO_OPERATOR], "input_dims": [""], "input_types": [""], "count": [0],
             "gpu_time_ns": [rest]})], ignore_index=True)
    return table


def combine(parts: Mapping[int, RankProfile]) -> dict[int, RankProfile]:
    """The per-rank profiles, ``{rank: RankProfile}`` (what the deltas below take)."""
    return dict(parts)


# ------------------------------------------------------------------------------ the deltas


def breakdown_table(profiles: Mapping[int, RankProfile]) -> pd.DataFrame:
    """Per rank: ``steps`` and each of ``BREAKDOWN_ROWS`` per profiler step (µs)."""
    rows = [{"rank": r, "steps": p.steps,
             **{k: p.breakdown[k] / 1000.0 / p.divisor for k in BREAKDOWN_ROWS}}
            for r, p in profiles.items()]
    return pd.DataFrame(rows, columns=["rank", "steps", *BREAKDOWN_ROWS])


def breakdown_deltas(
    base: Mapping[int, RankProfile], test: Mapping[int, RankProfile],
    pairs: Sequence[tuple[int, int]],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-step breakdown, base vs test: per matched rank pair (``base_rank``, ``test_rank``) and
    averaged over the pairs. Columns ``category, base_us, test_us, diff_us, diff_pct``; the
    categories' ``diff_us`` add up to ``step_time``'s."""
    b = breakdown_table({r: base[r] for r, _ in pairs}).set_index("rank")
    t = breakdown_table({r: test[r] for _, r in pairs}).set_index("rank")
    per_rank = []
    for rb, rt in pairs:
        for cat in BREAKDOWN_ROWS:
            per_rank.append((rb, rt, cat, b.at[rb, cat], t.at[rt, cat]))
    per_rank = pd.DataFrame(per_rank, columns=["base_rank", "test_rank", "category", "base_us",
                                               "test_us"])
    overall = (per_rank.groupby("category", sort=False)[["base_us", "test_us"]].mean()
               .reset_index())
    return _with_diff(per_rank), _with_diff(overall)


def _with_diff(df: pd.DataFrame) -> pd.DataFrame:
    """``diff_us`` and ``diff_pct`` (% of the base; NaN where the base is 0: no percentage of
    nothing, which the page and the CSVs showed as ``inf``)."""
    df["diff_us"] = df["test_us"] - df["base_us"]
    with np.errstate(divide="ignore", invalid="ignore"):
        df["diff_pct"] = (100.0 * df["diff_us"] / df["base_us"]).where(df["base_us"] != 0)
    return df


def _per_step(profiles: Mapping[int, RankProfile], table: str, key: list[str],
              time_col: str) -> pd.DataFrame:
    parts = []
    for p in profiles.values():
        t = getattr(p, table)
        parts.append(pd.DataFrame({**{k: t[k] for k in key},
                                   "count": t["count"] / p.divisor,
                                   "time_us": t[time_col] / 1000.0 / p.divisor}))
    if not parts:
        return pd.DataFrame(columns=[*key, "count", "time_us"])
    return pd.concat(parts, ignore_index=True).groupby(key, sort=True)[["count", "time_us"]].sum()


def _deltas(base: pd.DataFrame, test: pd.DataFrame, key: list[str],
            min_change_pct: float) -> pd.DataFrame:
    df = base.join(test, how="outer", lsuffix="_base", rsuffix="_test")
    df = df.rename(columns={"count_base": "base_count", "count_test": "test_count",
                            "time_us_base": "base_time_us", "time_us_test": "test_time_us"})
    in_base, in_test = df["base_count"].notna(), df["test_count"].notna()
    df = df.fillna(0.0)
    df["diff_count"] = df["test_count"] - df["base_count"]
    df["diff_time_us"] = df["test_time_us"] - df["base_time_us"]
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = 100.0 * df["diff_time_us"] / df["base_time_us"]
    # 0 without a change; NaN from a base of 0 µs (``change`` says added or slower)
    pct = pct.where(df["diff_time_us"] != 0, 0.0).where((df["base_time_us"] != 0)
                                                        | (df["diff_time_us"] == 0))
    df["diff_pct"] = pct
    noise = (df["diff_time_us"] == 0) | (pct.abs() < min_change_pct)
    change = np.where(noise, "unchanged",
                      np.where(df["diff_time_us"] > 0, "slower", "faster"))
    change = np.where(in_base & ~in_test, "removed", np.where(~in_base & in_test, "added", change))
    df["change"] = pd.Categorical(change, categories=CHANGES)
    df = df.reset_index()
    # largest change first, then by key (np.lexsort's last key is the primary one)
    order = np.lexsort([df[k].astype(str).to_numpy() for k in reversed(key)]
                       + [-df["diff_time_us"].abs().to_numpy()])
    return df.iloc[order].reset_index(drop=True)[
        [*key, "base_count", "test_count", "diff_count", "base_time_us", "test_time_us",
         "diff_time_us", "diff_pct", "change"]]


def kernel_deltas(base: Mapping[int, RankProfile], test: Mapping[int, RankProfile],
                  min_change_pct: float = DEFAULT_MIN_CHANGE_PCT) -> pd.DataFrame:
    """Per kernel type and name: count and time per step, base vs test, summed over the compared
    ranks; ``diff_pct`` is the change in % of the base time (NaN where that is 0); ``change``
    one of ``CHANGES``. Sorted by the size of the time change, largest first."""
    return _deltas(_per_step(base, "kernels", _KERNEL_KEY, "time_ns"),
                   _per_step(test, "kernels", _KERNEL_KEY, "time_ns"), _KERNEL_KEY,
                   min_change_pct)


def operator_deltas(base: Mapping[int, RankProfile], test: Mapping[int, RankProfile],
                    min_change_pct: float = DEFAULT_MIN_CHANGE_PCT) -> pd.DataFrame:
    """Per CPU operator (name, and input dims/types when recorded): calls and exclusive GPU time
    per step, base vs test (as ``kernel_deltas``). Operators that launch no GPU work in either run
    are ``unchanged`` with ``diff_time_us == 0`` unless they appear or disappear."""
    return _deltas(_per_step(base, "operators", _OPERATOR_KEY, "gpu_time_ns"),
                   _per_step(test, "operators", _OPERATOR_KEY, "gpu_time_ns"), _OPERATOR_KEY,
                   min_change_pct)
