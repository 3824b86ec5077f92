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


def _percent(df) -> list[str]:
    """``diff_pct`` as read: "new" where the base had none (not inf), "gone" where the test has
    none, "–" where both are 0."""
    base = next(c for c in df.columns if c.startswith("base_") and c.endswith("_us"))
    test = base.replace("base_", "test_")
    out = []
    for b, t, pct in zip(df[base], df[test], df["diff_pct"], strict=True):
        if b == 0 and t == 0:
            out.append("–")
        elif b == 0:
            out.append("new")
        elif t == 0:
            out.append("gone")
        else:
            out.append(f"{pct:+,.1f}")
    return out


# Short headers for the terminal (the CSVs and the page keep the DataFrame's names).
_HEADERS = {"base_count": "base n", "test_count": "test n", "base_time_us": "base µs",
            "test_time_us": "test µs", "diff_time_us": "Δ µs", "diff_pct": "Δ %",
            "base_us": "base µs", "test_us": "test µs", "diff_us": "Δ µs",
            "kernel_type": "type"}


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
    from analysis.cli import terminal
    from analysis.comparison import compare

    chosen = ranks
    comparison = compare(open_analysis(base, **options), open_analysis(test, **options),
                         ranks=chosen, min_change_pct=min_change_pct)
    lines = ["Step time by category (µs per profiler step)"]
    breakdown = comparison.breakdown()
    lines += terminal.listing(breakdown, shrink="category",
                              cells={"diff_pct": _percent(breakdown)}, headers=_HEADERS)
    for note in comparison.notes:
        lines += terminal.wrap(note, indent="      ", first="note: ")
    lines += ["", f"Operators, top {top} changes (exclusive GPU µs per step)"]
    ops = comparison.operators().head(top)
    shapes = ["input_dims", "input_types"] if (ops["input_dims"] != "").any() else []
    ops = ops[[_OPS_COLUMNS[0], *shapes, *_OPS_COLUMNS[1:]]].reset_index(drop=True)
    lines += terminal.listing(ops, shrink="operator", cells={"diff_pct": _percent(ops)}, headers=_HEADERS)
    lines += ["", f"Kernels, top {top} changes (µs per step)"]
    kernels = comparison.kernels().head(top)[_KERNEL_COLUMNS].reset_index(drop=True)
    lines += terminal.listing(kernels, shrink="name", cells={"diff_pct": _percent(kernels)}, headers=_HEADERS)
    click.echo("\n".join(lines))
    if out_dir:
        from analysis.reports.comparison import write_comparison_report

        result = write_comparison_report(comparison, out_dir, formats=formats, top=top)
        if not options["quiet"]:
            n_files = sum(len(p) for p in result.figures.values())
            click.echo(f"\nwrote {result.index or result.out_dir} ({n_files} figure files, "
                       f"{len(result.tables)} tables)")
