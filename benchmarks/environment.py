"""What a benchmark ran on, recorded as data, and the start-up cost of the package.

``machine_info()`` is stored with every record of ``results.json`` (CPU, cores usable by this
process, RAM, OS, Python, package versions, commit, load average), so a table can always say
which machine and code produced it. ``startup()`` measures what a user waits for before any work:
``trace-analysis --help`` and ``from analysis import TraceAnalysis`` as whole processes, their
import time from ``python -X importtime``, and which heavy modules each one imported.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("trace-analysis", "holistictraceanalysis", "pandas", "numpy", "pyarrow", "msgspec", "isal")
# modules a start-up should not import unless the command needs them (issue #19)
HEAVY_MODULES = ("plotly", "kaleido", "dask", "jinja2", "pyarrow.compute", "gcsfs", "fsspec", "pandas")
STARTUP_RUNS = 5

STARTUPS = {
    "trace-analysis --help": ["-m", "analysis", "--help"],
    "from analysis import TraceAnalysis": ["-c", "from analysis import TraceAnalysis"],
}


def machine_info() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = None
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                                    capture_output=True, text=True, check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = None, None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "ram_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "packages": versions,
        "commit": commit,
        "dirty": dirty,
        "load_avg_1min": os.getloadavg()[0],
    }


def _run(args: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], env=env, cwd=REPO, check=True, capture_output=True)
    return time.perf_counter() - start


def _imports(args: list[str], env: dict) -> tuple[float, set[str]]:
    """Import time of a command (s: the sum of the top-level cumulative times that
    ``python -X importtime`` prints) and the modules it imported."""
    done = subprocess.run([sys.executable, "-X", "importtime", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, check=True)
    total = 0
    imported = set()
    for line in done.stderr.splitlines():
        fields = line.removeprefix("import time:").split("|")
        if not line.startswith("import time:") or len(fields) != 3 or not fields[1].strip().isdigit():
            continue  # the header, or anything else on stderr
        name = fields[2]
        imported.add(name.strip())
        if len(name) - len(name.lstrip()) == 1:  # nested imports are indented further
            total += int(fields[1])
    return total / 1e6, imported


def startup(runs: int = STARTUP_RUNS) -> dict:
    """Per start-up: whole-process wall time (median of ``runs``), import time, heavy modules."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "ignore"}
    bare_imports, _ = _imports(["-c", "pass"], env)  # the interpreter's own (site, encodings)
    out = {"python -c pass": {"process_s": statistics.median(_run(["-c", "pass"], env) for _ in range(runs)),
                              "imports_s": bare_imports, "package_imports_s": 0.0, "heavy": []}}
    for label, args in STARTUPS.items():
        walls = [_run(args, env) for _ in range(runs)]
        imports, modules = _imports(args, env)
        out[label] = {"process_s": statistics.median(walls), "imports_s": imports,
                      "package_imports_s": max(0.0, imports - bare_imports),
                      "heavy": [m for m in HEAVY_MODULES if m in modules]}
    return out
