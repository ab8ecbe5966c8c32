"""ONNX Runtime's weight-only quantized and mixture-of-experts contrib ops (com.microsoft):
MatMulBnb4, MatMulFpQ4, MoE, QMoE and QEmbedLayerNormalization. Each case builds one node, runs it
in onnxruntime and in kiln on the same random inputs (fixed seed) and compares; where
onnxruntime's CPU kernel does not compute what its schema says (MatMulBnb4 with transB 0) or has
no kernel for a layout (MoE's SwiGLU with FC3 or concatenated halves), against numpy. Each op has
one malformed case, refused with a message that names the node and the tensor."""
import numpy as np
import pytest

import kiln
from test_contrib_ops import check, contrib_model, feeds_of, rng, run_both


def refused(model, feeds):
    """The message kiln refuses the model with, at load or when it runs."""
    with pytest.raises(Exception) as info:
        kiln.InferenceSession(model).run(None, feeds)
    return str(info.value)


# ---- MatMulBnb4: bitsandbytes FP4 / NF4 ----------------------------------------------------------

FP4 = np.array([0.0, 5.208333333e-03, 0.66666667, 1.0, 0.33333333, 0.5, 0.16666667, 0.25,
                -0.0, -5.208333333e-03, -0.66666667, -1.0, -0.33333333, -0.5, -0.16666667, -0.25], np.float32)
NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
                -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                0.7229568362236023, 1.0], np.float32)


def bnb4_weights(r, N, K, block_size, quant_type):
    """(B, absmax, W [N, K]) of random 4-bit codes, two a byte, high nibble first."""
    n = N * K
    codes = r.integers(0, 16, n + n % 2)
    b = ((codes[0::2] << 4) | codes[1::2]).astype(np.uint8)
    absmax = (r.random(-(-n // block_size)) + 0.5).astype(np.float32)
    table = NF4 if quant_type == 1 else FP4
    w = (table[codes[:n]] * np.repeat(absmax, block_size)[:n]).reshape(N, K)
    return b, absmax, w


@pytest.mark.parametrize("quant_type", [0, 1], ids=["FP4", "NF4"])
@pytest.mark.parametrize("K,N,block_size,a_shape", [
    (64, 16, 32, (3, 64)), (40, 12, 16, (2, 3, 40)), (33, 5, 16, (33,)), (16, 48, 256, (4, 16)),
    (128, 8, 64, (1, 2, 2, 128))])
@pytest.mark.parametrize("constant", [True, False], ids=["B_constant", "B_fed"])
def test_matmul_bnb4(quant_type, K, N, block_size, a_shape, constant):
    r = rng(41)
    b, absmax, _ = bnb4_weights(r, N, K, block_size, quant_type)
    inputs = [("A", r.standard_normal(a_shape).astype(np.float32)), ("B", b), ("absmax", absmax)]
    check("MatMulBnb4", inputs, ["Y"], {"B", "absmax"} if constant else set(), K=K, N=N,
          block_size=block_size, quant_type=quant_type, training_mode=0)


@pytest.mark.parametrize("quant_type", [0, 1], ids=["FP4", "NF4"])
def test_matmul_bnb4_trans_b_0_against_numpy(quant_type):
    """transB 0 is Y = A [..., N] x W [N, K] by the schema; onnxruntime's kernel instead reads
    row k of W with a stride of K values (past B's end when K > N), so numpy is the reference."""
    r = rng(42)
    K, N = 48, 20
    b, absmax, w = bnb4_weights(r, N, K, 32, quant_type)
    a = r.standard_normal((2, 3, N)).astype(np.float32)
    model = contrib_model("MatMulBnb4", [("A", a), ("B", b), ("absmax", absmax)], ["Y"], {"B", "absmax"},
                          K=K, N=N, block_size=32, quant_type=quant_type, transB=0)
    got = kiln.InferenceSession(model).run(None, {"A": a})[0]
    np.testing.assert_allclose(got, a @ w, rtol=1e-5, atol=1e-5)


def test_matmul_bnb4_blob_of_the_wrong_size_is_refused():
    r = rng(43)
    b, absmax, _ = bnb4_weights(r, 8, 32, 16, 1)
    a = r.standard_normal((2, 32)).astype(np.float32)
    model = contrib_model("MatMulBnb4", [("A", a), ("B", b[:-1]), ("absmax", absmax)], ["Y"], {"absmax"},
                          K=32, N=8, block_size=16, quant_type=1)
    message = refused(model, {"A": a, "B": b[:-1]})
    assert "MatMulBnb4_node" in message and "B holds 127 values, where (N x K + 1) / 2 = 128" in message, message


# ---- MatMulFpQ4: MLAS's Q4 blobs -----------------------------------------------------------------

def fpq4_blob(r, K, N, zero_points):
    """(blob, W [K, N]): per column, per block of 32 rows, a float scale, a uint8 zero point
    (blk_quant_type 1) and 16 bytes holding row j low and row j + 16 high."""
    blocks = -(-K // 32)
    w = np.zeros((K, N), np.float32)
    blob = bytearray()
    for n in range(N):
        for kb in range(blocks):
            scale = np.float32(r.random() * 0.1 + 0.01)
            zero = int(r.integers(0, 16)) if zero_points else 8
            codes = r.integers(0, 16, 32)
            blob += scale.tobytes() + (bytes([zero]) if zero_points else b"")
            blob += bytes(int(codes[j]) | (int(codes[j + 16]) << 4) for j in range(16))
            rows = min(32, K - kb * 32)
            w[kb * 32:kb * 32 + rows, n] = (codes[:rows] - zero) * scale
    return np.frombuffer(bytes(blob), np.uint8).copy(), w


@pytest.mark.parametrize("blk_quant_type", [0, 1, 2])
@pytest.mark.parametrize("K,N,a_shape", [(64, 16, (3, 64)), (40, 12, (2, 3, 40)), (96, 7, (96,)), (32, 33, (5, 32))])
@pytest.mark.parametrize("constant", [True, False], ids=["B_constant", "B_fed"])
def test_matmul_fpq4(blk_quant_type, K, N, a_shape, constant):
    r = rng(44)
    blob, _ = fpq4_blob(r, K, N, blk_quant_type != 0)
    inputs = [("A", r.standard_normal(a_shape).astype(np.float32)), ("B", blob),
              ("B_shape", np.array([K, N], np.int64))]
    check("MatMulFpQ4", inputs, ["Y"], {"B", "B_shape"} if constant else {"B_shape"}, rtol=1e-4, atol=1e-4,
          blk_quant_type=blk_quant_type)


def test_matmul_fpq4_against_numpy():
    r = rng(45)
    blob, w = fpq4_blob(r, 70, 9, True)
    a = r.standard_normal((4, 70)).astype(np.float32)
    model = contrib_model("MatMulFpQ4", [("A", a), ("B", blob), ("B_shape", np.array([70, 9], np.int64))], ["Y"],
                          {"B", "B_shape"}, blk_quant_type=1)
    np.testing.assert_allclose(kiln.InferenceSession(model).run(None, {"A": a})[0], a @ w, rtol=1e-5, atol=1e-5)


def test_matmul_fpq4_blob_of_the_wrong_size_is_refused():
    r = rng(46)
    blob, _ = fpq4_blob(r, 64, 4, False)
    a = r.standard_normal((2, 64)).astype(np.float32)
    model = contrib_model("MatMulFpQ4", [("A", a), ("B", blob), ("B_shape", np.array([64, 4], np.int64))], ["Y"],
                          {"B", "B_shape"}, blk_quant_type=1)
    message = refused(model, {"A": a})
    assert "MatMulFpQ4_node" in message and "B holds 160 values, where N x ceil(K / 32) x 21 = 168" in message, message


# ---- MoE and QMoE: top-k routing over experts ----------------------------------------------------

def moe_reference(x, logits, fc1, fc2, k, normalize, activation, fc3=None, alpha=1.0, beta=0.0,
                  limit=np.inf, fusion=1):
    """numpy's MoE: fc = (weights [E, out, in], bias [E, out] or None) per projection."""
    hidden = x.shape[-1]
    rows = x.reshape(-1, hidden).astype(np.float64)
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    out = np.zeros_like(rows)

    def linear(fc, e, v):
        w, b = fc
        return v @ w[e].T.astype(np.float64) + (b[e] if b is not None else 0)

    for t in range(rows.shape[0]):
        chosen = sorted(range(p.shape[1]), key=lambda e: (-p[t, e], -e))[:k]
        weights = p[t, chosen] / (p[t, chosen].sum() if normalize else 1)
        for e, weight in zip(chosen, weights):
            h = linear(fc1, e, rows[t])
            if activation == "swiglu":
                inter = fc2[0].shape[2]
                gate, lin = ((h, linear(fc3, e, rows[t])) if fusion == 0 else
                             (h[0::2], h[1::2]) if fusion == 1 else (h[:inter], h[inter:]))
                gate = np.minimum(gate, limit)
                h = gate / (1 + np.exp(-alpha * gate)) * (np.clip(lin, -limit, limit) + beta)
            elif activation == "relu":
                h = np.maximum(h, 0)
            elif activation == "gelu":  # onnxruntime's MoE: the tanh approximation
                h = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))
            elif activation == "silu":
                h = h / (1 + np.exp(-h))
            out[t] += weight * linear(fc2, e, h)
    return out.reshape(x.shape).astype(np.float32)


def moe_case(r, shape, experts, inter, fusion_size):
    hidden = shape[-1]
    tokens = int(np.prod(shape[:-1]))
    x = r.standard_normal(shape).astype(np.float32)
    logits = r.standard_normal((tokens, experts)).astype(np.float32)
    fc1 = ((r.standard_normal((experts, fusion_size * inter, hidden)) * 0.3).astype(np.float32),
           (r.standard_normal((experts, fusion_size * inter)) * 0.1).astype(np.float32))
    fc2 = ((r.standard_normal((experts, hidden, inter)) * 0.3).astype(np.float32),
           (r.standard_normal((experts, hidden)) * 0.1).astype(np.float32))
    return x, logits, fc1, fc2


@pytest.mark.parametrize("activation", ["relu", "gelu", "silu", "identity"])
@pytest.mark.parametrize("k,normalize,shape,experts", [(1, 0, (5, 8), 4), (2, 1, (2, 3, 8), 4), (2, 0, (7, 16), 3),
                                                        (4, 1, (1, 4, 8), 6)])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_moe(activation, k, normalize, shape, experts, bias):
    r = rng(50)
    x, logits, fc1, fc2 = moe_case(r, shape, experts, 6, 1)
    inputs = [("input", x), ("router_probs", logits), ("fc1_experts_weights", fc1[0]),
              ("fc1_experts_bias", fc1[1] if bias else None), ("fc2_experts_weights", fc2[0]),
              ("fc2_experts_bias", fc2[1] if bias else None)]
    check("MoE", inputs, ["output"], {n for n, _ in inputs[2:]}, k=k, normalize_routing_weights=normalize,
          activation_type=activation)


@pytest.mark.parametrize("alpha,beta,limit", [(1.0, 0.0, None), (1.702, 1.0, 7.0), (1.702, 1.0, 0.3)])
def test_moe_swiglu_interleaved(alpha, beta, limit):
    """onnxruntime's CPU MoE runs swiglu_fusion 1 (gate and linear values interleaved) only."""
    r = rng(51)
    x, logits, fc1, fc2 = moe_case(r, (2, 3, 8), 4, 6, 2)
    limits = {} if limit is None else {"swiglu_limit": limit}
    inputs = [("input", x), ("router_probs", logits), ("fc1_experts_weights", fc1[0]), ("fc1_experts_bias", fc1[1]),
              ("fc2_experts_weights", fc2[0]), ("fc2_experts_bias", fc2[1])]
    check("MoE", inputs, ["output"], {n for n, _ in inputs[2:]}, k=2, normalize_routing_weights=1,
          activation_type="swiglu", swiglu_fusion=1, activation_alpha=alpha, activation_beta=beta, **limits)


@pytest.mark.parametrize("fusion", [0, 2])
def test_moe_swiglu_layouts_onnxruntime_does_not_run_against_numpy(fusion):
    """swiglu_fusion 2 (gate values, then linear ones) and 0 (the linear half from fc3)."""
    r = rng(52)
    x, logits, fc1, fc2 = moe_case(r, (5, 8), 4, 6, 2 if fusion == 2 else 1)
    fc3 = ((r.standard_normal((4, 6, 8)) * 0.3).astype(np.float32), (r.standard_normal((4, 6)) * 0.1).astype(np.float32))
    inputs = [("input", x), ("router_probs", logits), ("fc1_experts_weights", fc1[0]), ("fc1_experts_bias", fc1[1]),
              ("fc2_experts_weights", fc2[0]), ("fc2_experts_bias", fc2[1])]
    if fusion == 0:
        inputs += [("fc3_experts_weights", fc3[0]), ("fc3_experts_bias", fc3[1])]
    model = contrib_model("MoE", inputs, ["output"], {n for n, _ in inputs[2:]}, k=2, normalize_routing_weights=1,
                          activation_type="swiglu", swiglu_fusion=fusion, activation_alpha=1.702, activation_beta=1.0,
                          swiglu_limit=2.0)
    got = kiln.InferenceSession(model).run(None, {"input": x, "router_probs": logits})[0]
    want = moe_reference(x, logits, fc1, fc2, 2, True, "swiglu", fc3, 1.702, 1.0, 2.0, fusion)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_moe_ties_go_to_the_higher_expert():
    r = rng(53)
    x, _, fc1, fc2 = moe_case(r, (3, 8), 4, 6, 1)
    logits = np.array([[1, 1, 0, 0], [0, 2, 2, 2], [0, 0, 0, 0]], np.float32)
    inputs = [("input", x), ("router_probs", logits), ("fc1_experts_weights", fc1[0]), ("fc1_experts_bias", fc1[1]),
              ("fc2_experts_weights", fc2[0])]
    check("MoE", inputs, ["output"], {n for n, _ in inputs[2:]}, k=2)


def test_moe_router_with_more_experts_than_weights_is_refused():
    r = rng(54)
    x, _, fc1, fc2 = moe_case(r, (3, 8), 4, 6, 1)
    logits = r.standard_normal((3, 5)).astype(np.float32)
    inputs = [("input", x), ("router_probs", logits), ("fc1_experts_weights", fc1[0]), ("fc1_experts_bias", None),
              ("fc2_experts_weights", fc2[0])]
    message = refused(contrib_model("MoE", inputs, ["output"], {"fc1_experts_weights", "fc2_experts_weights"}),
                      {"input": x, "router_probs": logits})
    assert "MoE_node" in message and "fc1_experts_weights float32[4x6x8]" in message and "5 experts" in message, message


def pack_rows(values, bits):
    """`bits`-bit values packed along the last axis, low bits first, rows padded to whole bytes."""
    per_byte = 8 // bits
    v = np.pad(values, [(0, 0)] * (values.ndim - 1) + [(0, -values.shape[-1] % per_byte)])
    v = v.reshape(*v.shape[:-1], -1, per_byte).astype(np.uint8)
    return sum(v[..., i] << (i * bits) for i in range(per_byte)).astype(np.uint8)


def quantized_projection(r, experts, out, inner, bits, block_size, zero_points, scale_type):
    """(weights, scales, zero points or None, dequantized [E, out, in] float32)."""
    q = r.integers(0, 1 << bits, (experts, out, inner))
    blocks = 1 if block_size is None else inner // block_size
    scale = (r.random((experts, out, blocks)) * 0.02 + 0.01).astype(scale_type)
    zero = r.integers(0, 1 << bits, (experts, out, blocks)) if zero_points else np.full((experts, out, blocks), 1 << (bits - 1))
    dequantized = ((q - np.repeat(zero, inner // blocks, -1)) * np.repeat(scale.astype(np.float32), inner // blocks, -1))
    if block_size is None:
        packed_zero = pack_rows(zero[..., 0], bits)
        scale = scale[..., 0]
    else:
        packed_zero = pack_rows(zero, bits)
    return pack_rows(q, bits), scale, packed_zero if zero_points else None, dequantized.astype(np.float32)


def qmoe_inputs(r, shape, experts, inter, bits, block_size, zero_points, swiglu, dtype=np.float32, bias=True):
    hidden = shape[-1]
    tokens = int(np.prod(shape[:-1]))
    fc1_out = 2 * inter if swiglu else inter
    w1, s1, z1, d1 = quantized_projection(r, experts, fc1_out, hidden, bits, block_size, zero_points, dtype)
    w2, s2, z2, d2 = quantized_projection(r, experts, hidden, inter, bits, block_size, zero_points, dtype)
    b1 = (r.standard_normal((experts, fc1_out)) * 0.1).astype(dtype) if bias else None
    b2 = (r.standard_normal((experts, hidden)) * 0.1).astype(dtype) if bias else None
    x = r.standard_normal(shape).astype(dtype)
    logits = r.standard_normal((tokens, experts)).astype(dtype)
    inputs = [("input", x), ("router_probs", logits), ("fc1_experts_weights", w1), ("fc1_scales", s1),
              ("fc1_experts_bias", b1), ("fc2_experts_weights", w2), ("fc2_scales", s2), ("fc2_experts_bias", b2),
              ("fc3_experts_weights", None), ("fc3_scales", None), ("fc3_experts_bias", None),
              ("fc1_zero_points", z1), ("fc2_zero_points", z2)]
    return inputs, (d1, b1), (d2, b2)


QMOE_CONSTANTS = {"fc1_experts_weights", "fc1_scales", "fc1_experts_bias", "fc2_experts_weights", "fc2_scales",
                  "fc2_experts_bias", "fc1_zero_points", "fc2_zero_points"}


@pytest.mark.parametrize("bits,block_size", [(4, None), (4, 16), (4, 32), (8, None), (2, None), (2, 16)])
@pytest.mark.parametrize("zero_points", [False, True], ids=["no_zero_points", "zero_points"])
@pytest.mark.parametrize("activation,k", [("silu", 2), ("relu", 1), ("gelu", 3), ("swiglu", 2)])
def test_qmoe(bits, block_size, zero_points, activation, k):
    """onnxruntime's CPU QMoE renormalizes the top k routing weights whatever
    normalize_routing_weights says; kiln does the same."""
    r = rng(60)
    inputs, _, _ = qmoe_inputs(r, (2, 3, 32), 4, 64, bits, block_size, zero_points, activation == "swiglu")
    attrs = {"swiglu_fusion": 1, "activation_alpha": 1.702, "activation_beta": 1.0, "swiglu_limit": 7.0} \
        if activation == "swiglu" else {}
    if block_size:
        attrs["block_size"] = block_size
    check("QMoE", inputs, ["output"], QMOE_CONSTANTS, rtol=1e-4, atol=1e-4, k=k, expert_weight_bits=bits,
          activation_type=activation, normalize_routing_weights=0, **attrs)


@pytest.mark.parametrize("block_size", [16, 32])
def test_qmoe_8bit_blocks_within_onnxruntime_int8_activations(block_size):
    """Block-wise 8-bit experts have no float kernel in onnxruntime: it quantizes the activations
    to int8 per block, kiln keeps them float, so the two agree to that quantization's error."""
    r = rng(61)
    inputs, fc1, fc2 = qmoe_inputs(r, (6, 32), 4, 64, 8, block_size, True, False)
    model = contrib_model("QMoE", inputs, ["output"], QMOE_CONSTANTS, k=2, expert_weight_bits=8,
                          block_size=block_size, activation_type="silu")
    ort, ours = run_both(model, feeds_of(inputs, QMOE_CONSTANTS))
    want = moe_reference(inputs[0][1], inputs[1][1], fc1, fc2, 2, True, "silu")
    np.testing.assert_allclose(ours[0], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    assert np.abs(ort[0] - ours[0]).max() <= 0.02 * np.abs(want).max()


def test_qmoe_float16():
    r = rng(62)
    inputs, _, _ = qmoe_inputs(r, (5, 32), 4, 64, 4, 16, True, False, dtype=np.float16)
    check("QMoE", inputs, [("output", np.float16)], QMOE_CONSTANTS, rtol=2e-3, atol=2e-3, k=2,
          expert_weight_bits=4, block_size=16, activation_type="silu")


def test_qmoe_router_weights_are_the_mixing_weights():
    """With router_weights, router_probs only chooses the experts; the chosen experts' router
    weights, as they are, mix their outputs."""
    r = rng(63)
    inputs, _, _ = qmoe_inputs(r, (4, 32), 4, 64, 4, None, False, False)
    inputs += [("fc3_zero_points", None), ("router_weights", r.random((4, 4)).astype(np.float32))]
    check("QMoE", inputs, ["output"], QMOE_CONSTANTS, rtol=1e-4, atol=1e-4, k=2, expert_weight_bits=4,
          activation_type="relu")


def test_qmoe_swiglu_fc3_against_numpy():
    r = rng(64)
    inputs, fc1, fc2 = qmoe_inputs(r, (5, 32), 4, 32, 4, 16, True, False)
    w3, s3, z3, d3 = quantized_projection(r, 4, 32, 32, 4, 16, True, np.float32)
    inputs[8:11] = [("fc3_experts_weights", w3), ("fc3_scales", s3), ("fc3_experts_bias", None)]
    inputs.append(("fc3_zero_points", z3))
    constants = QMOE_CONSTANTS | {"fc3_experts_weights", "fc3_scales", "fc3_zero_points"}
    model = contrib_model("QMoE", inputs, ["output"], constants, k=2, expert_weight_bits=4, block_size=16,
                          activation_type="swiglu", swiglu_fusion=0, activation_alpha=1.702, activation_beta=1.0)
    got = kiln.InferenceSession(model).run(None, feeds_of(inputs, constants))[0]
    want = moe_reference(inputs[0][1], inputs[1][1], fc1, fc2, 2, True, "swiglu", (d3, None), 1.702, 1.0, np.inf, 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_qmoe_scales_of_the_wrong_shape_are_refused():
    r = rng(65)
    inputs, _, _ = qmoe_inputs(r, (4, 32), 4, 64, 4, 16, False, False)
    inputs[3] = ("fc1_scales", inputs[3][1][:, :, :1].copy())
    message = refused(contrib_model("QMoE", inputs, ["output"], QMOE_CONSTANTS, k=2, expert_weight_bits=4,
                                    block_size=16), feeds_of(inputs, QMOE_CONSTANTS))
    assert "QMoE_node" in message and "fc1_scales float32[4x64x1] must be [4x64x2]" in message, message


def test_qmoe_features_that_do_not_fill_whole_bytes_are_refused():
    """4-bit weights of 33 input features would end inside a byte; refused, not read past the row."""
    r = rng(66)
    inputs, _, _ = qmoe_inputs(r, (4, 32), 4, 64, 4, None, False, False)
    inputs[0] = ("input", r.standard_normal((4, 33)).astype(np.float32))
    message = refused(contrib_model("QMoE", inputs, ["output"], QMOE_CONSTANTS, k=2, expert_weight_bits=4),
                      feeds_of(inputs, QMOE_CONSTANTS))
    assert "QMoE_node" in message and "not a multiple of 2" in message, message


# ---- QEmbedLayerNormalization: EmbedLayerNormalization on int8 / uint8 tables ------------------

def qembed_inputs(r, dtype, segments, mask, batch=2, seq=5, hidden=16):
    lo, hi = (-128, 128) if dtype == np.int8 else (0, 256)

    def quantized(shape):
        return (r.integers(lo, hi, shape).astype(dtype), np.array(r.random() * 0.02 + 0.005, np.float32),
                np.array(r.integers(lo // 2, hi // 2), dtype))

    word, pos, seg, gamma, beta = (quantized((30, hidden)), quantized((seq + 2, hidden)), quantized((3, hidden)),
                                   quantized((hidden,)), quantized((hidden,)))
    ids = r.integers(0, 30, (batch, seq)).astype(np.int32)
    seg_ids = r.integers(0, 3, (batch, seq)).astype(np.int32)
    mask_values = (r.random((batch, seq)) > 0.3).astype(np.int32)
    mask_values[0, 0] = 2  # not counted: onnxruntime counts the entries equal to 1
    tables = [("word_embedding_quant", word), ("position_embedding_quant", pos),
              ("segment_embedding", seg if segments else None), ("gamma_quant", gamma), ("beta_quant", beta)]
    inputs = [("input_ids", ids), ("segment_ids", seg_ids if segments else None)]
    inputs += [(n, t[0] if t else None) for n, t in tables]
    inputs.append(("mask", mask_values if mask else None))
    inputs += [(n.replace("_quant", "") + "_scale", t[1] if t else None) for n, t in tables]
    inputs += [(n.replace("_quant", "") + "_zero_point", t[2] if t else None) for n, t in tables]
    return inputs


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("segments", [True, False], ids=["segments", "no_segments"])
@pytest.mark.parametrize("mask", [True, False], ids=["mask", "no_mask"])
@pytest.mark.parametrize("constant", [True, False], ids=["tables_constant", "tables_fed"])
def test_qembed_layer_normalization(dtype, segments, mask, constant):
    r = rng(70)
    inputs = qembed_inputs(r, dtype, segments, mask)
    constants = {n for n, _ in inputs[2:7]} | {n for n, _ in inputs[8:]} if constant else set()
    check("QEmbedLayerNormalization", inputs, ["layernorm_out", ("mask_index_out", np.int32)], constants,
          epsilon=1e-12)


def test_qembed_layer_normalization_word_index_past_the_table_is_refused():
    r = rng(71)
    inputs = qembed_inputs(r, np.uint8, True, True)
    inputs[0] = ("input_ids", np.full((2, 5), 30, np.int32))
    model = contrib_model("QEmbedLayerNormalization", inputs, ["layernorm_out", ("mask_index_out", np.int32)])
    message = refused(model, feeds_of(inputs))
    assert "QEmbedLayerNormalization_node" in message and "word_embedding index 30 is outside [0, 30)" in message, message
