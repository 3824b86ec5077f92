"""HolisticTraceAnalysis 0.5.0's ``TraceDiff``: operator/kernel counts and durations of two traces.

HTA's ``compare_traces`` counts every event (``ph == "X"`` with a ``cat``) of the selected ranks and
*iterations* by name, with its duration (µs) summed, nested operators included (an operator's time
is also in its parent's: totals are not a breakdown). An event's iteration is, for CPU events
(``stream == -1``), the ``ProfilerStep#N`` (any event of that name, file order, the last that
contains it) whose ``[ts, ts + dur)`` contains its start; for GPU events (``stream > 0``), the
iteration of the CPU event that shares its ``correlation`` id; otherwise none. ``device_type``
``"CPU"`` keeps events with ``stream == -1``, ``"GPU"`` the others. HTA reads the whole trace (no
analysed-step window). The defaults are HTA's: the first rank and the first iteration of each trace.

``ops_summary_rank`` is the per-rank step (one rank's ``name → counts, total_duration``);
``compare_frames`` and ``ops_diff`` build HTA's frame and dict from the per-rank summaries.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from analysis.errors import ConfigError
from analysis.kineto.events import gpu_mask
from analysis.kineto.model import RankTrace
from analysis.metrics.timebase import Rounding, event_bounds_ns

DEVICE_TYPES = ("CPU", "GPU", "ALL")
_STEP_PREFIX = "ProfilerStep"
_STEP_RE = re.compile(r"ProfilerStep\s*#\s*(\d+)")
# hta/utils/utils.py: memory kernels keep their whole name in shorten_name
_MEMORY_KERNEL_RE = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")


def iterations_rank(rt: RankTrace) -> set[int]:
    """Step numbers of every ``ProfilerStep#N`` name in the rank (HTA's ``LabeledTrace.iterations``
    reads them from the symbol table: CPU and GPU-side annotations alike)."""
    names = rt.events["name"]
    cats = names.cat.categories if isinstance(names.dtype, pd.CategoricalDtype) else names.unique()
    out = set()
    for c in cats:
        if isinstance(c, str) and c.startswith(_STEP_PREFIX):
            m = _STEP_RE.match(c)
            if m:
                out.add(int(m.group(1)))
    return out


def _step_number_per_row(names: pd.Series) -> np.ndarray:
    """Per row: N of a ``ProfilerStep#N`` name, -1 otherwise (each distinct name parsed once)."""
    cat = names if isinstance(names.dtype, pd.CategoricalDtype) else names.astype("category")
    per_category = np.array(
        [int(m.group(1)) if isinstance(c, str) and c.startswith(_STEP_PREFIX)
         and (m := _STEP_RE.match(c)) else -1 for c in cat.cat.categories] + [-1], dtype=np.int64)
    return per_category[cat.cat.codes.to_numpy()]  # code -1 (no name) → the trailing -1


def event_iterations(rt: RankTrace, rounding: Rounding = "exact") -> tuple[np.ndarray, np.ndarray]:
    """Per event of ``rt.events``: its HTA iteration (-1: none) and its (rounded) duration in ns."""
    ev = rt.events
    start, end = event_bounds_ns(ev["ts"].to_numpy(), ev["dur"].to_numpy(), rounding,
                                 float_timestamps=rt.meta.float_timestamps)
    stream = ev["stream"].to_numpy()
    step_no = _step_number_per_row(ev["name"])
    iteration = np.full(len(ev), -1, dtype=np.int64)
    on_cpu = stream < 0
    # the last step in file order that contains the event's start wins, as in HTA's loop
    for pos in np.flatnonzero(step_no >= 0):
        inside = on_cpu & (start >= start[pos]) & (start < start[pos] + (end[pos] - start[pos]))
        iteration[inside] = step_no[pos]
    # GPU events: the iteration of the CPU-side event with the same correlation (the last one)
    corr = ev["correlation"].to_numpy()
    cpu_side = ~gpu_mask(ev) & (corr != -1)
    no_launch = np.zeros(len(ev), bool)
    if rounding == "hta":
        # HTA looks the launch up only at a row index > 0 (hta/common/trace.py: ``if x > 0``):
        # the GPU events of a launch written first in the file get no iteration
        rows = np.flatnonzero((ev["cat"] != "python_function").to_numpy(bool))  # HTA's rows
        if len(rows) and cpu_side[rows[0]]:
            no_launch = corr == corr[rows[0]]
    by_corr = pd.Series(iteration[cpu_side], index=corr[cpu_side])
    by_corr = by_corr[~by_corr.index.duplicated(keep="last")]
    on_gpu = stream > 0
    iteration[on_gpu] = by_corr.reindex(corr[on_gpu]).fillna(-1).to_numpy(np.int64)
    iteration[on_gpu & no_launch] = -1
    # stream 0 events get no iteration in HTA (NaN)
    iteration[stream == 0] = -1
    return iteration, end - start


def ops_summary_rank(
    rt: RankTrace, *, iterations: Iterable[int], device_type: str = "ALL",
    rounding: Rounding = "exact",
) -> pd.DataFrame:
    """One rank's ``name, counts, total_duration_ns`` over the given iterations and device type."""
    if device_type not in DEVICE_TYPES:
        raise ConfigError(f"device_type must be one of {DEVICE_TYPES}, not {device_type!r}")
    ev = rt.events
    iteration, dur = event_iterations(rt, rounding)
    keep = np.isin(iteration, np.fromiter(iterations, dtype=np.int64))
    stream = ev["stream"].to_numpy()
    if device_type == "CPU":
        keep &= stream == -1
    elif device_type == "GPU":
        keep &= stream != -1
    # group the kept rows by name code, then name the groups (no per-row strings)
    names = ev["name"]
    cat = names if isinstance(names.dtype, pd.CategoricalDtype) else names.astype("category")
    codes = cat.cat.codes.to_numpy()[keep]
    counts = np.bincount(codes + 1, minlength=len(cat.cat.categories) + 1)[1:]
    totals = np.bincount(codes + 1, weights=dur[keep], minlength=len(cat.cat.categories) + 1)[1:]
    present = counts > 0
    out = pd.DataFrame({"name": np.asarray(cat.cat.categories, dtype=object)[present].astype(str),
                        "counts": counts[present].astype(np.int64),
                        "total_duration_ns": np.rint(totals[present]).astype(np.int64)})
    return out.sort_values("name", kind="stable").reset_index(drop=True)


def shorten_name(name: str) -> str:
    """HTA's short name: function arguments, template arguments and return types removed."""
    if _MEMORY_KERNEL_RE.match(name) is not None or ("<" not in name and "(" not in name):
        return name
    stack: list[str] = []
    for c in name.replace("->", ""):
        if c in ">)":
            opening = "<" if c == ">" else "("
            while stack and stack[-1] != opening:
                stack.pop()
            if stack:
                stack.pop()
        else:
            stack.append(c)
    return "".join(stack).split(" ")[-1]


def _side(parts: Sequence[pd.DataFrame], use_short_name: bool) -> pd.DataFrame:
    df = pd.concat(list(parts), ignore_index=True) if parts else pd.DataFrame(
        {"name": pd.Series(dtype=str), "counts": pd.Series(dtype="int64"),
         "total_duration_ns": pd.Series(dtype="int64")})
    col = "short_name" if use_short_name else "name"
    if use_short_name:
        df = df.assign(short_name=df["name"].map(shorten_name))
    ns = df["total_duration_ns"].to_numpy(np.int64)
    # HTA's durations are integer µs unless the trace has fractions
    whole = bool((ns % 1000 == 0).all())
    df = df.assign(total_duration=(ns // 1000) if whole else ns / 1000.0)
    return df.groupby(col)[["counts", "total_duration"]].sum()


def compare_frames(
    control: Sequence[pd.DataFrame], test: Sequence[pd.DataFrame],
    labels: tuple[str, str] = ("Control", "Test"), use_short_name: bool = False,
) -> pd.DataFrame:
    """HTA's ``compare_traces`` frame from per-rank ``ops_summary_rank`` tables of each side."""
    control_label, test_label = labels
    if control_label == test_label:  # HTA renames the test label so (twice, as it does)
        test_label = f"{test_label}_control_test"
    comp = pd.concat([_side(control, use_short_name), _side(test, use_short_name)], axis=1,
                     join="outer", keys=[control_label, test_label])
    comp = comp.fillna(0)
    comp.columns = ["_".join(col).rstrip("_") for col in comp.columns]
    comp["diff_counts"] = comp[f"{test_label}_counts"] - comp[f"{control_label}_counts"]
    comp["diff_duration"] = (comp[f"{test_label}_total_duration"]
                             - comp[f"{control_label}_total_duration"])
    comp["counts_change_categories"] = np.where(
        comp["diff_counts"] > 0, "+", np.where(comp["diff_counts"] < 0, "-", "="))
    return comp


def ops_diff(comp: pd.DataFrame) -> dict[str, list[str]]:
    """HTA's ``ops_diff`` dict (``added``, ``deleted``, ``increased``, ``decreased``,
    ``unchanged``) from a ``compare_frames`` frame."""
    control, test = [c[: -len("_counts")] for c in comp.columns
                     if c.endswith("_counts") and c != "diff_counts"]
    c, t, d = comp[f"{control}_counts"], comp[f"{test}_counts"], comp["diff_counts"]
    return {
        "added": comp.index[c.eq(0) & t.gt(0)].tolist(),
        "deleted": comp.index[c.gt(0) & t.eq(0)].tolist(),
        "increased": comp.index[c.gt(0) & d.gt(0)].tolist(),
        "decreased": comp.index[t.gt(0) & d.lt(0)].tolist(),
        "unchanged": comp.index[t.gt(0) & d.eq(0)].tolist(),
    }


def first_iteration(iterations: Mapping[int, set[int]], label: str) -> list[int]:
    """HTA's default iteration: the smallest step number of the trace (all ranks)."""
    every = sorted(set().union(*iterations.values())) if iterations else []
    if not every:
        raise ConfigError(
            f"the {label} trace has no ProfilerStep#N annotation, and compare_traces / ops_diff "
            "count events per profiler step (HTA's TraceDiff): record the runs with a "
            "torch.profiler schedule and prof.step() to compare them step by step")
    return every[:1]
