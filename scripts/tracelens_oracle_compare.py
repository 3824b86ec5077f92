"""Compare our numbers with AMD's TraceLens, run live on Kineto traces of one's own.

For every Kineto trace under ``--traces``, runs TraceLens's report generator
(``TraceLens.Reporting.generate_perf_report_pytorch``) in its own venv (build it with
``scripts/make-tracelens-oracle-venv.sh``), keeps its CSVs under ``--out/<trace-id>/``, and prints
one line per trace comparing, in TraceLens's window (every profiler step:
``include_last_profiler_step=True``; TraceLens covers the whole trace, ``window="steps"`` keeps
traces without ProfilerStep whole too):

- ``gpu_timeline.csv``: total, idle and busy time against our temporal breakdown, computation
  against our computation ∪ memsets (TraceLens counts memsets as computation), in ms, 0.002 ms;
- ``ops_summary.csv``: each operator's ``total_direct_kernel_time_sum`` against our operator
  summary's ``gpu_self_us``, 0.01 µs.

What is known to differ, and why, is in docs/deviations.md (TraceLens): kernels launched by calls
Kineto names ``INVALID`` (no flow start: TraceLens loses them), an operator's kernel time as the
busy time of its kernels (overlapping kernels count once there), graph-launched kernels named
after ``cudaGraphLaunch``, collectives outside its operator tables. The script reports, it
does not judge.

Usage (the project's venv runs this file):
    VENV=$(scripts/make-tracelens-oracle-venv.sh PATH_TO_TRACELENS)
    .venv/bin/python scripts/tracelens_oracle_compare.py --traces DIR --out /tmp/tl [--venv $VENV]
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tb_oracle_snapshot import kineto_traces, trace_id  # noqa: E402

TIMELINE_MS = 0.002
OPERATOR_US = 0.01
DEFAULT_VENV = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / \
    "trace-analysis" / "venvs" / "tracelens"


def run_tracelens(venv: Path, trace: Path, out: Path, timeout: int) -> str | None:
    """TraceLens's CSVs for ``trace`` in ``out`` (kept from an earlier run); None, or why not."""
    if (out / "gpu_timeline.csv").is_file():
        return None
    out.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "TraceLens.Reporting.generate_perf_report_pytorch",
             "--profile_json_path", str(trace), "--output_csvs_dir", str(out)],
            capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"TraceLens ran past {timeout} s"
    (out / "tracelens.log").write_text(done.stdout + done.stderr)
    if not (out / "gpu_timeline.csv").is_file():
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return f"TraceLens wrote no gpu_timeline.csv ({last[0][:200]})"
    return None


def compare(trace: Path, out: Path) -> str:
    """One line: the timeline's differences and the operators that differ."""
    from analysis import TraceAnalysis
    from analysis.metrics.intervals import merge
    from analysis.metrics.kernel_types import classified_gpu_events

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ta = TraceAnalysis(trace_files={0: str(trace)}, use_cache=False, progress=False,
                           include_last_profiler_step=True, window="steps")
        row = ta.get_temporal_breakdown(visualize=False).iloc[0]
        gpu = classified_gpu_events(ta.trace[0], ta.patterns, ta.time_rounding)
        ours_ops = ta.get_operator_summary(top=None).set_index("name")["gpu_self_us"]
    ref = pd.read_csv(out / "gpu_timeline.csv").set_index("type")["time ms"]
    memset = gpu["name"].astype(str).str.startswith("Memset").to_numpy()
    as_tracelens = (gpu["kernel_type"] == "COMPUTATION").to_numpy() | memset
    s, e = merge(gpu["start"].to_numpy()[as_tracelens], gpu["end"].to_numpy()[as_tracelens])
    total, idle = row["kernel_time(us)"] / 1000, row["idle_time(us)"] / 1000
    ours = {"total_time": total, "idle_time": idle, "busy_time": total - idle,
            "computation_time": int((e - s).sum()) / 1e6}
    timeline = {k: round(v - ref[k], 4) for k, v in ours.items()
                if k in ref and not abs(v - ref[k]) <= TIMELINE_MS}
    differ, only_there = [], []
    ops = out / "ops_summary.csv"
    if ops.is_file():
        with open(ops, encoding="utf-8") as f:
            for r in csv.DictReader(f):
                theirs = float(r["total_direct_kernel_time_sum"])
                mine = float(ours_ops.get(r["name"], np.nan))
                if np.isnan(mine):
                    only_there.append(r["name"])
                elif not abs(mine - theirs) <= OPERATOR_US:
                    differ.append(f"{r['name']} {mine:.2f}/{theirs:.2f}")
    return (f"timeline {'equal' if not timeline else timeline} | operators: "
            f"{len(differ)} differ (ours/TraceLens µs) {differ[:4]}, "
            f"{len(only_there)} only in TraceLens {only_there[:4]}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True, help="TraceLens's CSVs, one folder per trace")
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per TraceLens run")
    a = ap.parse_args(argv)
    if not (a.venv / "bin" / "python").is_file():
        sys.exit(f"no TraceLens venv at {a.venv}: build it with scripts/make-tracelens-oracle-venv.sh")
    for trace in kineto_traces(a.traces):
        name = trace_id(trace, a.traces)
        out = a.out / name
        why = run_tracelens(a.venv, trace, out, a.timeout)
        try:
            line = why or compare(trace, out)
        except Exception as exc:  # a report, not a test: say what failed and go on
            line = f"ours failed: {type(exc).__name__}: {exc}"
        print(f"{name[:70]}: {line}", flush=True)


if __name__ == "__main__":
    main()
