"""``trace-analysis compare BASE TEST``: what changed between two runs, as terminal tables and,
with ``-o OUT_DIR``, a report folder (index.html, SVG figures, CSV tables).

Parses the arguments and calls ``analysis.comparison.compare`` and
``analysis.reports.comparison.write_comparison_report``; nothing is computed here.
"""

from __future__ import annotations

import click

from analysis.cli.options import int_list, open_analysis, trace_loading_options
from analysis.cli.report import _formats

_OPS_COLUMNS = ["operator", "base_count", "test_count", "base_time_us", "test_time_us",
                "diff_time_us", "diff_pct", "change"]
_KERNEL_COLUMNS = ["kernel_type", "name", "base_time_us", "test_time_us", "diff_time_us",
                   "diff_pct", "change"]


@click.command("compare")
@click.argument("base")
@click.argument("test")
@click.option("-o", "--output", "out_dir", default=None, type=click.Path(file_okay=False),
              help="Also write index.html, figures/ and tables/ into this directory.")
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=1),
              help="Operators and kernels shown (largest time changes first).")
@click.option("--ranks", default=None, callback=int_list,
              help="Ranks to compare, e.g. 0,3 (default: every rank loaded in both runs).")
@click.option("--min-change-pct", default=5.0, show_default=True, type=click.FloatRange(min=0),
              help="Changes smaller than this % of the base time count as unchanged (noise).")
@click.option("-f", "--format", "formats", multiple=True, callback=_formats,
              help="Outputs with -o: html, svg, png, pdf. Default: html,svg.")
@trace_loading_options
def command(base: str, test: str, out_dir: str | None, top: int, ranks: list[int] | None,
            min_change_pct: float, formats: tuple[str, ...], **options) -> None:
    """Compare run TEST with run BASE (directories, files or gs:// URLs), per profiler step."""
    import pandas as pd

    from analysis.comparison import compare

    chosen = ranks
    comparison = compare(open_analysis(base, **options), open_analysis(test, **options),
                         ranks=chosen, min_change_pct=min_change_pct)
    with pd.option_context("display.max_colwidth", 60, "display.width", 200,
                           "display.float_format", "{:,.2f}".format):
        click.echo("Step time by category (µs per profiler step)")
        click.echo(comparison.breakdown().to_string(index=False, max_colwidth=70))
        for note in comparison.notes:
            click.echo(f"note: {note}")
        click.echo(f"\nOperators, top {top} changes (exclusive GPU µs per step)")
        ops = comparison.operators().head(top)
        shapes = ["input_dims", "input_types"] if (ops["input_dims"] != "").any() else []
        ops = ops[[_OPS_COLUMNS[0], *shapes, *_OPS_COLUMNS[1:]]]
        click.echo(ops.to_string(index=False, max_colwidth=70))
        click.echo(f"\nKernels, top {top} changes (µs per step)")
        kernels = comparison.kernels().head(top)[_KERNEL_COLUMNS]
        click.echo(kernels.to_string(index=False, max_colwidth=70))
    if out_dir:
        from analysis.reports.comparison import write_comparison_report

        result = write_comparison_report(comparison, out_dir, formats=formats, top=top)
        if not options["quiet"]:
            n_files = sum(len(p) for p in result.figures.values())
            click.echo(f"\nwrote {result.index or result.out_dir} ({n_files} figure files, "
                       f"{len(result.tables)} tables)")
