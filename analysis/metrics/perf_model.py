"""FLOPs and bytes moved by one operator call, from the shapes the profiler recorded.

A *performance model* turns one CPU operator call (its name and the ``record_shapes=True`` args
``Input Dims``, ``Input type``, ``Input Strides``, ``Concrete Inputs``) into an :class:`OpCost`:
the floating-point operations it must do and the bytes it must move between the GPU's memory and
its cores at least once (each input read once, each output written once). These are the
definitions TraceLens (AMD-AGI/TraceLens, ``TraceLens/PerfModel``) uses, re-derived per op family:

- :mod:`analysis.metrics.perf_model_gemm`: ``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``matmul``,
  ``linear``, ``_scaled_mm`` (fp8);
- :mod:`analysis.metrics.perf_model_attention`: ``scaled_dot_product_attention`` and its flash,
  memory-efficient and cuDNN kernels, forward and backward (causal attention halved);
- :mod:`analysis.metrics.perf_model_conv`: ``convolution``, ``_convolution``, ``cudnn_convolution``,
  ``conv1d/2d/3d`` (grouped and transposed) and ``convolution_backward``;
- :mod:`analysis.metrics.perf_model_memory`: elementwise, normalisation and reduction ops, which
  are memory-bound by nature (``memory_bound=True``: their roofline bound is always memory).

An op without a model, or whose args do not fit its model, raises :class:`NoModel` with the reason:
it is reported as "no model", never guessed. Where we deliberately differ from TraceLens
(convolution bias, reduction output size, layer-norm affine flags, causal attention with
``N_Q != N_KV``, stride-0 inputs), ``docs/deviations.md`` says so.

Units: FLOPs and bytes per call (``Data Moved (MB)`` in the tables is bytes / 2**20, as TraceLens).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from math import prod
from typing import Any

import msgspec

# Bytes per element of the dtype names Kineto writes in "Input type" (lower-cased). "scalar" is a
# Python number passed to an op: TraceLens counts it as 4 bytes, and so do we.
BYTES_PER_ELEMENT: dict[str, int] = {
    "double": 8,
    "long int": 8,
    "long": 8,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "float": 4,
    "int": 4,
    "unsigned int": 4,
    "scalar": 4,
    "c10::half": 2,
    "c10::bfloat16": 2,
    "short": 2,
    "c10::float8_e4m3fn": 1,
    "c10::float8_e4m3fnuz": 1,
    "c10::float8_e5m2": 1,
    "c10::float8_e5m2fnuz": 1,
    "c10::float8_e8m0fnu": 1,
    "unsigned char": 1,
    "signed char": 1,
    "bool": 1,
}

# torch ScalarType codes (a dtype argument appears in Concrete Inputs as one) → bytes per element
SCALAR_TYPE_BYTES = {
    0: 1,
    1: 1,
    2: 2,
    3: 4,
    4: 8,
    5: 2,
    6: 4,
    7: 8,
    11: 1,
    15: 2,
    23: 1,
    24: 1,
    25: 1,
    26: 1,
}

# The precision an op computes in, from its first input's dtype: the key of the GPU peak to use.
PRECISION: dict[str, str] = {
    "c10::bfloat16": "bf16",
    "c10::half": "fp16",
    "float": "fp32",
    "double": "fp64",
    "c10::float8_e4m3fn": "fp8",
    "c10::float8_e4m3fnuz": "fp8",
    "c10::float8_e5m2": "fp8",
    "c10::float8_e5m2fnuz": "fp8",
}


class NoModel(Exception):
    """The op has no performance model, or its recorded args do not fit one (``reason``)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class OpCall:
    """One operator call's recorded args, decoded (positions as the profiler lists the inputs)."""

    name: str
    dims: list[Any]  # Input Dims: a shape (list of ints) per input, [] for non-tensors
    types: list[str]  # Input type: "c10::BFloat16", "float", "Scalar", "" ...
    strides: list[Any]  # Input Strides, like dims ([] when the trace has none)
    concrete: list[str]  # Concrete Inputs: each non-tensor input as text ("", "[1, 1]", "True")

    def dim(self, i: int) -> tuple[int, ...]:
        """Shape of input ``i`` (a tensor); NoModel when it is missing or not a shape."""
        if i >= len(self.dims) or not isinstance(self.dims[i], list):
            raise NoModel(f"input {i} has no recorded shape")
        shape = self.dims[i]
        if not all(isinstance(d, int) for d in shape):
            raise NoModel(f"input {i} is not a tensor (its dims are {shape})")
        return tuple(shape)

    def has_tensor(self, i: int) -> bool:
        """Whether input ``i`` is a tensor that was passed (an absent optional one is ``[]``)."""
        return i < len(self.dims) and isinstance(self.dims[i], list) and len(self.dims[i]) > 0

    def dtype(self, i: int) -> str:
        return self.types[i] if i < len(self.types) else ""

    def bpe(self, i: int) -> int:
        return bytes_per_element(self.dtype(i))

    def stride(self, i: int) -> tuple[int, ...] | None:
        if i < len(self.strides) and isinstance(self.strides[i], list) and self.strides[i]:
            s = self.strides[i]
            return tuple(s) if all(isinstance(x, int) for x in s) else None
        return None

    def arg(self, i: int) -> Any:
        """Concrete input ``i`` decoded: ints, floats, bools, lists; None when empty or absent."""
        if i >= len(self.concrete):
            return None
        return parse_concrete(self.concrete[i])


@dataclass(frozen=True)
class OpCost:
    """What one call of an op costs: ``flops``, ``bytes`` moved, in which ``precision``."""

    family: str  # "gemm", "attention", "conv", "elementwise", "softmax", "normalization", "reduce"
    flops: int
    bytes: int
    precision: str | None  # "bf16", "fp16", "fp8", "fp32", "fp64"; None: not a float type
    memory_bound: bool = False  # bytes-only families: bound by memory bandwidth by nature


def bytes_per_element(dtype: str) -> int:
    try:
        return BYTES_PER_ELEMENT[dtype.lower()]
    except KeyError:
        raise NoModel(f"unknown element size of dtype {dtype!r}") from None


def precision_of(dtype: str) -> str | None:
    return PRECISION.get(dtype.lower())


def parse_concrete(text: str) -> Any:
    """A ``Concrete Inputs`` string as a value: "" / "None" → None, "True" → True, "[1, 2]" →
    [1, 2], "0." → 0.0, "1" → 1; anything else stays text."""
    if text in ("", "None"):
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        try:
            return float(text)
        except ValueError:
            return text


def elements(shape: Sequence[int], strides: Sequence[int] | None = None) -> int:
    """Elements of a tensor stored in memory: dims with stride 0 (``expand``) are stored once."""
    if strides is None or len(strides) != len(shape):
        return prod(shape)
    return prod(n for n, s in zip(shape, strides, strict=True) if s != 0)


@cache
def _models() -> dict[str, Callable[[OpCall], OpCost]]:
    # imported here: the family modules import this one for OpCall/OpCost
    from analysis.metrics import (
        perf_model_attention,
        perf_model_conv,
        perf_model_gemm,
        perf_model_memory,
    )

    models: dict[str, Callable[[OpCall], OpCost]] = {}
    for family in (perf_model_gemm, perf_model_attention, perf_model_conv, perf_model_memory):
        models.update(family.MODELS)
    return models


def modelled_ops() -> list[str]:
    """The operator names that have a model."""
    return sorted(_models())


def op_cost(call: OpCall) -> OpCost:
    """The cost of one call; raises :class:`NoModel` (with the reason) when there is none."""
    model = _models().get(call.name)
    if model is None:
        raise NoModel("no model for this operator")
    try:
        return model(call)
    except NoModel:
        raise
    except (IndexError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise NoModel(f"unexpected args for {call.name}: {exc}") from None
