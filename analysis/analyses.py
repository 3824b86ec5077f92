"""The catalogue: one registry entry per analysis, in report order (see ``analysis.registry``).

Adding an analysis is a metric module, a figure module and one ``register(Analysis(...))`` here
(``docs/contributing.md``). Facade methods, report sections, ``summary`` columns, ``--analyses``
choices and engine runs all come from these entries.
"""

from __future__ import annotations

from analysis.metrics import (
    comm_comp_overlap,
    findings,
    idle_time_breakdown,
    kernel_breakdown,
    kernel_launch_stats,
    operator_summary,
    profiler_steps,
    step_start_gap,
    temporal_breakdown,
    trace_diff,
    trace_metadata,
)
from analysis.registry import Analysis, Param, register

# HTA's defaults for the launch statistics cut-offs (µs) and the report's top operators.
RUNTIME_CUTOFF_US = 50
LAUNCH_DELAY_CUTOFF_US = 100
TOP_OPERATORS = 20

RANKS_ALL = Param("ranks", "all", role="ranks", keyword_only=True)
VISUALIZE = Param("visualize", True, role="visualize")

# ------------------------------------------------------------------------- context tables
register(Analysis(
    name="trace_metadata",
    method="get_trace_metadata",
    doc="Per rank: source file, GPU, world size, events, profiler steps, time range (ms) and the "
        "GPU events that nothing in the trace launched.",
    rank_step=trace_metadata.trace_metadata_rank,
    combine=trace_metadata.combine,
    params=(Param("ranks", "all", role="ranks"),),
    window="full",
    placement="context",
    title="Trace metadata",
    headline=trace_metadata.headline,
    key_numbers=trace_metadata.key_numbers,
))

register(Analysis(
    name="profiler_step_table",
    method="get_profiler_step_table",
    doc="Per rank and step: start and end (absolute µs, and ms from the first step) and duration "
        "(µs) of each CPU-side ``ProfilerStep#N``, over the whole trace.",
    rank_step=profiler_steps.profiler_steps_rank,
    combine=profiler_steps.combine,
    params=(Param("ranks", "all", role="ranks"),),
    window="full",
    placement="context",
    title="Profiler steps",
    tables=lambda df: {"profiler_steps": df},
    key_numbers=profiler_steps.key_numbers,
))

register(Analysis(
    name="profiler_steps",
    method="get_profiler_steps",
    doc="The profiler step numbers in the analysed window, all ranks (HTA's return value).",
    rank_step=profiler_steps.profiler_steps_rank,
    combine=profiler_steps.combine_step_ids,
    placement="none",
))

register(Analysis(
    name="trace_diff",
    method="get_step_profile",
    doc="Per rank: the per-step profile that ``compare(base, test)`` compares (breakdown of the "
        "step time, kernels, operators by exclusive GPU time; ``analysis.metrics.trace_diff``).",
    rank_step=trace_diff.trace_diff_rank,
    combine=trace_diff.combine,
    params=(Param("ranks", "all", role="ranks"),),
    placement="none",
))

register(Analysis(
    name="step_start_gap",
    method="get_step_start_gaps",
    doc="Per rank and profiler step: how long the step runs on the CPU before its first CUDA "
        "launch (µs and % of the step), and its time in DataLoader events (µs).",
    rank_step=step_start_gap.step_start_gap_rank,
    combine=step_start_gap.combine,
    params=(Param("ranks", "all", role="ranks"),),
    window="full",
    placement="none",
))

# ------------------------------------------------------------------------------- lead sections
register(Analysis(
    name="findings",
    method="findings",
    doc="What is wrong, ranked: one row per finding (severity, title, detail, metric, value, "
        "threshold, evidence, suggestion); ``.attrs['not_run']`` says which checks could not run "
        "and why. Rules and thresholds: docs/findings.md.",
    params=(Param("ranks", "all", role="ranks"),),
    placement="lead",
    title="Findings",
    how_to_read=(
        "What the analyses below say is wrong, most severe first, each with its number, the table "
        "or figure that shows it, and what usually fixes it. Checks that could not run on these "
        "traces (missing data) are listed, never guessed."
    ),
    requires=findings.REQUIRES,
    derive=findings.findings,
    tables=lambda table: {"findings": table},
))

# -------------------------------------------------------------------------------- sections
register(Analysis(
    name="temporal_breakdown",
    method="get_temporal_breakdown",
    doc="Per rank: idle, compute and non-compute GPU time (µs) and their shares of kernel time.",
    rank_step=temporal_breakdown.temporal_breakdown_rank,
    combine=temporal_breakdown.combine,
    params=(VISUALIZE, RANKS_ALL),
    figures="analysis.figures.temporal_breakdown",
    title="Temporal breakdown",
    how_to_read=(
        "Each bar is one rank's GPU time between its first and last kernel, split into compute "
        "(kernels that do math), non-compute (communication and memory kernels only) and idle "
        "(no kernel running). A rank with much more idle time than the others is waiting, either "
        "for its CPU to launch work or for the other ranks."
    ),
    headline=temporal_breakdown.headline,
    key_numbers=temporal_breakdown.key_numbers,
))

register(Analysis(
    name="idle_time_breakdown",
    method="get_idle_time_breakdown",
    doc="Per rank and stream: GPU idle time split into host wait, kernel wait and other (µs); "
        "with ``show_idle_interval_stats`` also the distribution of the idle intervals.",
    rank_step=idle_time_breakdown.idle_time_breakdown_rank,
    combine=idle_time_breakdown.combine,
    params=(
        Param("ranks", None, role="ranks"),
        Param("streams", None),
        VISUALIZE,
        Param("visualize_pctg", True, role="figure"),
        Param("show_idle_interval_stats", False),
        Param("consecutive_kernel_delay", idle_time_breakdown.CONSECUTIVE_KERNEL_DELAY_US),
    ),
    figures="analysis.figures.idle_time_breakdown",
    default_ranks="first",
    needs_gpu=True,
    title="Idle time breakdown",
    how_to_read=(
        "Per CUDA stream, the idle time between consecutive kernels split by cause: host_wait "
        "(the CPU launched the next kernel only after the previous one had finished: the GPU "
        "starved), kernel_wait (short gaps under 30 µs between back-to-back kernels: launch "
        "overhead) and other (e.g. waiting on another stream or a synchronisation). The interval "
        "statistics show how long the individual gaps are."
    ),
    report_options={"show_idle_interval_stats": True},
    tables=lambda r: {"idle_time_breakdown": r[0]}
    | ({"idle_interval_stats": r[1].reset_index()} if r[1] is not None else {}),
))

register(Analysis(
    name="comm_comp_overlap",
    method="get_comm_comp_overlap",
    doc="Per rank: % of communication kernel time that overlaps computation kernels.",
    rank_step=comm_comp_overlap.comm_comp_overlap_rank,
    combine=comm_comp_overlap.combine,
    params=(VISUALIZE, RANKS_ALL),
    figures="analysis.figures.comm_comp_overlap",
    title="Communication / computation overlap",
    how_to_read=(
        "The share of each rank's communication kernel time during which computation kernels ran "
        "too. Higher is better: communication hidden behind computation costs no step time. A rank "
        "well below the others exposes its collectives."
    ),
    headline=comm_comp_overlap.headline,
    key_numbers=comm_comp_overlap.key_numbers,
))

register(Analysis(
    name="kernel_launch_stats",
    method="get_cuda_kernel_launch_stats",
    doc="Per rank: each launch's CPU duration, GPU duration and launch delay (µs), as "
        "``{rank: DataFrame}``.",
    rank_step=kernel_launch_stats.kernel_launch_stats_rank,
    combine=kernel_launch_stats.combine,
    params=(
        Param("ranks", None, role="ranks"),
        Param("runtime_cutoff", RUNTIME_CUTOFF_US, role="figure"),
        Param("launch_delay_cutoff", LAUNCH_DELAY_CUTOFF_US, role="figure"),
        Param("include_memory_events", True),
        VISUALIZE,
        Param("launch_apis", None, keyword_only=True),
    ),
    figures="analysis.figures.kernel_launch_stats",
    default_ranks="first",
    needs_gpu=True,
    title="CUDA kernel launch statistics",
    how_to_read=(
        "Left: every launch as its CPU runtime-call duration against its GPU kernel duration; "
        "points below the diagonal are kernels shorter than their own launch call (the CPU "
        f"cannot keep the GPU busy with them), calls over {RUNTIME_CUTOFF_US} µs are runtime "
        "outliers. Right: per rank, the delay between the end of the launch call and the kernel's "
        f"start; delays over {LAUNCH_DELAY_CUTOFF_US} µs mean a queue of work ahead of the kernel."
    ),
    tables=lambda stats: {"kernel_launch_summary": kernel_launch_stats.launch_summary(stats)},
    csv_only=lambda stats: {"kernel_launch_stats": kernel_launch_stats.all_launches(stats)},
))

register(Analysis(
    name="kernel_breakdown",
    method="get_gpu_kernel_breakdown",
    doc="Time per kernel type (with overlaps) and the top kernels per type and rank: "
        "``(kernel_type_df, all_kernel_df)``. ``image_renderer`` is a plotly renderer name for "
        "the figures (HTA's argument).",
    rank_step=kernel_breakdown.kernel_breakdown_rank,
    combine=kernel_breakdown.combine,
    params=(
        VISUALIZE,
        Param("duration_ratio", 0.8),
        Param("num_kernels", 10),
        Param("include_memory_kernels", True),
        Param("image_renderer", None, role="renderer"),
        RANKS_ALL,
    ),
    figures="analysis.figures.kernel_breakdown",
    title="GPU kernel breakdown",
    how_to_read=(
        "The pie splits all GPU time by kernel type, with the time during which types overlap "
        "shown separately. The bars list the kernels that account for most of each type's time, "
        "per rank: the first candidates for optimisation."
    ),
    tables=lambda r: {"kernel_type_breakdown": r[0], "kernel_breakdown": r[1]},
))

register(Analysis(
    name="operator_summary",
    method="get_operator_summary",
    doc="Per CPU operator: calls, total/self CPU time and the GPU time it launched (µs).",
    rank_step=operator_summary.operator_summary_rank,
    combine=operator_summary.combine,
    params=(Param("ranks", None, role="ranks"), Param("top", TOP_OPERATORS)),
    default_ranks="first",
    title="CPU operators",
    how_to_read=(
        f"The {TOP_OPERATORS} CPU operators with the most GPU time launched, per rank: calls, total "
        "and self CPU time, and the GPU time of the kernels they launched (µs)."
    ),
    report_options={"top": TOP_OPERATORS},
))
