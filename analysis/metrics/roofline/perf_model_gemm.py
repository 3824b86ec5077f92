"""Performance models of matrix multiplications (GEMM): FLOPs and bytes per call.

For ``C[M, N] = A[M, K] @ B[K, N]`` (times a batch ``B``): FLOPs = ``2·M·N·K`` per batch, plus
``M·N`` for an added bias; bytes = A, B and C each moved once (``M·K``, ``K·N``, ``M·N`` elements
at their own element sizes; the output at A's) plus the bias tensor as recorded. Shapes are the
logical ones: a transposed or strided operand costs the same; a dimension with stride 0 (an
``expand``-ed operand) is read once (:func:`analysis.metrics.roofline.op_call.elements`).

Argument positions are those of the ATen signatures (``addmm(self, mat1, mat2, beta, alpha)``,
``linear(input, weight, bias)``, ``_scaled_mm(self, mat2, scale_a, scale_b, bias, scale_result,
out_dtype, use_fast_accum)``). Backward GEMMs appear in traces as ``mm``/``bmm`` calls of their own
and are modelled as such.
"""

from __future__ import annotations

from math import prod

from analysis.metrics.roofline.op_call import (
    SCALAR_TYPE_BYTES,
    NoModel,
    OpCall,
    OpCost,
    elements,
    precision_of,
)


def _operand(call: OpCall, i: int) -> int:
    """Bytes of input ``i`` as stored (stride-0 dimensions once)."""
    return elements(call.dim(i), call.stride(i)) * call.bpe(i)


def _gemm(
    call: OpCall,
    a: int,
    b: int,
    batch: int,
    m: int,
    n: int,
    k: int,
    bias: int | None,
    out_bpe: int | None = None,
) -> OpCost:
    """A GEMM whose operands are inputs ``a``, ``b`` (and ``bias``, an input index or None)."""
    if min(batch, m, n, k) < 0:
        raise NoModel("negative dimension")
    flops = batch * (2 * m * n * k + (m * n if bias is not None else 0))
    out = batch * m * n * (out_bpe if out_bpe is not None else call.bpe(a))
    moved = _operand(call, a) + _operand(call, b) + out
    if bias is not None:
        moved += _operand(call, bias)
    return OpCost("gemm", flops, moved, precision_of(call.dtype(a)))


def mm(call: OpCall) -> OpCost:
    (m, k), (k2, n) = call.dim(0), call.dim(1)
    return _gemm(call, 0, 1, 1, m, n, _same(k, k2), None)


def addmm(call: OpCall) -> OpCost:
    (m, k), (k2, n) = call.dim(1), call.dim(2)
    return _gemm(call, 1, 2, 1, m, n, _same(k, k2), 0 if call.has_tensor(0) else None)


def bmm(call: OpCall) -> OpCost:
    (b, m, k), (b2, k2, n) = call.dim(0), call.dim(1)
    return _gemm(call, 0, 1, _same(b, b2), m, n, _same(k, k2), None)


def baddbmm(call: OpCall) -> OpCost:
    (b, m, k), (b2, k2, n) = call.dim(1), call.dim(2)
    return _gemm(call, 1, 2, _same(b, b2), m, n, _same(k, k2), 0 if call.has_tensor(0) else None)


def linear(call: OpCall) -> OpCost:
    x, w = call.dim(0), call.dim(1)  # x[..., K], weight[N, K]
    if len(w) != 2 or not x:
        raise NoModel(f"linear with input {x} and weight {w}")
    n, k = w
    return _gemm(call, 0, 1, 1, prod(x[:-1]), n, _same(x[-1], k), 2 if call.has_tensor(2) else None)


def matmul(call: OpCall) -> OpCost:
    """``torch.matmul`` with its broadcasting: 1-D operands gain a dimension of 1 (then dropped),
    batch dimensions broadcast."""
    a, b = call.dim(0), call.dim(1)
    if not a or not b:
        raise NoModel("matmul of a 0-d tensor")
    m, k = (1, a[0]) if len(a) == 1 else a[-2:]
    k2, n = (b[0], 1) if len(b) == 1 else b[-2:]
    batch = prod(_broadcast(a[:-2], b[:-2]))
    return _gemm(call, 0, 1, batch, m, n, _same(k, k2), None)


def scaled_mm(call: OpCall) -> OpCost:
    """fp8 (or other scaled) GEMM; the scale tensors are moved too; the output is ``out_dtype``
    (a ScalarType code in Concrete Inputs), else the input's dtype."""
    (m, k), (k2, n) = call.dim(0), call.dim(1)
    out_code = call.arg(6)
    out_bpe = SCALAR_TYPE_BYTES.get(out_code) if isinstance(out_code, int) else None
    cost = _gemm(call, 0, 1, 1, m, n, _same(k, k2), 4 if call.has_tensor(4) else None, out_bpe)
    scales = sum(_operand(call, i) for i in (2, 3) if call.has_tensor(i))
    return OpCost(cost.family, cost.flops, cost.bytes + scales, cost.precision)


def _same(x: int, y: int) -> int:
    if x != y:
        raise NoModel(f"inner dimensions differ ({x} vs {y})")
    return x


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b, strict=True):
        if x != y and 1 not in (x, y):
            raise NoModel(f"batch dimensions {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


MODELS = {
    "aten::mm": mm,
    "aten::addmm": addmm,
    "aten::addmm_": addmm,
    "aten::bmm": bmm,
    "aten::baddbmm": baddbmm,
    "aten::baddbmm_": baddbmm,
    "aten::linear": linear,
    "aten::matmul": matmul,
    "aten::_scaled_mm": scaled_mm,
}
