"""The registry entries of this family (the retired TensorBoard plugin's views: the package
docstring), in report order. The top-level catalogue (:mod:`analysis.analyses`) registers them; the
machinery is :mod:`analysis.registry`."""

from __future__ import annotations

from analysis.metrics.tensorboard import (
    gpu_summary,
    kernel_table,
    memory_view,
    module_view,
    operator_table,
    step_time_breakdown,
)
from analysis.registry import VISUALIZE, Analysis, Param, ranks_param

KERNEL_ARGS = ("kernel_args",)
MEMORY = ("memory_events", "kernel_args", "python_functions")
# the extras are decoded from Kineto JSON: other profilers' files raise FormatNotSupportedError
KINETO = ("kineto_args",)
PLUGIN_WINDOW = (
    " Window: every profiler step of the whole trace, the last included (the plugin's; "
    "``include_last_profiler_step`` does not change it); a trace without ``ProfilerStep`` is one "
    "step, ``0``, over the span of its CPU events, as in the plugin."
)
MEMORY_DOC = (
    " Needs a trace recorded with ``profile_memory=True`` (``NoMemoryProfileError`` otherwise). "
    "Window: the whole trace."
)



def _memory_table(name, method, doc, rank_step, title, default_ranks, columns) -> Analysis:
    """One table of the memory view, for the API only (the report shows ``memory_view``)."""
    return Analysis(
        name=name,
        method=method,
        doc=doc + MEMORY_DOC,
        rank_step=rank_step,
        persist=True,
        combine=memory_view.combine,
        params=(ranks_param("all" if default_ranks == "all" else None),),
        columns=tuple(columns),
        default_ranks=default_ranks,
        window="full",
        extras=MEMORY,
        needs=KINETO,
        title=title,
        placement="none",
    )


ENTRIES = (
    Analysis(
        name="gpu_summary",
        method="get_gpu_summary",
        doc="Per rank and GPU: GPU utilization, est. SM efficiency, est. achieved occupancy and "
            "the share of kernel time in tensor-core kernels (%), as the TensorBoard plugin's GPU "
            "summary." + PLUGIN_WINDOW,
        rank_step=gpu_summary.gpu_summary_rank,
        combine=gpu_summary.combine,
        params=(ranks_param("all"), VISUALIZE),
        figures="analysis.figures.gpu_summary",
        window="full",
        persist=True,
        needs_gpu=True,
        extras=KERNEL_ARGS,
        needs=KINETO,
        title="GPU summary (TensorBoard)",
        how_to_read=(
            "The TensorBoard profiler plugin's GPU summary, per rank and GPU, over all profiler "
            "steps (without steps, the span of the CPU events): GPU utilization (share of the time some kernel runs), est. SM efficiency "
            "(how much of the GPU's SMs those kernels could fill: blocks per SM, capped at 1), est. "
            "achieved occupancy (warps resident per SM against the maximum, weighted by kernel "
            "time) and the share of kernel time in kernels that use tensor cores. High utilization "
            "with low SM efficiency means many small kernels. GPU utilization is not 100 % minus "
            "the temporal breakdown's idle share: the plugin counts kernels only (no memcpy or "
            "memset) over every profiler step, the last one included, where the temporal "
            "breakdown counts every GPU event from the first to the last kernel of the analysed "
            "steps. The tensor-core share reads the plugin's kernel-name markers (2021: Volta and "
            "Ampere names), which miss Hopper's and Blackwell's GEMM kernels (nvjet, sm90 "
            "cutlass); the tensor-core finding reads a longer list."
        ),
        headline=gpu_summary.headline,
        key_numbers=gpu_summary.key_numbers,
        columns=tuple(gpu_summary.COLUMNS),
    ),
    Analysis(
        name="gpu_utilization_timeline",
        method="get_gpu_utilization_timeline",
        doc="Per rank, GPU and time bucket of the whole trace (the plugin's 10**k µs buckets, at "
            "most 100): GPU utilization and est. SM efficiency (%).",
        rank_step=gpu_summary.gpu_utilization_timeline_rank,
        combine=gpu_summary.combine_timeline,
        params=(ranks_param("all"), VISUALIZE),
        figures="analysis.figures.gpu_utilization_timeline",
        window="full",
        persist=True,
        needs_gpu=True,
        extras=KERNEL_ARGS,
        needs=KINETO,
        title="GPU utilization over time (TensorBoard)",
        columns=tuple(gpu_summary.TIMELINE_COLUMNS),
        how_to_read=(
            "GPU utilization and est. SM efficiency per time bucket, as the plugin's trace-view "
            "counters: dips show where the GPU waits (data loading, synchronisation, the host)."
        ),
    ),
    Analysis(
        name="step_time_breakdown",
        method="get_step_time_breakdown",
        doc="Per rank and profiler step: the step's time split into kernel, memcpy, memset, "
            "runtime, DataLoader, CPU exec and other (µs; plus communication), as the "
            "TensorBoard plugin's overview." + PLUGIN_WINDOW,
        rank_step=step_time_breakdown.step_time_breakdown_rank,
        combine=step_time_breakdown.combine,
        params=(ranks_param("all"), VISUALIZE),
        figures="analysis.figures.step_time_breakdown",
        window="full",
        persist=True,
        extras=KERNEL_ARGS,
        needs=KINETO,
        title="Step time breakdown (TensorBoard)",
        how_to_read=(
            "Each profiler step split as the plugin's overview: time with a kernel running, else a "
            "memcpy, memset, collective, runtime call, DataLoader fetch, CPU operator, else other. "
            "A large DataLoader share means input-bound steps; Runtime (2021 traces only: the plugin "
            "does not read today's cuda_runtime events) means launch overhead."
        ),
        headline=step_time_breakdown.headline,
        columns=tuple(step_time_breakdown.COLUMNS),
    ),
    Analysis(
        name="kernel_table",
        method="get_kernel_table",
        doc="Per rank and kernel name: tensor cores used, calls, total/mean/max/min time (µs), "
            "mean blocks per SM and est. achieved occupancy; ``.by_operator``: per kernel and "
            "launching operator, grid, block, registers per thread and shared memory. Returns "
            "``KernelTables(kernels, by_operator)``. Window: the whole trace.",
        rank_step=kernel_table.kernel_table_rank,
        combine=kernel_table.combine,
        params=(ranks_param(None), VISUALIZE,
                Param("top", 20, role="figure", type="int",
                      description="The number of kernels in the figure (by total time).")),
        returns="KernelTables",
        columns=tuple(kernel_table.COLUMNS),
        figures="analysis.figures.kernel_table",
        default_ranks="first",
        window="full",
        persist=True,
        extras=KERNEL_ARGS,  # no needs_gpu: the plugin's kernels are the 'kernel' events
        needs=KINETO,
        title="Kernels (TensorBoard)",
        how_to_read=(
            "The plugin's kernel view: the kernels with the most GPU time, whether they use tensor "
            "cores, and their launch statistics; and the share of kernel time in tensor-core kernels."
        ),
        tables=lambda r: {"kernel_table": r.kernels.head(50)},
        csv_only=lambda r: {"kernel_table_all": r.kernels, "kernel_op_table": r.by_operator},
    ),
    Analysis(
        name="operator_table",
        method="get_operator_table",
        doc="Per rank and operator name (``group_by=\"name\"``) or name and input shapes "
            "(``\"name_and_input_shape\"``), or either and the call stack (``\"name_and_stack\"``, "
            "``\"name_and_input_shape_and_stack\"``: the plugin's stack view, ``call_stack`` "
            "column; empty with a warning on traces without ``Call stack`` args): calls, host "
            "self/total and device self/total time "
            "(µs), tensor-core eligibility and the share of device time on tensor cores, as the "
            "TensorBoard plugin's operator view. Device times need 2021-schema traces (the plugin's "
            "limit). Window: the whole trace.",
        rank_step=operator_table.operator_table_rank,
        combine=operator_table.combine,
        params=(ranks_param(None),
                Param("group_by", "name",
                      type="Literal['name', 'name_and_input_shape', 'name_and_stack', "
                           "'name_and_input_shape_and_stack']",
                      description="Group the operators by name, or by name and input shapes "
                                  "(``'name_and_input_shape'``: adds the ``input_shape`` "
                                  "column; shapes need ``record_shapes=True``), or either and "
                                  "the call stack (``'name_and_stack'``, "
                                  "``'name_and_input_shape_and_stack'``: adds the ``call_stack`` "
                                  "column; only calls with a ``Call stack`` arg)."),
                VISUALIZE,
                Param("top", 20, role="figure", type="int",
                      description="The number of operators in the figure.")),
        # group_by="name" (the default) leaves the input_shape and call_stack columns out
        columns=tuple(c for c in operator_table.COLUMNS if c not in ("input_shape", "call_stack")),
        figures="analysis.figures.operator_table",
        default_ranks="first",
        window="full",
        persist=True,
        extras=operator_table.extras,
        needs=KINETO,
        title="Operators (TensorBoard)",
        how_to_read=(
            "The plugin's operator view: per operator, its calls and its time on the host (self: "
            "not in the operators it calls) and on the device (the kernels its runtime calls "
            "launched; the plugin links them only on 2021 traces, so 0 on current ones)."
        ),
        tables=lambda r: {"operator_table": r.head(50)},
        csv_only=lambda r: {"operator_table_all": r},
    ),
    Analysis(
        name="module_summary",
        method="get_module_summary",
        doc="Per rank, the nn.Module hierarchy (pre-order; ``path``, ``depth``) with each module's "
            "occurrences, operators, host total/self and device total/self time (µs), as the "
            "TensorBoard plugin's module view. Needs ``with_modules=True`` (``NoModulesError`` "
            "otherwise). Window: the whole trace.",
        rank_step=module_view.module_summary_rank,
        combine=module_view.combine,
        params=(ranks_param(None), VISUALIZE),
        figures="analysis.figures.module_summary",
        default_ranks="first",
        window="full",
        persist=True,
        extras=("kernel_args", "python_functions"),
        needs=KINETO,
        title="Modules (TensorBoard)",
        columns=tuple(module_view.COLUMNS),
        how_to_read=(
            "The nn.Module hierarchy of the model, each module's rectangle as wide as its host time "
            "(self time: not in its sub-modules or operators). Modules that take most of their "
            "parent are where to look first."
        ),
        tables=lambda r: {"module_summary": r.head(100)},
        csv_only=lambda r: {"module_summary_all": r},
    ),
    *(
        _memory_table(name, method, doc, rank_step, title, ranks, columns)
        for name, method, doc, rank_step, title, ranks, columns in (
            ("memory_timeline", "get_memory_timeline",
             "Per rank and device (CPU, GPU0, ...): allocated and reserved bytes after each "
             "memory event, in time order (µs).",
             memory_view.memory_timeline_rank, "Memory over time (TensorBoard)", "first",
             memory_view.TIMELINE_COLUMNS),
            ("memory_peaks", "get_memory_peaks",
             "Per rank and device: the peak of allocated bytes, when it was reached (µs) and in "
             "which profiler step (-1: none), and the peak of reserved bytes.",
             memory_view.memory_peaks_rank, "Memory peaks (TensorBoard)", "all",
             memory_view.PEAK_COLUMNS),
            ("operator_memory", "get_operator_memory",
             "Per rank, device and operator: calls, size increase, allocation count and bytes, "
             "each including nested operators and by the operator itself (``self_*``).",
             memory_view.operator_memory_rank, "Operator memory (TensorBoard)", "first",
             memory_view.OP_COLUMNS),
            ("memory_events", "get_memory_events",
             "Per rank: every allocation paired with its free: device, operator, bytes, "
             "allocated and freed at (µs), lifetime (µs); ``freed`` False for allocations never "
             "freed in the trace.",
             memory_view.memory_events_rank, "Memory events (TensorBoard)", "first",
             memory_view.EVENT_COLUMNS),
        )
    ),
    Analysis(
        name="memory_view",
        method="get_memory_view",
        doc="The memory view of the report: ``MemoryReport(timeline, peaks, operators, steps)`` "
            "(see get_memory_timeline, get_memory_peaks, get_operator_memory)." + MEMORY_DOC,
        params=(ranks_param("all"), VISUALIZE),
        figures="analysis.figures.memory_view",
        requires=memory_view.REQUIRES,
        derive=memory_view.memory_report,
        returns="MemoryReport",
        title="Memory view (TensorBoard)",
        how_to_read=(
            "Memory allocated and reserved by PyTorch's allocators over time, per device, from a "
            "trace recorded with profile_memory=True; profiler steps shaded, each device's peak "
            "marked. The table lists the operators that allocate most (self: by the operator "
            "itself; the others include the operators it calls)."
        ),
        tables=lambda r: {"memory_peaks": r.peaks, "operator_memory": memory_view.top_operators(r)},
        csv_only=lambda r: {"memory_timeline": r.timeline, "operator_memory_all": r.operators},
        key_numbers=memory_view.key_numbers,
    ),
)
