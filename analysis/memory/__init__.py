"""GPU memory, offline: CUDA memory snapshots (``torch.cuda.memory._dump_snapshot``) and the
memory timeline files of ``torch.profiler`` (``export_memory_timeline``).

- :mod:`.snapshot`: load a snapshot pickle safely (no torch, no code runs), local or ``gs://``.
- :mod:`.replay`: allocated/reserved bytes over time, the peak, what was alive at it, OOMs.
- :mod:`.frames`: naming an allocation by its top user frame.
- :mod:`.timeline`: ``export_memory_timeline`` files as bytes per category over time.
"""

from analysis.memory.replay import (
    MemoryReplay,
    NoMemoryEventsError,
    alive_at,
    allocated_by_frame,
    allocations_at_peak,
    device_overview,
    memory_peak,
    oom_events,
    pending_free,
    replay_snapshot,
    segment_fragmentation,
)
from analysis.memory.snapshot import UnsafePickleError, load_snapshot, parse_snapshot_bytes
from analysis.memory.timeline import (
    CATEGORIES,
    load_memory_file,
    load_memory_timeline,
    memory_timeline_peak,
)

__all__ = [
    "CATEGORIES", "MemoryReplay", "NoMemoryEventsError", "UnsafePickleError", "alive_at",
    "allocated_by_frame", "allocations_at_peak", "device_overview", "load_memory_file",
    "load_memory_timeline",
    "load_snapshot", "memory_peak", "memory_timeline_peak", "oom_events", "parse_snapshot_bytes",
    "pending_free", "replay_snapshot", "segment_fragmentation",
]  # fmt: skip
