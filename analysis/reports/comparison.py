"""The comparison of two runs as a report folder: ``index.html``, ``figures/*.svg``, ``tables/*.csv``.

``write_comparison_report(comparison, out_dir)`` lays out a :class:`~analysis.comparison.TraceComparison`
with the report's own machinery: its page model (``ReportContent``), its template
(:func:`analysis.reports.html.render_html`), and one kaleido browser for the static figures
(:func:`analysis.figures.export.export_figures`). Nothing is computed here.
"""

from __future__ import annotations

import os
from pathlib import Path

from analysis import arguments
from analysis.arguments import REPORT_FORMATS
from analysis.reports import ReportResult, _write_text, write_tables
from analysis.reports.content import ReportContent, Section
from analysis.reports.html import render_html
from analysis.reports.staging import moved, staged

HOW_TO_READ = {
    "breakdown": (
        "Each rank's step time (its ProfilerStep annotations) splits into a partition of the GPU "
        "timeline: computation, communication not hidden by computation, memory copies/sets hidden "
        "by neither, other GPU work, and GPU idle. Values are µs per profiler step, averaged over "
        "the compared ranks, so runs with different numbers of steps compare fairly; the parts' "
        "changes add up to the step-time change."),
    "operators": (
        "CPU operators matched by name, with the exclusive GPU time of the kernels each launched "
        "(a kernel counts for the innermost operator only: nested operators are never counted "
        "twice), per profiler step, summed over the compared ranks. The operator level stays "
        "comparable across hardware (kernel names differ between GPUs). Changes smaller than the "
        "noise threshold are 'unchanged'."),
    "kernels": (
        "GPU kernels by type and name: count and time per profiler step, base vs test, largest "
        "change first. Between different GPUs the names differ: read the operators instead."),
}


def comparison_sections(comparison, top: int = 10) -> list[Section]:
    """The page's sections (figures and tables) in reading order."""
    tables = comparison.tables()
    figs = comparison.figures(top=top)
    return [
        Section("breakdown", "Step time by category", HOW_TO_READ["breakdown"],
                figures={"step_time_waterfall": figs["step_time_waterfall"]},
                tables={"breakdown": tables["breakdown"],
                        "breakdown_per_rank": tables["breakdown_per_rank"],
                        "steps": tables["steps"]}),
        Section("operators", "Operators: what got slower or faster", HOW_TO_READ["operators"],
                figures={"operators_gained_lost": figs["operators_gained_lost"]},
                tables={"operators": tables["operators"]}),
        Section("kernels", "Kernels", HOW_TO_READ["kernels"],
                figures={"kernels_gained_lost": figs["kernels_gained_lost"]},
                tables={"kernels": tables["kernels"]}),
    ]


def comparison_content(comparison, top: int = 10) -> ReportContent:
    """The comparison as a ``ReportContent`` (the report page's model): key numbers, sections."""
    base, test = comparison.labels
    step = comparison.breakdown().set_index("category").loc["step_time"]
    pct = "" if not step["base_us"] else f" ({step['diff_pct']:+.1f} %)"
    sections = comparison_sections(comparison, top=top)
    sections[0].notes = list(comparison.notes)
    return ReportContent(
        source=f"{base}: {comparison.base.engine.source} · {test}: {comparison.test.engine.source}",
        ranks=[b for b, _ in comparison.pairs],
        kernel_patterns=comparison.base.patterns.name,
        headline=None,
        key_numbers=[
            (f"{base} step (µs)", f"{step['base_us']:,.1f}"),
            (f"{test} step (µs)", f"{step['test_us']:,.1f}"),
            ("step time change", f"{step['diff_us']:+,.1f} µs{pct}"),
            ("rank pairs", ", ".join(f"{b}→{t}" for b, t in comparison.pairs)),
        ],
        context=[], lead=[], sections=sections,
    )


def write_comparison_report(comparison, out_dir: str | os.PathLike, formats=("svg", "html"),
                            top: int = 10) -> ReportResult:
    """Write the comparison page, its figures (``formats`` besides html) and every table as CSV."""
    formats = arguments.formats(formats, REPORT_FORMATS) or REPORT_FORMATS[:2]
    out = Path(out_dir).absolute()
    content = comparison_content(comparison, top=top)
    with staged(out) as tmp:  # moved in place when complete: a failure leaves nothing
        (tmp / "tables").mkdir()
        result = ReportResult(out_dir=out, index=None, tables={
            k: moved(p, tmp, out) for k, p in write_tables(content.tables, tmp / "tables").items()})
        if "html" in formats:
            import plotly.offline

            base, test = comparison.labels
            _write_text(tmp / "index.html", render_html(content, plotly.offline.get_plotlyjs(),
                                                        title=f"Run comparison: {base} vs {test}"))
            result.index = out / "index.html"
        static = [f for f in formats if f != "html"]
        if static:
            from analysis.figures.export import export_figures

            written = export_figures(content.figures, tmp / "figures", formats=static)
            result.figures = {k: [moved(p, tmp, out) for p in v] for k, v in written.items()}
    return result
