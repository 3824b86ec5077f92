"""Every performance-model formula against hand-computed FLOPs and bytes."""

from __future__ import annotations

import pytest

from analysis.metrics.roofline.op_call import NoModel, OpCall, parse_concrete
from analysis.metrics.roofline.perf_model import modelled_ops, op_cost
from analysis.metrics.roofline.perf_model_attention import causal_share

BF16, F32, FP8 = "c10::BFloat16", "float", "c10::Float8_e4m3fn"


def call(name, dims, types, strides=None, concrete=None):
    n = len(dims)
    return OpCall(name, dims, types, strides or [[] for _ in range(n)], concrete or [""] * n)


def cost(*args, **kw):
    return op_cost(call(*args, **kw))


# --- GEMM --------------------------------------------------------------------------------------


def test_mm_flops_and_bytes():
    c = cost("aten::mm", [[8944, 1024], [1024, 2816]], [BF16, BF16])
    assert c.flops == 2 * 8944 * 2816 * 1024
    assert c.bytes == (8944 * 1024 + 1024 * 2816 + 8944 * 2816) * 2
    assert (c.family, c.precision, c.memory_bound) == ("gemm", "bf16", False)


def test_transposed_input_costs_the_same_as_contiguous():
    plain = cost("aten::mm", [[64, 32], [32, 16]], [F32, F32], [[32, 1], [16, 1]])
    transposed = cost("aten::mm", [[64, 32], [32, 16]], [F32, F32], [[1, 64], [1, 32]])
    assert plain == transposed
    assert plain.flops == 2 * 64 * 16 * 32 and plain.bytes == (64 * 32 + 32 * 16 + 64 * 16) * 4


def test_expanded_operand_with_stride_zero_is_read_once():
    # bmm of a [8, 64, 32] by a weight expanded over the batch: stride 0 on dim 0
    c = cost("aten::bmm", [[8, 64, 32], [8, 32, 16]], [BF16, BF16], [[2048, 32, 1], [0, 16, 1]])
    assert c.flops == 8 * 2 * 64 * 16 * 32
    assert c.bytes == (8 * 64 * 32 + 32 * 16 + 8 * 64 * 16) * 2


def test_addmm_adds_bias_flops_and_the_bias_tensor():
    c = cost(
        "aten::addmm",
        [[1024], [8944, 1024], [1024, 1024], [], []],
        [BF16, BF16, BF16, "Scalar", "Scalar"],
    )
    assert c.flops == 2 * 8944 * 1024 * 1024 + 8944 * 1024 == 18_766_086_144
    assert c.bytes == (1024 + 8944 * 1024 + 1024 * 1024 + 8944 * 1024) * 2


def test_bmm_and_baddbmm_scale_with_the_batch():
    b = cost("aten::bmm", [[12, 128, 64], [12, 64, 128]], [BF16, BF16])
    assert b.flops == 12 * 2 * 128 * 128 * 64
    assert b.bytes == 12 * (128 * 64 + 64 * 128 + 128 * 128) * 2
    bb = cost(
        "aten::baddbmm",
        [[12, 128, 128], [12, 128, 64], [12, 64, 128], [], []],
        [BF16, BF16, BF16, "Scalar", "Scalar"],
    )
    assert bb.flops == 12 * (2 * 128 * 128 * 64 + 128 * 128)
    assert bb.bytes == b.bytes + 12 * 128 * 128 * 2


def test_linear_flattens_leading_dims_and_counts_bias_only_when_passed():
    with_bias = cost("aten::linear", [[16, 559, 1024], [1024, 1024], [1024]], [BF16] * 3)
    m = 16 * 559
    assert with_bias.flops == 2 * m * 1024 * 1024 + m * 1024
    assert with_bias.bytes == (m * 1024 + 1024 * 1024 + m * 1024 + 1024) * 2
    no_bias = cost("aten::linear", [[16, 559, 1024], [2816, 1024], []], [BF16, BF16, ""])
    assert no_bias.flops == 2 * m * 2816 * 1024


def test_matmul_broadcasts_batch_dims_and_promotes_vectors():
    c = cost("aten::matmul", [[4, 1, 32, 16], [3, 16, 8]], [F32, F32])
    assert c.flops == 4 * 3 * 2 * 32 * 8 * 16
    assert c.bytes == (4 * 32 * 16 + 3 * 16 * 8 + 12 * 32 * 8) * 4
    vec = cost("aten::matmul", [[16], [16, 8]], [F32, F32])
    assert vec.flops == 2 * 8 * 16 and vec.bytes == (16 + 16 * 8 + 8) * 4


def test_scaled_mm_fp8_with_output_dtype_and_scales():
    # out_dtype 15 = bfloat16; per-tensor float scales
    c = cost(
        "aten::_scaled_mm",
        [[128, 256], [256, 512], [], [], [], [], [], []],
        [FP8, FP8, F32, F32, "", "", "Scalar", "Scalar"],
        concrete=["", "", "", "", "", "", "15", "False"],
    )
    assert c.precision == "fp8" and c.flops == 2 * 128 * 512 * 256
    assert c.bytes == 128 * 256 + 256 * 512 + 128 * 512 * 2
    scaled = cost(
        "aten::_scaled_mm",
        [[128, 256], [256, 512], [1], [1], [], [], [], []],
        [FP8, FP8, F32, F32, "", "", "Scalar", "Scalar"],
        concrete=["", "", "", "", "", "", "15", "False"],
    )
    assert scaled.bytes == c.bytes + 2 * 4


def test_gemm_with_mismatched_inner_dims_has_no_model():
    with pytest.raises(NoModel, match="inner dimensions"):
        cost("aten::mm", [[4, 5], [6, 7]], [F32, F32])


# --- attention ---------------------------------------------------------------------------------


def _sdpa(name, q, k, v, causal_at, causal, dtype=BF16, extra=7):
    concrete = [""] * extra
    concrete[causal_at] = "True" if causal else "False"
    dims = [q, k, v] + [[]] * (extra - 3)
    return cost(name, dims, [dtype] * 3 + ["Scalar"] * (extra - 3), concrete=concrete)


def test_flash_attention_causal_is_half_of_full():
    q = [16, 16, 559, 64]
    full = _sdpa("aten::_scaled_dot_product_flash_attention", q, q, q, 4, False)
    causal = _sdpa("aten::_scaled_dot_product_flash_attention", q, q, q, 4, True)
    assert full.flops == 4 * 16 * 16 * 559 * 559 * 64
    assert causal.flops * 2 == full.flops and causal.flops == 10_239_377_408
    assert causal.bytes == 4 * 16 * 16 * 559 * 64 * 2


def test_causal_with_fewer_queries_than_keys_counts_the_unmasked_scores():
    # top-left causal mask, 4 queries x 6 keys: rows keep 1, 2, 3, 4 keys = 10 of 24
    assert causal_share(4, 6) == pytest.approx(10 / 24)
    assert causal_share(6, 4) == pytest.approx((1 + 2 + 3 + 4 + 4 + 4) / 24)
    c = _sdpa(
        "aten::scaled_dot_product_attention",
        [1, 1, 4, 8],
        [1, 1, 6, 8],
        [1, 1, 6, 8],
        5,
        True,
        extra=8,
    )
    assert c.flops == round(2 * 4 * 6 * 16 * 10 / 24)


def test_grouped_query_attention_uses_query_heads_for_flops_and_kv_heads_for_bytes():
    c = _sdpa(
        "aten::_scaled_dot_product_efficient_attention",
        [2, 8, 128, 64],
        [2, 2, 128, 64],
        [2, 2, 128, 64],
        6,
        False,
        extra=8,
    )
    assert c.flops == 2 * 2 * 8 * 128 * 128 * 128
    assert c.bytes == (2 * 8 * 128 * 64 * 2 + 2 * 2 * 128 * 64 * 2) * 2


def test_attention_backward_is_five_products():
    q = [2, 4, 256, 64]
    fwd = _sdpa("aten::_scaled_dot_product_flash_attention", q, q, q, 4, True)
    dims = [q, q, q, q, q, [2, 4, 256]] + [[]] * 9
    concrete = [""] * 15
    concrete[11] = "True"
    bwd = cost(
        "aten::_scaled_dot_product_flash_attention_backward",
        dims,
        [BF16] * 5 + [F32] + ["Scalar"] * 9,
        concrete=concrete,
    )
    assert bwd.flops == fwd.flops * 5 // 2
    assert bwd.bytes == 8 * 2 * 4 * 256 * 64 * 2


# --- convolution -------------------------------------------------------------------------------


def _conv(x, w, bias, stride, padding, dilation, transposed, out_pad, groups, dtype=BF16):
    dims = [x, w, [w[0] if not transposed else w[1] * groups] if bias else []] + [[]] * 6
    concrete = [
        "",
        "",
        "",
        str(stride),
        str(padding),
        str(dilation),
        str(transposed),
        str(out_pad),
        str(groups),
    ]
    return cost("aten::convolution", dims, [dtype] * 3 + ["ScalarList"] * 6, concrete=concrete)


def test_conv2d_patch_embedding():
    c = _conv(
        [128, 3, 224, 224], [768, 3, 16, 16], False, [16, 16], [0, 0], [1, 1], False, [0, 0], 1
    )
    y = 128 * 768 * 14 * 14
    assert c.flops == 2 * y * 3 * 16 * 16 == 29_595_009_024
    assert c.bytes == (128 * 3 * 224 * 224 + 768 * 3 * 16 * 16 + y) * 2


def test_conv_bias_adds_one_flop_per_output_and_the_bias_vector():
    args = ([8, 16, 32, 32], [32, 16, 3, 3])
    plain = _conv(*args, False, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    biased = _conv(*args, True, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    y = 8 * 32 * 32 * 32
    assert biased.flops - plain.flops == y
    assert biased.bytes - plain.bytes == 32 * 2


def test_strided_dilated_conv_output_shape():
    # out = floor((32 + 2*2 - 2*(5-1) - 1) / 3) + 1 = 10
    c = _conv([1, 4, 32, 32], [8, 4, 5, 5], False, [3, 3], [2, 2], [2, 2], False, [0, 0], 1)
    assert c.flops == 2 * (8 * 10 * 10) * (4 * 5 * 5)


def test_grouped_and_depthwise_conv():
    grouped = _conv([2, 64, 16, 16], [128, 16, 3, 3], False, [1], [1], [1], False, [0], 4)
    assert grouped.flops == 2 * (2 * 128 * 16 * 16) * (16 * 3 * 3)
    depthwise = _conv([2, 64, 16, 16], [64, 1, 3, 3], False, [1], [1], [1], False, [0], 64)
    assert depthwise.flops == 2 * (2 * 64 * 16 * 16) * 9
    with pytest.raises(NoModel, match="channels"):
        _conv([2, 64, 16, 16], [128, 16, 3, 3], False, [1], [1], [1], False, [0], 2)


def test_transposed_conv_counts_per_input_element():
    # (16 - 1) * 2 - 2 * 1 + (4 - 1) + 0 + 1 = 32
    c = _conv([1, 8, 16, 16], [8, 4, 4, 4], False, [2, 2], [1, 1], [1, 1], True, [0, 0], 1)
    assert c.flops == 2 * (8 * 16 * 16) * (4 * 4 * 4)
    assert c.bytes == (8 * 16 * 16 + 8 * 4 * 4 * 4 + 4 * 32 * 32) * 2


def test_cudnn_convolution_signature():
    c = cost(
        "aten::cudnn_convolution",
        [[1, 4, 8, 8], [4, 4, 3, 3]] + [[]] * 7,
        [F32, F32] + ["ScalarList"] * 3 + ["Scalar"] * 4,
        concrete=["", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False", "False", "True"],
    )
    assert c.flops == 2 * (4 * 8 * 8) * (4 * 9) and c.precision == "fp32"


def test_convolution_backward_follows_output_mask():
    dy, x, w = [8, 32, 16, 16], [8, 16, 16, 16], [32, 16, 3, 3]
    dims = [dy, x, w, [], [], [], [], [], [], [], []]
    types = [BF16] * 3 + ["ScalarList"] * 8

    def backward(mask):
        concrete = ["", "", "", "[32]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", mask]
        return cost("aten::convolution_backward", dims, types, concrete=concrete)

    forward = 2 * (8 * 32 * 16 * 16) * (16 * 9)
    ny, nx, nw = 8 * 32 * 256, 8 * 16 * 256, 32 * 16 * 9
    full = backward("[True, True, True]")
    assert full.flops == 2 * forward + ny
    assert full.bytes == 2 * (ny + nx + nw) * 2 + (ny + 32) * 2
    weight_only = backward("[False, True, False]")
    assert (weight_only.flops, weight_only.bytes) == (forward, (ny + nx + nw) * 2)
    with pytest.raises(NoModel, match="output_mask"):
        backward("")


# --- memory-bound ops --------------------------------------------------------------------------


def test_unary_reads_and_writes_every_element_in_its_dtypes():
    silu = cost("aten::silu", [[16, 559, 2816]], [BF16])
    n = 16 * 559 * 2816
    assert (silu.flops, silu.bytes, silu.memory_bound) == (n, 4 * n, True)
    cast = cost(
        "aten::copy_", [[4, 8], [4, 8], []], [BF16, F32, "Scalar"], concrete=["", "", "False"]
    )
    assert cast.bytes == 32 * 2 + 32 * 4


def test_binary_broadcasting_and_scalars():
    c = cost("aten::mul", [[1024], [16, 559, 1024]], [BF16, BF16])
    assert c.bytes == (1024 + 2 * 16 * 559 * 1024) * 2 and c.flops == 16 * 559 * 1024
    mixed = cost("aten::add", [[8, 4], [8, 1]], [BF16, F32])
    assert mixed.bytes == 32 * 2 + 8 * 4 + 32 * 4  # output in the wider type
    scalar = cost("aten::mul", [[8, 4], []], [BF16, "Scalar"], concrete=["", "2"])
    assert scalar.bytes == 32 * 2 + 4 + 32 * 2  # a scalar is one 4-byte element; out stays bf16


def test_layer_norm():
    n, c = 25089 * 768, 768
    full = cost(
        "aten::layer_norm",
        [[1, 25089, 768], [], [768], [768], [], []],
        [BF16, "ScalarList", BF16, BF16, "Scalar", "Scalar"],
        concrete=["", "[768]", "", "", "1e-06", "True"],
    )
    assert full.flops == 5 * n + 6 * c == 96_346_368
    assert full.bytes == 2 * n * 2 + 6 * c * 2
    bare = cost(
        "aten::layer_norm",
        [[1, 25089, 768], [], [], [], [], []],
        [BF16, "ScalarList", "", "", "Scalar", "Scalar"],
        concrete=["", "[768]", "", "", "1e-06", "True"],
    )
    assert full.bytes - bare.bytes == 2 * c * 2


def test_reductions_follow_dim_and_keepdim():
    n = 16 * 559 * 1024
    mean = cost(
        "aten::mean",
        [[16, 559, 1024], [], [], []],
        [F32, "ScalarList", "Scalar", ""],
        concrete=["", "[-1]", "True", ""],
    )
    assert (mean.flops, mean.bytes) == (n, n * 4 + 16 * 559 * 4)
    total = cost("aten::sum", [[16, 559, 1024], []], [F32, ""], concrete=["", ""])
    assert total.bytes == n * 4 + 4
    two = cost(
        "aten::amax",
        [[4, 5, 6], [], []],
        [F32, "ScalarList", "Scalar"],
        concrete=["", "[0, 2]", "False"],
    )
    assert two.bytes == (120 + 5) * 4
    cumsum = cost("aten::cumsum", [[4, 5], [], []], [F32, "Scalar", ""], concrete=["", "1", ""])
    assert cumsum.bytes == 2 * 20 * 4


def test_norms_and_std_read_dim_and_keepdim_where_their_signatures_have_them():
    """``linalg_norm(self, ord, dim, keepdim, dtype)`` (OWLv2's, TraceLens's Reduce_fwd sheet),
    ``norm(self, p, dim, keepdim)``, ``linalg_vector_norm`` and ``std(self, dim, correction,
    keepdim)``: reading ``dim`` at 1 would take the order (2) for a dimension."""
    n = 5184 * 768
    for name in ("aten::linalg_norm", "aten::linalg_vector_norm", "aten::norm"):
        kept = cost(name, [[1, 5184, 768], [], [], [], []],
                    [BF16, "Scalar", "ScalarList", "Scalar", ""], concrete=["", "2", "[-1]", "True", ""])
        assert (kept.flops, kept.bytes) == (n, (n + 5184) * 2), name
        whole = cost(name, [[1, 5184, 768], []], [BF16, "Scalar"], concrete=["", "2"])
        assert whole.bytes == (n + 1) * 2, name
    dropped = cost("aten::norm", [[4, 5, 6], [], [], []], [F32, "Scalar", "ScalarList", "Scalar"],
                   concrete=["", "2", "[0, 2]", "False"])
    assert dropped.bytes == (120 + 5) * 4
    std = cost("aten::std", [[4, 5, 6], [], [], []], [F32, "ScalarList", "Scalar", "Scalar"],
               concrete=["", "[1]", "1", "True"])
    assert std.bytes == (120 + 24) * 4
    assert cost("aten::std", [[4, 5, 6], []], [F32, "Scalar"], concrete=["", "True"]).bytes == 121 * 4


def test_a_bool_tensor_is_one_byte_an_element():
    """TraceLens has no size for ``bool`` (its bytes are NaN on OWLv2's mask copy); 1 byte."""
    mask = cost("aten::copy_", [[1, 1, 5, 5], [1, 1, 5, 5], []], ["bool", BF16, "Scalar"],
                strides=[[25, 25, 5, 1], [25, 25, 5, 1], []], concrete=["", "", "False"])
    assert (mask.flops, mask.bytes) == (25, 25 * 1 + 25 * 2)


def test_softmax_and_upsample():
    s = cost(
        "aten::_softmax",
        [[3136, 12, 8, 8], [], []],
        [BF16, "Scalar", "Scalar"],
        concrete=["", "-1", "False"],
    )
    n = 3136 * 12 * 64
    assert (s.flops, s.bytes, s.memory_bound) == (3 * n, 4 * n, True)
    up = cost(
        "aten::upsample_nearest1d",
        [[2, 3, 8], [], []],
        [F32, "ScalarList", "ScalarList"],
        concrete=["", "[16]", ""],
    )
    assert up.bytes == (48 + 96) * 4


# --- what has no model ---------------------------------------------------------------------------


def test_unknown_ops_and_dtypes_are_no_model_never_guessed():
    with pytest.raises(NoModel, match="no model"):
        cost("aten::cat", [[[2, 3], [2, 3]], []], ["TensorList", "Scalar"])
    with pytest.raises(NoModel, match="dtype"):
        cost("aten::mm", [[2, 3], [3, 4]], ["c10::Float4_weird", "c10::Float4_weird"])
    with pytest.raises(NoModel):
        cost("aten::mm", [[2, 3]], [F32])  # a missing input
    assert "aten::mm" in modelled_ops() and "aten::cat" not in modelled_ops()


def test_concrete_inputs_parsing():
    assert parse_concrete("") is None and parse_concrete("True") is True
    assert parse_concrete("[16, 16]") == [16, 16] and parse_concrete("0.") == 0.0
    assert parse_concrete("1") == 1 and parse_concrete("same") == "same"


def test_a_conv_without_concrete_inputs_is_not_modelled():
    """Traces without ``Concrete Inputs`` give no stride, padding or dilation: stride 1, padding
    0 were assumed, and AlexNet's 11x11 stride-4 stem (``[[1,3,224,224],[64,3,11,11],[64]]``)
    cost 2.131 GFLOP instead of 0.141 (66.6 TFLOP/s on an RTX 3080, a real trace of a sweep)."""
    no_concrete = OpCall("aten::cudnn_convolution", [[1, 3, 224, 224], [64, 3, 11, 11]],
                         [F32, F32], [[], []], [])
    with pytest.raises(NoModel, match="no Concrete Inputs"):
        op_cost(no_concrete)
    given = _conv([1, 3, 224, 224], [64, 3, 11, 11], False, [4, 4], [2, 2], [1, 1], False,
                  [0, 0], 1)
    assert given.flops == 2 * (64 * 55 * 55) * (3 * 11 * 11)  # 140,553,600: 0.141 GFLOP


def test_complex_elements_are_8_and_16_bytes():
    """RoPE's complex multiply (``aten::mul`` of ``c10::complex<float>``, a real Llama trace):
    TraceLens has no element size for it (bytes NaN)."""
    c = cost("aten::mul", [[4, 64], [4, 64]], ["c10::complex<float>", "c10::complex<float>"])
    assert c.bytes == 3 * 4 * 64 * 8
    d = cost("aten::mul", [[4, 64], [4, 64]], ["c10::complex<double>", "c10::complex<double>"])
    assert d.bytes == 2 * c.bytes
