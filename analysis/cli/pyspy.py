"""``trace-analysis pyspy-report FILE...`` and ``trace-analysis flamegraph FILE... -o OUT``.

Both read ``py-spy record -f raw`` or ``-f speedscope`` files (one per node, local or gs://): they parse the arguments and
call ``analysis.reports.pyspy`` (``samples_report``, ``write_flamegraph``); nothing is computed here.
"""

from __future__ import annotations

from pathlib import Path

import click

_ON_ERROR = click.option(
    "--on-error",
    type=click.Choice(["raise", "skip"]),
    default="raise",
    show_default=True,
    help="Stop at the first malformed line, or skip such lines (the count is printed).",
)


@click.command("pyspy-report")
@click.argument("files", nargs=-1, required=True)
@click.option("--library-name", default=None, help="Attribute samples to the deepest frame in this library (e.g. torch); a stack "
              "with no frame in it reads 'not found' (line -1).")
@click.option("--aggregate-leaf-paths", is_flag=True, help="Merge rows with the same leaf and library function.")
@click.option("--num-rows", type=click.IntRange(min=1), default=20, show_default=True, help="Rows to print.")
@_ON_ERROR
def pyspy_report(files, library_name, aggregate_leaf_paths, num_rows, on_error) -> None:
    """Where the Python samples of py-spy FILES (raw or speedscope) go: leaf function, library function, share."""
    from analysis.reports.pyspy import samples_report

    report = samples_report(files, library_name=library_name,
                            aggregate_leaf_paths=aggregate_leaf_paths, num_rows=num_rows,
                            on_error=on_error)
    click.echo("\n".join(report.lines()))


@click.command("flamegraph")
@click.argument("files", nargs=-1, required=True)
@click.option(
    "-o", "--output", required=True, type=click.Path(dir_okay=False),
    help="Output file: .html (interactive), .svg, .png or .pdf.",
)
@click.option("--min-width", type=click.FloatRange(0, 1), default=0.005, show_default=True,
              help="Leave out frames with less than this fraction of the samples.")
@click.option("--title", default=None, help="Figure title.")
@_ON_ERROR
def flamegraph(files, output, min_width, title, on_error) -> None:
    """Flame graph of py-spy FILES (raw or speedscope; one root per file) written to OUTPUT."""
    from analysis.reports.pyspy import FLAMEGRAPH_FORMATS, write_flamegraph

    out = Path(output)
    if out.suffix.lower().lstrip(".") not in FLAMEGRAPH_FORMATS:
        raise click.BadParameter(f"{out.name}: use a .html, .svg, .png or .pdf file", param_hint="-o")
    click.echo(f"wrote {write_flamegraph(files, out, min_width=min_width, title=title, on_error=on_error)}")


commands = [pyspy_report, flamegraph]
