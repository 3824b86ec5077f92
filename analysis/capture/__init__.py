"""Recording traces: ``ProfilerConfig``, ``profile(config)`` and ``schedule_table``.

``profile`` needs torch (the optional ``capture`` extra) and imports it only when a profiler is
built; configs and schedule tables work without it.
"""

from analysis.capture.config import ProfilerConfig
from analysis.capture.schedule import schedule_action, schedule_table
from analysis.capture.session import DisabledProfiler, ProfilerSession, current_rank, profile
from analysis.capture.upload import TraceUploadError

__all__ = [
    "DisabledProfiler",
    "ProfilerConfig",
    "ProfilerSession",
    "TraceUploadError",
    "current_rank",
    "profile",
    "schedule_action",
    "schedule_table",
]
