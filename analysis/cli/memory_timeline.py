"""``trace-analysis memory-timeline TRACES``: the memory view of traces recorded with
``profile_memory=True``: the peak allocated and reserved memory per rank and device, and with
``--operators N`` the operators that allocate most; ``--csv DIR`` writes the curve and the tables.

Parses the arguments and calls ``TraceAnalysis.get_memory_peaks`` / ``get_operator_memory`` /
``get_memory_timeline``; nothing is computed here.
"""

from __future__ import annotations

from pathlib import Path

import click

from analysis.cli.options import open_analysis, trace_loading_options

MIB = 2**20


def _size(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


@click.command("memory-timeline")
@click.argument("traces")
@click.option("--operators", "top", type=int, default=0, show_default=True,
              help="Also list the N operators per rank and device that allocate most.")
@click.option("--csv", "csv_dir", type=click.Path(file_okay=False), default=None,
              help="Write memory_timeline.csv, memory_peaks.csv and operator_memory.csv here.")
@trace_loading_options
def command(traces: str, top: int, csv_dir: str | None, **options) -> None:
    """Peak memory per rank and device of TRACES (a directory, a file or a gs:// URL) recorded
    with torch.profiler.profile(profile_memory=True), from their [memory] events."""
    ta = open_analysis(traces, **options)
    results = ta.run_many({"memory_peaks": {}, "operator_memory": {}, "memory_timeline": {}},
                          ranks="all")
    peaks = results["memory_peaks"]
    click.echo(f"{'rank':>4}  {'device':<7} {'peak allocated':>16} {'peak reserved':>15}  "
               f"{'at (ms from start)':>18}  step")
    timeline = results["memory_timeline"]
    starts = timeline.groupby("rank")["time_us"].min()
    for p in peaks.itertuples(index=False):
        since = (p.peak_time_us - starts.get(p.rank, p.peak_time_us)) / 1000
        step = "-" if p.step < 0 else str(p.step)
        click.echo(f"{p.rank:>4}  {p.device:<7} {_size(p.peak_allocated_bytes):>16} "
                   f"{_size(p.peak_reserved_bytes):>15}  {since:>18.3f}  {step}")
    ops = results["operator_memory"]
    if top > 0:
        ranked = ops.sort_values("self_allocation_bytes", ascending=False, kind="stable")
        for (rank, device), g in ranked.groupby(["rank", "device"], sort=True):
            click.echo(f"\nrank {rank} {device}: operators allocating most (self; calls)")
            for r in g.head(top).itertuples(index=False):
                calls = f"{r.calls} call" + ("s" if r.calls != 1 else "")
                click.echo(f"  {_size(r.self_allocation_bytes):>10}  {r.operator}  ({calls})")
    if csv_dir:
        from analysis.reports import write_tables

        out = Path(csv_dir)
        write_tables({"memory_timeline": timeline, "memory_peaks": peaks, "operator_memory": ops},
                     out)
        click.echo(f"\nwrote {out}/memory_timeline.csv, memory_peaks.csv, operator_memory.csv")
