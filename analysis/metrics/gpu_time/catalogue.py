"""The registry entries of this family (what it answers: the package docstring), in report
order. The top-level catalogue (:mod:`analysis.analyses`) registers them; the machinery is
:mod:`analysis.registry`.
"""

from __future__ import annotations

from analysis.metrics.gpu_time import (
    comm_comp_overlap,
    idle_time_breakdown,
    kernel_breakdown,
    kernel_launch_stats,
    memory_bandwidth,
    queue_length,
    temporal_breakdown,
)
from analysis.registry import (
    RANKS_ALL,
    VISUALIZE,
    Analysis,
    ChunkedTable,
    Param,
    ranks_param,
    visualize_param,
)


def _hta_counter(name: str, method: str, doc: str, rank_step, combine, returns: str,
                 columns: tuple[str, ...], extras=()) -> Analysis:
    """One of HTA's queue-length / memory-bandwidth methods: first rank by default, no section."""
    title = doc.split(":")[0].removeprefix("HTA's ")
    return Analysis(
        name=name, method=method, doc=doc, rank_step=rank_step, combine=combine,
        params=(ranks_param(None),), default_ranks="first", needs_gpu=True,
        extras=extras, placement="none", title=title[:1].upper() + title[1:],
        returns=returns, columns=columns, units={"ts": "µs"} if "ts" in columns else {},
    )


ENTRIES = (
    Analysis(
        name="temporal_breakdown",
        method="get_temporal_breakdown",
        doc="Per rank: idle, compute and non-compute GPU time (µs) and their shares of kernel "
            "time.",
        rank_step=temporal_breakdown.temporal_breakdown_rank,
        persist=True,
        combine=temporal_breakdown.combine,
        params=(VISUALIZE, RANKS_ALL),
        figures="analysis.figures.temporal_breakdown",
        title="Temporal breakdown",
        how_to_read=(
            "Each bar is one rank's GPU time between its first and last kernel, split into compute "
            "(kernels that do math), non-compute (communication and memory kernels only) and idle "
            "(no kernel running). A rank with much more idle time than the others is waiting, "
            "either for its CPU to launch work or for the other ranks."
        ),
        headline=temporal_breakdown.headline,
        key_numbers=temporal_breakdown.key_numbers,
        columns=tuple(temporal_breakdown.COLUMNS),
    ),
    Analysis(
        name="idle_time_breakdown",
        method="get_idle_time_breakdown",
        doc="Per rank and stream: GPU idle time split into host wait, kernel wait and other (µs); "
            "with ``show_idle_interval_stats`` also the distribution of the idle intervals.",
        rank_step=idle_time_breakdown.idle_time_breakdown_rank,
        persist=True,
        combine=idle_time_breakdown.combine,
        params=(
            ranks_param(None),
            Param("streams", None, type="Iterable[int] | None",
                  description="The stream ids to analyse (None: every stream of the rank)."),
            VISUALIZE,
            Param("visualize_pctg", True, role="figure", type="bool",
                  description="Plot each category's share of the stream's idle time (%) rather "
                              "than its time (µs)."),
            Param("show_idle_interval_stats", False, type="bool",
                  description="Also return the distribution (``describe()``: count, mean, std, "
                              "min, quartiles, max; µs) of the idle intervals per rank, stream "
                              "and category as the second element."),
            Param("consecutive_kernel_delay", idle_time_breakdown.CONSECUTIVE_KERNEL_DELAY_US,
                  type="float",
                  description="Gaps shorter than this (µs) between kernels that the host "
                              "launched in time count as ``kernel_wait`` (HTA's default: 30)."),
        ),
        returns="tuple[pd.DataFrame, pd.DataFrame | None]",
        columns=tuple(idle_time_breakdown.COLUMNS),
        units={"idle_time": "µs", "idle_time_ratio": "share of the stream's idle time, 0-1"},
        figures="analysis.figures.idle_time_breakdown",
        default_ranks="first",
        needs_gpu=True,
        title="Idle time breakdown",
        how_to_read=(
            "Per CUDA stream, the idle time between consecutive kernels split by cause: host_wait "
            "(the CPU launched the next kernel only after the previous one had finished: the GPU "
            "starved), kernel_wait (short gaps under 30 µs between back-to-back kernels: launch "
            "overhead) and other (e.g. waiting on another stream or a synchronisation). The "
            "interval statistics show how long the individual gaps are."
        ),
        report_options={"show_idle_interval_stats": True},
        tables=lambda r: {"idle_time_breakdown": r[0]}
        | ({"idle_interval_stats": r[1].reset_index()} if r[1] is not None else {}),
    ),
    Analysis(
        name="comm_comp_overlap",
        method="get_comm_comp_overlap",
        doc="Per rank: % of communication kernel time that overlaps computation kernels.",
        rank_step=comm_comp_overlap.comm_comp_overlap_rank,
        persist=True,
        combine=comm_comp_overlap.combine,
        params=(VISUALIZE, RANKS_ALL),
        figures="analysis.figures.comm_comp_overlap",
        title="Communication / computation overlap",
        how_to_read=(
            "The share of each rank's communication kernel time during which computation kernels "
            "ran too. Higher is better: communication hidden behind computation costs no step "
            "time. A rank well below the others exposes its collectives."
        ),
        headline=comm_comp_overlap.headline,
        key_numbers=comm_comp_overlap.key_numbers,
        columns=tuple(comm_comp_overlap.COLUMNS),
    ),
    Analysis(
        name="cuda_kernel_launch_stats",
        method="get_cuda_kernel_launch_stats",
        aliases=("kernel_launch_stats",),
        doc="Per rank: each launch's CPU duration, GPU duration and launch delay (µs), as "
            "``{rank: DataFrame}``.",
        rank_step=kernel_launch_stats.kernel_launch_stats_rank,
        persist=True,
        combine=kernel_launch_stats.combine,
        params=(
            ranks_param(None),
            Param("runtime_cutoff", kernel_launch_stats.RUNTIME_CUTOFF_US, role="figure",
                  type="float",
                  description="Launch calls longer than this (µs) are marked as runtime "
                              "outliers in the figure (HTA's default: 50)."),
            Param("launch_delay_cutoff", kernel_launch_stats.LAUNCH_DELAY_CUTOFF_US,
                  role="figure", type="float",
                  description="Launch delays longer than this (µs) are marked as outliers in "
                              "the figure (HTA's default: 100)."),
            Param("include_memory_events", True, type="bool",
                  description="Count asynchronous memcpy/memset launches "
                              "(``cudaMemcpyAsync``, ``cudaMemsetAsync``) too, not only kernels."),
            VISUALIZE,
            Param("launch_apis", None, keyword_only=True, type="str | LaunchApis | None",
                  description="Which CPU calls count as launches: a preset name (``'default'``, "
                              "``'hta'``) or a ``LaunchApis``; None follows the kernel pattern "
                              "preset."),
        ),
        returns="dict[int, pd.DataFrame]",
        columns=tuple(kernel_launch_stats.COLUMNS),
        units=dict.fromkeys(("cpu_duration", "gpu_duration", "launch_delay"), "µs"),
        figures="analysis.figures.kernel_launch_stats",
        default_ranks="first",
        needs_gpu=True,
        title="CUDA kernel launch statistics",
        how_to_read=(
            "Left: every launch as its CPU runtime-call duration against its GPU kernel duration; "
            "points below the diagonal are kernels shorter than their own launch call (the CPU "
            "cannot keep the GPU busy with them), calls over "
            f"{kernel_launch_stats.RUNTIME_CUTOFF_US} µs are runtime outliers. Right: per rank, "
            "the delay between the end of the launch call and the kernel's start; delays over "
            f"{kernel_launch_stats.LAUNCH_DELAY_CUTOFF_US} µs mean a queue of work ahead of the "
            "kernel."
        ),
        tables=lambda stats: {"kernel_launch_summary": kernel_launch_stats.launch_summary(stats)},
        # one row per launch of every rank: written a rank at a time, never held whole
        csv_only=lambda stats: {"kernel_launch_stats": ChunkedTable(
            lambda: (kernel_launch_stats.all_launches({r: df}) for r, df in stats.items()
                     if df is not None),
            columns=(*kernel_launch_stats.COLUMNS, "rank", *kernel_launch_stats.CLASS_COLUMNS))},
    ),
    Analysis(
        name="gpu_kernel_breakdown",
        method="get_gpu_kernel_breakdown",
        aliases=("kernel_breakdown",),
        doc="Time per kernel type (with overlaps) and the top kernels per type and rank: "
            "``(kernel_type_df, all_kernel_df)``. ``image_renderer`` is a plotly renderer name for "
            "the figures (HTA's argument).",
        rank_step=kernel_breakdown.kernel_breakdown_rank,
        persist=True,
        combine=kernel_breakdown.combine,
        params=(
            VISUALIZE,
            Param("duration_ratio", 0.8, type="float",
                  description="Per rank and kernel type, kernels past this quantile of the "
                              "cumulative time are grouped as ``'others'`` (HTA's default: 0.8)."),
            Param("num_kernels", 10, type="int",
                  description="At most this many kernels per rank and type are listed by name; "
                              "the rest are grouped as ``'others'``."),
            Param("include_memory_kernels", True, type="bool",
                  description="Analyse MEMORY kernels (memcpy, memset) as a type too."),
            Param("image_renderer", "", role="renderer", type="str",
                  description="The plotly renderer that shows the figures ('': plotly's "
                              "default; HTA's default)."),
            RANKS_ALL,
        ),
        returns="tuple[pd.DataFrame, pd.DataFrame]",
        columns=("kernel_type", "sum", "percentage"),
        units={"sum": "µs"},
        figures="analysis.figures.kernel_breakdown",
        title="GPU kernel breakdown",
        how_to_read=(
            "The pie splits all GPU time by kernel type, with the time during which types overlap "
            "shown separately. The bars list the kernels that account for most of each type's "
            "time, per rank: the first candidates for optimisation."
        ),
        tables=lambda r: {"kernel_type_breakdown": r[0], "kernel_breakdown": r[1]},
    ),
    Analysis(
        name="queue_length_stream_summary",
        method="get_queue_length_stream_summary",
        aliases=("queue_length",),
        doc="Per rank and stream: time-weighted mean and maximum CUDA queue length, time at or "
            "above ``max_queue_length`` (µs) and the time the queue was empty while the stream was "
            "idle (µs and % of the stream's span).",
        rank_step=queue_length.stream_stats_rank,
        persist=True,
        combine=queue_length.stream_summary,
        params=(
            ranks_param("all"),
            Param("max_queue_length", queue_length.CUDA_MAX_LAUNCH_QUEUE_PER_STREAM, type="int",
                  description="The queue length counted as full: the time at or above it is "
                              "``time_at_max_queue_length`` (CUDA's launch queue holds 1024)."),
            visualize_param(False),
        ),
        columns=tuple(queue_length.STREAM_SUMMARY_COLUMNS),
        units=dict.fromkeys(("span", "time_at_max_queue_length", "empty_idle"), "µs"),
        tables=lambda df: {"queue_length": df},
        figures="analysis.figures.queue_length",
        needs_gpu=True,
        title="CUDA queue length",
        how_to_read=(
            "The queue of a stream holds the operations the CPU has launched onto it that have not "
            "started yet. A long queue means the CPU runs ahead of the GPU (good). 'Empty while "
            "idle' is the time the stream had nothing to run and nothing queued: the GPU was "
            "waiting for the CPU to launch work, the signature of a launch-bound rank."
        ),
        headline=queue_length.headline,
    ),
    _hta_counter(
        "queue_length_summary", "get_queue_length_summary",
        "HTA's CUDA queue length summary: ``describe()`` of the queue length's change points per "
        "``(rank, stream)``.",
        queue_length.queue_length_rank, queue_length.combine, "pd.DataFrame", (),
    ),
    _hta_counter(
        "queue_length_time_series", "get_queue_length_time_series",
        "HTA's CUDA queue length time series: ``{rank: DataFrame[ts (µs), pid, tid, stream, "
        "queue_length]}``, one row per change.",
        queue_length.queue_length_rank, queue_length.time_series, "dict[int, pd.DataFrame]",
        tuple(queue_length.SERIES_COLUMNS),
    ),
    Analysis(
        name="memcpy_summary",
        method="get_memcpy_summary",
        aliases=("memory_bandwidth",),
        doc="Per rank and copy kind (direction, pinned/pageable host memory): count, bytes, time "
            "and busy time (µs) and achieved bandwidth (GB/s).",
        rank_step=memory_bandwidth.memory_bandwidth_rank,
        combine=memory_bandwidth.copy_summary,
        params=(ranks_param("all"), visualize_param(False)),
        columns=tuple(memory_bandwidth.COPY_COLUMNS),
        units={"time": "µs", "busy": "µs"},
        figures="analysis.figures.memory_bandwidth",
        needs_gpu=True,
        extras=("memory_ops",),
        title="Memory copies",
        how_to_read=(
            "Every memcpy and memset by direction (HtoD: host to device, DtoH, DtoD, PtoP: between "
            "GPUs) and host memory kind: bytes moved, time spent and the achieved bandwidth, bytes "
            "/ time. Copies from pageable host memory are slow and synchronous: pin the memory."
        ),
        tables=lambda df: {"memcpy_summary": df},
    ),
    _hta_counter(
        "memory_bw_summary", "get_memory_bw_summary",
        "HTA's memory bandwidth summary: ``describe()`` of the positive bandwidth values (GB/s) "
        "per ``(rank, name)``.",
        memory_bandwidth.memory_bandwidth_rank, memory_bandwidth.combine, "pd.DataFrame", (),
        extras=("memory_ops",),
    ),
    _hta_counter(
        "memory_bw_time_series", "get_memory_bw_time_series",
        "HTA's memory bandwidth time series: ``{rank: DataFrame[ts (µs), pid, name, "
        "memory_bw_gbps]}``, one row per change.",
        memory_bandwidth.memory_bandwidth_rank, memory_bandwidth.time_series,
        "dict[int, pd.DataFrame]", tuple(memory_bandwidth.SERIES_COLUMNS),
        extras=("memory_ops",),
    ),
)
