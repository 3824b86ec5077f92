"""``trace-analysis summary TRACES``: the headline numbers per rank, as a table in the terminal."""

from __future__ import annotations

import click

from analysis.cli.options import open_analysis, trace_loading_options


@click.command("summary")
@click.argument("traces")
@click.option("--wide", is_flag=True,
              help="Every column on one line per rank (default: fit the terminal, COLUMNS or 100).")
@trace_loading_options
def command(traces: str, wide: bool, **options) -> None:
    """Findings, then the headline numbers per rank, for TRACES (a directory, a file or a gs:// URL)."""
    from analysis import analyses as catalogue
    from analysis.cli import terminal

    ta = open_analysis(traces, **options)
    # one batch: the findings and the headline columns share their analyses (stragglers, ...)
    results = ta.run_many(dict.fromkeys(["findings", *catalogue.headline_names()], {}), "all",
                          errors="return")
    found = results["findings"]
    if isinstance(found, Exception):
        raise found
    lines = []
    for r in found.itertuples():
        lines += terminal.wrap(f"{r.title}: {r.detail}", indent="    ", first=f"[{r.severity}] ")
    if not lines:
        lines = ["no finding: nothing the rules check for is wrong"]
    for rule, why in found.attrs.get("not_run", {}).items():
        lines += terminal.wrap(f"{rule}: {why}", indent="    ", first="[not run] ")
    lines.append("")
    lines += terminal.table(catalogue.headline_table(results), key=["rank"], wide=wide)
    click.echo("\n".join(lines))
