"""Writes the sample inputs of the README's side commands (py-spy profiles, memory files).

Run from the repository root with the project's venv (needs torch 2.13.0 CPU and py-spy; py-spy
spawns the workload as its child, which works as root in a container)::

    .venv/bin/python scripts/make-sample-inputs.py

Writes, under ``sample_traces/`` (in subfolders, so that ``sample_traces/`` itself holds only the
Kineto traces that ``trace-analysis report sample_traces`` reads):

- ``pyspy/profile_node0.txt.gz``, ``pyspy/profile_node1.txt.gz``: real ``py-spy record -f raw``
  output (gzipped; the readers detect gzip) of a small torch CPU training loop, 3 s at 50 Hz each
  (node 1 with a larger batch), named like a multi-node run's ``profile_node$SLURM_NODEID.txt``;
- ``memory/memory_timeline.raw.json.gz``: ``torch.profiler.profile.export_memory_timeline`` of
  three steps of the same loop (``profile_memory=True``, device ``cpu``);
- ``memory/snapshot.pickle``: a CUDA memory snapshot (the ``torch.cuda.memory._snapshot()``
  layout) of the same kind of loop, made by the tests' caching-allocator model
  (``tests/memory_snapshots.py``): torch on CPU records no CUDA memory history.
"""

from __future__ import annotations

import gzip
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "sample_traces"

WORKLOAD = r"""
import sys, time
import torch

torch.manual_seed(0)
torch.set_num_threads(1)
batch = int(sys.argv[1])
seconds = float(sys.argv[2])
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)


def load_batch():
    return torch.randn(batch, 256), torch.randint(0, 10, (batch,))


def train_step(x, y):
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()


end = time.monotonic() + seconds
while time.monotonic() < end:
    train_step(*load_batch())
"""


def py_spy() -> str:
    beside = Path(sys.executable).parent / "py-spy"
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise SystemExit("py-spy is not installed: pip install py-spy")
    return found


def record_pyspy(out_dir: Path) -> None:
    script = out_dir / "_workload.py"
    script.write_text(WORKLOAD)
    try:
        for node, batch in ((0, 64), (1, 256)):
            raw = out_dir / f"profile_node{node}.txt"
            subprocess.run([py_spy(), "record", "-f", "raw", "-r", "50", "-o", str(raw), "--",
                            sys.executable, str(script), str(batch), "3"],
                           check=True, capture_output=True, text=True, cwd=out_dir)
            out = raw.with_name(raw.name + ".gz")
            out.write_bytes(gzip.compress(raw.read_bytes(), mtime=0))
            raw.unlink()
            print(f"wrote {out} ({out.stat().st_size:,} bytes)")
    finally:
        script.unlink()


def memory_timeline(out: Path) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        for _ in range(3):
            x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    prof.export_memory_timeline(str(out), device="cpu")
    print(f"wrote {out} ({out.stat().st_size:,} bytes)")


def memory_snapshot(out: Path) -> None:
    sys.path.insert(0, str(REPO / "tests"))
    from memory_snapshots import MiB, SnapshotBuilder, stack

    b = SnapshotBuilder()
    for i, size in enumerate((64 * MiB, 64 * MiB, 16 * MiB)):  # the weights, kept to the end
        b.alloc(size, stack("model.py", 10 + i, "build_model"))
    for _ in range(3):
        acts = [b.alloc(24 * MiB, stack("model.py", 40, "forward")) for _ in range(4)]
        grads = [b.alloc(16 * MiB, stack("train.py", 61, "backward",
                                         library="torch/autograd/graph.py")) for _ in range(3)]
        for a in acts:
            b.free(a)
        for g in grads:
            b.free(g)
    out.write_bytes(pickle.dumps(b.snapshot(), protocol=4))
    print(f"wrote {out} ({out.stat().st_size:,} bytes)")


def main() -> None:
    (OUT / "pyspy").mkdir(parents=True, exist_ok=True)
    (OUT / "memory").mkdir(parents=True, exist_ok=True)
    record_pyspy(OUT / "pyspy")
    memory_timeline(OUT / "memory" / "memory_timeline.raw.json.gz")
    memory_snapshot(OUT / "memory" / "snapshot.pickle")


if __name__ == "__main__":
    main()
