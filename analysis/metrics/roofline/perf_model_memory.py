"""Performance models of memory-bound ops: elementwise, normalisation, reduction (bytes first).

These ops do a few operations per element loaded, far below any GPU's ridge point, so their
roofline bound is always memory bandwidth (``OpCost.memory_bound``). FLOPs are given for
completeness with TraceLens's counts.

- Unary elementwise (``y = f(x)``, also ``copy_(dst, src)``): ``n = |input 0|``; FLOPs ``n``;
  bytes ``n·bpe(in) + n·bpe(out)``, the output dtype being the second tensor's when there is one.
- Binary elementwise (``y = a ∘ b`` with broadcasting): FLOPs ``|y|``; bytes
  ``|a|·bpe(a) + |b|·bpe(b) + |y|·bpe(y)``; a Python scalar counts as one 4-byte element; ``y``
  has the wider input dtype (the tensor's when one side is a scalar) unless an ``out`` is recorded.
- Layer norm over the last dims ``C = prod(normalized_shape)`` of ``N`` elements: FLOPs
  ``5·N + 6·C``; bytes ``N·(bpe_in + bpe_out)`` plus ``k·C·bpe_in`` with ``k`` = 2 (mean, variance)
  + 2 (their writes) + 1 for a weight + 1 for a bias (TraceLens's model; we count the weight and
  bias only when they are passed).
- Reductions (``sum``, ``mean``, ``amax``, the norms, ...): FLOPs = input elements; bytes = input
  and output elements at the input's element size. The output size follows ``dim``/``keepdim``
  from Concrete Inputs, read where each op's signature has them (:data:`REDUCE_ARGS`; TraceLens
  takes 1 when those are written as text, i.e. always in real traces).
- Softmax over one dim (``_softmax``, ``softmax``): FLOPs ``3·n`` (exponent, sum, division, as
  TraceLens's softmax model); bytes ``n·bpe(in) + n·bpe(out)`` (out: fp32 with
  ``half_to_float``, or the ``dtype`` argument).
- Nearest upsampling: bytes input + output (output spatial size from Concrete Inputs).
"""

from __future__ import annotations

from math import prod

from analysis.metrics.roofline.op_call import (
    SCALAR_TYPE_BYTES,
    NoModel,
    OpCall,
    OpCost,
    precision_of,
)


def _cost(call: OpCall, family: str, flops: int, moved: int) -> OpCost:
    return OpCost(family, flops, moved, precision_of(call.dtype(0)), memory_bound=True)


def unary(call: OpCall) -> OpCost:
    n = prod(call.dim(0))
    bpe_out = call.bpe(1) if call.has_tensor(1) else call.bpe(0)
    return _cost(call, "elementwise", n, n * call.bpe(0) + n * bpe_out)


def binary(call: OpCall) -> OpCost:
    a, b = call.dim(0), call.dim(1)
    y = broadcast_shape(a, b)
    bpe_a, bpe_b = call.bpe(0), call.bpe(1)
    if call.has_tensor(2):
        bpe_y = call.bpe(2)
    else:
        bpe_y = max(bpe_a, bpe_b) if a and b else bpe_a
    moved = prod(a) * bpe_a + prod(b) * bpe_b + prod(y) * bpe_y
    return _cost(call, "elementwise", prod(y), moved)


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    if any(x != y and 1 not in (x, y) for x, y in zip(a, b, strict=True)):
        raise NoModel(f"shapes {a} and {b} do not broadcast")
    return tuple(max(x, y) for x, y in zip(a, b, strict=True))


def layer_norm(call: OpCall) -> OpCost:
    n = prod(call.dim(0))
    normalized = call.arg(1)
    if not isinstance(normalized, list) or not all(isinstance(v, int) for v in normalized):
        raise NoModel(f"normalized_shape {normalized!r} not recorded")
    c = prod(normalized)
    affine, bias = call.has_tensor(2), call.has_tensor(3)
    vectors = 4 + int(affine) + int(affine and bias)
    bpe = call.bpe(0)
    return _cost(call, "normalization", 5 * n + 6 * c, 2 * n * bpe + vectors * c * bpe)


# Where ``dim`` and ``keepdim`` are among a reduction's arguments (the ATen signatures; the
# others: ``(self, dim, keepdim, ...)``): the norms take the order first, std/var the correction
# between the two. Fewer arguments recorded (``norm(self, p)``, ``std(self, unbiased)``): a full
# reduction.
REDUCE_ARGS = {
    "aten::norm": (2, 3),
    "aten::linalg_vector_norm": (2, 3),
    "aten::linalg_norm": (2, 3),
    "aten::std": (1, 3),
    "aten::var": (1, 3),
}


def reduction(call: OpCall) -> OpCost:
    shape = call.dim(0)
    n = prod(shape)
    if call.name in ("aten::cumsum", "aten::cumprod"):
        out = n
    else:
        dim_at, keep_at = REDUCE_ARGS.get(call.name, (1, 2))
        dims = call.arg(dim_at) if len(call.concrete) > keep_at else None
        keepdim = dims is not None and call.arg(keep_at) is True
        if isinstance(dims, int) and not isinstance(dims, bool):
            dims = [dims]
        if isinstance(dims, list) and dims and all(isinstance(d, int) for d in dims):
            reduced = {d % len(shape) for d in dims} if shape else set()
            out = (
                prod(1 if i in reduced else s for i, s in enumerate(shape))
                if keepdim
                else prod(s for i, s in enumerate(shape) if i not in reduced)
            )
        else:
            out = 1
    bpe = call.bpe(0)
    return _cost(call, "reduce", n, n * bpe + out * bpe)


def softmax(call: OpCall) -> OpCost:
    n = prod(call.dim(0))
    out = call.arg(2)
    if call.name == "aten::_softmax":
        bpe_out = 4 if out is True else call.bpe(0)
    else:
        bpe_out = SCALAR_TYPE_BYTES.get(out, call.bpe(0)) if isinstance(out, int) else call.bpe(0)
    return _cost(call, "softmax", 3 * n, n * call.bpe(0) + n * bpe_out)


def upsample_nearest(call: OpCall) -> OpCost:
    x = call.dim(0)
    size = call.arg(1)
    if not isinstance(size, list) or len(size) != len(x) - 2:
        raise NoModel(f"output size {size!r} not recorded")
    y = (*x[:2], *size)
    bpe = call.bpe(0)
    return _cost(call, "elementwise", prod(y), (prod(x) + prod(y)) * bpe)


UNARY_OPS = (
    "aten::copy_",
    "aten::copy",
    "aten::clamp_min",
    "aten::clamp_min_",
    "aten::clamp_max",
    "aten::clamp_max_",
    "aten::sigmoid",
    "aten::rsqrt",
    "aten::silu",
    "aten::neg",
    "aten::pow",
    "aten::gelu",
    "aten::relu",
    "aten::relu_",
    "aten::tanh",
    "aten::exp",
    "aten::sqrt",
    "aten::abs",
    "aten::reciprocal",
)  # TraceLens's list, plus common activations and math functions
BINARY_OPS = (
    "aten::add",
    "aten::add_",
    "aten::mul",
    "aten::mul_",
    "aten::div",
    "aten::div_",
    "aten::sub",
    "aten::sub_",
    "aten::sigmoid_backward",
    "aten::threshold_backward",
)
REDUCE_OPS = (
    "aten::sum",
    "aten::mean",
    "aten::max",
    "aten::min",
    "aten::amax",
    "aten::amin",
    "aten::norm",
    "aten::linalg_vector_norm",
    "aten::linalg_norm",
    "aten::std",
    "aten::var",
    "aten::logsumexp",
    "aten::cumsum",
    "aten::cumprod",
)

MODELS = {
    **{name: unary for name in UNARY_OPS},
    **{name: binary for name in BINARY_OPS},
    **{name: reduction for name in REDUCE_OPS},
    "aten::_softmax": softmax,
    "aten::softmax": softmax,
    "aten::layer_norm": layer_norm,
    "aten::native_layer_norm": layer_norm,
    "aten::upsample_nearest1d": upsample_nearest,
    "aten::upsample_nearest2d": upsample_nearest,
    "aten::upsample_nearest3d": upsample_nearest,
}
