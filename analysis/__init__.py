"""Fast, exact analysis of PyTorch profiler (Kineto) traces with HolisticTraceAnalysis's API."""

from analysis.errors import (
    ConfigError,
    CorruptTraceError,
    DuplicateRankError,
    NoGPUEventsError,
    NotATraceError,
    TraceAnalysisError,
    TraceLoadError,
    TraceNotFoundError,
    TracePermissionError,
    UnknownRankError,
)


def __getattr__(name):
    # Lazy: training processes (analysis.capture) and loader workers import this package; pandas,
    # plotly and the facade load only when used.
    if name in ("RankMeta", "RankTrace", "Trace"):
        from analysis.kineto import model

        return getattr(model, name)
    if name == "TraceAnalysis":
        from analysis.api import TraceAnalysis

        return TraceAnalysis
    if name in ("compare", "TraceComparison"):
        from analysis import comparison

        return getattr(comparison, name)
    if name == "load_trace":
        from analysis.kineto.loader import load_trace

        return load_trace
    if name == "TraceCache":
        from analysis.kineto.cache import TraceCache

        return TraceCache
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")


__all__ = [
    "TraceAnalysis",
    "TraceComparison",
    "compare",
    "load_trace",
    "TraceCache",
    "ConfigError",
    "CorruptTraceError",
    "DuplicateRankError",
    "NoGPUEventsError",
    "NotATraceError",
    "RankMeta",
    "RankTrace",
    "Trace",
    "TraceAnalysisError",
    "TraceLoadError",
    "TraceNotFoundError",
    "TracePermissionError",
    "UnknownRankError",
]
