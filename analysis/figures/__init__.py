"""Plotly figures of the analyses: one function per chart, a DataFrame in, a ``go.Figure`` out.

Like ``plotly.express``: no side effects, the caller decides whether to show, export or embed (see
``analysis.export``). Every figure accepts empty input and then says there is no data. Colours,
labels and the switch to distributions for many ranks live in ``analysis.figures.style``.

Only this package's core figure modules are imported here; others (``flamegraph``, ``memory``) are
imported by whoever uses them, so a broken or heavy one never slows ``import analysis.figures``.
"""

from __future__ import annotations

from .idle_time import idle_interval_stats, idle_time_breakdown

# The function is bound after its module is imported, so `figures.kernel_breakdown` is the function.
from .kernel_breakdown import kernel_breakdown, kernel_type_breakdown
from .launch_stats import kernel_launch_stats
from .overlap import comm_comp_overlap
from .temporal import temporal_breakdown

__all__ = [
    "comm_comp_overlap",
    "idle_interval_stats",
    "idle_time_breakdown",
    "kernel_breakdown",
    "kernel_launch_stats",
    "kernel_type_breakdown",
    "temporal_breakdown",
]
