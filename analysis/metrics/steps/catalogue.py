"""The registry entries of this family (what it answers: the package docstring), in report
order. The top-level catalogue (:mod:`analysis.analyses`) registers them; the machinery is
:mod:`analysis.registry`.
"""

from __future__ import annotations

from analysis.metrics.steps import profiler_steps, step_start_gap, trace_metadata
from analysis.registry import Analysis, ranks_param

ENTRIES = (
    Analysis(
        name="trace_metadata",
        method="get_trace_metadata",
        doc="Per rank: source file, GPU, world size, events, profiler steps, serving "
            "iterations, time range (ms) and the GPU events that nothing in the trace launched.",
        rank_step=trace_metadata.trace_metadata_rank,
        combine=trace_metadata.combine,
        params=(ranks_param("all"),),
        window="full",
        placement="context",
        title="Trace metadata",
        tables=lambda df: {"trace_metadata": trace_metadata.report_table(df)},
        columns=tuple(trace_metadata.COLUMNS),
        headline=trace_metadata.headline,
        key_numbers=trace_metadata.key_numbers,
    ),
    Analysis(
        name="profiler_step_table",
        method="get_profiler_step_table",
        doc="Per rank and step: start and end (absolute µs, and ms from the first step) and "
            "duration (µs) of each CPU-side ``ProfilerStep#N``, over the whole trace.",
        rank_step=profiler_steps.profiler_steps_rank,
        persist=True,
        combine=profiler_steps.combine,
        params=(ranks_param("all"),),
        window="full",
        placement="context",
        title="Profiler steps",
        columns=tuple(profiler_steps.COLUMNS),
        tables=lambda df: {"profiler_steps": df},
        key_numbers=profiler_steps.key_numbers,
    ),
    Analysis(
        name="profiler_steps",
        method="get_profiler_steps",
        doc="The profiler step numbers in the analysed window, all ranks (HTA's return value).",
        rank_step=profiler_steps.profiler_steps_rank,
        persist=True,
        combine=profiler_steps.combine_step_ids,
        placement="none",
        returns="list[int]",
    ),
    Analysis(
        name="step_start_gaps",
        method="get_step_start_gaps",
        aliases=("step_start_gap",),
        doc="Per rank and profiler step: how long the step runs on the CPU before its first CUDA "
            "launch (µs and % of the step), and its time in DataLoader events (µs).",
        rank_step=step_start_gap.step_start_gap_rank,
        persist=True,
        combine=step_start_gap.combine,
        params=(ranks_param("all"),),
        window="full",
        placement="none",
        columns=tuple(step_start_gap.COLUMNS),
    ),
)
