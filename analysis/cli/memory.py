"""``trace-analysis memory SNAPSHOT -o OUT_DIR``: a CUDA memory snapshot (or an
``export_memory_timeline`` file) summarised in the terminal, with its figures and tables written."""

from __future__ import annotations

import click

_TIMELINE_SUFFIXES = (".json", ".json.gz", ".raw.gz")


@click.command("memory")
@click.argument("snapshot")
@click.option("-o", "--out-dir", type=click.Path(file_okay=False), default=None,
              help="Write the figures (SVG + HTML) and tables (CSV) here.")
@click.option("--device", type=int, default=None, help="GPU index (default: the one with most events).")
@click.option("--top", type=int, default=10, show_default=True, help="Allocation groups to list.")
@click.option("--format", "formats", multiple=True, default=("svg", "html"), show_default=True,
              type=click.Choice(["svg", "html", "png", "pdf"]), help="Figure formats (repeatable).")
def command(snapshot: str, out_dir: str | None, device: int | None, top: int, formats: tuple[str, ...]) -> None:
    """Peak GPU memory and what held it, from SNAPSHOT (torch.cuda.memory._dump_snapshot pickle,
    gzip ok, local or gs://). A memory timeline JSON from export_memory_timeline also works."""
    if snapshot.endswith(_TIMELINE_SUFFIXES):
        _timeline(snapshot, out_dir, formats)
        return
    from analysis.figures.memory import snapshot_timeline_figure, top_allocations_table
    from analysis.memory import (
        allocated_by_frame,
        allocations_at_peak,
        load_snapshot,
        memory_peak,
        oom_events,
        replay_snapshot,
        segment_fragmentation,
    )

    data = load_snapshot(snapshot)
    replay = replay_snapshot(data, device=device, source=snapshot)
    peak = memory_peak(replay)
    at_peak = allocations_at_peak(replay, top=top)
    ooms = oom_events(data, replay)
    row = peak.iloc[0]
    click.echo(f"{snapshot} (device {replay.device}, {int(row['events']):,} events in the buffer)")
    click.echo(f"peak allocated: {row['peak_allocated_mib']:,.1f} MiB at {_when(row, 'allocated')}")
    click.echo(f"peak reserved:  {row['peak_reserved_mib']:,.1f} MiB at {_when(row, 'reserved')}")
    click.echo(f"at the snapshot: {row['allocated_at_snapshot_bytes'] / 2**20:,.1f} MiB allocated, "
               f"{row['reserved_at_snapshot_bytes'] / 2**20:,.1f} MiB reserved")
    if len(ooms):
        click.echo(f"out-of-memory events: {len(ooms)} (first asked for "
                   f"{ooms['requested_bytes'].iat[0] / 2**20:,.1f} MiB)")
    click.echo("top allocations at the peak:")
    click.echo(at_peak[["frame", "allocations", "mib", "share_pct"]].round(2).to_string(index=False))
    if out_dir is None:
        return
    from pathlib import Path

    from analysis.figures.export import export_figures

    out = Path(out_dir)
    figures = {
        "memory_timeline": snapshot_timeline_figure(allocated_by_frame(replay, top=top), replay.timeline,
                                                    peak, at_peak),
        "memory_top_allocations": top_allocations_table(at_peak),
    }
    export_figures(figures, out, formats=formats)
    tables = {
        "memory_peak": peak, "memory_top_allocations": at_peak, "memory_timeline": replay.timeline,
        "memory_allocations": replay.allocations, "memory_ooms": ooms,
        "memory_segments": segment_fragmentation(data, replay.device),
    }
    for name, table in tables.items():
        table.to_csv(out / f"{name}.csv", index=False)
    click.echo(f"wrote {len(figures)} figures and {len(tables)} tables to {out}")


def _when(row, what: str) -> str:
    event = int(row[f"peak_{what}_event"])
    where = "the start of the buffer" if event < 0 else f"event {event}"
    t = row[f"peak_{what}_time_us"]
    return where if t != t else f"{where} (time_us {t:,.0f})"  # NaN: the snapshot has no times


def _timeline(path: str, out_dir: str | None, formats: tuple[str, ...]) -> None:
    from analysis.figures.memory import memory_timeline_figure
    from analysis.memory import load_memory_timeline, memory_timeline_peak

    timeline = load_memory_timeline(path)
    peak = memory_timeline_peak(timeline)
    click.echo(f"{path}: {len(timeline):,} moments")
    if len(peak):
        p = peak.iloc[0]
        cats = ", ".join(f"{c} {p[c] / 2**20:,.1f}" for c in peak.columns[1:-1] if p[c])
        click.echo(f"peak: {p['total_bytes'] / 2**20:,.1f} MiB at time_ns {int(p['time_ns'])} ({cats} MiB)")
    if out_dir is None:
        return
    from pathlib import Path

    from analysis.figures.export import export_figures

    out = Path(out_dir)
    export_figures({"memory_categories": memory_timeline_figure(timeline)}, out, formats=formats)
    timeline.to_csv(out / "memory_categories.csv", index=False)
    click.echo(f"wrote the figure and the table to {out}")
