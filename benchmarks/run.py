"""Benchmark: HolisticTraceAnalysis 0.5.0 against this package on the same traces.

Usage (from the repository root; ``make bench`` runs the default)::

    .venv/bin/python benchmarks/run.py [--full] [--runs 3] [--datasets real-8 ...]
                                       [--no-hta] [--write-results] [--profile DATASET]

Every measurement is a fresh Python process (this file, ``_worker`` sub-command), so no run
inherits another's imports, caches or heap. For each dataset and each round the kinds run in
alternating order (HTA first in even rounds, ours first in odd ones) to spread drifting machine
load over both:

- ``hta``: ``hta.trace_analysis.TraceAnalysis(trace_dir)`` and its five analyses over all ranks.
- ``ours``: ``analysis.api.TraceAnalysis`` (``kernel_patterns="hta"``: the same numbers as HTA)
  with an empty cache directory, so the load parses every file and writes the cache, as a first
  open does; then the same five analyses.
- ``cached``: the same again in a new process, reading the cache the ``ours`` run just wrote
  (a second open).
- ``serial`` (one-file datasets only): ``ours`` with ``max_workers=1``, i.e. the file parsed in one
  process, to compare with the default, which decodes one file's chunks on every core.
- ``floor``: only read, decompress and JSON-decode each file with this package's own parser
  (``analysis.kineto.parse``'s msgspec decoder), in the same process pool the loader uses; no tables,
  no model, no analysis. The least any loader built on that decoder can take.

Times are wall clock inside the worker (``time.perf_counter``), imports excluded and reported
apart; end-to-end = constructing ``TraceAnalysis`` + the five analyses. Peak memory is the largest
*sum of RSS* over the worker and all its descendants (HTA's fork pool, our forkserver and its
workers), sampled every 50 ms with psutil from this process. That sum is what the issue asks for;
``getrusage(RUSAGE_CHILDREN)`` cannot give it (its ``ru_maxrss`` is the largest single process, not
a sum). A sum of RSS counts shared pages once per process (HTA's forked workers share the
parent's pages), so the sum of PSS (proportional set size, shared pages divided among sharers)
is sampled too, as the fairer figure; both are reported. Medians over the runs are shown.

Each record also carries the machine it ran on (``environment.machine_info()``: CPU, usable
cores, RAM, versions, commit, load), and each invocation first measures the start-up
(``environment.startup()``: ``trace-analysis --help`` and ``from analysis import TraceAnalysis`` as
whole processes, with ``-X importtime``). ``report.py`` turns the records into ``RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path[:0] = [str(REPO), str(BENCH_DIR)]

import datasets  # noqa: E402  (needs the path above)
import environment  # noqa: E402
import report  # noqa: E402

ANALYSES = report.ANALYSES
KINDS = ("hta", "ours", "cached", "floor", "serial")
SAMPLE_S = 0.05  # memory sampling period
RESULTS_MD = BENCH_DIR / "RESULTS.md"
RAW_JSON = datasets.DATA_DIR / "results.json"
NOTES_HEADING = "## Notes"


# --------------------------------------------------------------------------------- the workers
# Each runs in its own process and writes {"import": s, "load": s, <analysis>: s, "check": ...}.

def _five_analyses(ta, ranks, timings: dict) -> dict:
    calls = {
        "temporal": lambda: ta.get_temporal_breakdown(visualize=False),
        "idle": lambda: ta.get_idle_time_breakdown(ranks=ranks, visualize=False),
        "overlap": lambda: ta.get_comm_comp_overlap(visualize=False),
        "launch": lambda: ta.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False),
        "kernels": lambda: ta.get_gpu_kernel_breakdown(visualize=False),
    }
    out = {}
    for name, call in calls.items():
        t = time.perf_counter()
        try:
            out[name] = call()
        except Exception as exc:  # reported in the table as a failed analysis, not a crash
            timings.setdefault("failed", {})[name] = f"{type(exc).__name__}: {exc}"[:300]
            continue
        timings[name] = time.perf_counter() - t
    return out


def _check(results: dict) -> dict:
    """A few numbers both implementations must agree on, to catch a benchmark of wrong work."""
    check = {}
    if "temporal" in results:
        temporal = results["temporal"].sort_values("rank")
        check["ranks"] = [int(r) for r in temporal["rank"]]
        check["kernel_time_us"] = [float(v) for v in temporal["kernel_time(us)"]]
        check["idle_time_us"] = [float(v) for v in temporal["idle_time(us)"]]
    if "launch" in results:
        check["launches"] = sum(len(df) for df in results["launch"].values())
    if "idle" in results:
        check["idle_rows"] = len(results["idle"][0])
    return check


def worker_hta(data: Path, cache_dir: Path, timings: dict) -> dict:
    t = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis

    timings["import"] = time.perf_counter() - t
    t = time.perf_counter()
    ta = TraceAnalysis(trace_dir=str(data))
    timings["load"] = time.perf_counter() - t
    ranks = sorted(ta.t.traces)
    return _check(_five_analyses(ta, ranks, timings))


def worker_ours(data: Path, cache_dir: Path, timings: dict, max_workers: int | None = None) -> dict:
    t = time.perf_counter()
    from analysis.api import TraceAnalysis

    timings["import"] = time.perf_counter() - t
    t = time.perf_counter()
    ta = TraceAnalysis(
        trace_dir=str(data), kernel_patterns="hta", cache_dir=cache_dir, use_cache=True, progress=False,
        max_workers=max_workers,
    )
    timings["load"] = time.perf_counter() - t
    return _check(_five_analyses(ta, "all", timings))


def _decode_only(path: str) -> int:
    """Read, decompress and decode one file with the loader's own decoder; returns the events."""
    from analysis.kineto import parse

    # The parser's private stages on purpose: the same code the loader runs, minus the tables.
    text = parse._decompress(Path(path).read_bytes(), path)
    top = parse._decode_top(text, path)
    return len(parse._decode_events(top["traceEvents"], path))


def worker_floor(data: Path, cache_dir: Path, timings: dict) -> dict:
    t = time.perf_counter()
    from concurrent.futures import ProcessPoolExecutor

    from analysis.kineto import loader

    timings["import"] = time.perf_counter() - t
    files = [str(p) for p in sorted(data.iterdir()) if p.name.endswith((".json", ".gz"))]
    t = time.perf_counter()
    workers = min(loader._available_cpus(), len(files))
    if workers <= 1:
        events = sum(map(_decode_only, files))
    else:
        ctx = loader._pool_context(files)  # the loader's own choice of start method
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            events = sum(pool.map(_decode_only, files))
    timings["load"] = time.perf_counter() - t
    return {"events": events}


def worker_serial(data: Path, cache_dir: Path, timings: dict) -> dict:
    """A first open parsed in one process (``max_workers=1``), into a cache of its own."""
    with tempfile.TemporaryDirectory(dir=cache_dir.parent) as own_cache:
        return worker_ours(data, Path(own_cache), timings, max_workers=1)


WORKERS = {"hta": worker_hta, "ours": worker_ours, "cached": worker_ours, "floor": worker_floor,
           "serial": worker_serial}


def worker_main(kind: str, data: str, cache_dir: str, out: str) -> None:
    timings: dict[str, float] = {}
    check = WORKERS[kind](Path(data), Path(cache_dir), timings)
    failed = timings.pop("failed", {})
    Path(out).write_text(json.dumps({"timings": timings, "check": check, "failed": failed}))


# ------------------------------------------------------------------------------ measuring a run

class TreeMemory:
    """Peak of the summed RSS and PSS (bytes) of a process and all its descendants, and their CPU
    seconds (user + system, each process's last sample; a process's final < 50 ms can be missed).

    CPU time is sampled here rather than taken from ``getrusage(RUSAGE_CHILDREN)``, which counts
    only the descendants someone waited for: HTA's pool workers are, our forkserver's are not.
    """

    def __init__(self, pid: int):
        import psutil

        self._psutil = psutil
        self.root = psutil.Process(pid)
        self.peak_rss = 0
        self.peak_pss = 0
        self._cpu: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        ps = self._psutil
        while not self._stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except ps.Error:
                break
            rss = pss = 0
            for p in procs:
                try:
                    full = p.memory_full_info()  # Linux: reads smaps_rollup; has rss and pss
                    rss += full.rss
                    pss += full.pss
                    times = p.cpu_times()
                    self._cpu[p.pid] = times.user + times.system
                except ps.Error:
                    pass  # exited between listing and reading
            self.peak_rss = max(self.peak_rss, rss)
            self.peak_pss = max(self.peak_pss, pss)
            self._stop.wait(SAMPLE_S)

    @property
    def cpu_seconds(self) -> float:
        return sum(self._cpu.values())


def measure(kind: str, data: Path, cache_dir: Path, log_path: Path, profile: Path | None = None) -> dict:
    out = Path(tempfile.mkstemp(prefix=f"bench-{kind}-", suffix=".out", dir=datasets.DATA_DIR)[1])
    cmd = [sys.executable, str(Path(__file__).resolve()), "_worker", kind, str(data), str(cache_dir), str(out)]
    if profile is not None:
        pyspy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
        cmd = [pyspy, "record", "--subprocesses", "--format", "raw", "--rate", "50",
               "--output", str(profile), "--", *cmd]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, env=env, cwd=REPO)
        with TreeMemory(proc.pid) as mem:
            rc = proc.wait()
    wall = time.perf_counter() - start
    try:
        if rc != 0:
            raise SystemExit(f"{kind} run on {data} failed (exit {rc}); see {log_path}")
        result = json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)
    t = result["timings"]
    analyses = sum(t.get(a, 0.0) for a in ANALYSES)
    t.update(analyses=analyses, e2e=t["load"] + analyses, process=wall, cpu=mem.cpu_seconds)
    result.update(kind=kind, peak_rss_mib=mem.peak_rss / 2**20, peak_pss_mib=mem.peak_pss / 2**20)
    return result


def run_dataset(ds: datasets.Dataset, runs: int, kinds: list[str], log_path: Path, echo) -> list[dict]:
    data = datasets.ensure(ds, log=echo)
    machine = environment.machine_info()
    records = []
    for i in range(runs):
        cache_dir = Path(tempfile.mkdtemp(prefix=f"cache-{ds.name}-", dir=datasets.DATA_DIR))
        # ours then cached, always in that order (cached reads ours' cache); HTA before or after
        # serial (one parsing process) only where it differs from ours: one file, chunks in parallel
        order = [k for k in kinds if k != "hta" and (k != "serial" or ds.ranks == 1)]
        if "hta" in kinds:
            order = ["hta", *order] if i % 2 == 0 else [*order, "hta"]
        try:
            for kind in order:
                rec = measure(kind, data, cache_dir, log_path)
                rec.update(dataset=ds.name, round=i, load_avg=os.getloadavg()[0], time=time.time(),
                           machine=machine)
                records.append(rec)
                t = rec["timings"]
                for name, why in rec.get("failed", {}).items():
                    echo(f"  {ds.name} round {i} {kind}: {name} FAILED: {why}")
                echo(f"  {ds.name} round {i} {kind:6s} load {t['load']:7.2f} s  e2e {t['e2e']:7.2f} s  "
                     f"cpu {t['cpu']:7.2f} s  "
                     f"peak RSS {rec['peak_rss_mib']:7.0f} MiB  PSS {rec['peak_pss_mib']:7.0f} MiB")
        finally:
            shutil.rmtree(cache_dir, ignore_errors=True)
    return records


# -------------------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_worker"]:
        return worker_main(*argv[1:])
    p = argparse.ArgumentParser(description="Benchmark HTA 0.5.0 against this package.")
    p.add_argument("--full", action="store_true", help="add 64 ranks, 4 M events/rank and 8 × 1 M")
    p.add_argument("--runs", type=int, default=3, help="runs of each kind per dataset (default 3)")
    p.add_argument("--datasets", nargs="+", metavar="NAME", help=f"only these ({', '.join(datasets.BY_NAME)})")
    p.add_argument("--no-hta", action="store_true", help="skip HTA (only ours, cached and floor)")
    p.add_argument("--write-results", action="store_true", help=f"write the tables to {RESULTS_MD}")
    p.add_argument("--profile", metavar="DATASET",
                   help="instead: py-spy our first-open end-to-end on DATASET (raw stacks in .data/)")
    p.add_argument("--no-startup", action="store_true", help="skip the start-up measurement")
    p.add_argument("--from-json", action="store_true",
                   help=f"no runs: rebuild the report from the last run's {RAW_JSON.name}")
    args = p.parse_args(argv)
    datasets.DATA_DIR.mkdir(parents=True, exist_ok=True)
    log_path = datasets.DATA_DIR / "workers.log"

    def echo(msg: str) -> None:
        print(msg, flush=True)

    if args.profile:
        ds = datasets.BY_NAME[args.profile]
        data = datasets.ensure(ds, log=echo)
        out = datasets.DATA_DIR / f"profile-{ds.name}.txt"
        with tempfile.TemporaryDirectory(dir=datasets.DATA_DIR) as cache_dir:
            rec = measure("ours", data, Path(cache_dir), log_path, profile=out)
        echo(f"py-spy raw stacks: {out}; e2e {rec['timings']['e2e']:.2f} s under profiling")
        return None

    # results.json keeps the latest records of every dataset, so one dataset can be re-run alone
    saved = json.loads(RAW_JSON.read_text()) if RAW_JSON.exists() else []
    saved = saved if isinstance(saved, list) else []
    if not args.from_json:
        dsets = datasets.selected(args.full, args.datasets)
        kinds = [k for k in KINDS if not (args.no_hta and k == "hta")]
        command = " ".join(sys.argv[1:])
        replaced = {d.name for d in dsets} | (set() if args.no_startup else {report.STARTUP})
        kept = [r for r in saved if r["dataset"] not in replaced]
        fresh = []
        if not args.no_startup:
            runs = environment.STARTUP_RUNS
            fresh.append({"dataset": report.STARTUP, "kind": report.STARTUP, "runs": runs,
                          "startup": environment.startup(runs), "machine": environment.machine_info(),
                          "time": time.time(), "command": command})
            echo("  start-up: " + ", ".join(f"{k} {v['process_s']:.2f} s" for k, v in fresh[-1]["startup"].items()))
        for ds in dsets:
            for rec in run_dataset(ds, args.runs, kinds, log_path, echo):
                fresh.append({**rec, "command": command})
            RAW_JSON.write_text(json.dumps(kept + fresh, indent=1))
        saved = kept + fresh
    present = {r["dataset"] for r in saved}
    text = report.report(saved, [d for d in datasets.ALL if d.name in present])
    print("\n" + text)
    if args.write_results:
        # the hand-written analysis below NOTES_HEADING survives a rewrite of the tables
        old = RESULTS_MD.read_text() if RESULTS_MD.exists() else ""
        notes = old[old.index(NOTES_HEADING):] if NOTES_HEADING in old else ""
        RESULTS_MD.write_text(text + ("\n" + notes if notes else ""))
        echo(f"wrote {RESULTS_MD}")
    return None


if __name__ == "__main__":
    main()
