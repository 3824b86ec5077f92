"""Plotly figures of the analyses: one function per chart, a DataFrame in, a ``go.Figure`` out.

Like ``plotly.express``: no side effects, the caller decides whether to show, export or embed (see
``analysis.figures.export``). Every figure accepts empty input and then says there is no data. Colours,
labels and the switch to distributions for many ranks live in ``analysis.figures.style``.

The flame graph (py-spy profiles) and the memory figures live here too, under the same rules.
"""

from __future__ import annotations

from analysis.figures.collectives import busbw_vs_size, skew_distribution, wait_heatmap
from analysis.figures.comm_comp_overlap import comm_comp_overlap
from analysis.figures.flamegraph import flamegraph
from analysis.figures.idle_time_breakdown import idle_interval_stats, idle_time_breakdown

# The function is bound after its module is imported, so `figures.kernel_breakdown` is the function.
from analysis.figures.kernel_breakdown import kernel_breakdown, kernel_type_breakdown
from analysis.figures.kernel_launch_stats import kernel_launch_stats
from analysis.figures.memory import (
    memory_timeline_figure,
    snapshot_timeline_figure,
    top_allocations_table,
)
from analysis.figures.operator_roofline import operator_roofline, time_lost_table
from analysis.figures.step_breakdown import median_rank_steps, step_time_heatmap
from analysis.figures.stragglers import stragglers
from analysis.figures.temporal_breakdown import temporal_breakdown

__all__ = [
    "busbw_vs_size",
    "comm_comp_overlap",
    "flamegraph",
    "memory_timeline_figure",
    "snapshot_timeline_figure",
    "top_allocations_table",
    "idle_interval_stats",
    "idle_time_breakdown",
    "kernel_breakdown",
    "kernel_launch_stats",
    "kernel_type_breakdown",
    "operator_roofline",
    "time_lost_table",
    "temporal_breakdown",
    "median_rank_steps",
    "skew_distribution",
    "step_time_heatmap",
    "stragglers",
    "wait_heatmap",
]
