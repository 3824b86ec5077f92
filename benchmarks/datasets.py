"""The benchmark's datasets, built on first use and kept under ``benchmarks/.data/`` (git-ignored).

- ``real-8``: one real GPU trace (``shared/traces/hta/df_index_resolver``: 2 V100 ranks of a
  DataFrame-heavy job, 54 MB of JSON) written 8 times with ``distributedInfo.rank`` rewritten to
  0..7, so each copy is a distinct rank to both HTA and this package.
- ``synth-rR-eE``: ``analysis.testing.synthetic`` traces, R ranks of about E events each. Two sweeps: ranks
  (1, 8, 64 at 0.25 M events) and events per rank (0.25 M, 1 M, 4 M on 1 rank). The default run
  builds the cheap ones; ``--full`` adds 64 ranks, 4 M events and 8 × 1 M.
- ``synth-r512-e250k`` and ``synth-r64of512-e250k`` (only when named; issue 31's scaling case,
  ``scale.py``): ranks of one 512-rank synthetic job (world size 512: each collective records 512
  group ranks; about 1 s and 4.3 MB of gzip per rank to write). The 64-rank set is the 512-rank
  set's first 64 files (hard links when that is built), so both hold the same data per rank.

A dataset directory is complete once its ``.complete`` marker exists (no ``.json`` suffix: HTA
would take any ``*.json`` for a trace), so an interrupted build is redone, not half-used.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from isal import igzip

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
DATA_DIR = Path(os.environ.get("BENCH_DATA_DIR", BENCH_DIR / ".data"))
MARKER = ".complete"
# The real trace: the shared checkout sits beside the repo (../shared), as in the team's layout.
REAL_TRACE = Path(
    os.environ.get(
        "BENCH_REAL_TRACE",
        REPO.parent / "shared" / "traces" / "hta" / "df_index_resolver" / "df_index_resolver.json.gz",
    )
)
# HTA takes a file's rank from the first `"rank": N`; in this trace that is distributedInfo's.
_DIST_INFO = re.compile(rb'"distributedInfo":\s*\{[^{}]*\}')


@dataclass(frozen=True)
class Dataset:
    name: str
    description: str
    ranks: int
    events_per_rank: int | None  # None: the real trace
    full_only: bool = False
    prefix_of: str | None = None  # its files are this dataset's first ones (the same job)

    @property
    def path(self) -> Path:
        return DATA_DIR / self.name


REAL = Dataset("real-8", "8 × real 54 MB trace (df_index_resolver), rank rewritten", 8, None)
SYNTHETIC = [
    Dataset("synth-r1-e250k", "synthetic, 1 rank × 0.25 M events", 1, 250_000),
    Dataset("synth-r1-e1m", "synthetic, 1 rank × 1 M events", 1, 1_000_000),
    Dataset("synth-r8-e250k", "synthetic, 8 ranks × 0.25 M events", 8, 250_000),
    Dataset("synth-r1-e4m", "synthetic, 1 rank × 4 M events", 1, 4_000_000, full_only=True),
    Dataset("synth-r8-e1m", "synthetic, 8 ranks × 1 M events", 8, 1_000_000, full_only=True),
    Dataset("synth-r64-e250k", "synthetic, 64 ranks × 0.25 M events", 64, 250_000, full_only=True),
]
SCALE = [
    Dataset("synth-r512-e250k", "synthetic, 512 ranks × 0.25 M events", 512, 250_000),
    Dataset("synth-r64of512-e250k", "synthetic, ranks 0..63 of synth-r512-e250k", 64, 250_000,
            prefix_of="synth-r512-e250k"),
]
ALL = [REAL, *SYNTHETIC]
BY_NAME = {d.name: d for d in [*ALL, *SCALE]}


def selected(full: bool, names: list[str] | None = None) -> list[Dataset]:
    if names:
        unknown = [n for n in names if n not in BY_NAME]
        if unknown:
            raise SystemExit(f"unknown dataset(s) {unknown}; known: {sorted(BY_NAME)}")
        return [BY_NAME[n] for n in names]
    return [d for d in ALL if full or not d.full_only]  # SCALE: by name only


def _with_rank(text: bytes, rank: int, world_size: int) -> bytes:
    found = _DIST_INFO.search(text)
    if found is None:
        raise SystemExit(f"{REAL_TRACE}: no distributedInfo to rewrite")
    info = f'"distributedInfo": {{"backend": "nccl", "rank": {rank}, "world_size": {world_size}}}'
    return text[: found.start()] + info.encode() + text[found.end():]


def _build_real(ds: Dataset, tmp: Path) -> None:
    if not REAL_TRACE.is_file():
        raise SystemExit(f"the real trace {REAL_TRACE} is missing (set BENCH_REAL_TRACE)")
    with igzip.open(REAL_TRACE, "rb") as f:
        text = f.read()
    for rank in range(ds.ranks):
        with igzip.open(tmp / f"rank-{rank}.pt.trace.json.gz", "wb") as out:
            out.write(_with_rank(text, rank, ds.ranks))


def _build_synthetic(ds: Dataset, tmp: Path) -> None:
    from analysis.testing.synthetic import SynthConfig, trace_path, write_traces

    whole = BY_NAME[ds.prefix_of] if ds.prefix_of else ds  # the job its ranks come from
    if whole is not ds and (whole.path / MARKER).exists():  # the same bytes: link, not regenerate
        for rank in range(ds.ranks):
            os.link(trace_path(whole.path, rank), trace_path(tmp, rank))
        return
    job_ranks = whole.ranks
    slow_rank = 1 if job_ranks > 1 else None  # the synthesiser's default, where there is a rank 1
    config = SynthConfig(ranks=job_ranks, events_per_rank=ds.events_per_rank, slow_rank=slow_rank)
    write_traces(config, tmp, ranks=range(ds.ranks))


def ensure(ds: Dataset, log=print) -> Path:
    """The dataset's directory, built first if it is not complete."""
    if (ds.path / MARKER).exists():
        return ds.path
    log(f"building {ds.name} ({ds.description}) in {ds.path} ...")
    tmp = ds.path.with_name(ds.path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (_build_real if ds.events_per_rank is None else _build_synthetic)(ds, tmp)
    shutil.rmtree(ds.path, ignore_errors=True)
    tmp.rename(ds.path)
    (ds.path / MARKER).touch()
    return ds.path


def stats(path: Path) -> dict[str, float]:
    """Files, bytes on disk and (for gzip) bytes of JSON, from the gzip trailers."""
    files = sorted(p for p in path.iterdir() if p.name.endswith((".json", ".gz")))
    disk = sum(p.stat().st_size for p in files)
    json_bytes = 0
    for p in files:
        if p.name.endswith(".gz"):
            with open(p, "rb") as f:  # ISIZE: uncompressed size mod 2**32, exact below 4 GiB
                f.seek(-4, os.SEEK_END)
                json_bytes += int.from_bytes(f.read(4), "little")
        else:
            json_bytes += p.stat().st_size
    return {"files": len(files), "disk_mb": disk / 1e6, "json_mb": json_bytes / 1e6}
