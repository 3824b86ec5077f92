"""One operator call as the profiler recorded it, and what a performance model says it costs.

The shared vocabulary of the performance models (:mod:`analysis.metrics.roofline.perf_model`
dispatches to them): :class:`OpCall` (the ``record_shapes=True`` args of one call, decoded),
:class:`OpCost` (FLOPs and bytes moved per call, in which precision), :class:`NoModel` (why a call
has no cost), and the dtype tables (bytes per element, precision per dtype). Units: FLOPs and bytes
per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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
