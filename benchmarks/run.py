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
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
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

ANALYSES = ("temporal", "idle", "overlap", "launch", "kernels")
KINDS = ("hta", "ours", "cached", "floor")
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


def worker_ours(data: Path, cache_dir: Path, timings: dict) -> dict:
    t = time.perf_counter()
    from analysis.api import TraceAnalysis

    timings["import"] = time.perf_counter() - t
    t = time.perf_counter()
    ta = TraceAnalysis(
        trace_dir=str(data), kernel_patterns="hta", cache_dir=cache_dir, use_cache=True, progress=False
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


WORKERS = {"hta": worker_hta, "ours": worker_ours, "cached": worker_ours, "floor": worker_floor}


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
    records = []
    for i in range(runs):
        cache_dir = Path(tempfile.mkdtemp(prefix=f"cache-{ds.name}-", dir=datasets.DATA_DIR))
        # ours then cached, always in that order (cached reads ours' cache); HTA before or after
        order = [k for k in kinds if k != "hta"]
        if "hta" in kinds:
            order = ["hta", *order] if i % 2 == 0 else [*order, "hta"]
        try:
            for kind in order:
                rec = measure(kind, data, cache_dir, log_path)
                rec.update(dataset=ds.name, round=i, load_avg=os.getloadavg()[0])
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


# ----------------------------------------------------------------------------------- reporting

def _median(records: list[dict], kind: str, key: str) -> float | None:
    values = [
        (r["timings"][key] if key in r["timings"] else r.get(key))
        for r in records
        if r["kind"] == kind
    ]
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _fmt(v: float | None, unit: str = "s") -> str:
    if v is None:
        return "–"
    return f"{v:.0f}" if unit == "MiB" else (f"{v:.3f}" if v < 1 else f"{v:.2f}")


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None or b == 0 else f"{a / b:.1f}×"


def dataset_table(ds: datasets.Dataset, records: list[dict]) -> list[str]:
    st = datasets.stats(ds.path)
    runs = max((r["round"] for r in records), default=-1) + 1
    lines = [
        f"### {ds.name}: {ds.description}",
        "",
        f"{st['files']} files, {st['json_mb']:.0f} MB of JSON ({st['disk_mb']:.0f} MB gzip); "
        f"median of {runs} runs per column.",
        "",
        "| phase | HTA 0.5.0 | ours (first open) | HTA / ours | ours (second open, cache) | HTA / cached |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    rows = [("load", "load"), *[(a, a) for a in ANALYSES], ("five analyses", "analyses"),
            ("**end-to-end**", "e2e"), ("import (not in end-to-end)", "import"),
            ("whole process (start to exit)", "process"), ("CPU time, whole process tree", "cpu")]
    for label, key in rows:
        h, o, c = (_median(records, k, key) for k in ("hta", "ours", "cached"))
        lines.append(f"| {label} (s) | {_fmt(h)} | {_fmt(o)} | {_ratio(h, o)} | {_fmt(c)} | {_ratio(h, c)} |")
    for label, key in (("peak memory, sum of RSS", "peak_rss_mib"), ("peak memory, sum of PSS", "peak_pss_mib")):
        h, o, c = (_median(records, k, key) for k in ("hta", "ours", "cached"))
        lines.append(f"| {label} (MiB) | {_fmt(h, 'MiB')} | {_fmt(o, 'MiB')} | {_ratio(h, o)} "
                     f"| {_fmt(c, 'MiB')} | {_ratio(h, c)} |")
    floor = _median(records, "floor", "load")
    ours_e2e, ours_load = _median(records, "ours", "e2e"), _median(records, "ours", "load")
    if floor is not None:
        lines += ["", f"Floor (read + decompress + msgspec decode only, same pool): {_fmt(floor)} s; "
                  f"ours end-to-end / floor = {_ratio(ours_e2e, floor)}, ours load / floor = "
                  f"{_ratio(ours_load, floor)}; in CPU seconds of the whole process tree, ours / floor = "
                  f"{_ratio(_median(records, 'ours', 'cpu'), _median(records, 'floor', 'cpu'))}; "
                  f"floor peak RSS {_fmt(_median(records, 'floor', 'peak_rss_mib'), 'MiB')} MiB."]
    checks = {r["kind"]: r["check"] for r in records if r["kind"] in ("hta", "ours", "cached")}
    if "hta" in checks and "ours" in checks:
        agree = _agree(checks["hta"], checks["ours"]) and _agree(checks["hta"], checks.get("cached", checks["ours"]))
        lines += ["", "Results agree with HTA (kernel and idle time per rank, launch and idle-row counts): "
                  + ("yes" if agree else f"**NO** (HTA {checks['hta']} vs ours {checks['ours']})")]
    failed = {f"{r['kind']}: {name}": why for r in records for name, why in r.get("failed", {}).items()}
    if failed:
        lines += ["", "**Failed analyses (left out of the sums above):**", ""]
        lines += [f"- {k}: `{v}`" for k, v in sorted(failed.items())]
    loads = [r["load_avg"] for r in records]
    lines += ["", f"1-minute load average during the runs: {min(loads):.1f}–{max(loads):.1f} (2 cores).", ""]
    return lines


def _agree(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    if any(a[k] != b[k] for k in ("ranks", "launches", "idle_rows") if k in a):
        return False
    pairs = zip(a.get("kernel_time_us", []) + a.get("idle_time_us", []),
                b.get("kernel_time_us", []) + b.get("idle_time_us", []), strict=True)
    return all(abs(x - y) <= 1e-6 * max(1.0, abs(x)) for x, y in pairs)


def targets(records: list[dict]) -> list[str]:
    """The issue's targets, on dataset (a) and the events sweep."""
    real = [r for r in records if r["dataset"] == datasets.REAL.name]
    med = lambda kind, key, rs=real: _median(rs, kind, key)  # noqa: E731
    lines = ["| target | measured | met |", "|---|---:|:---:|"]

    def row(label, value, ok):
        lines.append(f"| {label} | {value} | {'yes' if ok else '**no**'} |")

    h_e2e, o_e2e, floor = med("hta", "e2e"), med("ours", "e2e"), med("floor", "load")
    if h_e2e and o_e2e:
        row("end-to-end ≥ 15× faster than HTA", f"{h_e2e / o_e2e:.1f}×", h_e2e / o_e2e >= 15)
    h_cpu, o_cpu = med("hta", "cpu"), med("ours", "cpu")
    if h_cpu and o_cpu:
        lines.append(f"| (for reference) CPU seconds of the whole process tree, HTA / ours | "
                     f"{h_cpu / o_cpu:.1f}× | |")
    h_mem, o_mem = med("hta", "peak_rss_mib"), med("ours", "peak_rss_mib")
    if h_mem and o_mem:
        row("peak memory (sum of RSS) ≤ 0.4× HTA's", f"{o_mem / h_mem:.2f}×", o_mem / h_mem <= 0.4)
    h_pss, o_pss = med("hta", "peak_pss_mib"), med("ours", "peak_pss_mib")
    if h_pss and o_pss:
        row("peak memory (sum of PSS) ≤ 0.4× HTA's", f"{o_pss / h_pss:.2f}×", o_pss / h_pss <= 0.4)
    if o_e2e and floor:
        row("end-to-end ≤ 1.5× the floor", f"{o_e2e / floor:.2f}×", o_e2e / floor <= 1.5)
    h_load, c_load = med("hta", "load"), med("cached", "load")
    if h_load and c_load:
        row("second open (cache) ≥ 50× faster than HTA's load", f"{h_load / c_load:.0f}×", h_load / c_load >= 50)
    for small, big in (("synth-r1-e250k", "synth-r1-e1m"), ("synth-r1-e1m", "synth-r1-e4m")):
        a = [r for r in records if r["dataset"] == small]
        b = [r for r in records if r["dataset"] == big]
        if not a or not b:
            continue
        events = datasets.BY_NAME[big].events_per_rank / datasets.BY_NAME[small].events_per_rank
        for what, key in (("time (end-to-end)", "e2e"), ("memory (sum of RSS)", "peak_rss_mib")):
            x, y = _median(a, "ours", key), _median(b, "ours", key)
            if x and y:
                row(f"{events:.0f}× events ({small} → {big}): {what} ≤ 4.4×", f"{y / x:.2f}×", y / x <= 4.4)
    return lines


def machine() -> list[str]:
    from importlib.metadata import version

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    pkgs = ["trace-analysis", "holistictraceanalysis", "pandas", "numpy", "pyarrow", "msgspec", "isal"]
    versions = ", ".join(f"{p} {version(p)}" for p in pkgs)
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return [
        f"- Date: {dt.datetime.fromtimestamp(RAW_JSON.stat().st_mtime).strftime('%Y-%m-%d %H:%M')}",
        f"- Machine: {cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, {platform.platform()}",
        f"- Python {platform.python_version()}; {versions}; repo commit {commit} (plus working tree)",
    ]


def report(records: list[dict], dsets: list[datasets.Dataset]) -> str:
    loads = [r["load_avg"] for r in records]
    commands = dict.fromkeys(r.get("command", "") for r in records)
    lines = ["# Benchmark results", "", *machine(),
             "- Commands: " + ", ".join(f"`.venv/bin/python benchmarks/run.py{' ' + c if c else ''}`"
                                        for c in commands),
             f"- Machine load: 1-minute load average {min(loads):.1f}–{max(loads):.1f} on 2 cores during "
             "the runs (other jobs shared the machine: wall times are inflated, CPU seconds much less so)",
             "",
             "## Targets (dataset real-8 unless stated)", "", *targets(records), "",
             "## Per dataset", ""]
    for ds in dsets:
        rs = [r for r in records if r["dataset"] == ds.name]
        if rs:
            lines += dataset_table(ds, rs)
    return "\n".join(lines) + "\n"


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
        kept = [r for r in saved if r["dataset"] not in {d.name for d in dsets}]
        fresh = []
        for ds in dsets:
            for rec in run_dataset(ds, args.runs, kinds, log_path, echo):
                fresh.append({**rec, "command": command})
            RAW_JSON.write_text(json.dumps(kept + fresh, indent=1))
        saved = kept + fresh
    present = {r["dataset"] for r in saved}
    text = report(saved, [d for d in datasets.ALL if d.name in present])
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
