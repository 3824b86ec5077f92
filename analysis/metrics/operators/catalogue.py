"""The registry entries of this family (what it answers: the package docstring), in report
order. The top-level catalogue (:mod:`analysis.analyses`) registers them; the machinery is
:mod:`analysis.registry`.
"""

from __future__ import annotations

from analysis.metrics.operators import operator_summary
from analysis.registry import Analysis, Param, ranks_param

# The report's top operators.
TOP_OPERATORS = 20

ENTRIES = (
    Analysis(
        name="operator_summary",
        method="get_operator_summary",
        doc="Per CPU operator: calls, total/self CPU time and the GPU time it launched (µs). "
            "With ``group_by=\"name_and_input_shape\"``: per launching operator and its recorded "
            "arguments (``input_dims``, ``input_types``, ``input_strides``, ``concrete_inputs``) "
            "as TraceLens's unified_perf_summary groups them, the calls that launched GPU work, "
            "their times, the ``kernels`` they launched, and a row per launch call and kernel "
            "for GPU work outside every operator (rows sum to the rank's GPU time).",
        rank_step=operator_summary.operator_summary_rank,
        persist=True,
        combine=operator_summary.combine,
        params=(
            ranks_param(None),
            Param("top", TOP_OPERATORS, type="int | None",
                  description="Keep the first ``top`` operators per rank, by GPU time launched "
                              "then self CPU time (None: every operator)."),
            Param("group_by", "name", type="Literal['name', 'name_and_input_shape']",
                  description="Group by operator name, or by the launching operator's name and "
                              "recorded arguments (``'name_and_input_shape'``: shape columns "
                              "and ``kernels``; shapes need ``record_shapes=True``; sorted by "
                              "``gpu_self_us``)."),
        ),
        columns=("rank", *operator_summary.COLUMNS),
        default_ranks="first",
        title="CPU operators",
        how_to_read=(
            f"The {TOP_OPERATORS} CPU operators with the most GPU time launched, per rank: calls, "
            "total and self CPU time, and the GPU time of the kernels they launched (µs)."
        ),
        report_options={"top": TOP_OPERATORS},
        needs=("operators",),
        extras=operator_summary.extras,
    ),
)
