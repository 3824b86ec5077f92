"""What the TensorBoard views add to the five analyses on the 8-rank real benchmark (issue 25).

Each measurement is a fresh Python process on dataset ``real-8`` (8 × the 54 MB df_index_resolver
trace; ``benchmarks/datasets.py``): open the traces (``kernel_patterns="hta"``, the cache directory
given), run the five analyses of ``run.py``, then the TensorBoard views — the GPU summary, the step
time breakdown, the kernel table and the utilization timeline (which read the ``kernel_args``
extra), and the memory views (``memory_events``, decoded only for them). Timed per group; the
ratio "new / five" is what the issue bounds (15 %). Three passes: ``cold`` (an empty cache: the
files are parsed, ``kernel_args`` with them, the views computed), ``cached`` (the second open:
parsed traces come from the cache, and so do the views' per-rank parts, kept in the cache entry
by the first pass: ``Analysis.persist``) and ``first-ask`` (parsed traces from the cache, but
the stored parts removed: what asking for the views costs on a trace opened before).

    nice -n 19 .venv/bin/python benchmarks/tensorboard.py [--runs 3]

``--cpu N`` measures instead, in one process, the CPU time per rank of the five analyses and of
the GPU views' first ask (best of N): steadier than wall time on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import datasets  # noqa: E402

GPU_VIEWS = ("gpu_summary", "step_time_breakdown", "kernel_table", "gpu_utilization_timeline")
MEMORY_VIEWS = ("memory_timeline", "memory_peaks", "operator_memory", "memory_events")


def worker(data: str, cache_dir: str) -> None:
    from analysis.api import TraceAnalysis

    out: dict[str, float] = {}
    t = time.perf_counter()
    ta = TraceAnalysis(trace_dir=data, kernel_patterns="hta", cache_dir=cache_dir, progress=False)
    out["load"] = time.perf_counter() - t
    t = time.perf_counter()
    ta.get_temporal_breakdown(visualize=False)
    ta.get_idle_time_breakdown(ranks="all", visualize=False)
    ta.get_comm_comp_overlap(visualize=False)
    ta.get_cuda_kernel_launch_stats(ranks="all", visualize=False)
    ta.get_gpu_kernel_breakdown(visualize=False)
    out["five"] = time.perf_counter() - t
    t = time.perf_counter()
    ta.run_many({name: {} for name in GPU_VIEWS}, ranks="all")
    out["gpu_views"] = time.perf_counter() - t
    t = time.perf_counter()
    ta.run_many({name: {} for name in MEMORY_VIEWS}, ranks="all")
    out["memory_views"] = time.perf_counter() - t
    print(json.dumps(out))


def cpu_per_rank(data: str, cache_dir: str, repeat: int) -> None:
    """CPU seconds per rank, in this process (steadier than wall time on a shared machine): the
    five analyses, then the GPU views asked for the first time (their stored parts removed),
    each on a fresh open of the cached traces; the best of ``repeat``."""
    from analysis.api import TraceAnalysis

    best = {"five": float("inf"), "gpu_views": float("inf")}
    for _ in range(repeat):
        for stored in Path(cache_dir).glob("*/results"):
            shutil.rmtree(stored)
        ta = TraceAnalysis(trace_dir=data, kernel_patterns="hta", cache_dir=cache_dir,
                           progress=False)
        ranks = len(ta.ranks)
        t = time.process_time()
        ta.get_temporal_breakdown(visualize=False)
        ta.get_idle_time_breakdown(ranks="all", visualize=False)
        ta.get_comm_comp_overlap(visualize=False)
        ta.get_cuda_kernel_launch_stats(ranks="all", visualize=False)
        ta.get_gpu_kernel_breakdown(visualize=False)
        best["five"] = min(best["five"], (time.process_time() - t) / ranks)
        t = time.process_time()
        ta.run_many({name: {} for name in GPU_VIEWS}, ranks="all")
        best["gpu_views"] = min(best["gpu_views"], (time.process_time() - t) / ranks)
    print(f"CPU per rank, first ask (best of {repeat}): five analyses "
          f"{1000 * best['five']:.1f} ms, GPU views {1000 * best['gpu_views']:.1f} ms "
          f"({100 * best['gpu_views'] / best['five']:.0f} % of the five)")


def measure(data: Path, cache_dir: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, __file__, "--worker", str(data), str(cache_dir)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cpu", type=int, metavar="REPEAT", default=0,
                    help="instead: CPU time per rank of the five analyses and of the GPU views "
                         "asked for the first time, in one process, best of REPEAT")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        worker(*a.worker)
        return
    data = datasets.ensure(datasets.REAL)
    if a.cpu:
        cache = Path(tempfile.mkdtemp(prefix="tb-bench-"))
        try:
            measure(data, cache)  # parses the traces into the cache
            cpu_per_rank(str(data), str(cache), a.cpu)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        return
    rows = []
    for run in range(a.runs):
        cache = Path(tempfile.mkdtemp(prefix="tb-bench-"))
        try:
            for kind in ("cold", "cached", "first-ask"):
                if kind == "first-ask":  # the views' stored parts gone, the parsed traces kept
                    for stored in cache.glob("*/results"):
                        shutil.rmtree(stored)
                r = measure(data, cache)
                r |= {"kind": kind, "run": run}
                rows.append(r)
                print(json.dumps(r), flush=True)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    for kind in ("cold", "cached", "first-ask"):
        mine = [r for r in rows if r["kind"] == kind]
        best = {k: min(r[k] for r in mine) for k in ("load", "five", "gpu_views", "memory_views")}
        print(f"{kind:9}: load {best['load']:.2f} s, five analyses {best['five']:.2f} s, "
              f"GPU views {best['gpu_views']:.2f} s ({100 * best['gpu_views'] / best['five']:.0f} % "
              f"of the five), memory views {best['memory_views']:.2f} s "
              f"({100 * best['memory_views'] / best['five']:.0f} %)  [best of {len(mine)}]")


if __name__ == "__main__":
    main()
