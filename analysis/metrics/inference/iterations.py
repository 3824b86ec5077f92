"""A serving engine's iterations (one scheduler step: one forward pass over a batch), per rank.

Inference traces have no ``ProfilerStep#N``. An iteration is found from the engine's own CPU
annotations, the first kind present of:

1. ``execute_<tokens>_context_<c>(...)_generation_<g>(...)`` (vLLM's and SGLang's batch
   annotation): ``tokens`` scheduled, ``c`` prefill (context) requests, ``g`` decode (generation)
   requests; phase ``prefill`` (c > 0, g = 0), ``decode`` (c = 0, g > 0) or ``mixed``;
2. SGLang's ``step[<MODE> bs=<n>]``: phase from the mode (``DECODE`` → decode, ``EXTEND`` /
   ``PREFILL`` → prefill, ``MIXED`` → mixed), batch size ``n``;
3. vLLM's ``gpu_model_runner.py(...): execute_model`` / SGLang's ``forward_batch_generation``
   Python frames: phase ``unknown``.

GPU side of an iteration: the kernels, memcpy and memset launched by runtime calls made on the
annotation's thread inside its ``[ts, ts + dur)`` (by correlation id; a graph launch's kernels
all count). Columns (times µs):

- ``gpu_start_us`` / ``gpu_end_us``: first start and last end of those GPU events (absolute);
- ``gpu_busy_us``: the union of their intervals (overlapping streams counted once);
- ``idle_inside_us``: ``gpu_end - gpu_start - gpu_busy``: the GPU waits inside the iteration;
- ``idle_before_us``: the gap from the previous iteration's ``gpu_end`` to this ``gpu_start``
  (idle *between* iterations: scheduler and host time); NaN for the first iteration;
- ``cpu_us``: the annotation's duration; ``kernels``: GPU events counted;
- ``steady``: in the steady-state window: every iteration except warm-up, i.e. the first
  iteration when there are more than two, and iterations whose ``cpu_us`` exceeds
  ``WARMUP_FACTOR`` × the median of the same phase (first-call compilation, graph capture).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.kineto.events import cat_mask, kernel_like_mask, runtime_mask
from analysis.kineto.model import RankTrace
from analysis.metrics.intervals import merge

WARMUP_FACTOR = 3.0
COLUMNS = ["rank", "iteration", "name", "phase", "tokens", "batch_size", "cpu_start_us", "cpu_us",
           "gpu_start_us", "gpu_end_us", "gpu_busy_us", "idle_inside_us", "idle_before_us",
           "kernels", "steady"]
_EXECUTE = re.compile(r"^execute_(\d+)_context_(\d+)\(.*?\)_generation_(\d+)")
_SGLANG_STEP = re.compile(r"^step\[(\w+) bs=(\d+)\]")
_FRAMES = ("gpu_model_runner.py", "forward_batch_generation")
_SGLANG_PHASE = {"DECODE": "decode", "EXTEND": "prefill", "PREFILL": "prefill", "MIXED": "mixed",
                 "IDLE": "idle"}


def _phase(context: int, generation: int) -> str:
    if context and generation:
        return "mixed"
    return "prefill" if context else ("decode" if generation else "idle")


def iteration_spans(events: pd.DataFrame) -> pd.DataFrame:
    """The iteration annotations (see the module docstring), sorted by start: ``name``, ``phase``,
    ``tokens``, ``batch_size`` (NaN where not carried), ``ts``, ``dur`` (ns), ``pid``, ``tid``."""
    names = events["name"].astype(str)
    annotations = cat_mask(events, ("user_annotation",))
    rows = []
    for idx in events.index[annotations & names.str.startswith("execute_").to_numpy()]:
        m = _EXECUTE.match(names[idx])
        if m:
            tokens, ctx, gen = (int(g) for g in m.groups())
            rows.append((idx, _phase(ctx, gen), tokens, ctx + gen))
    if not rows:
        for idx in events.index[annotations & names.str.startswith("step[").to_numpy()]:
            m = _SGLANG_STEP.match(names[idx])
            if m:
                rows.append((idx, _SGLANG_PHASE.get(m.group(1).upper(), "unknown"), np.nan,
                             int(m.group(2))))
    if not rows:
        frames = cat_mask(events, ("python_function",)) & (
            names.str.contains("gpu_model_runner.py", regex=False)
            & names.str.endswith("execute_model")
            | names.str.endswith("forward_batch_generation")
        ).to_numpy()
        rows = [(idx, "unknown", np.nan, np.nan) for idx in events.index[frames]]
    cols = ["name", "phase", "tokens", "batch_size", "ts", "dur", "pid", "tid"]
    if not rows:
        return pd.DataFrame(columns=cols)
    idx = [r[0] for r in rows]
    table = events.loc[idx, ["name", "ts", "dur", "pid", "tid"]].copy()
    table["name"] = table["name"].astype(str)
    table["phase"] = [r[1] for r in rows]
    table["tokens"] = [r[2] for r in rows]
    table["batch_size"] = [r[3] for r in rows]
    return table.sort_values("ts", kind="stable")[cols].reset_index(drop=True)


def iterations_rank(rt: RankTrace) -> pd.DataFrame:
    """One row per iteration of this rank (columns ``COLUMNS``; see the module docstring)."""
    ev = rt.events
    spans = iteration_spans(ev)
    if spans.empty:
        return pd.DataFrame(columns=COLUMNS)
    calls = ev.loc[runtime_mask(ev), ["ts", "pid", "tid", "correlation"]]
    gpu = ev.loc[kernel_like_mask(ev), ["ts", "dur", "correlation"]]
    rows, prev_end = [], None
    for i, span in enumerate(spans.itertuples(index=False)):
        inside = calls[(calls["pid"] == span.pid) & (calls["tid"] == span.tid)
                       & (calls["ts"] >= span.ts) & (calls["ts"] < span.ts + span.dur)]
        work = gpu[gpu["correlation"].isin(inside["correlation"][inside["correlation"] >= 0])]
        if len(work):
            starts = work["ts"].to_numpy(np.int64)
            ends = starts + work["dur"].to_numpy(np.int64)
            ms, me = merge(starts, ends)
            busy = int((me - ms).sum())
            g0, g1 = int(starts.min()), int(ends.max())
        else:
            busy, g0, g1 = 0, np.nan, np.nan
        before = np.nan if prev_end is None or not len(work) else (g0 - prev_end) / 1000
        if len(work):
            prev_end = g1
        rows.append({
            "rank": rt.rank, "iteration": i, "name": span.name, "phase": span.phase,
            "tokens": span.tokens, "batch_size": span.batch_size,
            "cpu_start_us": span.ts / 1000, "cpu_us": span.dur / 1000,
            "gpu_start_us": g0 / 1000, "gpu_end_us": g1 / 1000, "gpu_busy_us": busy / 1000,
            "idle_inside_us": (g1 - g0 - busy) / 1000 if len(work) else np.nan,
            "idle_before_us": before, "kernels": len(work),
        })
    table = pd.DataFrame(rows, columns=COLUMNS[:-1])
    table["steady"] = _steady(table)
    return table[COLUMNS]


def _steady(table: pd.DataFrame) -> np.ndarray:
    steady = np.ones(len(table), dtype=bool)
    if len(table) > 2:
        steady[0] = False
    median = table.groupby("phase")["cpu_us"].transform("median").to_numpy()
    steady &= table["cpu_us"].to_numpy() <= WARMUP_FACTOR * median
    return steady


def combine(frames: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    parts = [f for f in frames.values() if len(f)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)


def phase_summary(iterations: pd.DataFrame) -> pd.DataFrame:
    """Per rank and phase, over the steady-state iterations: count, mean CPU and GPU-busy time,
    summed idle inside and before iterations (µs), mean tokens and batch size."""
    cols = ["rank", "phase", "iterations", "cpu_us_mean", "gpu_busy_us_mean", "idle_inside_us",
            "idle_before_us", "tokens_mean", "batch_size_mean"]
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
    return out[cols]
