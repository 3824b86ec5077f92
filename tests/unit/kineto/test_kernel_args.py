"""The ``kernel_args`` table, read by the parser in the trace's own decode
(``analysis.kineto.kernel_args``) and kept in the trace cache entry."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pandas as pd

from analysis.kineto.cache import TraceCache, parsed_extra_path
from analysis.kineto.chunks import CHUNK_BYTES
from analysis.kineto.extras import attach_extras
from analysis.kineto.loader import load_trace
from analysis.kineto.parse import parse_trace_bytes
from analysis.testing import tensorboard_traces


def kernel(name, ts, corr, **args):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": 5,
            "args": {"device": 0, "stream": 7, "correlation": corr, **args}}


def trace_bytes(events) -> bytes:
    return json.dumps({"traceEvents": events}).encode()


EVENTS = [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 50,
     "args": {"External id": 3}},
    kernel("k_full", 10, 1, **{"blocks per SM": 0.5, "warps per SM": 2, "est. achieved occupancy %": 25,
                               "grid": [66, 1, 1], "block": [128, 1, 1], "registers per thread": 32,
                               "shared memory": 1024}),
    kernel("k_odd", 20, 2, **{"blocks per SM": "1.5", "warps per SM": True, "grid": "text",
                              "est. achieved occupancy %": [1], "registers per thread": None}),
    {"ph": "X", "cat": "kernel", "name": "k_no_args", "pid": 0, "tid": 7, "ts": 30, "dur": 5},
    {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 5,
     "dur": 2, "args": {"correlation": 1, "external id": 3}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 15,
     "dur": 2, "args": {"correlation": 2}},
]


def test_the_parser_reads_the_kernel_args_with_the_events():
    rt = parse_trace_bytes(trace_bytes(EVENTS), "t.json")
    t = rt.extras["kernel_args"]
    # kernels (with or without args) and the 2021-named runtime call; not today's cuda_runtime
    assert t.index.tolist() == [1, 2, 3, 4]
    assert t["raw_cat"].astype(str).tolist() == ["kernel", "kernel", "kernel", "Runtime"]
    full = t.loc[1]
    assert (full["blocks_per_sm"], full["warps_per_sm"], full["occupancy_pct"]) == (0.5, 2, 25)
    assert (full["grid"], full["block"]) == ("[66, 1, 1]", "[128, 1, 1]")
    assert (full["registers_per_thread"], full["shared_memory"]) == (32, 1024)
    odd = t.loc[2]
    assert odd["blocks_per_sm"] == 1.5  # a numeric string is a number
    assert math.isnan(odd["warps_per_sm"]) and math.isnan(odd["occupancy_pct"])  # bool, list
    assert odd["grid"] == "text" and odd["block"] == ""
    assert math.isnan(t.loc[3, "blocks_per_sm"]) and t.loc[3, "grid"] == ""
    assert t["external_id_lower"].tolist() == [-1, -1, -1, 3]
    assert rt.extra("kernel_args") is t


def test_chunked_and_whole_parses_give_the_same_table():
    events = tensorboard_traces.events(legacy=True, launches=400)
    data = json.dumps({"traceEvents": events}, indent=1).encode()
    whole = parse_trace_bytes(data, "t.json", chunk_bytes=len(data) * 2).extras["kernel_args"]
    chunked = parse_trace_bytes(data, "t.json", chunk_bytes=4096).extras["kernel_args"]
    assert len(data) > 4 * 4096 < CHUNK_BYTES
    assert len(whole) > 400
    pd.testing.assert_frame_equal(whole, chunked)


def test_the_cache_entry_keeps_the_table(tmp_path):
    path = tmp_path / "rank0.json.gz"
    path.write_bytes(gzip.compress(trace_bytes(EVENTS)))
    first = load_trace(str(tmp_path), cache_dir=tmp_path / "cache", progress=False)[0]
    assert parsed_extra_path(first.cache_entry, "kernel_args").is_file()
    again = TraceCache.read(first.cache_entry)
    assert "kernel_args" not in again.extras  # read on demand
    attach_extras(again, ["kernel_args"], cache_dir=tmp_path / "cache")
    pd.testing.assert_frame_equal(again.extras["kernel_args"], first.extras["kernel_args"])


def test_an_entry_that_lost_the_table_parses_the_file_again(tmp_path):
    path = tmp_path / "rank0.json.gz"
    path.write_bytes(gzip.compress(trace_bytes(EVENTS)))
    first = load_trace(str(tmp_path), cache_dir=tmp_path / "cache", progress=False)[0]
    parsed_extra_path(first.cache_entry, "kernel_args").unlink()
    again = TraceCache.read(first.cache_entry)
    table = attach_extras(again, ["kernel_args"], cache_dir=tmp_path / "cache").extras["kernel_args"]
    pd.testing.assert_frame_equal(table, first.extras["kernel_args"])
    assert np.isclose(table.loc[1, "blocks_per_sm"], 0.5)
