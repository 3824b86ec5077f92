"""Trace metadata: per rank, what was loaded and what the analysed window keeps.

Per rank (``window="full"``: the whole trace):

- ``file``, ``format`` (the profiler that wrote it: ``kineto``, ``nsys``, ``xplane``, ``rocprof``),
  ``rank_from`` (where the rank came from: ``distributedInfo``, the file name, a mapping, or for
  another profiler's file which process/GPU it is, e.g. ``nsys: process 111, GPU 0``),
  ``gpu`` (device names from ``deviceProperties``), ``world_size``, ``events`` (rows);
- ``steps``: the profiler step numbers (``analysis.kineto.steps``), ``"-"`` without a schedule;
- ``iterations``: the serving engine's iterations (vLLM/SGLang annotations,
  ``analysis.kineto.iterations``), 0 in a training trace; ``steady_iterations``: how many of them
  are steady-state, ``steady_first``, ``steady_last``: the indices of the first and last steady
  one (the steady-state window spans them; None without iterations);
- ``duration_ms``: first event start to last event end (ms); ``start(us)``, ``end(us)``: those two
  instants in the trace's own clock (absolute epoch µs as written, as the profiler step table);
- ``gpu_events``: GPU events (kernels, memcpy, memset, syncs) in the trace;
- ``graph_launches``, ``graph_launches_unmatched``: CUDA/HIP graph launches, and those whose
  kernels no capture trace attributed to operators (all of them without capture traces);
- ``unlaunched_gpu_events``, ``unlaunched_gpu_ms``: GPU events whose correlation id matches no
  launching call in the trace (the tail of an iteration the profiler did not capture) and their
  summed GPU time (ms); whether the analyses keep them is ``TraceAnalysis(gpu_events=...)``.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from analysis.kineto.events import gpu_mask, name_mask, runtime_mask
from analysis.kineto.iterations import serving_iterations
from analysis.kineto.model import RankTrace
from analysis.kineto.steps import profiler_steps
from analysis.kineto.window import unlaunched_mask

ITERATION_COLUMNS = ["iterations", "steady_iterations", "steady_first", "steady_last"]
COLUMNS = ["rank", "file", "format", "rank_from", "gpu", "world_size", "events", "steps",
           *ITERATION_COLUMNS, "duration_ms", "start(us)", "end(us)", "gpu_events",
           "unlaunched_gpu_events", "unlaunched_gpu_ms", "graph_launches", "graph_launches_unmatched"]
# The columns of the report's table (the time range is in the profiler step table and the figures).
REPORT_COLUMNS = [c for c in COLUMNS if c not in ("start(us)", "end(us)")]


def trace_metadata_rank(rt: RankTrace) -> dict:
    """One rank's row (see the module doc)."""
    ev = rt.events
    steps = profiler_steps(rt)
    start = int(ev["ts"].min()) if len(ev) else None
    end = int((ev["ts"] + ev["dur"]).max()) if len(ev) else None
    unlaunched = unlaunched_mask(rt)
    return {
        "rank": rt.rank,
        "file": rt.meta.source,
        "format": rt.meta.source_format,
        "rank_from": rt.meta.rank_origin,
        "gpu": ", ".join(sorted(set(rt.meta.gpu_names))) or "-",
        "world_size": rt.meta.world_size,
        "events": len(ev),
        "steps": ", ".join(str(s) for s in steps["step"]) if len(steps) else "-",
        **_iteration_counts(rt),
        "duration_ms": None if start is None else round((end - start) / 1e6, 3),
        "start(us)": None if start is None else start / 1000.0,
        "end(us)": None if end is None else end / 1000.0,
        "gpu_events": int(gpu_mask(ev).sum()),
        "unlaunched_gpu_events": int(unlaunched.sum()),
        "unlaunched_gpu_ms": round(int(ev["dur"].to_numpy()[unlaunched].sum()) / 1e6, 3),
        **_graph_counts(rt),
    }


def _iteration_counts(rt: RankTrace) -> dict:
    """The serving iterations of the whole trace and its steady-state ones (module doc)."""
    steady = serving_iterations(rt)["steady"].astype(bool).to_numpy().nonzero()[0]
    return {"iterations": len(serving_iterations(rt)), "steady_iterations": len(steady),
            "steady_first": int(steady[0]) if len(steady) else None,
            "steady_last": int(steady[-1]) if len(steady) else None}


def _graph_counts(rt: RankTrace) -> dict:
    """CUDA/HIP graph launches merged with capture traces (``analysis.kineto.cuda_graphs``):
    how many, and how many matched no capture; without capture traces, the launch calls in the
    trace, all unmatched."""
    merged = rt.meta.other.get("graphCapture")
    if isinstance(merged, dict):
        return {"graph_launches": int(merged.get("graph_launches", 0)),
                "graph_launches_unmatched": int(merged.get("unmatched_launches", 0))}
    ev = rt.events
    n = int((runtime_mask(ev) & name_mask(ev, lambda s: s.str.endswith("GraphLaunch"))).sum())
    return {"graph_launches": n, "graph_launches_unmatched": n}


def combine(rows: Mapping[int, dict]) -> pd.DataFrame:
    """Per-rank rows → one table, ranks in the order given."""
    table = pd.DataFrame(list(rows.values()), columns=COLUMNS)
    return table.astype({c: "Int64" for c in ITERATION_COLUMNS})


def report_table(result: pd.DataFrame) -> pd.DataFrame:
    """The report's table: :data:`REPORT_COLUMNS`, the serving-iteration columns only when a rank
    has serving iterations."""
    columns = REPORT_COLUMNS
    if not (result["iterations"] > 0).any():
        columns = [c for c in columns if c not in ITERATION_COLUMNS]
    return result[columns]


def headline(result: pd.DataFrame) -> pd.DataFrame:
    """Per rank: GPU name and event count, the first columns of a summary."""
    return result[["rank", "gpu", "events"]]


def key_numbers(result: pd.DataFrame) -> list[tuple[str, str]]:
    """The GPU models in the trace, as a report card."""
    gpus = sorted({g for g in result["gpu"] if g and g != "-"})
    return [("GPU", ", ".join(gpus) or "–")]
