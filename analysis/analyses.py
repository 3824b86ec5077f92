"""The catalogue: one registry entry per analysis, in report order (see ``analysis.registry``).

Adding an analysis is a metric module, a figure module and one ``register(Analysis(...))`` here
(``docs/contributing.md``). Facade methods, report sections, ``summary`` columns, ``--analyses``
choices and engine runs all come from these entries.
"""

from __future__ import annotations

from analysis.metrics import (
    collectives,
    comm_comp_overlap,
    critical_path,
    findings,
    idle_time_breakdown,
    kernel_breakdown,
    kernel_launch_stats,
    memory_bandwidth,
    operator_roofline,
    operator_summary,
    profiler_steps,
    queue_length,
    step_breakdown,
    step_start_gap,
    stragglers,
    temporal_breakdown,
    trace_diff,
    trace_health,
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
    name="trace_health",
    method="check",
    doc="Trace health findings (``rank, severity, check, message, evidence``; errors first): "
        "misclassified communication kernels, broken CPU-GPU links, dropped events, Kineto's own "
        "warnings, overlapping events, bad durations, clock skew and step mismatches between "
        "ranks, missing rank metadata. Runs over the whole trace of every rank.",
    rank_step=trace_health.trace_health_rank,
    combine=trace_health.combine,
    params=(Param("ranks", "all", role="ranks"),),
    window="full",
    placement="lead",
    title="Trace health",
    how_to_read=(
        "Problems in the traces themselves that make the numbers below wrong or doubtful. "
        "error: the analyses are wrong (fix the trace or the options first); warning: some numbers "
        "may be (read the message: e.g. kernels that look like communication but are counted as "
        "computation, GPU events the profiler dropped, clocks of two ranks that disagree); info: "
        "worth knowing. A finding on several ranks is one row naming them; info rows are folded."
    ),
    tables=lambda table: {"trace_health": table},
    headline=trace_health.headline,
))

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

register(Analysis(
    name="operator_roofline",
    method="get_operator_roofline",
    doc="Per operator group (name and recorded shapes, dtypes, strides, concrete inputs): FLOPs "
        "and bytes per call, kernel time (µs), achieved TFLOP/s and TB/s, roofline bound and % of "
        "peak; MFU per step; the share of GPU time the models explain. Needs traces recorded with "
        "``record_shapes=True``. ``gpu``: a GPU name, a ``GpuSpec`` or a dict of peaks overriding "
        "the detected GPU's. Returns ``RooflineResult(ops, steps, coverage, unmodelled, gpu)``.",
    rank_step=operator_roofline.operator_roofline_rank,
    combine=operator_roofline.combine,
    params=(
        Param("ranks", None, role="ranks"),
        Param("gpu", None),
        VISUALIZE,
        Param("top", 15, role="figure"),
    ),
    figures="analysis.figures.operator_roofline",
    default_ranks="first",
    needs_gpu=True,
    extras=("op_shapes",),
    title="How close to the hardware",
    how_to_read=(
        "Each dot is one operator with one set of input shapes (the innermost modelled operator, so "
        "that each kernel counts once), placed by its arithmetic intensity (FLOPs per byte moved, "
        "from its shapes) and the TFLOP/s its kernels achieved; its area is its total kernel time. "
        "The lines are the GPU's ceilings: memory bandwidth on the left of the ridge point, the "
        "dense peak of each precision on the right. A dot far below its ceiling has room to gain; "
        "the table lists the operators that lose most time against their roofline. MFU divides the "
        "FLOPs of the modelled operators of a step by the step time and the GPU's peak."
    ),
    tables=lambda r: {
        "operator_roofline": r.ops,
        "operator_mfu": r.steps,
        "operator_model_coverage": r.coverage,
        "operator_unmodelled": r.unmodelled,
    },
    key_numbers=operator_roofline.key_numbers,
))

register(Analysis(
    name="queue_length",
    method="get_queue_length_stream_summary",
    doc="Per rank and stream: time-weighted mean and maximum CUDA queue length, time at or above "
        "``max_queue_length`` (µs) and the time the queue was empty while the stream was idle "
        "(µs and % of the stream's span).",
    rank_step=queue_length.queue_length_rank,
    combine=queue_length.stream_summary,
    params=(
        Param("ranks", "all", role="ranks"),
        Param("max_queue_length", queue_length.CUDA_MAX_LAUNCH_QUEUE_PER_STREAM),
        Param("visualize", False, role="visualize"),
    ),
    figures="analysis.figures.queue_length",
    needs_gpu=True,
    title="CUDA queue length",
    how_to_read=(
        "The queue of a stream holds the operations the CPU has launched onto it that have not "
        "started yet. A long queue means the CPU runs ahead of the GPU (good). 'Empty while idle' "
        "is the time the stream had nothing to run and nothing queued: the GPU was waiting for "
        "the CPU to launch work, the signature of a launch-bound rank."
    ),
    headline=queue_length.headline,
))

def _hta_counter(name: str, method: str, doc: str, rank_step, combine, extras=()) -> None:
    """One of HTA's queue-length / memory-bandwidth methods: first rank by default, no section."""
    title = doc.split(":")[0].removeprefix("HTA's ")
    register(Analysis(
        name=name, method=method, doc=doc, rank_step=rank_step, combine=combine,
        params=(Param("ranks", None, role="ranks"),), default_ranks="first", needs_gpu=True,
        extras=extras, placement="none", title=title[:1].upper() + title[1:],
    ))


_hta_counter(
    "queue_length_summary", "get_queue_length_summary",
    "HTA's CUDA queue length summary: ``describe()`` of the queue length's change points per "
    "``(rank, stream)``.",
    queue_length.queue_length_rank, queue_length.combine,
)

_hta_counter(
    "queue_length_time_series", "get_queue_length_time_series",
    "HTA's CUDA queue length time series: ``{rank: DataFrame[ts (µs), pid, tid, stream, "
    "queue_length]}``, one row per change.",
    queue_length.queue_length_rank, queue_length.time_series,
)

register(Analysis(
    name="memory_bandwidth",
    method="get_memcpy_summary",
    doc="Per rank and copy kind (direction, pinned/pageable host memory): count, bytes, time and "
        "busy time (µs) and achieved bandwidth (GB/s).",
    rank_step=memory_bandwidth.memory_bandwidth_rank,
    combine=memory_bandwidth.copy_summary,
    params=(Param("ranks", "all", role="ranks"), Param("visualize", False, role="visualize")),
    figures="analysis.figures.memory_bandwidth",
    needs_gpu=True,
    extras=("memory_ops",),
    title="Memory copies",
    how_to_read=(
        "Every memcpy and memset by direction (HtoD: host to device, DtoH, DtoD, PtoP: between "
        "GPUs) and host memory kind: bytes moved, time spent and the achieved bandwidth, bytes / "
        "time. Copies from pageable host memory are slow and synchronous: pin the memory."
    ),
    tables=lambda df: {"memcpy_summary": df},
))

_hta_counter(
    "memory_bw_summary", "get_memory_bw_summary",
    "HTA's memory bandwidth summary: ``describe()`` of the positive bandwidth values (GB/s) per "
    "``(rank, name)``.",
    memory_bandwidth.memory_bandwidth_rank, memory_bandwidth.combine, extras=("memory_ops",),
)

_hta_counter(
    "memory_bw_time_series", "get_memory_bw_time_series",
    "HTA's memory bandwidth time series: ``{rank: DataFrame[ts (µs), pid, name, "
    "memory_bw_gbps]}``, one row per change.",
    memory_bandwidth.memory_bandwidth_rank, memory_bandwidth.time_series, extras=("memory_ops",),
)
# ------------------------------------------------------------------ distributed training (#13)
register(Analysis(
    name="collectives",
    method="get_collectives",
    doc="One row per (collective instance, rank): type, process group, bytes, start/end (µs), "
        "skew, wait, transfer and exposed time (µs), algorithm and bus bandwidth (GB/s).",
    rank_step=collectives.collectives_rank,
    combine=collectives.combine,
    params=(VISUALIZE, RANKS_ALL),
    figures="analysis.figures.collectives",
    title="Collectives and stragglers",
    how_to_read=(
        "Every collective is matched across ranks (by process group and sequence number, else by "
        "order). Skew is the latest rank's start minus the earliest's; each rank's wait is the "
        "time it spent waiting for the last rank; transfer is the time after everyone arrived, and "
        "bus bandwidth (nccl-tests' definition) compares across collective types and group sizes. "
        "The heatmap shows which ranks waited in which collectives: a bright row is a rank that "
        "is always early (others are late), a dark column with one dark row is one straggler. The "
        "straggler table ranks the ranks by the wait they cost the others, and says why they were "
        "late when the trace shows it."
    ),
    tables=lambda df: {"collective_summary": collectives.summary(df),
                       "stragglers": stragglers.stragglers(df)},
    csv_only=lambda df: {"collectives": df},
    headline=collectives.headline,
))

register(Analysis(
    name="collective_summary",
    method="get_collective_summary",
    doc="Per (collective type, message-size bucket, process group): instances, ranks, total and "
        "exposed time (µs), median bus bandwidth (GB/s) and 95th-percentile skew (µs).",
    rank_step=collectives.collectives_rank,
    combine=collectives.combine_summary,
    params=(RANKS_ALL,),
    placement="none",
))

register(Analysis(
    name="stragglers",
    method="get_stragglers",
    doc="One row per rank, costliest first: times it arrived last at a collective, the wait it "
        "caused the others (µs), its mean lateness (µs) and why it was late.",
    rank_step=collectives.collectives_rank,
    combine=stragglers.combine,
    params=(VISUALIZE, RANKS_ALL),
    figures="analysis.figures.stragglers",
    placement="none",
))

register(Analysis(
    name="step_breakdown",
    method="get_step_breakdown",
    doc="Per rank and profiler step: step time, computation, exposed communication, memory, other "
        "GPU work and idle time by cause (µs), with each step's slowest rank and its margin over "
        "the median (µs).",
    rank_step=step_breakdown.step_breakdown_rank,
    combine=step_breakdown.combine,
    params=(VISUALIZE,
            Param("consecutive_kernel_delay", step_breakdown.CONSECUTIVE_KERNEL_DELAY_US),
            RANKS_ALL),
    figures="analysis.figures.step_breakdown",
    title="Per-step breakdown across ranks",
    how_to_read=(
        "The heatmap shows every rank's step time per profiler step: a bright cell is a slow step "
        "on one rank, a bright column a slow step everywhere. The bars split the median rank's "
        "step into computation, communication not hidden by computation, memory copies and idle "
        "time by cause (host wait: the GPU waited for the CPU). The table names each step's "
        "slowest rank and how much longer it took than the median."
    ),
))


register(Analysis(
    name="critical_path",
    method="get_critical_path_summary",
    doc="Per rank and profiler step: the critical path's length (µs), node/event/edge counts and "
        "the share (%) of the path per ``bound_by`` category (cpu_bound, data_loading, "
        "gpu_compute_bound, gpu_communication_bound, gpu_kernel_kernel_overhead, "
        "gpu_kernel_launch_overhead). ``annotation`` names the windows (every instance).",
    rank_step=critical_path.critical_path_summary_rank,
    combine=critical_path.combine_summaries,
    params=(Param("annotation", "ProfilerStep"), VISUALIZE, RANKS_ALL),
    figures="analysis.figures.critical_path",
    title="Critical path",
    how_to_read=(
        "The critical path is the longest chain of work that had to happen one after the other "
        "in a step (CPU operators, kernel launches, kernels, synchronisations): the step could "
        "not have been shorter without shortening something on it. Each bar splits one step's "
        "path by what it was made of: CPU time (cpu_bound, data_loading) means the GPU waited "
        "for the host; GPU compute or communication means the kernels themselves bound the "
        "step; kernel-kernel and launch overheads are gaps between kernels and delays between "
        "a launch and its kernel on an idle stream."
    ),
    tables=lambda df: {"critical_path": df},
    headline=critical_path.headline,
))

register(Analysis(
    name="critical_path_graph",
    method="critical_path_analysis",
    doc="HTA's critical path analysis of one rank: ``(graph, success)``; the graph has "
        "``get_critical_path_breakdown()`` (one row per path edge: event_idx, duration µs, type, "
        "s_name, cat, pid, tid, stream, bound_by), ``summary()`` (% per bound_by), "
        "``critical_path_nodes``, ``critical_path_events_set``, ``nodes()``, ``edges()``. "
        "``instance_id``: the N-th instance of ``annotation`` (``(first, last)`` for a range, "
        "``None`` for every instance: then ``({(rank, instance): graph}, all succeeded)``). "
        "``analysis.figures.critical_path.write_overlay_trace(graph, path)`` writes the trace "
        "with the path marked, for Perfetto.",
    rank_step=critical_path.critical_path_rank,
    combine=critical_path.combine_graphs,
    params=(
        Param("rank", None, role="ranks"),
        Param("annotation", "ProfilerStep"),
        Param("instance_id", 0),
    ),
    default_ranks="first",
    placement="none",
))
