"""The registry entries of this family (what it answers: the package docstring), in report
order. The top-level catalogue (:mod:`analysis.analyses`) registers them; the machinery is
:mod:`analysis.registry`.
"""

from __future__ import annotations

from analysis.metrics.inference import iterations
from analysis.registry import Analysis, ranks_param

ENTRIES = (
    Analysis(
        name="inference_iterations",
        method="get_inference_iterations",
        doc="Per rank: the serving engine's iterations found without ProfilerSteps (vLLM/SGLang "
            "batch annotations), their phase (prefill / decode / mixed), tokens and batch size, "
            "CPU time, GPU busy time (union of their kernels), idle inside the iteration and "
            "between iterations (µs), and whether each is in the steady-state window.",
        rank_step=iterations.iterations_rank,
        combine=iterations.combine,
        params=(ranks_param("all"),),
        columns=tuple(iterations.COLUMNS),
        window="full",
        placement="section",
        title="Inference iterations",
        how_to_read=(
            "One row per iteration of the serving engine (one scheduler step over a batch, found "
            "from vLLM's or SGLang's annotations): its phase (prefill, decode or mixed), tokens, "
            "batch size, CPU time and GPU busy time (µs). Idle inside is GPU waiting within the "
            "iteration, idle before is the gap since the previous iteration (scheduler and host "
            "time). The phase table averages the steady-state iterations (warm-up left out). "
            "Empty for traces without serving iterations (training)."
        ),
        tables=lambda df: {  # none for traces without serving iterations (training)
            "inference_iterations": df,
            "inference_phases": iterations.phase_summary(df),
        } if len(df) else {},
    ),
)
