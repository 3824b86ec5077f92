"""The local engine: the whole :class:`~analysis.kineto.model.Trace` lives in this process.

Loading uses :func:`analysis.kineto.loader.load_trace` (a local process pool); per-rank steps are plain
function calls over the trace held here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from analysis.errors import ConfigError
from analysis.kineto.loader import load_trace
from analysis.kineto.model import RankMeta, Trace
from analysis.kineto.window import (
    GpuEvents,
    Window,
    WindowStats,
    profiler_step_window,
    window_stats,
)


class LocalEngine:
    """Runs per-rank steps in this process over ``full_trace`` and its analysed window ``trace``."""

    def __init__(
        self,
        full_trace: Trace,
        include_last_profiler_step: bool = False,
        gpu_events: GpuEvents = "hta",
    ) -> None:
        self.full_trace = full_trace
        # The analysed window: complete profiler steps and the chosen GPU events.
        self.trace = profiler_step_window(full_trace, include_last_profiler_step, gpu_events)
        self.source = full_trace.source
        self.skipped = full_trace.skipped
        self.metas: dict[int, RankMeta] = {r: rt.meta for r, rt in full_trace.items()}
        self.window_stats: dict[int, WindowStats] = {
            r: window_stats(rt, self.trace[r]) for r, rt in full_trace.items()
        }

    @classmethod
    def load(
        cls,
        trace_dir: str | os.PathLike | None = None,
        trace_files: Iterable[str] | Mapping[int, str] | None = None,
        *,
        include_last_profiler_step: bool = False,
        gpu_events: GpuEvents = "hta",
        **load_options: Any,
    ) -> LocalEngine:
        """Load with :func:`analysis.kineto.loader.load_trace` (``load_options`` are its keywords)."""
        trace = load_trace(
            None if trace_dir is None else os.fspath(trace_dir), trace_files, **load_options
        )
        return cls(trace, include_last_profiler_step, gpu_events)

    @property
    def ranks(self) -> list[int]:
        return self.full_trace.rank_list()

    def select(self, ranks=None, default: str = "first") -> list[int]:
        """A ``ranks`` argument as a list of loaded ranks (:meth:`analysis.kineto.model.Trace.select`)."""
        return self.full_trace.select(ranks, default=default)

    def map_ranks(
        self, func: Callable[..., Any], ranks: Iterable[int], *, window: Window = "steps", **kw
    ) -> dict[int, Any]:
        """``{rank: func(rank_trace, **kw)}`` in the order of ``ranks``; errors propagate as raised."""
        if window not in ("steps", "full"):
            raise ConfigError(f"window must be 'steps' or 'full', not {window!r}")
        trace = self.trace if window == "steps" else self.full_trace
        return {int(r): func(trace[int(r)], **kw) for r in ranks}

    def __repr__(self) -> str:
        return f"LocalEngine(source={self.source!r}, ranks={self.ranks})"
