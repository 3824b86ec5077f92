"""The registry entries of this family (what it answers: the package docstring), in report
order. The top-level catalogue (:mod:`analysis.analyses`) registers them; the machinery is
:mod:`analysis.registry`.
"""

from __future__ import annotations

from analysis.metrics.findings import findings
from analysis.registry import Analysis, ranks_param

ENTRIES = (
    Analysis(
        name="findings",
        method="findings",
        doc="What is wrong, ranked: one row per finding (severity, title, detail, metric, value, "
            "threshold, evidence, suggestion); ``.attrs['not_run']`` says which checks could not "
            "run and why. Rules and thresholds: docs/findings.md.",
        params=(ranks_param("all"),),
        columns=tuple(findings.COLUMNS),
        placement="lead",
        title="Findings",
        how_to_read=(
            "What the analyses below say is wrong, most severe first, each with its number, the "
            "table or figure that shows it, and what usually fixes it. Checks that could not run "
            "on these traces (missing data) are listed, never guessed."
        ),
        requires=findings.REQUIRES,
        derive=findings.findings,
        tables=lambda table: {"findings": table},
    ),
)
