"""``trace-analysis check TRACES``: the trace-health findings; exit status 1 when any is an error.

Parses the arguments, calls ``TraceAnalysis.check()`` (the registered analysis ``trace_health``, over
every rank's whole trace) and prints its table, so that a CI job can gate on the exit status.
Nothing is computed here.
"""

from __future__ import annotations

import click

from analysis.cli.options import (
    open_analysis,
    report_failures,
    strict_option,
    trace_loading_options,
)


@click.command("check")
@click.argument("traces")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True, help="How to print the findings.")
@click.option("--min-severity", type=click.Choice(["error", "warning", "info"]), default="info",
              show_default=True, help="Print findings of this severity or worse.")
@trace_loading_options
@strict_option
@click.pass_context
def command(ctx: click.Context, traces: str, fmt: str, min_severity: str, strict: bool,
            **options) -> None:
    """Check TRACES (a directory, a file or a gs:// URL) for problems that make analyses wrong.

    Exit status: 0 when no finding is an error, 1 otherwise. A rank whose checks could not run
    is warned about on stderr (exit 1 with --strict); the other ranks are checked. In the CSV and
    JSON output, rank -1 marks a finding about the job as a whole (ranks that disagree on the
    world size, the profiler steps or their clocks).
    """
    from analysis.metrics.health import trace_health

    ta = open_analysis(traces, **options)
    with ta.collect_failures() as failures:  # a rank whose checks fail is left out and warned about
        findings = ta.check()
    report_failures(failures, strict)
    keep = trace_health.SEVERITIES[: trace_health.SEVERITIES.index(min_severity) + 1]
    shown = findings[findings["severity"].isin(keep)]
    if fmt == "csv":
        click.echo(shown.to_csv(index=False), nl=False)
    elif fmt == "json":
        click.echo(shown.to_json(orient="records", force_ascii=False))
    elif shown.empty:
        click.echo(f"no findings ({len(ta.ranks)} ranks checked)")
    else:
        # identical findings on several ranks are one entry naming them (the csv/json keep rows)
        from analysis.cli import terminal
        from analysis.reports.health import grouped

        lines = []
        for row in grouped(shown, "all: --format csv").itertuples(index=False):
            lines += terminal.wrap(f"{row.check} ({row.ranks}): {row.message}", indent=" " * 8,
                                   first=f"{row.severity.upper():7} ")
            if row.evidence:
                lines += terminal.wrap(row.evidence, indent=" " * 8, first=" " * 8)
        click.echo("\n".join(lines))
    ctx.exit(trace_health.exit_code(findings))
