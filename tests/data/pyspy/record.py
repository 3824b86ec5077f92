"""Records the py-spy files in this folder from ``workload.py`` (real py-spy output, not hand-written).

Run from anywhere with the project's venv (py-spy from PyPI must be installed, and ptrace allowed;
spawning the child as below works as root in a container where attaching to a PID may not)::

    .venv/bin/python tests/data/pyspy/record.py

Writes, next to this script:

- ``simple.txt``: ``py-spy record -f raw -r 200`` of 2 s, shares kernel 0.5 / preprocess 0.3 / callback 0.2;
- ``profile_node0.txt``, ``profile_node1.txt``: two runs of 1 s with different shares (node 1 spends
  0.2 / 0.6 / 0.2), named like ``py-spy record -o profile_node$SLURM_NODEID.txt`` on a cluster;
- ``subprocesses_threads.txt``: ``-s --threads --idle`` of a run with a worker thread and a child process;
- ``native.txt``: ``--native`` (C frames such as ``0x7f... (libc.so.6)`` without line numbers);
- ``inline_child.txt``: ``-s`` of a run whose child is ``python -c`` code spanning several lines:
  py-spy writes the command line verbatim, newlines included, so one stack spans several lines;
- ``simple.speedscope.json``, ``threads.speedscope.json``: ``-f speedscope``, the default shares,
  and ``-s --threads --idle`` with a worker thread and a child process.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOAD = HERE / "workload.py"

RECORDINGS = {
    "simple.txt": (["-r", "200"], ["--seconds", "2"]),
    "profile_node0.txt": (["-r", "200"], ["--seconds", "1"]),
    "profile_node1.txt": (["-r", "200"], ["--seconds", "1", "--kernel", "0.2", "--preprocess", "0.6"]),
    "subprocesses_threads.txt": (
        ["-r", "100", "-s", "--threads", "--idle"],
        ["--seconds", "0.5", "--thread", "--subprocess"],
    ),
    "native.txt": (["-r", "100", "--native"], ["--seconds", "0.5"]),
    "inline_child.txt": (["-r", "100", "-s"], ["--seconds", "0.5", "--inline-child"]),
    # py-spy's speedscope JSON (``-f speedscope``): the default shares, and threads + a child
    "simple.speedscope.json": (["-f", "speedscope", "-r", "200"], ["--seconds", "2"]),
    "threads.speedscope.json": (
        ["-f", "speedscope", "-r", "100", "-s", "--threads", "--idle"],
        ["--seconds", "0.5", "--thread", "--subprocess"],
    ),
}


def py_spy() -> str:
    """py-spy beside this interpreter (a venv's bin/), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise SystemExit("py-spy is not installed: pip install py-spy")
    return found


def record(out: Path, spy_args: list[str], workload_args: list[str]) -> None:
    """``py-spy record`` of the workload (``-f raw`` unless ``spy_args`` name a format), spawned
    as py-spy's child (no attach to a PID)."""
    fmt = [] if "-f" in spy_args else ["-f", "raw"]
    cmd = [py_spy(), "record", *fmt, "-o", str(out), *spy_args, "--",
           sys.executable, str(WORKLOAD), *workload_args]
    subprocess.run(cmd, check=True, cwd=HERE, capture_output=True, text=True)


def main() -> None:
    for name, (spy_args, workload_args) in RECORDINGS.items():
        record(HERE / name, spy_args, workload_args)
        print(f"wrote {HERE / name}")


if __name__ == "__main__":
    main()
