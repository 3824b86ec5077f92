"""``trace-analysis pyspy-report FILE...`` and ``trace-analysis flamegraph FILE... -o OUT``.

Both read ``py-spy record -f raw`` files (one per node, local or gs://) and call ``analysis.pyspy.samples``
and ``analysis.figures.flamegraph``; nothing is computed here.
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
@click.option("--library-name", default=None, help="Attribute samples to the deepest frame in this library (e.g. torch).")
@click.option("--aggregate-leaf-paths", is_flag=True, help="Merge rows with the same leaf and library function.")
@click.option("--num-rows", type=click.IntRange(min=1), default=20, show_default=True, help="Rows to print.")
@_ON_ERROR
def pyspy_report(files, library_name, aggregate_leaf_paths, num_rows, on_error) -> None:
    """Where the Python samples of py-spy raw FILES go: leaf function, library function, share."""
    from analysis.pyspy.samples import load_profiles
    from analysis.pyspy.samples import pyspy_report as report

    profiles = load_profiles(list(files), on_error=on_error)
    table = report(
        profiles, library_name=library_name, aggregate_leaf_paths=aggregate_leaf_paths, num_rows=num_rows
    )
    if len(profiles) == 1:
        table = table.drop(columns="file")
    table["samples_pctg"] = table["samples_pctg"].round(2)
    click.echo(table.to_string(index=False))
    total = sum(p.total_samples for p in profiles)
    skipped = sum(p.skipped_lines for p in profiles)
    note = f"{total} samples in {len(profiles)} file(s)"
    if skipped:
        note += f"; {skipped} malformed line(s) skipped"
    click.echo(note)


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
    """Flame graph of py-spy raw FILES (one root per file) written to OUTPUT."""
    from analysis.figures.export import IMAGE_FORMATS, ExportError, kaleido_server, quiet_kaleido
    from analysis.figures.flamegraph import flamegraph as draw
    from analysis.pyspy.samples import call_tree, load_profiles

    out = Path(output)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in (*IMAGE_FORMATS, "html"):
        raise click.BadParameter(f"{out.name}: use a .html, .svg, .png or .pdf file", param_hint="-o")
    fig = draw(call_tree(load_profiles(list(files), on_error=on_error)), min_width=min_width, title=title)
    try:
        if fmt == "html":
            # one self-contained file that opens offline (plotly.js embedded, ~4.8 MB)
            fig.write_html(out, include_plotlyjs=True)
        else:
            with kaleido_server(), quiet_kaleido():
                fig.write_image(out, format=fmt, width=fig.layout.width, height=fig.layout.height)
    except OSError as exc:
        raise ExportError(out, f"cannot write: {exc.strerror or exc}") from exc
    click.echo(f"wrote {out}")


commands = [pyspy_report, flamegraph]
