"""Test helper: load a directory of trace files into a Trace with the real parser, in-process."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from analysis import TraceAnalysis
from analysis.kineto.model import EVENT_COLUMNS, RankMeta, RankTrace, Trace
from analysis.kineto.parse import parse_trace_bytes
from analysis.kineto.sources import rank_from_file_name


@cache  # analyses never mutate a Trace; parity tests share one parse per directory
def load_dir(path) -> Trace:
    """Parse each ``*.json``/``*.json.gz`` of ``path`` (execution traces ``*_et.*`` left out), keyed
    by ``meta.rank``, or the rank in the file name when the trace does not say (else 0, as HTA)."""
    ranks = {}
    for f in sorted(Path(path).iterdir()):
        if not f.name.endswith((".json", ".json.gz")) or "_et." in f.name:
            continue
        rt = parse_trace_bytes(f.read_bytes(), str(f))
        rank = rt.meta.rank if rt.meta.rank >= 0 else (rank_from_file_name(f.name) or 0)
        rt.meta.rank = rank
        ranks[rank] = rt
    return Trace(ranks, source=str(path))


def rank_trace(rows, rank: int = 0, float_timestamps: bool = False) -> RankTrace:
    """A hand-made RankTrace from ``(name, cat, ts_ns, dur_ns, stream, correlation)`` tuples."""
    df = pd.DataFrame(rows, columns=["name", "cat", "ts", "dur", "stream", "correlation"])
    df = df.assign(pid=1, tid=1, external_id=-1, device=0, wait_on_stream=-1, wait_on_record=-1)
    df = df[list(EVENT_COLUMNS)].astype(EVENT_COLUMNS)
    meta = RankMeta(rank=rank, source=f"hand-made rank {rank}", float_timestamps=float_timestamps)
    return RankTrace(meta=meta, events=df)


def parity_dirs() -> list:
    """pytest params for the parity suite: every real GPU trace folder, plus the sample traces."""
    from conftest import HTA_GPU_TRACE_DIRS

    return [pytest.param(d, id=d) for d in HTA_GPU_TRACE_DIRS] + [pytest.param("sample", id="sample")]


def load(path, **options) -> TraceAnalysis:
    """``TraceAnalysis`` over ``path`` for a test of analyses: the real loader through the default
    cache, which is the run's shared cache (tests/conftest.py: each file parsed once per run, by
    whichever test loads it first; a cached rank reads back equal to its parse,
    tests/unit/kineto/test_cache.py), no progress bar. Tests of parsing and of the cache itself
    load with their own options."""
    return TraceAnalysis(str(path), progress=False, **options)


@cache  # analyses never mutate the traces: one load per directory and options for the session
def facade(path, patterns: str = "default", rounding: str | None = None,
           gpu_events: str | None = None, include_last: bool = False) -> TraceAnalysis:
    """``TraceAnalysis`` over a directory through the real loader and the run's shared cache
    (:func:`load`): the path users take. ``patterns="hta"`` implies HTA's rounding and window, as
    for users."""
    return load(path, include_last_profiler_step=include_last, kernel_patterns=patterns,
                time_rounding=rounding, gpu_events=gpu_events)


def analyse(trace, patterns: str = "default", rounding: str | None = None,
            gpu_events: str | None = "all", include_last: bool = False) -> TraceAnalysis:
    """``TraceAnalysis.from_trace`` over a hand-made ``Trace`` (or one ``RankTrace``).

    ``gpu_events="all"`` by default: hand-made traces are mostly kernels without the runtime call
    that launched them, which ``"launched"`` (the default preset's window) would leave out.
    """
    if isinstance(trace, RankTrace):
        trace = Trace({trace.rank: trace})
    return TraceAnalysis.from_trace(trace, include_last, kernel_patterns=patterns,
                                    time_rounding=rounding, gpu_events=gpu_events)
