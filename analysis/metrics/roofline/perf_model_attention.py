"""Performance models of scaled-dot-product attention: FLOPs and bytes per call.

Shapes: query ``(B, H_Q, N_Q, d_qk)``, key ``(B, H_KV, N_KV, d_qk)``, value ``(B, H_KV, N_KV, d_v)``
(grouped-query attention when ``H_KV < H_Q``; 3-D inputs have one head).

- Forward FLOPs: the two matrix products ``S = Q·Kᵀ`` and ``O = P·V``:
  ``2·B·H_Q·N_Q·N_KV·(d_qk + d_v)``; the softmax is left out (``d`` times smaller), as in
  FlashAttention's benchmarks and TraceLens.
- Causal attention: with ``N_Q == N_KV`` half of that (the convention of FlashAttention and
  TraceLens); with ``N_Q != N_KV`` the exact share of unmasked scores of PyTorch's causal mask
  (top-left aligned: query ``i`` sees keys ``0..i``), where TraceLens gives no number.
- Forward bytes: Q, K, V read and O written once, at the query's element size.
- Backward (``..._backward``): five products (``S`` recomputed, then ``dV``, ``dP``, ``dQ``, ``dK``),
  i.e. 2.5 times the forward FLOPs with the same causal share; bytes: Q, K, V, O and dO read, dQ,
  dK, dV written.

Argument positions (Concrete Inputs) of ``dropout_p``/``is_causal`` follow each ATen signature.
"""

from __future__ import annotations

from analysis.metrics.roofline.op_call import NoModel, OpCall, OpCost, precision_of

# op name → (index of query in the inputs, index of is_causal in Concrete Inputs, backward?)
_SIGNATURES: dict[str, tuple[int, int, bool]] = {
    "aten::scaled_dot_product_attention": (0, 5, False),
    "aten::_scaled_dot_product_flash_attention": (0, 4, False),
    "aten::_scaled_dot_product_efficient_attention": (0, 6, False),
    "aten::_scaled_dot_product_cudnn_attention": (0, 6, False),
    "aten::_scaled_dot_product_flash_attention_backward": (1, 11, True),
    "aten::_scaled_dot_product_efficient_attention_backward": (1, 11, True),
    "aten::_scaled_dot_product_cudnn_attention_backward": (1, 14, True),
}


def causal_share(n_q: int, n_kv: int) -> float:
    """Share of the ``N_Q × N_KV`` scores a causal mask keeps (see the module docstring)."""
    if n_q == n_kv:
        return 0.5
    kept = n_q * (n_q + 1) // 2 if n_q <= n_kv else n_kv * (n_kv + 1) // 2 + (n_q - n_kv) * n_kv
    return kept / (n_q * n_kv)


def _bhnd(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    if len(shape) == 4:
        return shape  # type: ignore[return-value]
    if len(shape) == 3:
        return shape[0], 1, shape[1], shape[2]
    raise NoModel(f"attention input of shape {shape}")


def attention(call: OpCall) -> OpCost:
    q_at, causal_at, backward = _SIGNATURES[call.name]
    b, h_q, n_q, d_qk = _bhnd(call.dim(q_at))
    b_k, h_kv, n_kv, d_k = _bhnd(call.dim(q_at + 1))
    b_v, h_v, n_v, d_v = _bhnd(call.dim(q_at + 2))
    if len({b, b_k, b_v}) != 1 or h_kv != h_v or n_kv != n_v or d_qk != d_k:
        raise NoModel(f"query/key/value shapes do not match: {call.dims[q_at : q_at + 3]}")
    if h_q % h_kv:
        raise NoModel(f"{h_q} query heads for {h_kv} key/value heads")
    causal = call.arg(causal_at) is True
    flops = 2 * b * h_q * n_q * n_kv * (d_qk + d_v)
    if backward:
        flops = flops * 5 // 2
    if causal:
        flops = round(flops * causal_share(n_q, n_kv))
    q, k, v = b * h_q * n_q * d_qk, b * h_kv * n_kv * d_qk, b * h_kv * n_kv * d_v
    o = b * h_q * n_q * d_v
    elems = q + k + v + o
    if backward:
        elems += o + q + k + v  # dO read; dQ, dK, dV written
    return OpCost("attention", flops, elems * call.bpe(q_at), precision_of(call.dtype(q_at)))


MODELS = {name: attention for name in _SIGNATURES}
