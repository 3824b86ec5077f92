"""Fast, exact analysis of PyTorch profiler (Kineto) traces with HolisticTraceAnalysis's API."""

from .errors import (
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
from .model import RankMeta, RankTrace, Trace

__all__ = [
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
