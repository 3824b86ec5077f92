"""The registry entries of this family (what it answers: the package docstring), in report
order. The top-level catalogue (:mod:`analysis.analyses`) registers them; the machinery is
:mod:`analysis.registry`.
"""

from __future__ import annotations

from analysis.metrics.critical_path import critical_path
from analysis.registry import RANKS_ALL, VISUALIZE, Analysis, Param

ENTRIES = (
    Analysis(
        name="critical_path_summary",
        method="get_critical_path_summary",
        aliases=("critical_path",),
        doc="Per rank and profiler step: the critical path's length (µs; the step's duration, "
            "``step_us``, plus ``past_step_end_us`` where GPU work runs past the step), "
            "node/event/edge counts and the share (%) of the path per ``bound_by`` category "
            "(cpu_bound, cpu_untraced, data_loading, "
            "gpu_compute_bound, gpu_communication_bound, gpu_kernel_kernel_overhead, "
            "gpu_kernel_launch_overhead); NaN length and shares for a window without a path "
            "(a warning says why). ``annotation`` names the windows (every instance).",
        rank_step=critical_path.critical_path_summary_rank,
        persist=True,
        needs=("launches",),
        combine=critical_path.combine_summaries,
        params=(
            Param("annotation", "ProfilerStep", type="str",
                  description="The windows: every event whose name contains this (CPU-side "
                              "ones only, unless ``kernel_patterns='hta'``; ``''``: the whole "
                              "rank)."),
            VISUALIZE,
            RANKS_ALL,
        ),
        columns=tuple(critical_path.SUMMARY_COLUMNS),
        units=dict.fromkeys(critical_path.BOUND_BY, "% of the path"),
        figures="analysis.figures.critical_path",
        title="Critical path",
        how_to_read=(
            "The critical path is the longest chain of work that had to happen one after the other "
            "in a step (CPU operators, kernel launches, kernels, synchronisations): the step could "
            "not have been shorter without shortening something on it. Each bar splits one step's "
            "path by what it was made of: CPU time (cpu_bound, data_loading, and cpu_untraced: the "
            "CPU was busy in code the profiler did not record, such as Python or the GIL) means "
            "the GPU waited for the host; GPU compute or communication means the kernels themselves bound the "
            "step; kernel-kernel and launch overheads are gaps between kernels and delays between "
            "a launch and its kernel on an idle stream."
        ),
        tables=lambda df: {"critical_path": df},
        headline=critical_path.headline,
    ),
    Analysis(
        name="critical_path_analysis",
        method="critical_path_analysis",
        aliases=("critical_path_graph",),
        doc="HTA's critical path analysis of one rank: ``(graph, success)``; the graph has "
            "``get_critical_path_breakdown()`` (one row per path edge: event_idx, duration µs, "
            "type, s_name, cat, pid, tid, stream, bound_by), ``summary()`` (% per bound_by), "
            "``critical_path_nodes``, ``critical_path_events_set``, ``nodes()``, ``edges()``. "
            "``instance_id``: the N-th instance of ``annotation`` (``(first, last)`` for a range, "
            "``None`` for every instance: then ``({(rank, instance): graph}, all succeeded)``). "
            "``analysis.figures.critical_path.write_overlay_trace(graph, path)`` writes the trace "
            "with the path marked, for Perfetto.",
        rank_step=critical_path.critical_path_rank,
        needs=("launches",),
        combine=critical_path.combine_graphs,
        params=(
            Param("rank", None, role="ranks", type="int | None",
                  description="The rank to analyse (None: the first loaded rank)."),
            Param("annotation", "ProfilerStep", type="str",
                  description="The windows: every event whose name contains this (CPU-side "
                              "ones only, unless ``kernel_patterns='hta'``; ``''``: the whole "
                              "rank)."),
            Param("instance_id", 0, type="int | tuple[int, int] | None",
                  description="The N-th instance of ``annotation`` in file order, a "
                              "``(first, last)`` range of them, or None for every instance."),
        ),
        returns="tuple[CriticalPathGraph | dict[tuple[int, int], CriticalPathGraph], bool]",
        default_ranks="first",
        placement="none",
    ),
)
