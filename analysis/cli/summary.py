"""``trace-analysis summary TRACES``: the headline numbers per rank, as a table in the terminal."""

from __future__ import annotations

import click

from analysis.cli.options import open_analysis, trace_loading_options


@click.command("summary")
@click.argument("traces")
@trace_loading_options
def command(traces: str, **options) -> None:
    """Findings, then the headline numbers per rank, for TRACES (a directory, a file or a gs:// URL)."""
    from analysis import analyses as catalogue
    from analysis.metrics.findings.findings import headline_text

    ta = open_analysis(traces, **options)
    # one batch: the findings and the headline columns share their analyses (stragglers, ...)
    results = ta.run_many(dict.fromkeys(["findings", *catalogue.headline_names()], {}), "all",
                          errors="return")
    found = results["findings"]
    if isinstance(found, Exception):
        raise found
    for line in headline_text(found) or ["no finding: nothing the rules check for is wrong"]:
        click.echo(line)
    for rule, why in found.attrs.get("not_run", {}).items():
        click.echo(f"[not run] {rule}: {why}")
    click.echo("")
    table = catalogue.headline_table(results)
    click.echo(table.to_string(index=False))
