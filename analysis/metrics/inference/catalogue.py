"""The registry entries of this family (what it answers: the package docstring), in report
order. The top-level catalogue (:mod:`analysis.analyses`) registers them; the machinery is
:mod:`analysis.registry`.
"""

from __future__ import annotations

from analysis.metrics.inference import iterations
from analysis.registry import Analysis, ranks_param, visualize_param

ENTRIES = (
    Analysis(
        name="inference_iterations",
        method="get_inference_iterations",
        doc="Per rank: the serving engine's iterations found without ProfilerSteps (vLLM/SGLang "
            "batch annotations), their phase (prefill / decode / mixed), tokens and batch size, "
            "CPU time, GPU busy time (union of their kernels), idle inside the iteration and "
            "between iterations (µs), whether each is in the steady-state window, the GPU time "
            "of its attention and GEMM operators and its top operators; "
            "``attrs['operators']``: the per-iteration operator split. With visualize=True, "
            "the iterations over time and the per-phase split.",
        rank_step=iterations.iterations_rank,
        combine=iterations.combine,
        params=(ranks_param("all"), visualize_param(False)),
        columns=tuple(iterations.COLUMNS),
        window="full",
        figures="analysis.figures.inference_iterations",
        placement="section",
        title="Inference iterations",
        how_to_read="Serving traces (vLLM, SGLang) only; empty for training traces. One bar per "
                    "iteration of the serving engine, at its GPU start, as wide as its GPU span "
                    "and as high as its GPU busy time, coloured by phase (prefill / decode / "
                    "mixed); faded bars are warm-up, left out of the steady-state window that "
                    "the other analyses cover when the trace has no ProfilerStep. The second "
                    "figure splits each phase's steady-state time into GPU busy, idle inside "
                    "the iterations (the GPU waits for launches: launch-bound) and idle between "
                    "them (scheduler and host work). The tables give every iteration (tokens, "
                    "batch size, attention and GEMM GPU time, top operators) and each phase "
                    "(attention / GEMM / MoE share of its GPU time).",
        tables=lambda df: {  # none for traces without serving iterations (training)
            "inference_iterations": df,
            "inference_phases": iterations.phase_summary(df),
        } if len(df) else {},
        csv_only=lambda df: {"inference_operators": df.attrs["operators"]}
        if len(df) and "operators" in df.attrs else {},
    ),
)
