"""``trace-analysis report TRACES -o OUT_DIR``: the five analyses as an HTML page, figures and CSVs.

Parses the arguments and calls ``analysis.reports.write_report``; nothing is computed here.
"""

from __future__ import annotations

import click

from analysis.cli.options import (
    int_list,
    open_analysis,
    report_failures,
    strict_option,
    trace_loading_options,
)


def _formats(ctx, param, value: tuple[str, ...]) -> tuple[str, ...]:
    """``-f svg -f png`` or ``-f svg,png`` → ("svg", "png")."""
    from analysis.arguments import formats
    from analysis.errors import ConfigError

    try:
        return formats(list(value)) or ("html", "svg")
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None


def _analyses(ctx, param, value: str | None) -> list[str] | None:
    """``--analyses a,b`` → the section names, checked against the catalogue before loading."""
    if value is None:
        return None
    from analysis import analyses as catalogue
    from analysis.errors import ConfigError

    names = [a.strip() for a in value.split(",") if a.strip()]
    if not names:
        raise click.BadParameter(f"unknown {value!r}; choose from "
                                 f"{', '.join(catalogue.section_names())}")
    try:
        return catalogue.CATALOGUE.sections(names)  # earlier names accepted, as the sections'
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("report")
@click.argument("traces")
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for index.html, figures/ and tables/ (created if needed).")
@click.option("--ranks", default="all", show_default=True, callback=int_list,
              help="Ranks to report: 'all' or a comma-separated list such as 0,3,5.")
@click.option("-f", "--format", "formats", multiple=True, callback=_formats,
              help="Outputs: html (the page), svg, png, pdf (one file per figure). Repeat or use "
                   "commas; default: html,svg.")
@click.option("--analyses", default=None, metavar="NAMES", callback=_analyses,
              help="Sections to include, comma-separated (default: all; see "
                   "`trace-analysis analyses`).")
@trace_loading_options
@strict_option
def command(traces: str, out_dir: str, ranks: list[int] | None, formats: tuple[str, ...],
            analyses: list[str] | None, strict: bool, **options) -> None:
    """Write a report of TRACES (a directory, a file or a gs:// URL) into OUT_DIR.

    An analysis that cannot run on a rank is a row of its section's "could not run" table; the
    rest is written, and the exit status is 0 (1 with --strict)."""
    from analysis.reports import write_report

    ta = open_analysis(traces, **options)
    result = write_report(ta, out_dir, formats=formats, ranks="all" if ranks is None else ranks,
                          analyses=analyses,
                          progress=False if options["quiet"] else None)
    if options["quiet"]:  # -q: no notes (the page says what was left out and why)
        report_failures(result.failures, strict)
        return
    for title, reason in result.unavailable.items():
        click.echo(f"note: {title} left out: {reason}", err=True)
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    n_files = sum(len(p) for p in result.figures.values())
    where = result.index or result.out_dir
    click.echo(f"wrote {where} ({n_files} figure files, {len(result.tables)} tables)")
    report_failures(result.failures, strict)
