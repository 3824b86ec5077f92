"""``trace-analysis summary TRACES``: the headline numbers per rank, as a table in the terminal."""

from __future__ import annotations

import click

from analysis.cli.options import (
    open_analysis,
    report_failures,
    strict_option,
    trace_loading_options,
)


@click.command("summary")
@click.argument("traces")
@trace_loading_options
@strict_option
def command(traces: str, strict: bool, **options) -> None:
    """Findings, then the headline numbers per rank, for TRACES (a directory, a file or a gs:// URL).

    Analyses that cannot run are listed at the end ("could not run"); the exit status is 0 once
    the traces loaded (1 with --strict when something could not run)."""
    from analysis import registry
    from analysis.errors import AnalysisFailedError
    from analysis.metrics.findings import headline_text

    ta = open_analysis(traces, **options)
    # one batch: the findings and the headline columns share their analyses (stragglers, ...)
    failures: list[registry.Failure] = []
    results = ta.run_many(dict.fromkeys(["findings", *registry.headline_names()], {}), "all",
                          errors="return", failures=failures)
    found = results["findings"]
    if isinstance(found, Exception):
        click.echo(f"no findings: {found}")
    else:
        for line in headline_text(found) or ["no finding: nothing the rules check for is wrong"]:
            click.echo(line)
        for rule, why in found.attrs.get("not_run", {}).items():
            click.echo(f"[not run] {rule}: {why}")
    click.echo("")
    try:
        table = registry.headline_table(results)
    except Exception as exc:  # noqa: BLE001 - the table's bug leaves the findings printed
        failures.append(registry.Failure("headline", None, AnalysisFailedError.wrap("headline", None, exc)))
        table = None
    click.echo("no headline numbers" if table is None else table.to_string(index=False))
    report_failures(failures, strict, echo_table=True)
