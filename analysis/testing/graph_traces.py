"""A CUDA graph replay trace and its capture trace, hand-built with a known attribution.

``capture_events(ops, kernels=None)``: a capture trace (``cudaStreamBeginCapture`` ...
``EndCapture``) in which operator ``ops[i]`` (``Input Dims [[i + 1, 4], [4, 8]]``, bf16) launches
kernel ``i`` (named ``kernels[i]`` in the launch's ``kernel`` arg, as ROCm writes, when given).
``replay_events(kernel_counts)``: one ``cudaGraphLaunch`` per count, launch ``g`` at
``1000 + 1000 g`` µs lasting 50 µs, with that many kernels ``k0, k1, ...``, kernel ``k`` lasting
``k + 1`` µs, correlated to the launch. A launch whose count differs from the capture's matches
no capture. ``write_pair(folder, ops, kernel_counts)`` writes ``replay.json`` and
``capture_traces/capture.json`` and returns the replay's path. ``serving_events(phases)``: a
serving engine's replay trace with one batch annotation per iteration (no ProfilerSteps).
"""

from __future__ import annotations

import json
from pathlib import Path


def _x(cat, name, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": args}


def capture_events(ops: list[str], kernels: list[str] | None = None) -> list[dict]:
    ev = [_x("cuda_runtime", "cudaStreamBeginCapture", 0, 1, correlation=1)]
    t = 10
    for i, op in enumerate(ops):
        ev.append(_x("cpu_op", op, t, 10, **{"Input Dims": [[i + 1, 4], [4, 8]],
                                             "Input type": ["c10::BFloat16"] * 2}))
        named = {"kernel": kernels[i]} if kernels else {}
        ev.append(_x("cuda_runtime", "cudaLaunchKernel", t + 2, 3, correlation=100 + i, **named))
        t += 20
    ev.append(_x("cuda_runtime", "cudaStreamEndCapture", t, 1, correlation=2))
    return ev


def replay_events(kernel_counts: list[int]) -> list[dict]:
    ev, t = [], 1000
    for g, n in enumerate(kernel_counts):
        ev.append(_x("cuda_runtime", "cudaGraphLaunch", t, 50, correlation=500 + g))
        for k in range(n):
            kern = _x("kernel", f"k{k}", t + 100 + 10 * k, k + 1.0, correlation=500 + g,
                      stream=7)
            kern["pid"], kern["tid"] = 0, 7
            ev.append(kern)
        t += 1000
    return ev


def write_pair(folder: str | Path, ops: list[str], kernel_counts: list[int]) -> Path:
    folder = Path(folder)
    (folder / "capture_traces").mkdir(parents=True, exist_ok=True)
    (folder / "capture_traces" / "capture.json").write_text(
        json.dumps({"traceEvents": capture_events(ops)}))
    replay = folder / "replay.json"
    replay.write_text(json.dumps({"traceEvents": replay_events(kernel_counts)}))
    return replay


# Kernels a serving iteration's graph launch runs, by phase (prefill does more work per batch).
SERVING_KERNELS = {"prefill": 3, "decode": 2, "mixed": 3}
_SERVING_NAMES = {
    "prefill": "execute_512_context_2(sq256sk256)_generation_0(sq0sk0)",
    "decode": "execute_4_context_0(sq0sk0)_generation_4(sq4sk300)",
    "mixed": "execute_260_context_1(sq256sk256)_generation_4(sq4sk300)",
}


def serving_events(phases: list[str], warmup_kernel: bool = True) -> list[dict]:
    """A serving engine's trace without ProfilerSteps: iteration ``i`` of phase ``phases[i]`` is a
    vLLM batch annotation (``execute_...``, ``user_annotation``) at ``1000 (i + 1)`` µs lasting 100 µs
    that makes one ``cudaGraphLaunch`` at ``+10`` µs; the launch runs ``SERVING_KERNELS[phase]``
    kernels ``k0, k1, ...`` on stream 7, kernel ``k`` starting at ``+40 + 10 k`` µs and lasting
    ``k + 1`` µs. With ``warmup_kernel``, an operator before the first iteration (at 500 µs)
    launches one kernel ``warmup`` at 600 µs lasting 50 µs, outside every iteration.
    No kernels overlap, so an iteration's GPU busy time is the sum of its kernels' durations."""
    ev, corr = [], 1
    if warmup_kernel:
        ev.append(_x("cpu_op", "aten::warmup", 500, 20))
        ev.append(_x("cuda_runtime", "cudaLaunchKernel", 505, 5, correlation=corr))
        ev.append(_gpu("warmup", 600, 50.0, corr))
        corr += 1
    for i, phase in enumerate(phases):
        t = 1000 * (i + 1)
        ev.append(_x("user_annotation", _SERVING_NAMES[phase], t, 100))
        ev.append(_x("cuda_runtime", "cudaGraphLaunch", t + 10, 20, correlation=corr))
        for k in range(SERVING_KERNELS[phase]):
            ev.append(_gpu(f"k{k}", t + 40 + 10 * k, k + 1.0, corr))
        corr += 1
    return ev


def _gpu(name: str, ts: float, dur: float, correlation: int) -> dict:
    kern = _x("kernel", name, ts, dur, correlation=correlation, stream=7, device=0)
    kern["pid"], kern["tid"] = 0, 7
    return kern
