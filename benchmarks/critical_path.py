"""Critical path: HolisticTraceAnalysis 0.5.0 vs this package on the largest shared trace.

HTA 0.5.0's critical path needs pandas<3, so it runs in the oracle venv
(``scripts/make-hta-oracle-venv.sh`` → ``~/.cache/trace-analysis/venvs/hta-pandas2``) through
``tests/parity/hta_critical_path_oracle.py``; ours runs in a fresh process of this environment.
Both analyse the same profiler steps (HTA's default window: the last step left out), one
``critical_path_analysis`` call per step for HTA, one ``critical_path_rank`` over all steps for us.
Only the critical path is timed (not the trace load). Prints a Markdown table.

    .venv/bin/python benchmarks/critical_path.py [TRACE] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = REPO.parent / "shared/traces/hta/df_index_resolver/df_index_resolver.json.gz"
ORACLE = REPO / "tests/parity/hta_critical_path_oracle.py"


def hta_python() -> str:
    """The oracle venv's python (built on first use, outside the checkout)."""
    built = subprocess.run([str(REPO / "scripts" / "make-hta-oracle-venv.sh")], check=True,
                           capture_output=True, text=True)
    return built.stdout.strip().splitlines()[-1]

OURS = r"""
import json, sys, time
from pathlib import Path
from analysis.kineto.model import Trace
from analysis.kineto.parse import parse_trace_bytes
from analysis.kineto.window import profiler_step_window
from analysis.metrics.critical_path.critical_path import critical_path_rank
path = Path(sys.argv[1])
rt = parse_trace_bytes(path.read_bytes(), str(path))
rt = profiler_step_window(Trace({rt.rank: rt}))[rt.rank]
out = {}
for patterns in ("hta", "default"):
    t0 = time.perf_counter()
    one = critical_path_rank(rt, patterns=patterns, instance_id=0)
    t1 = time.perf_counter()
    every = critical_path_rank(rt, patterns=patterns)
    t2 = time.perf_counter()
    out[patterns] = {"one_s": t1 - t0, "all_s": t2 - t1, "steps": len(every),
                     "lengths": [g.path_length_us for g in every.values()],
                     "events": sum(len(g.graph.node_event) // 2 for g in every.values())}
print(json.dumps(out))
"""


def run_hta(python: str, trace: Path, instance: int) -> dict:
    done = subprocess.run([str(python), str(ORACLE), str(trace), "ProfilerStep", str(instance)],
                          check=True, capture_output=True, text=True)  # fmt: skip
    return json.loads(done.stdout)


def run_ours(trace: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", OURS, str(trace)], check=True,
                          capture_output=True, text=True, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})  # fmt: skip
    return json.loads(done.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    python = hta_python()
    ours = [run_ours(args.trace) for _ in range(args.runs)]
    steps = ours[0]["hta"]["steps"]
    hta = [[run_hta(python, args.trace, i) for i in range(steps)] for _ in range(args.runs)]
    hta_one = statistics.median(r[0]["critical_path_s"] for r in hta)
    hta_all = statistics.median(sum(x["critical_path_s"] for x in r) for r in hta)
    same = [x["breakdown_total"] for x in hta[0]] == ours[0]["hta"]["lengths"]
    print(f"{args.trace.name}: {steps} steps, {ours[0]['hta']['events']} events in the graphs; "
          f"median of {args.runs} runs; path lengths equal to HTA's: {same}\n")
    print("| critical path | HTA 0.5.0 (s) | ours, hta preset (s) | ratio | ours, default (s) | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, key, h in (("one step", "one_s", hta_one), (f"all {steps} steps", "all_s", hta_all)):
        o_h = statistics.median(r["hta"][key] for r in ours)
        o_d = statistics.median(r["default"][key] for r in ours)
        print(f"| {label} | {h:.2f} | {o_h:.3f} | {h / o_h:.1f}× | {o_d:.3f} | {h / o_d:.1f}× |")


if __name__ == "__main__":
    main()
