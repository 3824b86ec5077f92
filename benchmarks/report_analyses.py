"""What a report's analyses cost on the 8-rank real benchmark, and which of them cost most.

Each measurement is a fresh Python process on dataset ``real-8`` (``benchmarks/datasets.py``):
open the traces from a cache directory (parsed there once, before the first measurement) with
the analyses' stored parts removed, so every analysis is computed, then run what
``trace-analysis report`` runs (``analysis.reports.content.report_requests``: every section, the
context tables, the steps) in one ``run_many`` over all ranks. Timed: the wall time and the main
process's CPU time of that call (the open is not included), and, per analysis, the time of its
rank steps and of its combine step (a rank step several analyses share is counted once, for
the first that runs it).

``--against PATH`` measures the package at PATH too (another checkout, e.g. ``git worktree add
/tmp/old HEAD~3``), alternating with this one run by run, and prints the ratio of the two in
each run: comparisons on a shared machine are only fair within a run.

    nice -n 19 .venv/bin/python benchmarks/report_analyses.py [--runs 3] [--against PATH]
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

import datasets  # noqa: E402


def _timed_steps(catalogue) -> dict[str, float]:
    """Wrap every analysis's rank and combine steps to sum their wall time per analysis; a step
    shared by several analyses is wrapped once (the catalogue's sharing is kept)."""
    spent: dict[str, float] = {}
    wrapped: dict = {}

    def wrap(func, label):
        if func in wrapped:
            return wrapped[func]

        @functools.wraps(func)
        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.perf_counter() - t

        wrapped[func] = timed
        return timed

    for name, spec in catalogue.specs.items():
        if spec.rank_step is not None:
            object.__setattr__(spec, "rank_step", wrap(spec.rank_step, name))
        if spec.combine is not None:
            object.__setattr__(spec, "combine", wrap(spec.combine, f"{name} (combine)"))
    if hasattr(catalogue, "shared_steps"):
        catalogue.shared_steps = frozenset(wrapped.get(f, f) for f in catalogue.shared_steps)
    return spent


def worker(package: str, data: str, cache_dir: str) -> None:
    sys.path.insert(0, package)
    import warnings

    import analysis
    from analysis.analyses import CATALOGUE
    from analysis.api import TraceAnalysis
    from analysis.reports import content

    assert Path(analysis.__file__).resolve().is_relative_to(Path(package).resolve()), analysis.__file__
    spent = _timed_steps(CATALOGUE)
    if hasattr(content, "report_requests"):
        requests = content.report_requests()
    else:  # a checkout from before report_requests: what its build_report ran
        always = [n for n, s in CATALOGUE.specs.items() if s.placement in ("context", "lead")]
        requests = {n: dict(CATALOGUE.specs[n].report_options)
                    for n in always + CATALOGUE.section_names()}
        requests.setdefault("profiler_steps", {})
    ta = TraceAnalysis(trace_dir=data, kernel_patterns="hta", cache_dir=cache_dir, progress=False)
    failures: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, c = time.perf_counter(), time.process_time()
        ta.run_many(requests, "all", errors="return", failures=failures)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
    print(json.dumps({"wall": wall, "cpu": cpu, "analyses": len(requests),
                      "failures": len(failures), "steps": spent}))


def measure(package: Path, data: Path, cache_dir: Path) -> dict:
    for stored in cache_dir.glob("*/results"):
        shutil.rmtree(stored)
    done = subprocess.run(
        [sys.executable, __file__, "--worker", str(package), str(data), str(cache_dir)],
        capture_output=True, text=True, check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--against", type=Path, help="another checkout to measure in the same runs")
    ap.add_argument("--top", type=int, default=12, help="analyses listed by their time")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        worker(*a.worker)
        return
    data = datasets.ensure(datasets.REAL)
    packages = {"this": REPO} | ({"against": a.against.resolve()} if a.against else {})
    caches = {k: Path(tempfile.mkdtemp(prefix="report-bench-")) for k in packages}
    rows: dict[str, list[dict]] = {k: [] for k in packages}
    try:
        for k, package in packages.items():  # parse into each cache once (not measured)
            measure(package, data, caches[k])
        for run in range(a.runs):
            for k, package in packages.items():
                r = measure(package, data, caches[k])
                rows[k].append(r)
                print(f"run {run} {k:7}: wall {r['wall']:.2f} s, CPU {r['cpu']:.2f} s "
                      f"({r['analyses']} analyses, {r['failures']} failures)", flush=True)
            if a.against:
                print(f"run {run} against / this: wall "
                      f"{rows['against'][-1]['wall'] / rows['this'][-1]['wall']:.2f}×, CPU "
                      f"{rows['against'][-1]['cpu'] / rows['this'][-1]['cpu']:.2f}×", flush=True)
    finally:
        for cache in caches.values():
            shutil.rmtree(cache, ignore_errors=True)
    for k in packages:
        print(f"{k}: median wall {statistics.median(r['wall'] for r in rows[k]):.2f} s, "
              f"CPU {statistics.median(r['cpu'] for r in rows[k]):.2f} s over {a.runs} runs")
        steps: dict[str, list[float]] = {}
        for r in rows[k]:
            for name, s in r["steps"].items():
                steps.setdefault(name, []).append(s)
        ranked = sorted(steps.items(), key=lambda kv: -statistics.median(kv[1]))
        for name, s in ranked[: a.top]:
            print(f"    {statistics.median(s):6.2f} s  {name}")


if __name__ == "__main__":
    main()
