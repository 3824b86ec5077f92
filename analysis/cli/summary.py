"""``trace-analysis summary TRACES``: the headline numbers per rank, as a table in the terminal."""

from __future__ import annotations

import click

from analysis.cli.options import open_analysis, trace_loading_options


@click.command("summary")
@click.argument("traces")
@trace_loading_options
def command(traces: str, **options) -> None:
    """Findings, then the headline numbers per rank, for TRACES (a directory, a file or a gs:// URL)."""
    from analysis.metrics.findings import headline_text

    ta = open_analysis(traces, **options)
    found = ta.findings()
    for line in headline_text(found) or ["no finding: nothing the rules check for is wrong"]:
        click.echo(line)
    for rule, why in found.attrs.get("not_run", {}).items():
        click.echo(f"[not run] {rule}: {why}")
    click.echo("")
    table = ta.summary()
    click.echo(table.to_string(index=False))
