"""Static export: the report's figures as SVG through the package's renderer (kaleido's page kept
between figures, ``analysis.figures.export``) against plotly's ``write_image`` through kaleido's
sync server (a page reload after every figure: what export did before, and what a user's own
``kaleido.start_sync_server()`` still does), in the same run, alternating.

The figures are those of ``trace-analysis report sample_traces`` (``build_report``'s). Each pass starts its browser, renders every figure once, and stops it; the
browser's start is timed apart. CPU is the whole machine's (``/proc/stat``): Chromium renders in
processes of its own, which ``time``/RUSAGE_CHILDREN do not see. Best of ``--runs``.

    .venv/bin/python benchmarks/export.py [--runs 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (all processes), from /proc/stat."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq = map(int, f.readline().split()[1:8])
    return (user + nice + system + irq + softirq) / 100


def report_figures() -> dict:
    """The figures ``trace-analysis report sample_traces`` exports (the report's own builder)."""
    from analysis import TraceAnalysis
    from analysis.reports.content import build_report

    return build_report(TraceAnalysis(str(REPO / "sample_traces"), progress=False)).figures


def kaleido_server_pass(figures: dict, out: Path) -> tuple[float, float, float]:
    """(start, render wall, render CPU) through kaleido's sync server and plotly's write_image."""
    import kaleido

    b, t = busy_seconds(), time.perf_counter()
    kaleido.start_sync_server(mathjax=False, silence_warnings=True)
    # the server's browser starts on its thread: the first figure waits for it
    first, *rest = figures.items()
    first[1].write_image(out / f"{first[0]}.svg", format="svg", width=1100, height=550)
    start = time.perf_counter() - t
    b, t = busy_seconds(), time.perf_counter()
    for name, fig in rest:
        fig.write_image(out / f"{name}.svg", format="svg",
                        width=fig.layout.width or 1100, height=fig.layout.height or 550)
    wall, cpu = time.perf_counter() - t, busy_seconds() - b
    kaleido.stop_sync_server(silence_warnings=True)
    return start, wall, cpu


def renderer_pass(figures: dict, out: Path) -> tuple[float, float, float]:
    """(start, render wall, render CPU) through analysis.figures.export's renderer."""
    from analysis.figures.export import kaleido_server, write_image

    t = time.perf_counter()
    with kaleido_server():
        first, *rest = figures.items()
        write_image(first[1], out / f"{first[0]}.svg", "svg", 1100, 550)
        start = time.perf_counter() - t
        b, t = busy_seconds(), time.perf_counter()
        for name, fig in rest:
            write_image(fig, out / f"{name}.svg", "svg",
                        fig.layout.width or 1100, fig.layout.height or 550)
        wall, cpu = time.perf_counter() - t, busy_seconds() - b
    return start, wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    figures = report_figures()
    best: dict[str, list[tuple[float, float, float]]] = {"kaleido sync server": [],
                                                         "renderer": []}
    for _ in range(args.runs):
        for label, run in (("kaleido sync server", kaleido_server_pass),
                           ("renderer", renderer_pass)):
            with tempfile.TemporaryDirectory() as d:
                best[label].append(run(figures, Path(d)))
    n = len(figures) - 1
    print(f"{len(figures)} figures of the sample report; the {n} after the first, best of "
          f"{args.runs} (whole-machine CPU, Chromium included):")
    print("| path | browser start + first figure (s) | figures (s) | per figure (ms) | CPU (s) |")
    print("|---|---:|---:|---:|---:|")
    for label, runs in best.items():
        start = min(r[0] for r in runs)
        wall = min(r[1] for r in runs)
        cpu = min(r[2] for r in runs)
        print(f"| {label} | {start:.2f} | {wall:.2f} | {1000 * wall / n:.0f} | {cpu:.2f} |")
    old, new = (min(r[1] for r in runs) for runs in best.values())
    print(f"renderer / sync server, figures' wall time: {new / old:.2f}")


if __name__ == "__main__":
    main()
