"""Performance models of convolutions (1-D, 2-D, 3-D; grouped; transposed): FLOPs and bytes per call.

Input ``x = (N, C_in, *spatial)``, weight ``w = (C_out, C_in / groups, *kernel)`` (transposed:
``(C_in, C_out / groups, *kernel)``), output ``y = (N, C_out, *out)`` with
``out = floor((in + 2·padding − dilation·(kernel − 1) − 1) / stride) + 1`` (transposed:
``(in − 1)·stride − 2·padding + dilation·(kernel − 1) + output_padding + 1``).

- FLOPs: ``2 · |y| · |w[1:]|`` (each output element is a dot product over ``C_in / groups ×
  kernel``, so groups are accounted for by the weight's shape); transposed: ``2 · |x| · |w[1:]|``;
  plus ``|y|`` for a bias. This is ``torch.utils.flop_counter``'s definition, and TraceLens's.
- Bytes: x, w, the bias (``C_out``) and y each moved once, at the input's element size.

Backward (``aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
dilation, transposed, output_padding, groups, output_mask)``): for each gradient that
``output_mask`` asks for, the input and weight gradients cost the forward's FLOPs each (the same
multiply-adds, rearranged, as ``torch.utils.flop_counter``), the bias gradient ``|y|``; bytes: the
input gradient reads dY and w and writes dX, the weight gradient reads dY and x and writes dW, the
bias gradient reads dY and writes ``C_out``.

The bias counts when the bias input is a tensor (TraceLens only counts it when the op has exactly
three inputs, which ``aten::convolution`` never has in a trace: docs/deviations.md).
"""

from __future__ import annotations

from math import prod

from analysis.metrics.roofline.op_call import NoModel, OpCall, OpCost, precision_of

# op name → positions of (bias, stride, padding, dilation, transposed, output_padding, groups);
# None: the op does not take it (cudnn_convolution has no bias and is never transposed)
_SIGNATURES: dict[str, tuple[int | None, ...]] = {
    "aten::convolution": (2, 3, 4, 5, 6, 7, 8),
    "aten::_convolution": (2, 3, 4, 5, 6, 7, 8),
    "aten::conv1d": (2, 3, 4, 5, None, None, 6),
    "aten::conv2d": (2, 3, 4, 5, None, None, 6),
    "aten::conv3d": (2, 3, 4, 5, None, None, 6),
    "aten::cudnn_convolution": (None, 3, 2, 4, None, None, 5),
    "aten::miopen_convolution": (2, 4, 3, 5, None, None, 6),
}


def _per_dim(value, ndim: int, default: int) -> tuple[int, ...]:
    if value is None:
        return (default,) * ndim
    if isinstance(value, int):
        return (value,) * ndim
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return tuple(value) * ndim if len(value) == 1 else tuple(value)
    raise NoModel(f"convolution parameter {value!r} is not a list of ints")


def output_shape(x, w, stride, padding, dilation, transposed=False, output_padding=None):
    """The output shape of a convolution (see the module docstring)."""
    spatial = []
    for i, (n, k) in enumerate(zip(x[2:], w[2:], strict=True)):
        s, p, d = stride[i], padding[i], dilation[i]
        if transposed:
            spatial.append((n - 1) * s - 2 * p + d * (k - 1) + output_padding[i] + 1)
        else:
            spatial.append((n + 2 * p - d * (k - 1) - 1) // s + 1)
    return (x[0], w[1] if transposed else w[0], *spatial)


def convolution(call: OpCall) -> OpCost:
    bias_at, stride_at, pad_at, dil_at, tr_at, outpad_at, groups_at = _SIGNATURES[call.name]
    x, w = call.dim(0), call.dim(1)
    ndim = len(x) - 2
    if ndim not in (1, 2, 3) or len(w) != len(x):
        raise NoModel(f"convolution of input {x} with weight {w}")
    if len(call.concrete) <= max(a for a in (stride_at, pad_at, dil_at) if a is not None):
        # stride 1, padding 0 by default would be a guess: AlexNet's 11x11 stride-4 stem read
        # as 15x its FLOPs (66.6 TFLOP/s on an RTX 3080); TraceLens refuses these calls too
        raise NoModel("the trace records no Concrete Inputs for it (stride, padding, dilation "
                      "unknown: PyTorch before 2.1, or record_shapes without them)")
    stride = _per_dim(call.arg(stride_at), ndim, 1)
    padding = _per_dim(call.arg(pad_at), ndim, 0)
    dilation = _per_dim(call.arg(dil_at), ndim, 1)
    transposed = tr_at is not None and call.arg(tr_at) is True
    out_pad = _per_dim(call.arg(outpad_at) if outpad_at is not None else None, ndim, 0)
    groups = call.arg(groups_at) or 1
    c_in = w[0] if transposed else w[1] * groups
    if x[1] != c_in:
        raise NoModel(f"input channels {x[1]} do not match the weight {w} with groups={groups}")
    y = output_shape(x, w, stride, padding, dilation, transposed, out_pad)
    if transposed:
        y = (y[0], w[1] * groups, *y[2:])
    if min(y) <= 0:
        raise NoModel(f"empty output {y}")
    bias = bias_at is not None and call.has_tensor(bias_at)
    flops = 2 * prod(x if transposed else y) * prod(w[1:]) + (prod(y) if bias else 0)
    elems = prod(x) + prod(w) + prod(y) + (y[1] if bias else 0)
    return OpCost("conv", flops, elems * call.bpe(0), precision_of(call.dtype(0)))


def convolution_backward(call: OpCall) -> OpCost:
    dy, x, w = call.dim(0), call.dim(1), call.dim(2)
    transposed = call.arg(7) is True
    mask = _bools(call.concrete[10] if len(call.concrete) > 10 else "")
    if len(x) != len(w) or len(dy) != len(x) or len(mask) != 3:
        raise NoModel(f"convolution_backward with dims {call.dims[:3]}, output_mask {mask}")
    forward = 2 * prod(x if transposed else dy) * prod(w[1:])
    nx, nw, ny = prod(x), prod(w), prod(dy)
    flops = forward * (mask[0] + mask[1]) + (ny if mask[2] else 0)
    elems = mask[0] * (ny + nw + nx) + mask[1] * (ny + nx + nw) + mask[2] * (ny + dy[1])
    return OpCost("conv", flops, elems * call.bpe(0), precision_of(call.dtype(0)))


def _bools(text: str) -> list[bool]:
    """``"[True, False, True]"`` (how a bool list appears in Concrete Inputs) as a list."""
    items = [t.strip() for t in text.strip("[]").split(",") if t.strip()]
    if not all(t in ("True", "False", "true", "false", "1", "0") for t in items):
        raise NoModel(f"output_mask {text!r} not recorded")
    return [t in ("True", "true", "1") for t in items]


MODELS = {name: convolution for name in _SIGNATURES}
MODELS["aten::convolution_backward"] = convolution_backward
