"""The ``memory_ops`` extra: bytes and Kineto's bandwidth of each memcpy/memset, read on demand."""

from __future__ import annotations

import json
import math

from analysis.kineto.extras import MEMORY_OP_COLUMNS, MEMORY_OPS, extract
from analysis.kineto.parse import parse_trace_bytes


def _doc():
    gpu = {"ph": "X", "pid": 0, "tid": 7, "ts": 10, "dur": 5}
    return {"traceEvents": [
        {**gpu, "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)",
         "args": {"stream": 7, "correlation": 1, "bytes": 4096, "memory bandwidth (GB/s)": 0.8192}},
        {"ph": "i", "name": "an instant, not kept", "pid": 0, "tid": 0, "ts": 11},
        {**gpu, "cat": "kernel", "name": "gemm", "args": {"stream": 7, "correlation": 2}},
        {**gpu, "cat": "Memset", "name": "Memset (Device)",  # 2021 schema category
         "args": {"stream": 7, "correlation": 3, "bytes": "64", "memory bandwidth (GB/s)": "x"}},
        {**gpu, "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)",
         "args": {"stream": 7, "correlation": 4}},
    ]}


def test_one_row_per_memory_operation_by_event_label():
    data = json.dumps(_doc()).encode()
    rt = parse_trace_bytes(data, "m.json")
    ops = extract(data, "m.json", MEMORY_OPS)
    assert dict(ops.dtypes.astype(str)) == MEMORY_OP_COLUMNS
    assert ops.index.tolist() == [0, 2, 3]  # row labels of rt.events (the instant is not a row)
    assert ops["bytes"].tolist() == [4096, 64, -1]
    bw = ops["bandwidth_gbps"].tolist()
    assert bw[0] == 0.8192 and math.isnan(bw[1]) and math.isnan(bw[2])
    assert rt.events.loc[ops.index, "cat"].tolist() == ["gpu_memcpy", "gpu_memset", "gpu_memcpy"]
