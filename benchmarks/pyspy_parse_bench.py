"""Time reading a large py-spy raw file (100k lines by default) and the analyses over it.

The file is synthetic, built from the frames of the real recordings in tests/data/pyspy/: each line
is a distinct stack of 20-80 frames (real frame names and paths, line numbers varied), with the
``process``/``thread`` prefixes of ``py-spy record -s --threads``. Usage::

    .venv/bin/python benchmarks/pyspy_parse_bench.py [LINES]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from analysis.pyspy.samples import call_tree, pyspy_report, read_pyspy

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "pyspy"


def build(lines: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    frames = sorted(
        {frame.rsplit(":", 1)[0] for f in DATA.glob("*.txt") for row in f.read_text().splitlines()
         for frame in row.rsplit(" ", 1)[0].split(";") if ":" in frame and not frame.startswith("process")}
    )
    out = []
    for i in range(lines):
        depth = int(rng.integers(20, 80))
        picks = rng.integers(0, len(frames), depth)
        numbers = rng.integers(1, 2000, depth)
        stack = ";".join(f"{frames[p]}:{n})" for p, n in zip(picks, numbers, strict=True))
        prefix = f'process {100 + i % 8}:"python train.py --rank {i % 8}";thread ({200 + i % 3}): MainThread;'
        out.append(f"{prefix}{stack} {int(rng.integers(1, 50))}")
    return "\n".join(out) + "\n"


def main() -> None:
    lines = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "profile_node0.txt"
        path.write_text(build(lines))
        size_mb = path.stat().st_size / 1e6
        t0 = time.perf_counter()
        profile = read_pyspy(path)
        t1 = time.perf_counter()
        report = pyspy_report(profile, library_name="toylib", aggregate_leaf_paths=True)
        t2 = time.perf_counter()
        tree = call_tree(profile)
        t3 = time.perf_counter()
    print(f"{lines} lines, {size_mb:.1f} MB, {len(profile.frames)} frames, "
          f"{len(profile.functions)} distinct frames")
    print(f"read_pyspy   {t1 - t0:6.2f} s")
    print(f"pyspy_report {t2 - t1:6.2f} s ({len(report)} rows)")
    print(f"call_tree    {t3 - t2:6.2f} s ({len(tree)} nodes)")


if __name__ == "__main__":
    main()
