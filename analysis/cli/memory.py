"""``trace-analysis memory SNAPSHOT -o OUT_DIR``: a CUDA memory snapshot (or an
``export_memory_timeline`` file) summarised in the terminal, with its figures and tables written.

Parses the arguments and calls ``analysis.reports.memory`` (``memory_report``, then
``write_memory_report``); nothing is computed here.
"""

from __future__ import annotations

import click


@click.command("memory")
@click.argument("snapshot")
@click.option("-o", "--out-dir", type=click.Path(file_okay=False), default=None,
              help="Write the figures (SVG + HTML) and tables (CSV) here.")
@click.option("--device", type=int, default=None,
              help="GPU index (default: the one holding the most reserved memory).")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="Allocation groups to list.")
@click.option("--format", "formats", multiple=True, default=("svg", "html"), show_default=True,
              type=click.Choice(["svg", "html", "png", "pdf"]), help="Figure formats (repeatable).")
def command(snapshot: str, out_dir: str | None, device: int | None, top: int, formats: tuple[str, ...]) -> None:
    """Peak GPU memory and what held it, from SNAPSHOT (torch.cuda.memory._dump_snapshot pickle,
    gzip ok, local or gs://). A memory timeline JSON from export_memory_timeline also works."""
    from analysis.reports.memory import memory_report, write_memory_report

    report = memory_report(snapshot, device=device, top=top)
    click.echo("\n".join(report.lines()))
    if out_dir is not None:
        click.echo(write_memory_report(report, out_dir, formats=formats).note())
