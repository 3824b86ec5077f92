"""``trace-analysis merge TRACES OUT``: every rank in one Chrome-trace JSON for Perfetto (gzipped
when OUT ends in ``.gz``).

Parses the arguments and calls ``analysis.kineto.merge.merge_traces``; nothing is computed here.
"""

from __future__ import annotations

import click

from analysis.cli.options import int_list, open_analysis, trace_loading_options


@click.command("merge")
@click.argument("traces")
@click.argument("out", type=click.Path(dir_okay=False))
@click.option("--ranks", default=None, callback=int_list, help="Ranks to keep, e.g. 0,1,7 (default all).")
@click.option("--steps", default=None, callback=int_list,
              help="ProfilerStep numbers to keep, e.g. 12,13 (default all).")
@click.option("--gpu-only", is_flag=True, help="Keep only the GPU processes.")
@click.option("--align", type=click.Choice(["none", "first_collective"]), default="none",
              show_default=True, help="Shift each rank's clock so the first collectives end together.")
@trace_loading_options
def command(traces: str, out: str, ranks, steps, gpu_only: bool, align: str, **options) -> None:
    """Merge the ranks of TRACES into OUT (a .json.gz to open in ui.perfetto.dev)."""
    from analysis.kineto.merge import merge_traces

    ta = open_analysis(traces, **options)
    sources = {r: meta.source for r, meta in ta.engine.metas.items()}
    done = merge_traces(sources, out, ranks=ranks, steps=steps, gpu_only=gpu_only,
                        align=None if align == "none" else align, storage_options=ta.storage_options)
    if not options["quiet"]:
        events = sum(d.events for d in done)
        click.echo(f"wrote {out}: {len(done)} rank{'s' * (len(done) != 1)}, {events} events")
