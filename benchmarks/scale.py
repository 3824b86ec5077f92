"""Scaling in ranks: ``trace-analysis summary`` then ``trace-analysis report`` on one dataset.

Usage (from the repository root)::

    .venv/bin/python benchmarks/scale.py DATA [DATA ...] [--json OUT.json]

DATA: a directory of traces, or the name of a dataset of ``datasets.py`` (built first if it is
not complete), e.g. issue 31's case ``synth-r64of512-e250k synth-r512-e250k``.

For each directory, three whole processes, in order, each measured like ``run.py``'s workers
(wall time from start to exit, peak *sum of RSS* and of PSS over the process and all its
descendants, sampled every 50 ms): ``summary`` with an empty cache directory (a first open: parse
and write the cache), ``report -f html`` (reading that cache) and ``summary`` again (cached).
Every command must exit 0. The 512-rank datasets: ``datasets.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path[:0] = [str(REPO), str(BENCH_DIR)]

import datasets  # noqa: E402
import environment  # noqa: E402
import run as run_py  # noqa: E402
from run import TreeMemory  # noqa: E402


def measure(cmd: list[str], log, max_rss: float | None = None) -> dict:
    """One whole process: wall time, CPU seconds and peak memory of its tree. With ``max_rss``
    (bytes), the tree is killed when its summed RSS goes above it (a shared machine)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, env=env, cwd=REPO)
    with TreeMemory(proc.pid) as mem:
        while (rc := proc.poll()) is None:
            if max_rss is not None and mem.peak_rss > max_rss:
                for child in [*mem.root.children(recursive=True), mem.root]:
                    with contextlib.suppress(Exception):
                        child.kill()
                rc = proc.wait()
                raise SystemExit(f"{' '.join(cmd)}: killed at {mem.peak_rss / 2**30:.1f} GiB "
                                 "of summed RSS (--max-rss-gib)")
            time.sleep(0.2)
    wall = time.perf_counter() - start
    print(f"  {cmd[3]}: {wall:.1f} s, {mem.peak_rss / 2**20:.0f} MiB", file=sys.stderr, flush=True)
    if rc != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {rc})")
    return {"process_s": wall, "cpu_s": mem.cpu_seconds,
            "peak_rss_mib": mem.peak_rss / 2**20, "peak_pss_mib": mem.peak_pss / 2**20}


STEPS = ("summary_first", "report_cached", "summary_cached")


def run(data: Path, log, max_rss: float | None = None, steps=STEPS) -> dict:
    cli = [sys.executable, "-c", "from analysis.cli import main; main()"]
    files = sorted(p for p in data.iterdir() if p.name.endswith((".json", ".gz")))
    out: dict = {"dataset": str(data), "files": len(files),
                 "disk_mb": sum(p.stat().st_size for p in files) / 1e6}
    with tempfile.TemporaryDirectory(prefix="scale-", dir=data.parent) as tmp:
        cache, report_dir = Path(tmp) / "cache", Path(tmp) / "report"
        common = ["--cache-dir", str(cache), "-q"]
        commands = {
            "summary_first": [*cli, "summary", str(data), *common],
            "report_cached": [*cli, "report", str(data), "-o", str(report_dir), "-f", "html",
                              *common],
            "summary_cached": [*cli, "summary", str(data), *common],
        }
        for step in STEPS:  # in this order: the first fills the cache the others read
            if step in steps or step == "summary_first":
                out[step] = measure(commands[step], log, max_rss)
        out["cache_mb"] = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) / 1e6
        shutil.rmtree(report_dir, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", nargs="+", help="a directory of traces or a dataset's name")
    p.add_argument("--json", type=Path, help="append the records to this JSON file")
    p.add_argument("--max-rss-gib", type=float, default=None,
                   help="kill a command whose process tree's summed RSS goes above this")
    p.add_argument("--sample-s", type=float, default=run_py.SAMPLE_S,
                   help="memory sampling period (default run.py's); reading every process's "
                        "smaps costs CPU that a long run on a busy machine may not spare")
    p.add_argument("--steps", default=",".join(STEPS),
                   help="which commands (summary_first always runs: it fills the cache)")
    args = p.parse_args(argv)
    steps = args.steps.split(",")
    run_py.SAMPLE_S = args.sample_s
    max_rss = None if args.max_rss_gib is None else args.max_rss_gib * 2**30
    records = []
    with open(BENCH_DIR / ".scale.log", "ab") as log:
        for name in args.data:
            data = Path(name)
            if not data.is_dir() and name in datasets.BY_NAME:
                data = datasets.ensure(datasets.BY_NAME[name], log=lambda m: print(m, file=sys.stderr))
            rec = run(data, log, max_rss, steps)
            rec["dataset_name"] = name
            rec.update(machine=environment.machine_info(), time=time.time(),
                       load_avg=os.getloadavg()[0])
            records.append(rec)
            print(json.dumps({k: v for k, v in rec.items() if k != "machine"}), flush=True)
    if args.json:
        old = json.loads(args.json.read_text()) if args.json.exists() else []
        args.json.write_text(json.dumps(old + records, indent=1))


if __name__ == "__main__":
    main()
