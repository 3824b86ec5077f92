"""The registry entries of this family (what it answers: the package docstring), in report
order. The top-level catalogue (:mod:`analysis.analyses`) registers them; the machinery is
:mod:`analysis.registry`.
"""

from __future__ import annotations

from analysis.metrics.health import trace_health
from analysis.registry import Analysis, ranks_param

ENTRIES = (
    Analysis(
        name="trace_health",
        method="get_trace_health",
        method_aliases=("check",),
        doc="Trace health findings (``rank, severity, check, message, evidence``; errors first): "
            "misclassified communication kernels, broken CPU-GPU links, dropped events, Kineto's "
            "own warnings, overlapping events, bad durations, clock skew and step mismatches "
            "between ranks, missing rank metadata. Runs over the whole trace of every rank.",
        rank_step=trace_health.trace_health_rank,
        combine=trace_health.combine,
        params=(ranks_param("all"),),
        columns=tuple(trace_health.COLUMNS),
        window="full",
        placement="lead",
        title="Trace health",
        how_to_read=(
            "Problems in the traces themselves that make the numbers below wrong or doubtful. "
            "error: the analyses are wrong (fix the trace or the options first); warning: some "
            "numbers may be (read the message: e.g. kernels that look like communication but are "
            "counted as computation, GPU events the profiler dropped, clocks of two ranks that "
            "disagree); info: worth knowing. A finding on several ranks is one row naming them; "
            "info rows are folded."
        ),
        tables=lambda table: {"trace_health": table},
        headline=trace_health.headline,
    ),
)
