"""The model's ``memory_ops`` table: bytes and Kineto's bandwidth of each memcpy/memset."""

from __future__ import annotations

import json
import math

import pandas as pd

from analysis.kineto.cache import TraceCache
from analysis.kineto.model import MEMORY_OP_COLUMNS
from analysis.kineto.parse import parse_trace_bytes


def _doc():
    gpu = {"ph": "X", "pid": 0, "tid": 7, "ts": 10, "dur": 5}
    return {"traceEvents": [
        {**gpu, "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)",
         "args": {"stream": 7, "correlation": 1, "bytes": 4096, "memory bandwidth (GB/s)": 0.8192}},
        {**gpu, "cat": "kernel", "name": "gemm", "args": {"stream": 7, "correlation": 2}},
        {**gpu, "cat": "Memset", "name": "Memset (Device)",  # 2021 schema category
         "args": {"stream": 7, "correlation": 3, "bytes": "64", "memory bandwidth (GB/s)": "x"}},
        {**gpu, "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)",
         "args": {"stream": 7, "correlation": 4}},
    ]}


def test_one_row_per_memory_operation():
    rt = parse_trace_bytes(json.dumps(_doc()).encode(), "m.json")
    ops = rt.memory_ops
    assert dict(ops.dtypes.astype(str)) == MEMORY_OP_COLUMNS
    assert ops["event"].tolist() == [0, 2, 3]
    assert ops["bytes"].tolist() == [4096, 64, -1]
    bw = ops["bandwidth_gbps"].tolist()
    assert bw[0] == 0.8192 and math.isnan(bw[1]) and math.isnan(bw[2])
    assert rt.events.loc[ops["event"], "cat"].tolist() == ["gpu_memcpy", "gpu_memset", "gpu_memcpy"]


def test_cache_round_trip(tmp_path):
    rt = parse_trace_bytes(json.dumps(_doc()).encode(), "m.json")
    cache = TraceCache(tmp_path)
    cache.put("k" * 32, rt)
    pd.testing.assert_frame_equal(cache.get("k" * 32).memory_ops, rt.memory_ops)
