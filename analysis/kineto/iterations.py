"""Serving-engine iterations: which rows of a rank's trace mark one -- the one definition.

Inference traces (vLLM, SGLang) have no ``ProfilerStep#N``; the engine's own CPU annotations mark
its iterations (one scheduler step: one forward pass over a batch). An *iteration* is such an
annotation, the first kind present on the rank of:

1. ``execute_<tokens>_context_<c>(...)_generation_<g>(...)`` (vLLM's and SGLang's batch
   annotation, category ``user_annotation``): ``tokens`` scheduled, ``c`` prefill (context)
   requests, ``g`` decode (generation) requests; phase ``prefill`` (c > 0, g = 0), ``decode``
   (c = 0, g > 0) or ``mixed``;
2. SGLang's ``step[<MODE> bs=<n>]`` (``user_annotation``): phase from the mode (``DECODE`` →
   decode, ``EXTEND`` / ``PREFILL`` → prefill, ``MIXED`` → mixed), batch size ``n``;
3. vLLM's ``gpu_model_runner.py(...): execute_model`` / SGLang's ``forward_batch_generation``
   Python frames: phase ``unknown``.

**Steady state.** Every iteration except warm-up: the first iteration when there are more than
two, and iterations whose CPU time exceeds ``WARMUP_FACTOR`` × the median of the same phase
(first-call compilation, graph capture). The *steady-state window* of a rank runs from the start
of its first steady iteration to the end of its last one (CPU time, the annotations' ``[ts, ts +
dur]``); an outlier between them stays inside, as a slow profiler step would.

The analysed window (``analysis.kineto.window``, ``window="iterations"`` or ``"auto"``) and the
iteration table (``analysis.metrics.inference.iterations``) read iterations from here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import pandas as pd

from analysis.kineto.events import cat_mask, kernel_like_mask, runtime_mask

# A warm-up iteration (compilation, capture) is several times slower than its phase's median;
# ordinary batch-to-batch variation stays well under 3x.
WARMUP_FACTOR = 3.0
SPAN_COLUMNS = ["name", "phase", "tokens", "batch_size", "ts", "dur", "pid", "tid", "steady"]
_EXECUTE = re.compile(r"^execute_(\d+)_context_(\d+)\(.*?\)_generation_(\d+)")
_SGLANG_STEP = re.compile(r"^step\[(\w+) bs=(\d+)\]")
_SGLANG_PHASE = {"DECODE": "decode", "EXTEND": "prefill", "PREFILL": "prefill", "MIXED": "mixed",
                 "IDLE": "idle"}


class RankLike(Protocol):
    """What this module reads of a rank (:class:`analysis.kineto.model.RankTrace`)."""

    events: pd.DataFrame

    def memoised(self, key: Any, compute: Callable[[], Any]) -> Any: ...


def _phase(context: int, generation: int) -> str:
    if context and generation:
        return "mixed"
    return "prefill" if context else ("decode" if generation else "idle")


def iteration_spans(events: pd.DataFrame) -> pd.DataFrame:
    """The iteration annotations of ``events`` (see the module docstring), sorted by start:
    ``name``, ``phase``, ``tokens``, ``batch_size`` (NaN where not carried), ``ts``, ``dur`` (ns),
    ``pid``, ``tid``, ``steady`` (bool)."""
    annotations = cat_mask(events, ("user_annotation",))
    rows = []
    for idx, name in _named(events, annotations, lambda n: n.str.startswith("execute_")):
        m = _EXECUTE.match(name)
        if m:
            tokens, ctx, gen = (int(g) for g in m.groups())
            rows.append((idx, _phase(ctx, gen), tokens, ctx + gen))
    if not rows:
        for idx, name in _named(events, annotations, lambda n: n.str.startswith("step[")):
            m = _SGLANG_STEP.match(name)
            if m:
                rows.append((idx, _SGLANG_PHASE.get(m.group(1).upper(), "unknown"), np.nan,
                             int(m.group(2))))
    if not rows:
        frames = _named(events, cat_mask(events, ("python_function",)), lambda n: (
            n.str.contains("gpu_model_runner.py", regex=False) & n.str.endswith("execute_model")
            | n.str.endswith("forward_batch_generation")))
        rows = [(idx, "unknown", np.nan, np.nan) for idx, _ in frames]
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=bool if c == "steady" else object)
                             for c in SPAN_COLUMNS})
    table = events.loc[[r[0] for r in rows], ["name", "ts", "dur", "pid", "tid"]].copy()
    table["name"] = table["name"].astype(str)
    table["phase"] = [r[1] for r in rows]
    table["tokens"] = [r[2] for r in rows]
    table["batch_size"] = [r[3] for r in rows]
    table = table.sort_values("ts", kind="stable").reset_index(drop=True)
    table["steady"] = _steady(table)
    return table[SPAN_COLUMNS]


def _named(events: pd.DataFrame, rows: np.ndarray, test) -> list[tuple[Any, str]]:
    """``(index label, name)`` of the ``rows`` whose name passes ``test`` (a vectorised string
    test), tried once per distinct name (names are categorical), not once per event."""
    names = events["name"]
    distinct = names.cat.categories if isinstance(names.dtype, pd.CategoricalDtype) else names.unique()
    distinct = pd.Series(distinct, dtype=object).astype(str)
    chosen = distinct[np.asarray(test(distinct), dtype=bool)]
    if chosen.empty:
        return []
    hit = rows & names.isin(list(chosen)).to_numpy()
    return [(idx, str(names[idx])) for idx in events.index[hit]]


def _steady(table: pd.DataFrame) -> np.ndarray:
    steady = np.ones(len(table), dtype=bool)
    if len(table) > 2:
        steady[0] = False
    median = table.groupby("phase")["dur"].transform("median").to_numpy()
    steady &= table["dur"].to_numpy() <= WARMUP_FACTOR * median
    return steady


def serving_iterations(rt: RankLike) -> pd.DataFrame:
    """:func:`iteration_spans` of ``rt``, computed once per rank (shared frame: do not modify)."""
    return rt.memoised("serving_iterations", lambda: iteration_spans(rt.events))


def steady_window(rt: RankLike) -> tuple[int, int] | None:
    """``(start, end)`` (ns) of ``rt``'s steady-state window (module docstring), or None when the
    rank has no serving iterations."""
    spans = serving_iterations(rt)
    steady = spans[spans["steady"].astype(bool)]
    if steady.empty:
        return None
    ts = steady["ts"].to_numpy(np.int64)
    return int(ts.min()), int((ts + steady["dur"].to_numpy(np.int64)).max())


def iteration_of(where: pd.DataFrame, spans: pd.DataFrame) -> np.ndarray:
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


def gpu_work_iterations(events: pd.DataFrame, spans: pd.DataFrame) -> pd.Series:
    """The iteration (row of ``spans``) of each GPU kernel, memcpy and memset of ``events``
    launched inside one: by a runtime call on the iteration's thread inside its ``[ts, ts +
    dur)``, matched on correlation id (a graph launch's kernels all count). Indexed like
    ``events``; GPU work launched outside every iteration is left out."""
    calls = events.loc[runtime_mask(events), ["ts", "pid", "tid", "correlation"]]
    calls = calls[calls["correlation"].to_numpy() >= 0]
    by_corr = pd.Series(iteration_of(calls, spans), index=calls["correlation"].to_numpy())
    by_corr = by_corr[by_corr.to_numpy() >= 0]
    by_corr = by_corr[~by_corr.index.duplicated()]
    gpu = events.loc[kernel_like_mask(events), "correlation"]
    return gpu.map(by_corr).dropna().astype(np.int64)
