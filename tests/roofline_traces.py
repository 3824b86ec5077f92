"""A hand-made trace with recorded shapes and known kernel times, for the operator roofline tests.

One profiler step of 1000 µs on one thread: ``aten::linear`` holding ``aten::addmm`` (a memset and a
GEMM kernel overlapping by 2 µs: 43 µs busy), two ``aten::mm`` calls (20 and 30 µs busy), an
``aten::cat`` (no model, 7 µs), an ``aten::foo`` without shapes (3 µs), a launch outside any
operator (4 µs) and a kernel whose launch is not in the trace (6 µs).
"""

from __future__ import annotations

import gzip
import json

from analysis.kineto import extras
from analysis.kineto.parse import parse_trace_bytes

BASE = 1_700_000_000_000_000  # µs
BF16, F32 = "c10::BFloat16", "float"


def _op(name, ts, dur, dims=None, types=None, strides=None, concrete=None):
    args = {"External id": ts}
    if dims is not None:
        args.update(
            {
                "Input Dims": dims,
                "Input type": types,
                "Input Strides": strides or [[] for _ in dims],
                "Concrete Inputs": concrete or ["" for _ in dims],
            }
        )
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "ts": BASE + ts,
        "dur": dur,
        "pid": 1,
        "tid": 1,
        "args": args,
    }


def _launch(ts, corr, name="cudaLaunchKernel"):
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": name,
        "ts": BASE + ts,
        "dur": 2,
        "pid": 1,
        "tid": 1,
        "args": {"correlation": corr},
    }


def _gpu(ts, dur, corr, cat="kernel", name="gemm_kernel"):
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "ts": BASE + ts,
        "dur": dur,
        "pid": 0,
        "tid": 7,
        "args": {"stream": 7, "correlation": corr, "device": 0},
    }


def trace_events():
    linear = ([[64, 128], [256, 128], [256]], [BF16] * 3)
    addmm = (
        [[256], [64, 128], [128, 256], [], []],
        [BF16] * 3 + ["Scalar"] * 2,
        [[1], [128, 1], [1, 128], [], []],
    )
    mm = ([[32, 64], [64, 32]], [F32, F32])
    return [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "ts": BASE,
            "dur": 1000,
            "pid": 1,
            "tid": 1,
        },
        _op("aten::linear", 10, 100, *linear),
        _op("aten::addmm", 20, 80, *addmm),
        _launch(25, 1, "cudaMemsetAsync"),
        _gpu(200, 5, 1, "gpu_memset", "Memset (Device)"),
        _launch(30, 2),
        _gpu(203, 40, 2),  # overlaps the memset by 2 µs: busy 43 µs, not 45
        _op("aten::mm", 300, 50, *mm),
        _launch(310, 3),
        _gpu(400, 10, 3),
        _launch(320, 4),
        _gpu(420, 10, 4),  # a gap: busy 20 µs
        _op("aten::mm", 360, 30, *mm),
        _launch(365, 5),
        _gpu(440, 30, 5),
        _op("aten::cat", 500, 20, [[[2, 3], [2, 3]], []], ["TensorList", "Scalar"]),  # no model
        _launch(505, 6),
        _gpu(600, 7, 6),
        _op("aten::foo", 690, 5),  # no shapes recorded
        _launch(691, 7),
        _gpu(700, 3, 7),
        _launch(900, 8),  # outside any operator
        _gpu(950, 4, 8),
        _gpu(960, 6, 99),  # its launch is not in the trace
    ]


def hand_made_rank(gpu_name="NVIDIA H100 80GB HBM3", events=None):
    trace = {
        "deviceProperties": [{"id": 0, "name": gpu_name}],
        "traceEvents": events or trace_events(),
    }
    data = gzip.compress(json.dumps(trace).encode())
    rt = parse_trace_bytes(data, "hand.json.gz")
    rt.extras["op_shapes"] = extras.extract(data, "hand.json.gz", extras.OP_SHAPES)
    return rt
