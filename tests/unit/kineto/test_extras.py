"""Extras: args decoded on demand, aligned with the parser's rows, cached beside the trace cache."""

from __future__ import annotations

import gzip
import json

import pytest

from analysis.errors import CorruptTraceError, MissingExtraError
from analysis.kineto import extras
from analysis.kineto.loader import load_trace
from analysis.kineto.parse import parse_trace_bytes
from analysis.kineto.window import profiler_step_window

MM_ARGS = {
    "External id": 5,
    "Input Dims": [[8, 16], [16, 4]],
    "Input type": ["float", "float"],
    "Input Strides": [[16, 1], [1, 16]],
    "Concrete Inputs": ["", ""],
}


def _trace() -> dict:
    events = [
        {
            "ph": "M",
            "name": "process_name",
            "pid": 1,
            "args": {"name": "python"},
        },  # no cat: dropped
        {
            "ph": "X",
            "cat": "Trace",
            "name": "PyTorch Profiler",
            "ts": 0,
            "dur": 500,
            "pid": 1,
            "tid": 1,
        },  # the profiler span: dropped
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "ts": 0,
            "dur": 100,
            "pid": 1,
            "tid": 1,
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "ts": 10,
            "dur": 20,
            "pid": 1,
            "tid": 1,
            "args": MM_ARGS,
        },
        {
            "ph": "i",
            "cat": "cpu_instant_event",
            "name": "instant",
            "ts": 12,
            "pid": 1,
            "tid": 1,
            "args": {"Input Dims": [[1]]},
        },  # no dur: dropped by the parser, so not a row
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::empty",
            "ts": 40,
            "dur": 1,
            "pid": 1,
            "tid": 1,
            "args": {"External id": 6},
        },  # no shapes recorded
        {
            "ph": "X",
            "cat": "python_function",
            "name": "f",
            "ts": 41,
            "dur": 1,
            "pid": 1,
            "tid": 1,
            "args": {"Input Dims": [[3]]},
        },  # not an operator
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#2",
            "ts": 100,
            "dur": 100,
            "pid": 1,
            "tid": 1,
        },
        {
            "ph": "X",
            "cat": "Operator",
            "name": "aten::add",
            "ts": 150,
            "dur": 5,
            "pid": 1,
            "tid": 1,
            "args": {"Input Dims": [[4], [4], []], "Input type": ["float", "float", "Scalar"]},
        },
    ]
    return {"schemaVersion": 1, "traceEvents": events}


def _bytes(trace: dict) -> bytes:
    return gzip.compress(json.dumps(trace).encode())


def test_op_shapes_rows_are_the_parsers_rows():
    data = _bytes(_trace())
    rt = parse_trace_bytes(data, "t.json.gz")
    table = extras.extract(data, "t.json.gz", extras.OP_SHAPES)
    names = rt.events.loc[table.index, "name"].astype(str).tolist()
    assert names == ["aten::mm", "aten::add"]  # the legacy "Operator" category counts as cpu_op
    mm = table.iloc[0]
    assert mm["input_dims"] == "[[8,16],[16,4]]" and mm["input_types"] == '["float","float"]'
    assert mm["input_strides"] == "[[16,1],[1,16]]" and mm["concrete_inputs"] == '["",""]'
    add = table.iloc[1]
    assert add["input_strides"] == "" and add["concrete_inputs"] == ""  # not recorded


def test_a_window_sees_only_its_rows():
    data = _bytes(_trace())
    rt = parse_trace_bytes(data, "t.json.gz")
    rt.extras["op_shapes"] = extras.extract(data, "t.json.gz", extras.OP_SHAPES)
    window = profiler_step_window(_as_trace(rt))[0]  # drops the last step (aten::add at 150)
    assert window.extras is rt.extras
    assert window.events.loc[window.extra("op_shapes").index, "name"].astype(str).tolist() == [
        "aten::mm"
    ]
    assert len(rt.extra("op_shapes")) == 2


def _as_trace(rt):
    from analysis.kineto.model import Trace

    return Trace({0: rt})


def test_missing_extra_names_the_rank_and_the_fix():
    rt = parse_trace_bytes(_bytes(_trace()), "t.json.gz")
    with pytest.raises(MissingExtraError, match=r"rank -1 \(t.json.gz\).*attach_extras"):
        rt.extra("op_shapes")


def test_extracted_once_then_read_from_the_cache(tmp_path, monkeypatch):
    path = tmp_path / "rank0.pt.trace.json.gz"
    path.write_bytes(_bytes(_trace()))
    cache_dir = tmp_path / "cache"
    rt = load_trace(str(path), cache_dir=cache_dir, max_workers=1)[0]
    table = extras.extra_table(rt, "op_shapes", cache_dir=cache_dir)
    assert list(cache_dir.glob("*/extras/op_shapes-v*.arrow"))

    def no_reading(*args, **kw):
        raise AssertionError("the source was read again")

    monkeypatch.setattr(extras, "read_trace_bytes", no_reading)
    again = load_trace(str(path), cache_dir=cache_dir, max_workers=1)[0]
    assert "op_shapes" not in again.extras
    cached = extras.attach_extras(again, ["op_shapes"], cache_dir=cache_dir).extras["op_shapes"]
    assert cached.index.tolist() == table.index.tolist()
    assert cached.astype(str).equals(table.astype(str))
    assert extras.extra_table(again, "op_shapes") is cached  # kept on the rank


def test_without_a_cache_entry_nothing_is_written(tmp_path):
    path = tmp_path / "rank0.pt.trace.json.gz"
    path.write_bytes(_bytes(_trace()))
    cache_dir = tmp_path / "cache"
    rt = load_trace(str(path), use_cache=False, max_workers=1)[0]
    extras.extra_table(rt, "op_shapes", cache_dir=cache_dir)
    assert not cache_dir.exists()
    assert len(rt.extras["op_shapes"]) == 2


def test_bad_args_name_the_file():
    trace = _trace()
    trace["traceEvents"][3]["args"]["Input Dims"] = [[8, 16]]  # fine
    trace["traceEvents"][3]["cat"] = 7  # a category that is not a string
    with pytest.raises(CorruptTraceError, match="t.json.gz"):
        extras.extract(_bytes(trace), "t.json.gz", extras.OP_SHAPES)
