"""Recording traces: ``ProfilerConfig``, ``profile(config)`` and ``schedule_table``.

``profile`` needs torch (the optional ``capture`` extra) and imports it only when a profiler is
built; configs and schedule tables work without it.
"""

from .config import ProfilerConfig
from .schedule import schedule_action, schedule_table
from .session import DisabledProfiler, ProfilerSession, current_rank, profile
from .upload import TraceUploadError

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
