"""Extras decoded together: several kinds from one decode of a file, and a job's files decoded on
several processes before an engine runs its ranks one after another."""

from __future__ import annotations

import gzip
import json
import os
import warnings
from pathlib import Path

import pandas as pd
import pytest

from analysis import TraceAnalysis
from analysis.errors import CorruptTraceError
from analysis.kineto import extras
from analysis.testing import tensorboard_traces

MEMORY_VIEWS = ("memory_timeline", "memory_peaks", "operator_memory", "memory_events")
DECODED = [k for k in extras.KINDS.values() if not k.parsed]


def _job(folder: Path, ranks: int = 2) -> Path:
    """``ranks`` copies of the hand-made TensorBoard trace (memory events, modules, shapes),
    each with its own rank number."""
    folder.mkdir()
    for rank in range(ranks):
        path = tensorboard_traces.write(folder / f"rank{rank}.json")
        doc = json.loads(path.read_text())
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": ranks}
        doc["traceEvents"] += [  # a module call and an operator with shapes and a stack
            {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_0", "ts": 5,
             "dur": 1, "pid": 1, "tid": 7, "args": {"Python id": 3, "Python parent id": 1,
                                                    "Python module id": 0}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::zeros", "ts": 5, "dur": 1, "pid": 1,
             "tid": 7, "args": {"Input Dims": [[2, 2]], "Input type": ["float"],
                                "Call stack": "a.py(1): f"}},
        ]
        path.write_bytes(gzip.compress(json.dumps(doc).encode()))
        path.rename(folder / f"rank{rank}.json.gz")
    return folder


def _open(folder: Path, **options) -> TraceAnalysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(str(folder), progress=False, **options)


def test_one_decode_gives_each_kind_as_alone(tmp_path):
    data = (_job(tmp_path / "job", 1) / "rank0.json.gz").read_bytes()
    together = extras.extract_many(data, "rank0.json.gz", DECODED)
    assert set(together) == {k.name for k in DECODED}
    assert all(len(table) for table in together.values())
    for kind in DECODED:
        pd.testing.assert_frame_equal(together[kind.name], extras.extract(data, "x", kind),
                                      check_exact=True)


def test_a_kinds_bad_args_are_its_own_error(tmp_path):
    """Args of an unexpected shape fail the kinds that read those rows, naming the file; rows no
    kind reads are not decoded at all."""
    doc = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2, "pid": 1, "tid": 1,
         "args": [1, 2]},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "x", "ts": 1, "dur": 2, "pid": 1,
         "tid": 1, "args": 5},
    ]}
    data = json.dumps(doc).encode()
    with pytest.raises(CorruptTraceError, match=r"bad\.json.*op_shapes args"):
        extras.extract(data, "bad.json", extras.OP_SHAPES)
    assert extras.extract(data, "bad.json", extras.MEMORY_OPS).empty  # not its rows


def test_an_analysis_batch_reads_the_file_once(tmp_path, monkeypatch):
    folder = _job(tmp_path / "job", 1)
    reads = []
    real = extras.read_trace_bytes
    monkeypatch.setattr(extras, "read_trace_bytes", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    ta = _open(folder, cache_dir=tmp_path / "cache")
    ta.run_many({name: {} for name in MEMORY_VIEWS}
                | {"operator_table": {"group_by": "name_and_input_shape"}}, ranks="all")
    assert len(reads) == 1  # memory events, modules and shapes together
    cached = sorted(p.name.split("-v")[0] for p in (tmp_path / "cache").glob("*/extras/*-v*"))
    assert cached == ["memory_events", "op_shapes", "python_functions"]


def test_a_jobs_files_are_decoded_on_several_processes(tmp_path, monkeypatch):
    """Before the ranks run one by one, the extras their analyses read are decoded into the cache
    for every rank at once (here on 2 processes); the ranks then read them from the cache, and
    every table is the one a serial run gives."""
    folder = _job(tmp_path / "job", 3)
    serial = _open(folder, use_cache=False).run_many({n: {} for n in MEMORY_VIEWS}, ranks="all")
    monkeypatch.setattr(extras, "_PARALLEL_MIN_BYTES", 0)
    calls = []
    real_cache_extras = extras.cache_extras

    def spy(tasks, options):
        calls.append([t.source for t in tasks])
        real_cache_extras(tasks, options)
        for task in tasks:  # decoded by the pool, before any rank step ran
            assert all(Path(path).is_file() for _, path in task.targets)
        calls.append(os.getpid())

    monkeypatch.setattr(extras, "cache_extras", spy)
    reads = []
    real = extras.read_trace_bytes
    monkeypatch.setattr(extras, "read_trace_bytes", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    ta = _open(folder, cache_dir=tmp_path / "cache", max_workers=2)
    parallel = ta.run_many({n: {} for n in MEMORY_VIEWS}, ranks="all")
    assert len(calls[0]) == 3
    assert reads == []  # this process read no trace file: the pool's processes did
    for name in MEMORY_VIEWS:
        pd.testing.assert_frame_equal(parallel[name], serial[name], check_exact=True)
    # asked again (a new process, say): parts stored, extras cached: nothing decoded
    calls.clear()
    _open(folder, cache_dir=tmp_path / "cache").run_many({n: {} for n in MEMORY_VIEWS}, ranks="all")
    assert calls == []


def test_a_file_the_pool_cannot_read_fails_its_rank_only(tmp_path, monkeypatch):
    folder = _job(tmp_path / "job", 3)
    monkeypatch.setattr(extras, "_PARALLEL_MIN_BYTES", 0)
    ta = _open(folder, cache_dir=tmp_path / "cache", max_workers=2)
    bad = folder / "rank1.json.gz"
    bad.write_bytes(bad.read_bytes()[:200])  # cut after it was loaded
    failures = []
    out = ta.run_many({"memory_peaks": {}}, ranks="all", failures=failures)
    assert sorted(out["memory_peaks"]["rank"].unique()) == [0, 2]
    assert [(f.analysis, f.rank) for f in failures] == [("memory_peaks", 1)]
    assert "rank1.json.gz" in failures[0].message
