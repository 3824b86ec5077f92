"""Time the readers of other profilers' files (``analysis.formats``): bytes in memory → ranks.

Uses the shared real files when present (``../shared/traces``: the 2.2 MB nsys SQLite export of 2
H100s, the XPlane of 8 MI300X planes, the 1.6 MB rocprofv3 JSON with 43,915 dispatches); without
them, a synthetic nsys export of about 2 MB (``analysis.testing.foreign``). Reports the best of
``RUNS`` parses per file (the reader only: no cache, no analyses). Usage::

    .venv/bin/python benchmarks/formats_bench.py [RUNS]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from analysis.formats import detect, parse_foreign
from analysis.testing.foreign import NsysCall, NsysGpuOp, NsysReport, write_nsys_sqlite

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"
FILES = [SHARED / "nsys" / "h100_2gpu_1s.sqlite", SHARED / "xplane" / "jax_conv_minimal.xplane.pb",
         SHARED / "rocprof" / "908_results.json.gz"]


def synthetic_nsys(path: Path, kernels: int = 30_000) -> None:
    """About 2 MB: ``kernels`` kernels on 2 GPUs of 2 processes, each with its launch call."""
    report = NsysReport()
    for i in range(kernels):
        pid, device = (10, 0) if i % 2 == 0 else (11, 1)
        start = 1_000_000 + i * 3_000
        report.gpu.append(NsysGpuOp(start, start + 2_000, device, 7 + i % 3, i, pid,
                                    name=f"kernel_{i % 50}<float, 128>"))
        report.cpu.append(NsysCall(start - 900, start - 400, pid, pid + 1,
                                   "cudaLaunchKernel_v7000", correlation=i))
    write_nsys_sqlite(path, report)


def best_of(data: bytes, source: str, runs: int) -> tuple[float, list]:
    fmt = detect(data[:4096], len(data))
    best, ranks = float("inf"), []
    for _ in range(runs):
        t0 = time.perf_counter()
        ranks = parse_foreign(data, source, fmt)
        best = min(best, time.perf_counter() - t0)
    return best, ranks


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with tempfile.TemporaryDirectory() as tmp:
        files = [f for f in FILES if f.exists()]
        if not files:
            files = [Path(tmp) / "synthetic.sqlite"]
            synthetic_nsys(files[0])
        for path in files:
            data = path.read_bytes()
            seconds, ranks = best_of(data, str(path), runs)
            events = sum(len(r.events) for r in ranks)
            print(f"{path.name:32s} {len(data) / 1e6:5.2f} MB  {len(ranks)} rank(s)  "
                  f"{events:7,d} rows  parse {seconds:6.3f} s (best of {runs})")


if __name__ == "__main__":
    main()
