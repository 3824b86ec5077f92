"""Serving iterations on a long serving trace (issue 32): how the iteration table, the operator
split and the iteration window scale with the number of iterations.

A synthetic vLLM-style trace (``analysis.testing.graph_traces.serving_events``: one batch
annotation and one graph launch per iteration, one prefill every eight iterations) of ``--n``
iterations is written to a temporary folder and opened (no cache); timed: the open (which cuts
the steady-state iteration window), ``get_inference_iterations()`` and ``get_operator_summary()``.

    nice -n 19 .venv/bin/python benchmarks/inference.py [--n 40000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40000, help="iterations (default 40000)")
    args = parser.parse_args()
    from analysis.api import TraceAnalysis
    from analysis.testing.graph_traces import serving_events

    phases = (["prefill"] + ["decode"] * 7) * (args.n // 8)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "serving.json"
        path.write_text(json.dumps({"traceEvents": serving_events(phases)}))
        times = {}
        t = time.perf_counter()
        ta = TraceAnalysis(trace_files={0: str(path)}, use_cache=False, progress=False)
        times["open (parse + iteration window)"] = time.perf_counter() - t
        t = time.perf_counter()
        table = ta.get_inference_iterations()
        times["get_inference_iterations"] = time.perf_counter() - t
        t = time.perf_counter()
        ta.get_operator_summary()
        times["get_operator_summary"] = time.perf_counter() - t
    print(f"{len(table):,} iterations, {path.name}")
    for what, s in times.items():
        print(f"  {what:36s} {s:6.2f} s")


if __name__ == "__main__":
    main()
