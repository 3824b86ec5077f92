"""The registry entries of this family (what it answers: the package docstring), in report
order. The top-level catalogue (:mod:`analysis.analyses`) registers them; the machinery is
:mod:`analysis.registry`.
"""

from __future__ import annotations

from analysis.metrics.compare import trace_diff
from analysis.registry import Analysis, ranks_param

ENTRIES = (
    Analysis(
        name="step_profile",
        method="get_step_profile",
        aliases=("trace_diff",),
        doc="Per rank: the per-step profile that ``compare(base, test)`` compares (breakdown of "
            "the step time, kernels, operators by exclusive GPU time; "
            "``analysis.metrics.compare.trace_diff``).",
        rank_step=trace_diff.trace_diff_rank,
        combine=trace_diff.combine,
        params=(ranks_param("all"),),
        placement="none",
        returns="dict[int, RankProfile]",
    ),
)
