"""``trace-analysis summary TRACES``: the headline numbers per rank, as a table in the terminal."""

from __future__ import annotations

import click

from analysis.cli.options import open_analysis, trace_loading_options


@click.command("summary")
@click.argument("traces")
@trace_loading_options
def command(traces: str, **options) -> None:
    """Headline numbers per rank for TRACES (a directory, a file or a gs:// URL)."""
    ta = open_analysis(traces, **options)
    table = ta.summary()
    click.echo(table.to_string(index=False))
