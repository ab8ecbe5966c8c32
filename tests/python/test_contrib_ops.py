"""ONNX Runtime's com.microsoft contrib operators: each case builds one node with onnx.helper
(opset import com.microsoft 1), runs it in onnxruntime and in kiln on the same random inputs
(fixed seed) and compares. Integer products are exact in both, so the quantized ops match to
float rounding; the float ops match to a few ulps of their math functions."""
import hashlib
import os
import pathlib
import re

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln

MS = "com.microsoft"
ONNX_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int8): TensorProto.INT8,
              np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int32): TensorProto.INT32,
              np.dtype(np.int64): TensorProto.INT64, np.dtype(np.bool_): TensorProto.BOOL,
              np.dtype(np.int16): TensorProto.INT16, np.dtype(np.uint16): TensorProto.UINT16}


def onnx_type(dtype):
    """The TensorProto type of a numpy dtype (object or str: string)."""
    dtype = np.dtype(dtype)
    if dtype in ONNX_TYPES:
        return ONNX_TYPES[dtype]
    return TensorProto.STRING if dtype.kind in "OUS" else helper.np_dtype_to_tensor_dtype(dtype)


def contrib_model(op, inputs, outputs, constants=(), domain=MS, **attrs):
    """One `op` node. inputs: (name, array) pairs in the op's order, array None for an omitted
    input; those named in `constants` are initializers, the others graph inputs. outputs: names
    of float32 outputs or (name, numpy dtype) pairs, None for an omitted output."""
    while inputs and inputs[-1][1] is None:
        inputs = inputs[:-1]
    outputs = [(o, np.float32) if isinstance(o, str) else o for o in outputs]
    node = helper.make_node(op, [n if a is not None else "" for n, a in inputs], [o[0] if o else "" for o in outputs],
                            domain=domain, name=f"{op}_node", **attrs)
    graph_inputs = [helper.make_tensor_value_info(n, onnx_type(a.dtype), a.shape)
                    for n, a in inputs if a is not None and n not in constants]
    graph_outputs = [helper.make_tensor_value_info(o[0], onnx_type(o[1]), None) for o in outputs if o]
    initializers = [numpy_helper.from_array(a, n) for n, a in inputs if a is not None and n in constants]
    graph = helper.make_graph([node], op, graph_inputs, graph_outputs, initializers)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    data = helper.make_model(graph, opset_imports=opsets).SerializeToString()
    save_fuzz_seed(op, data)
    return data


def save_fuzz_seed(op, data):
    """With KILN_FUZZ_SEEDS=DIR (tests/fuzz/make_corpus.py), every model built here is also written
    to DIR, for the fuzz seeds of the contrib operators."""
    folder = os.environ.get("KILN_FUZZ_SEEDS")
    if folder:
        digest = hashlib.sha1(data).hexdigest()[:12]
        (pathlib.Path(folder) / f"{op}_{digest}.onnx").write_bytes(data)


def feeds_of(inputs, constants=()):
    return {n: a for n, a in inputs if a is not None and n not in constants}


def run_both(model, feeds):
    """(onnxruntime's outputs, kiln's outputs); onnxruntime on one thread, so that it runs each
    dynamic quantization over the whole batch as kiln does."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    ort = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"]).run(None, feeds)
    ours = kiln.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    assert len(ort) == len(ours)
    return ort, ours


def check(op, inputs, outputs, constants=(), rtol=1e-5, atol=1e-5, domain=MS, **attrs):
    """Runs the node in both and compares every output."""
    model = contrib_model(op, inputs, outputs, constants, domain=domain, **attrs)
    ort, ours = run_both(model, feeds_of(inputs, constants))
    names = [o if isinstance(o, str) else o[0] for o in outputs if o]
    for name, want, got in zip(names, ort, ours):
        assert got.shape == want.shape, name
        assert got.dtype == want.dtype, name
        if np.issubdtype(want.dtype, np.integer) and want.dtype.itemsize == 1:  # quantized: within one step
            assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max(initial=0) <= 1, f"{op} output {name}"
        else:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"{op} output {name}")


def rng(seed=0):
    return np.random.default_rng(seed)


def int8_weights(r, shape, dtype):
    lo, hi = (-127, 128) if dtype == np.int8 else (0, 256)
    return r.integers(lo, hi, shape).astype(dtype)


# ---- dynamic quantization: what quantize_dynamic writes ----------------------------------------

PRODUCT_CASES = [  # (A shape, B shape, B dtype, per-column b parameters, zero points, bias)
    ((4, 8), (8, 5), np.int8, False, False, False),
    ((4, 8), (8, 5), np.uint8, False, True, True),
    ((2, 3, 16), (16, 7), np.int8, True, True, True),
    ((2, 3, 16), (16, 7), np.uint8, True, False, False),
    ((1, 33), (33, 40), np.int8, False, True, True),
]


def scales(r, count):
    return (r.random(count) * 0.05 + 0.01).astype(np.float32)


@pytest.mark.parametrize("a_shape,b_shape,b_type,per_column,zero_points,bias", PRODUCT_CASES)
@pytest.mark.parametrize("b_constant", [True, False], ids=["B_constant", "B_fed"])
def test_dynamic_quantize_matmul(a_shape, b_shape, b_type, per_column, zero_points, bias, b_constant):
    r = rng(1)
    n = b_shape[-1]
    count = n if per_column else 1
    inputs = [("A", r.standard_normal(a_shape).astype(np.float32)), ("B", int8_weights(r, b_shape, b_type)),
              ("b_scale", scales(r, count)), ("b_zero_point", int8_weights(r, (count,), b_type) if zero_points else None),
              ("bias", r.standard_normal(n).astype(np.float32) if bias else None)]
    constants = {"b_scale", "b_zero_point", "bias"} | ({"B"} if b_constant else set())
    check("DynamicQuantizeMatMul", inputs, ["Y"], constants)


# onnxruntime has no int8 x uint8 kernel of MatMulIntegerToFloat.
INTEGER_PRODUCT_CASES = [(np.uint8,) + c for c in PRODUCT_CASES] + [(np.int8,) + c for c in PRODUCT_CASES if c[2] == np.int8]


@pytest.mark.parametrize("a_type,a_shape,b_shape,b_type,per_column,zero_points,bias", INTEGER_PRODUCT_CASES)
@pytest.mark.parametrize("b_constant", [True, False], ids=["B_constant", "B_fed"])
def test_matmul_integer_to_float(a_shape, b_shape, b_type, per_column, zero_points, bias, a_type, b_constant):
    r = rng(2)
    n = b_shape[-1]
    count = n if per_column else 1
    inputs = [("A", int8_weights(r, a_shape, a_type)), ("B", int8_weights(r, b_shape, b_type)),
              ("a_scale", np.array([0.02], np.float32)), ("b_scale", scales(r, count)),
              ("a_zero_point", int8_weights(r, (1,), a_type) if zero_points else None),
              ("b_zero_point", int8_weights(r, (count,), b_type) if zero_points else None),
              ("bias", r.standard_normal(n).astype(np.float32) if bias else None)]
    constants = {"a_scale", "b_scale", "a_zero_point", "b_zero_point", "bias"} | ({"B"} if b_constant else set())
    check("MatMulIntegerToFloat", inputs, ["Y"], constants)


@pytest.mark.parametrize("a_shape,b_shape", [((4, 6), (6, 5)), ((2, 3, 8), (8, 4)), ((2, 1, 3, 8), (2, 8, 5))])
def test_matmul_integer16(a_shape, b_shape):
    r = rng(38)
    inputs = [("A", r.integers(-3000, 3000, a_shape).astype(np.int16)), ("B", r.integers(-3000, 3000, b_shape).astype(np.int16))]
    check("MatMulInteger16", inputs, [("Y", np.int32)])


LSTM_CASES = [  # (direction, weight dtype, per-channel, zero points, bias, initial states, peepholes, extra attributes)
    ("forward", np.int8, False, False, True, False, False, {}),
    ("forward", np.uint8, False, True, True, True, False, {}),
    ("reverse", np.int8, True, False, True, True, False, {}),
    ("bidirectional", np.int8, False, False, True, True, True, {}),
    ("bidirectional", np.uint8, True, True, False, False, False, {}),
    ("forward", np.int8, False, False, True, False, True, {"input_forget": 1}),
    ("forward", np.int8, False, False, True, False, False, {"clip": 0.5}),
    ("forward", np.int8, False, False, True, False, False,
     {"activations": ["HardSigmoid", "Tanh", "Relu"], "activation_alpha": [0.3], "activation_beta": [0.4]}),
    ("forward", np.int8, False, True, True, True, False, {"sequence_lens": [6, 4, 2]}),
]


@pytest.mark.parametrize("direction,w_type,per_channel,zero_points,bias,states,peepholes,attrs", LSTM_CASES)
def test_dynamic_quantize_lstm(direction, w_type, per_channel, zero_points, bias, states, peepholes, attrs):
    attrs = dict(attrs)
    r = rng(3)
    seq, batch, size, hidden = 6, 3, 5, 4
    dirs = 2 if direction == "bidirectional" else 1
    count = (dirs, 4 * hidden) if per_channel else (dirs,)
    a = {"X": r.standard_normal((seq, batch, size)).astype(np.float32),
         "W": int8_weights(r, (dirs, size, 4 * hidden), w_type), "R": int8_weights(r, (dirs, hidden, 4 * hidden), w_type)}
    if bias:
        a["B"] = (r.standard_normal((dirs, 8 * hidden)) * 0.5).astype(np.float32)
    if states:
        a["initial_h"] = r.standard_normal((dirs, batch, hidden)).astype(np.float32)
        a["initial_c"] = r.standard_normal((dirs, batch, hidden)).astype(np.float32)
    if peepholes:
        a["P"] = r.standard_normal((dirs, 3 * hidden)).astype(np.float32)
    a["W_scale"] = (r.random(count) * 0.01 + 0.005).astype(np.float32)
    a["R_scale"] = (r.random(count) * 0.01 + 0.005).astype(np.float32)
    # onnxruntime needs all 12 inputs, the zero points too: zeros stand for "none".
    # onnxruntime takes a per-channel zero point only when all its values are the same.
    for name in ("W_zero_point", "R_zero_point"):
        if per_channel:
            a[name] = np.full(count, int8_weights(r, (), w_type) if zero_points else 0, w_type)
        else:
            a[name] = int8_weights(r, count, w_type) if zero_points else np.zeros(count, w_type)
    if "sequence_lens" in attrs:
        a["sequence_lens"] = np.array(attrs.pop("sequence_lens"), np.int32)
    names = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P",
             "W_scale", "W_zero_point", "R_scale", "R_zero_point"]
    inputs = [(k, a.get(k)) for k in names]
    constants = set(names) - {"X", "initial_h", "initial_c"}
    # Once an entry's sequence has ended, onnxruntime's per-step quantization range is not quite
    # kiln's (which spans the entries still running), so those steps agree to a quantization step.
    atol = 1e-3 if "sequence_lens" in a else 1e-5
    check("DynamicQuantizeLSTM", inputs, ["Y", "Y_h", "Y_c"], constants, rtol=1e-4, atol=atol,
          hidden_size=hidden, direction=direction, **attrs)


# ---- what the transformer optimizer writes -----------------------------------------------------

def test_gelu():
    check("Gelu", [("X", rng(4).standard_normal((3, 5, 17)).astype(np.float32) * 3)], ["Y"])


@pytest.mark.parametrize("alpha", [None, 1.0, 2.5])
def test_quick_gelu(alpha):
    x = rng(5).standard_normal((2, 7, 9)).astype(np.float32) * 4
    check("QuickGelu", [("X", x)], ["Y"], **({} if alpha is None else {"alpha": alpha}))


@pytest.mark.parametrize("with_bias", [False, True])
def test_fast_gelu(with_bias):
    r = rng(6)
    inputs = [("X", r.standard_normal((2, 4, 24)).astype(np.float32) * 3),
              ("bias", r.standard_normal(24).astype(np.float32) if with_bias else None)]
    check("FastGelu", inputs, ["Y"], {"bias"})


def test_bias_gelu():
    r = rng(7)
    check("BiasGelu", [("A", r.standard_normal((2, 3, 20)).astype(np.float32) * 3),
                       ("B", r.standard_normal(20).astype(np.float32))], ["C"], {"B"})


SKIP_CASES = [  # (input shape, skip shape, beta, bias, outputs)
    ((2, 5, 16), (2, 5, 16), True, True, ["output"]),
    ((2, 5, 16), (2, 5, 16), False, False, ["output", "mean", "inv_std_var", "sum"]),
    ((2, 5, 19), (5, 19), True, True, ["output", None, None, "sum"]),
    ((2, 5, 19), (1, 5, 19), True, False, ["output", None, "inv_std_var"]),
    ((6, 32), (6, 32), True, True, ["output", None, None, "sum"]),
]


def skip_norm_inputs(r, x_shape, skip_shape, beta, bias):
    hidden = x_shape[-1]
    vector = lambda present: r.standard_normal(hidden).astype(np.float32) if present else None  # noqa: E731
    return [("input", r.standard_normal(x_shape).astype(np.float32)), ("skip", r.standard_normal(skip_shape).astype(np.float32)),
            ("gamma", vector(True)), ("beta", vector(beta)), ("bias", vector(bias))]


@pytest.mark.parametrize("x_shape,skip_shape,beta,bias,outputs", SKIP_CASES)
@pytest.mark.parametrize("epsilon", [None, 1e-5])
def test_skip_layer_normalization(x_shape, skip_shape, beta, bias, outputs, epsilon):
    inputs = skip_norm_inputs(rng(8), x_shape, skip_shape, beta, bias)
    attrs = {} if epsilon is None else {"epsilon": epsilon}
    check("SkipLayerNormalization", inputs, outputs, {"gamma", "beta", "bias"}, **attrs)


@pytest.mark.parametrize("x_shape,skip_shape,beta,bias,outputs", SKIP_CASES)
def test_skip_simplified_layer_normalization(x_shape, skip_shape, beta, bias, outputs):
    inputs = [i for i in skip_norm_inputs(rng(9), x_shape, skip_shape, False, bias) if i[0] != "beta"]
    check("SkipSimplifiedLayerNormalization", inputs, outputs, {"gamma", "bias"}, epsilon=1e-6)


@pytest.mark.parametrize("shape,axis,outputs", [((2, 3, 16), -1, ["Y"]), ((4, 10), 1, ["Y", "inv_std_var"]),
                                                ((2, 3, 8), 1, ["Y", "inv_std_var"])])
def test_simplified_layer_normalization(shape, axis, outputs):
    r = rng(10)
    inputs = [("X", r.standard_normal(shape).astype(np.float32)), ("scale", r.standard_normal(shape[axis:]).astype(np.float32))]
    check("SimplifiedLayerNormalization", inputs, outputs, {"scale"}, domain="", axis=axis, epsilon=1e-5)


@pytest.mark.parametrize("segments,mask,positions,outputs", [
    (False, False, None, ["output", "mask_index"]),
    (True, True, None, ["output", "mask_index"]),
    (True, True, "batch", ["output", "mask_index", "embedding_sum"]),
    (False, True, "shared", ["output", None, "embedding_sum"]),
])
def test_embed_layer_normalization(segments, mask, positions, outputs):
    r = rng(14)
    batch, seq, vocab, hidden, max_positions = 2, 6, 30, 16, 10
    ids = r.integers(0, vocab, (batch, seq)).astype(np.int32)
    position_ids = None
    if positions == "batch":
        position_ids = r.integers(0, max_positions, (batch, seq)).astype(np.int32)
    elif positions == "shared":
        position_ids = np.arange(2, 2 + seq, dtype=np.int32).reshape(1, seq)
    inputs = [("input_ids", ids), ("segment_ids", r.integers(0, 2, (batch, seq)).astype(np.int32) if segments else None),
              ("word_embedding", r.standard_normal((vocab, hidden)).astype(np.float32)),
              ("position_embedding", r.standard_normal((max_positions, hidden)).astype(np.float32)),
              ("segment_embedding", r.standard_normal((2, hidden)).astype(np.float32) if segments else None),
              ("gamma", r.standard_normal(hidden).astype(np.float32)), ("beta", r.standard_normal(hidden).astype(np.float32)),
              ("mask", (r.random((batch, seq)) > 0.3).astype(np.int32) if mask else None), ("position_ids", position_ids)]
    constants = {"word_embedding", "position_embedding", "segment_embedding", "gamma", "beta"}
    outputs = [("mask_index", np.int32) if o == "mask_index" else o for o in outputs]
    check("EmbedLayerNormalization", inputs, outputs, constants, epsilon=1e-5)


def attention_mask(r, form, batch, keys, lengths):
    """An int32 mask index: None, "lengths" (keys per batch entry), "2d" [batch, keys] or "3d"
    [batch, keys, keys] of 0/1 with the first key always visible."""
    if form == "lengths":
        return np.array(lengths, np.int32)
    if form in ("2d", "3d"):
        mask = (r.random((batch, keys) if form == "2d" else (batch, keys, keys)) > 0.3).astype(np.int32)
        mask[..., 0] = 1
        return mask
    return None


ATTENTION_CASES = [  # (mask form, unidirectional, attention_bias heads, extra attributes)
    (None, 0, None, {}),
    ("lengths", 0, None, {}),
    ("2d", 0, None, {}),
    ("3d", 0, None, {"mask_filter_value": -1000.0}),
    (None, 1, None, {}),
    ("2d", 1, 4, {}),
    (None, 0, 1, {"scale": 0.3}),
    ("lengths", 0, None, {"qkv_hidden_sizes": [32, 32, 32]}),
]


@pytest.mark.parametrize("mask,unidirectional,bias_heads,attrs", ATTENTION_CASES)
def test_attention(mask, unidirectional, bias_heads, attrs):
    r = rng(12)
    batch, seq, hidden_in, hidden, heads = 2, 5, 24, 32, 4
    mask_index = attention_mask(r, mask, batch, seq, [5, 3])
    inputs = [("input", r.standard_normal((batch, seq, hidden_in)).astype(np.float32)),
              ("weights", (r.standard_normal((hidden_in, 3 * hidden)) * 0.3).astype(np.float32)),
              ("bias", r.standard_normal(3 * hidden).astype(np.float32)),
              ("mask_index", mask_index), ("past", None),
              ("attention_bias", r.standard_normal((1, bias_heads, seq, seq)).astype(np.float32) if bias_heads else None)]
    check("Attention", inputs, ["output"], {"weights", "bias"}, rtol=1e-4, atol=1e-5,
          num_heads=heads, unidirectional=unidirectional, **attrs)


@pytest.mark.parametrize("mask,unidirectional,bias,attention_bias,attrs", [
    (None, 0, False, False, {}),
    (None, 0, True, False, {}),
    ("lengths", 0, True, False, {}),
    ("2d", 0, False, True, {}),
    (None, 1, True, False, {"scale": 0.25}),
    ("2d", 0, True, False, {"mask_filter_value": -500.0}),
])
def test_multi_head_attention(mask, unidirectional, bias, attention_bias, attrs):
    r = rng(26)
    batch, seq, kv_seq, heads, head, value_head = 2, 4, 6, 3, 8, 5
    if unidirectional:
        kv_seq = seq
    key_padding = attention_mask(r, mask, batch, kv_seq, [kv_seq, 3])
    inputs = [("query", r.standard_normal((batch, seq, heads * head)).astype(np.float32)),
              ("key", r.standard_normal((batch, kv_seq, heads * head)).astype(np.float32)),
              ("value", r.standard_normal((batch, kv_seq, heads * value_head)).astype(np.float32)),
              ("bias", r.standard_normal(heads * (2 * head + value_head)).astype(np.float32) if bias else None),
              ("key_padding_mask", key_padding),
              ("attention_bias", r.standard_normal((batch, heads, seq, kv_seq)).astype(np.float32) if attention_bias else None)]
    check("MultiHeadAttention", inputs, ["output"], {"bias"}, rtol=1e-4, atol=1e-5, num_heads=heads,
          unidirectional=unidirectional, **attrs)


@pytest.mark.parametrize("w_type,mask,zero_points,per_column,unidirectional", [
    (np.int8, None, False, False, 0), (np.int8, "2d", True, False, 0), (np.uint8, "lengths", True, True, 0),
    (np.int8, None, True, True, 1)])
def test_qattention(w_type, mask, zero_points, per_column, unidirectional):
    r = rng(34)
    batch, seq, hidden_in, hidden, heads = 2, 5, 16, 24, 3
    mask_index = attention_mask(r, mask, batch, seq, [5, 2])
    count = 3 * hidden if per_column else 1
    inputs = [("input", quantized(r, (batch, seq, hidden_in), np.uint8)), ("weight", quantized(r, (hidden_in, 3 * hidden), w_type)),
              ("bias", r.standard_normal(3 * hidden).astype(np.float32)), ("input_scale", np.array(0.02, np.float32)),
              ("weight_scale", (r.random(count) * 0.01 + 0.002).astype(np.float32)), ("mask_index", mask_index),
              ("input_zero_point", quantized(r, (), np.uint8) if zero_points else None),
              ("weight_zero_point", (quantized(r, (), w_type) if zero_points else None))]
    constants = {"weight", "bias", "input_scale", "weight_scale", "input_zero_point", "weight_zero_point"}
    check("QAttention", inputs, ["output"], constants, rtol=1e-4, atol=1e-4, num_heads=heads, unidirectional=unidirectional)


def test_qattention_kv_cache_is_refused_by_name():
    """Attention's and MultiHeadAttention's KV caches run (test_contrib_kv_attention.py);
    QAttention's does not."""
    r = rng(13)
    inputs = [("input", quantized(r, (1, 3, 8), np.uint8)), ("weight", quantized(r, (8, 24), np.int8)),
              ("bias", r.standard_normal(24).astype(np.float32)), ("input_scale", np.array(0.02, np.float32)),
              ("weight_scale", np.array(0.01, np.float32))]
    model = contrib_model("QAttention", inputs, ["output", "present"], {"weight", "bias", "input_scale", "weight_scale"},
                          num_heads=2)
    with pytest.raises(kiln.NotImplemented, match="QAttention_node.*output 'present' \\(the KV cache\\) is not supported"):
        kiln.InferenceSession(model)


@pytest.mark.parametrize("activation,params", [("", None), ("Relu", None), ("LeakyRelu", [0.2]), ("Clip", [-0.5, 0.7]),
                                               ("HardSigmoid", [0.3, 0.4]), ("Sigmoid", None)])
@pytest.mark.parametrize("with_sum", [False, True])
def test_fused_conv(activation, params, with_sum):
    r = rng(15)
    inputs = [("X", r.standard_normal((2, 3, 7, 7)).astype(np.float32)), ("W", r.standard_normal((4, 3, 3, 3)).astype(np.float32)),
              ("B", r.standard_normal(4).astype(np.float32)),
              ("Z", r.standard_normal((2, 4, 4, 4)).astype(np.float32) if with_sum else None)]
    attrs = {"activation": activation} if activation else {}
    if params:
        attrs["activation_params"] = params
    check("FusedConv", inputs, ["Y"], {"W", "B"}, rtol=1e-4, atol=1e-4, pads=[1, 1, 1, 1], strides=[2, 2], **attrs)


@pytest.mark.parametrize("activation,attrs", [("Relu", {}), ("LeakyRelu", {"activation_alpha": 0.2}), ("Sigmoid", {}),
                                              ("HardSigmoid", {"activation_alpha": 0.3, "activation_beta": 0.4})])
@pytest.mark.parametrize("trans_b,with_c", [(0, True), (1, False)])
def test_fused_gemm(activation, attrs, trans_b, with_c):
    r = rng(23)
    inputs = [("A", r.standard_normal((5, 8)).astype(np.float32)),
              ("B", r.standard_normal((6, 8) if trans_b else (8, 6)).astype(np.float32)),
              ("C", r.standard_normal(6).astype(np.float32) if with_c else None)]
    check("FusedGemm", inputs, ["Y"], {"B", "C"}, rtol=1e-4, atol=1e-5, activation=activation, transB=trans_b,
          alpha=0.8, beta=1.5, **attrs)


@pytest.mark.parametrize("a_shape,b_shape,trans_a,trans_b", [
    ((4, 6), (6, 5), 0, 0), ((6, 4), (6, 5), 1, 0), ((4, 6), (5, 6), 0, 1), ((2, 3, 6, 4), (5, 6), 1, 1),
    ((2, 4, 6), (2, 5, 6), 0, 1)])
@pytest.mark.parametrize("b_constant", [True, False], ids=["B_constant", "B_fed"])
def test_fused_matmul(a_shape, b_shape, trans_a, trans_b, b_constant):
    r = rng(24)
    inputs = [("A", r.standard_normal(a_shape).astype(np.float32)), ("B", r.standard_normal(b_shape).astype(np.float32))]
    check("FusedMatMul", inputs, ["Y"], {"B"} if b_constant else set(), rtol=1e-4, atol=1e-5, alpha=0.5,
          transA=trans_a, transB=trans_b)


@pytest.mark.parametrize("a_shape,b_shape,trans_a,trans_b", [((6, 4), (6, 5), 1, 0), ((2, 4, 6), (5, 6), 0, 1)])
def test_transpose_matmul(a_shape, b_shape, trans_a, trans_b):
    r = rng(32)
    inputs = [("A", r.standard_normal(a_shape).astype(np.float32)), ("B", r.standard_normal(b_shape).astype(np.float32))]
    check("TransposeMatMul", inputs, ["Y"], {"B"}, rtol=1e-4, atol=1e-5, alpha=2.0, transA=trans_a, transB=trans_b)


def quantized(r, shape, dtype):
    return int8_weights(r, shape, dtype)


@pytest.mark.parametrize("dtype,axis,per_axis", [(np.uint8, 1, False), (np.int8, 1, True), (np.int16, 0, True),
                                            (np.uint16, 1, False)])
def test_quantize_and_dequantize_linear(dtype, axis, per_axis):
    r = rng(36)
    x = (r.standard_normal((3, 4, 5)) * 4).astype(np.float32)
    count = x.shape[axis] if per_axis else 1
    scale = (r.random(count) * 0.05 + 0.01).astype(np.float32).reshape(count if per_axis else ())
    info = np.iinfo(dtype)
    zero = r.integers(info.min // 4, info.max // 4, count).astype(dtype).reshape(count if per_axis else ())
    check("QuantizeLinear", [("x", x), ("y_scale", scale), ("y_zero_point", zero)], [("y", dtype)],
          {"y_scale", "y_zero_point"}, axis=axis)
    q = r.integers(info.min, info.max, x.shape).astype(dtype)
    check("DequantizeLinear", [("x", q), ("x_scale", scale), ("x_zero_point", zero)], ["y"],
          {"x_scale", "x_zero_point"}, axis=axis)


@pytest.mark.parametrize("x_type,w_type", [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8)])
@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 1, 1, 1], "strides": [2, 2]}, {"group": 2}])
def test_contrib_qlinear_conv(x_type, w_type, attrs):
    r = rng(37)
    groups = attrs.get("group", 1)
    inputs = [("x", quantized(r, (1, 4, 6, 6), x_type)), ("x_scale", np.array(0.05, np.float32)),
              ("x_zero_point", quantized(r, (), x_type)), ("w", quantized(r, (6, 4 // groups, 3, 3), w_type)),
              ("w_scale", (r.random(6) * 0.01 + 0.005).astype(np.float32)),
              ("w_zero_point", np.zeros(6, w_type) if w_type == np.int8 else quantized(r, (6,), w_type)),
              ("y_scale", np.array(0.2, np.float32)), ("y_zero_point", quantized(r, (), x_type)),
              ("B", r.integers(-300, 300, 6).astype(np.int32))]
    constants = {n for n, _ in inputs if n != "x"}
    check("QLinearConv", inputs, [("y", x_type)], constants, **attrs)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("a_shape,b_shape", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 3, 4), (3, 1)),
                                             ((1, 1, 1, 37), (2, 9, 300, 37))])  # per last-dim channel, A small
def test_qlinear_binary(op, dtype, a_shape, b_shape):
    r = rng(16)
    inputs = [("A", quantized(r, a_shape, dtype)), ("A_scale", np.array(0.05, np.float32)),
              ("A_zero_point", quantized(r, (), dtype)), ("B", quantized(r, b_shape, dtype)),
              ("B_scale", np.array(0.03, np.float32)), ("B_zero_point", quantized(r, (), dtype)),
              ("C_scale", np.array(0.08 if op == "QLinearAdd" else 0.5, np.float32)), ("C_zero_point", quantized(r, (), dtype))]
    constants = {n for n, _ in inputs if n.endswith(("scale", "zero_point"))}
    check(op, inputs, [("C", dtype)], constants)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_qlinear_binary_omitted_zero_points_are_zero(op):
    """onnxruntime's own type inference refuses omitted zero points: kiln's result with them
    omitted is compared with onnxruntime's with zeros there."""
    r = rng(19)
    zero = np.array(0, np.uint8)
    inputs = [("A", quantized(r, (2, 3, 4), np.uint8)), ("A_scale", np.array(0.05, np.float32)), ("A_zero_point", zero),
              ("B", quantized(r, (3, 4), np.uint8)), ("B_scale", np.array(0.03, np.float32)), ("B_zero_point", zero),
              ("C_scale", np.array(0.2, np.float32)), ("C_zero_point", np.array(7, np.uint8))]
    constants = {n for n, _ in inputs if n.endswith(("scale", "zero_point"))}
    feeds = feeds_of(inputs, constants)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    want = onnxruntime.InferenceSession(contrib_model(op, inputs, [("C", np.uint8)], constants), options).run(None, feeds)[0]
    omitted = [(n, None if n in ("A_zero_point", "B_zero_point") else a) for n, a in inputs]
    got = kiln.InferenceSession(contrib_model(op, omitted, [("C", np.uint8)], constants)).run(None, feeds)[0]
    assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= 1


@pytest.mark.parametrize("op,attrs", [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {}), ("QLinearLeakyRelu", {"alpha": 0.3})])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_unary(op, attrs, dtype):
    r = rng(22)
    x = np.arange(256).astype(np.int64) + np.iinfo(dtype).min  # every value an 8-bit x can take
    inputs = [("X", np.concatenate([x, r.integers(np.iinfo(dtype).min, np.iinfo(dtype).max + 1, 100)]).astype(dtype)),
              ("X_scale", np.array(0.04, np.float32)), ("X_zero_point", quantized(r, (), dtype)),
              ("Y_scale", np.array(0.005 if op == "QLinearSigmoid" else 0.03, np.float32)),
              ("Y_zero_point", np.array(np.iinfo(dtype).min if op == "QLinearSigmoid" else 3, dtype))]
    check(op, inputs, [("Y", dtype)], {"X_scale", "X_zero_point", "Y_scale", "Y_zero_point"}, **attrs)


def quantized_io(r, x_shape, dtype, y_scale=0.03):
    return [("X", quantized(r, x_shape, dtype)), ("X_scale", np.array(0.05, np.float32)), ("X_zero_point", quantized(r, (), dtype)),
            ("Y_scale", np.array(y_scale, np.float32)), ("Y_zero_point", quantized(r, (), dtype))]


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("attrs", [{"kernel_shape": [3, 3]}, {"kernel_shape": [2, 2], "strides": [2, 2]},
                                   {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
                                   {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "ceil_mode": 1, "strides": [2, 2]}])
def test_qlinear_average_pool(dtype, attrs):
    inputs = quantized_io(rng(27), (2, 3, 7, 8), dtype)
    check("QLinearAveragePool", inputs, [("Y", dtype)], {"X_scale", "X_zero_point", "Y_scale", "Y_zero_point"}, **attrs)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("attrs", [{"opset": 13}, {"opset": 13, "axis": 1}, {"opset": 11, "axis": 1}, {"opset": 11}])
def test_qlinear_softmax(dtype, attrs):
    r = rng(28)
    inputs = quantized_io(r, (2, 5, 6), dtype, y_scale=1 / 256)
    inputs[-1] = ("Y_zero_point", np.array(np.iinfo(dtype).min, dtype))  # onnxruntime's requirement: the range [0, 1)
    check("QLinearSoftmax", inputs, [("Y", dtype)], {"X_scale", "X_zero_point", "Y_scale", "Y_zero_point"}, **attrs)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("axis", [1, -1])
def test_qlinear_concat(dtype, axis):
    r = rng(29)
    inputs = [("Y_scale", np.array(0.04, np.float32)), ("Y_zero_point", quantized(r, (), dtype))]
    for k, shape in enumerate([(2, 3, 4), (2, 3, 4) if axis == -1 else (2, 5, 4), (2, 3, 2) if axis == -1 else (2, 1, 4)]):
        inputs += [(f"X{k}", quantized(r, shape, dtype)), (f"X{k}_scale", np.array(0.02 * (k + 1), np.float32)),
                   (f"X{k}_zero_point", quantized(r, (), dtype))]
    constants = {n for n, _ in inputs if n.endswith(("scale", "zero_point"))}
    check("QLinearConcat", inputs, [("Y", dtype)], constants, axis=axis)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_where(dtype):
    r = rng(30)
    inputs = [("condition", r.random((2, 3, 4)) > 0.5), ("X", quantized(r, (2, 3, 4), dtype)),
              ("x_scale", np.array(0.05, np.float32)), ("x_zero_point", quantized(r, (), dtype)),
              ("Y", quantized(r, (3, 1), dtype)), ("y_scale", np.array(0.02, np.float32)),
              ("y_zero_point", quantized(r, (), dtype)), ("z_scale", np.array(0.04, np.float32)),
              ("z_zero_point", quantized(r, (), dtype))]
    constants = {n for n, _ in inputs if n.endswith(("scale", "zero_point"))}
    check("QLinearWhere", inputs, [("Z", dtype)], constants)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("attrs", [{"kernel_shape": [3, 3]}, {"kernel_shape": [2, 2], "strides": [2, 2]},
                                   {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2], "ceil_mode": 1},
                                   {"kernel_shape": [2, 2], "dilations": [2, 2]}])
def test_nhwc_max_pool(dtype, attrs):
    check("NhwcMaxPool", [("x", quantized(rng(33), (2, 7, 8, 5), dtype))], [("y", dtype)], **attrs)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("shape", [(2, 5, 6, 7), (1, 9, 7, 33), (3, 4, 4, 64)])  # channel tails of 16 lanes
def test_qlinear_global_average_pool(dtype, channels_last, shape):
    r = rng(17)
    inputs = [("X", quantized(r, shape, dtype)), ("x_scale", np.array(0.05, np.float32)),
              ("x_zero_point", quantized(r, (), dtype)), ("y_scale", np.array(0.02, np.float32)),
              ("y_zero_point", quantized(r, (), dtype))]
    check("QLinearGlobalAveragePool", inputs, [("Y", dtype)], {"x_scale", "x_zero_point", "y_scale", "y_zero_point"},
          channels_last=channels_last)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("threads", [1, 2])
def test_qlinear_global_average_pool_layouts_give_the_same_bytes(dtype, threads):
    """The channels-last sums (sixteen channels a step) against the channels-first planes, in kiln."""
    r = rng(23)
    x = quantized(r, (2, 11, 10, 37), dtype)  # [N, H, W, C]
    params = [("x_scale", np.array(0.037, np.float32)), ("x_zero_point", quantized(r, (), dtype)),
              ("y_scale", np.array(0.011, np.float32)), ("y_zero_point", quantized(r, (), dtype))]
    constants = {name for name, _ in params}
    outputs = []
    for last, feed in ((1, x), (0, x.transpose(0, 3, 1, 2).copy())):
        inputs = [("X", feed)] + params
        model = contrib_model("QLinearGlobalAveragePool", inputs, [("Y", dtype)], constants, channels_last=last)
        options = kiln.SessionOptions()
        options.intra_op_num_threads = threads
        session = kiln.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        outputs.append(session.run(None, feeds_of(inputs, constants))[0].reshape(-1))
    np.testing.assert_array_equal(outputs[0], outputs[1])


@pytest.mark.parametrize("a_type,b_type", [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8)])
@pytest.mark.parametrize("output,trans_b,with_c,per_column", [
    ("float", 0, False, False), ("float", 1, True, True), ("quantized", 0, True, False), ("quantized", 1, False, True)])
def test_qgemm(a_type, b_type, output, trans_b, with_c, per_column):
    r = rng(18)
    M, K, N = 5, 12, 6
    count = N if per_column else 1
    inputs = [("A", quantized(r, (M, K), a_type)), ("a_scale", np.array(0.04, np.float32)),
              ("a_zero_point", quantized(r, (), a_type)),
              ("B", quantized(r, (N, K) if trans_b else (K, N), b_type)),
              ("b_scale", (r.random(count) * 0.05 + 0.01).astype(np.float32).reshape(count if per_column else ())),
              ("b_zero_point", (quantized(r, (count,), b_type) if b_type == np.uint8 else np.zeros(count, b_type)).reshape(
                  count if per_column else ())),
              ("C", r.integers(-500, 500, N).astype(np.int32) if with_c else None)]
    out = ["Y"]
    if output == "quantized":
        inputs += [("y_scale", np.array(0.3, np.float32)), ("y_zero_point", quantized(r, (), a_type))]
        out = [("Y", a_type)]
    constants = {n for n, _ in inputs if n != "A"}
    check("QGemm", inputs, out, constants, rtol=1e-5, atol=1e-4, transB=trans_b, alpha=0.7)


@pytest.mark.parametrize("layout,positions,attrs", [
    ("3d", "batch", {"num_heads": 4}),
    ("3d", "batch", {}),
    ("3d", "offset", {"num_heads": 4, "interleaved": 1}),
    ("4d", "batch", {"interleaved": 1}),
    ("4d", "offset", {}),
    ("3d", "batch", {"num_heads": 4, "rotary_embedding_dim": 4}),
])
def test_rotary_embedding(layout, positions, attrs):
    r = rng(25)
    batch, seq, heads, head_size, max_positions = 2, 5, 4, 8, 16
    rotary = attrs.get("rotary_embedding_dim", head_size)
    shape = (batch, seq, heads * head_size) if layout == "3d" else (batch, heads, seq, head_size)
    angles = r.random((max_positions, rotary // 2)) * 3
    ids = r.integers(0, max_positions - seq, (batch, seq)) if positions == "batch" else np.array([3])
    inputs = [("input", r.standard_normal(shape).astype(np.float32)), ("position_ids", ids.astype(np.int64)),
              ("cos_cache", np.cos(angles).astype(np.float32)), ("sin_cache", np.sin(angles).astype(np.float32))]
    check("RotaryEmbedding", inputs, ["output"], {"cos_cache", "sin_cache"}, **attrs)


def test_bias_add_against_numpy():
    """onnxruntime implements BiasAdd for CUDA only: compared with X + bias + skip."""
    r = rng(11)
    x, bias, skip = (r.standard_normal(s).astype(np.float32) for s in ((2, 3, 8), (8,), (2, 3, 8)))
    model = contrib_model("BiasAdd", [("X", x), ("bias", bias), ("skip", skip)], ["Y"], {"bias"})
    got = kiln.InferenceSession(model).run(None, {"X": x, "skip": skip})[0]
    np.testing.assert_allclose(got, x + bias + skip, rtol=1e-6, atol=1e-6)


# ---- what an unsupported contrib op gives --------------------------------------------------------

def test_unsupported_contrib_ops_are_named_together_with_domain_and_version():
    nodes = [helper.make_node(op, ["input_ids"], [f"{op}_out"], domain=MS, name=f"{op}_node")
             for op in ("BeamSearch", "GreedySearch")]
    graph = helper.make_graph(nodes, "search", [helper.make_tensor_value_info("input_ids", TensorProto.INT32, [1, 4])],
                              [helper.make_tensor_value_info(f"{op}_out", TensorProto.INT32, None)
                               for op in ("BeamSearch", "GreedySearch")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    with pytest.raises(kiln.NotImplemented) as info:
        kiln.InferenceSession(model.SerializeToString())
    message = str(info.value)
    assert "2 unsupported nodes" in message, message
    for op in ("BeamSearch", "GreedySearch"):
        assert f"node '{op}_node' (com.microsoft::{op}): operator com.microsoft::{op} at opset 1 is not supported" in message


def pack_bits(values, bits):
    """uint8 bytes holding `bits`-bit values along the last axis, low bits first."""
    per_byte = 8 // bits
    v = values.reshape(*values.shape[:-1], -1, per_byte).astype(np.uint8)
    return sum(v[..., i] << (i * bits) for i in range(per_byte)).astype(np.uint8)


@pytest.mark.parametrize("bits,block_size,K,zero_points,bias,b_constant", [
    (4, 32, 64, None, False, True), (4, 16, 48, "packed", True, True), (4, 32, 40, "float", False, True),
    (8, 32, 64, "packed", True, True), (2, 16, 32, None, False, True), (4, 32, 64, "packed", True, False)])
def test_matmul_nbits(bits, block_size, K, zero_points, bias, b_constant):
    r = rng(31)
    N = 12
    blocks = (K + block_size - 1) // block_size
    q = r.integers(0, 1 << bits, (N, blocks, block_size))
    inputs = [("A", r.standard_normal((3, 2, K)).astype(np.float32)), ("B", pack_bits(q, bits)),
              ("scales", (r.random(N * blocks) * 0.1 + 0.01).astype(np.float32))]
    if zero_points == "packed":
        zp = r.integers(0, 1 << bits, (N, -(-blocks * bits // 8) * 8 // bits))
        inputs.append(("zero_points", pack_bits(zp, bits).reshape(-1)))
    elif zero_points == "float":
        inputs.append(("zero_points", (r.random(N * blocks) * (1 << bits)).astype(np.float32)))
    else:
        inputs.append(("zero_points", None))
    inputs += [("g_idx", None), ("bias", r.standard_normal(N).astype(np.float32) if bias else None)]
    constants = {"scales", "zero_points", "bias"} | ({"B"} if b_constant else set())
    check("MatMulNBits", inputs, ["Y"], constants, rtol=1e-4, atol=1e-4, K=K, N=N, bits=bits, block_size=block_size)


def pack_rows(values, bits):
    """pack_bits with each row (last axis) padded to whole bytes, as zero points are stored."""
    per_byte = 8 // bits
    pad = -values.shape[-1] % per_byte
    return pack_bits(np.pad(values, [(0, 0)] * (values.ndim - 1) + [(0, pad)]), bits)


@pytest.mark.parametrize("bits,shape,quantize_axis,block_size,zero_points,indices", [
    (4, (10, 64), 1, 32, False, [[0, 3], [9, -1]]),
    (4, (10, 64), -1, 16, True, [2, 2, 7]),
    (8, (6, 48), 1, 16, True, [5, 0]),
    (2, (8, 64), 1, 32, True, [[1], [4]]),
    (4, (5, 4, 32), 2, 16, True, [4, 1]),
])
def test_gather_block_quantized(bits, shape, quantize_axis, block_size, zero_points, indices):
    r = rng(35)
    logical = np.array(shape)
    axis = quantize_axis % len(shape)
    blocked = logical.copy()
    blocked[axis] = -(-logical[axis] // block_size)
    inputs = [("data", pack_bits(r.integers(0, 1 << bits, tuple(logical)), bits)),
              ("indices", np.array(indices, np.int64)),
              ("scales", (r.random(tuple(blocked)) * 0.1 + 0.01).astype(np.float32)),
              ("zero_points", pack_rows(r.integers(0, 1 << bits, tuple(blocked)), bits) if zero_points else None)]
    check("GatherBlockQuantized", inputs, ["output"], {"data", "scales", "zero_points"}, bits=bits,
          block_size=block_size, quantize_axis=quantize_axis, gather_axis=0)


# ---- models straight from onnxruntime's tools ----------------------------------------------------

def lstm_matmul_model(path):
    """A float LSTM followed by a MatMul projection, the shape of a small OCR / speech head."""
    r = rng(20)
    seq, batch, size, hidden = 7, 2, 16, 12
    weights = {"W": r.standard_normal((1, 4 * hidden, size)) * 0.3, "R": r.standard_normal((1, 4 * hidden, hidden)) * 0.3,
               "B": r.standard_normal((1, 8 * hidden)) * 0.1, "M": r.standard_normal((hidden, 10))}
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "", ""], hidden_size=hidden, name="lstm"),
             helper.make_node("Squeeze", ["y", "axis"], ["ys"], name="squeeze"),
             helper.make_node("MatMul", ["ys", "M"], ["out"], name="projection")]
    initializers = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()]
    initializers.append(numpy_helper.from_array(np.array([1], np.int64), "axis"))
    graph = helper.make_graph(nodes, "lstm_head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, batch, size])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], initializers)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return r.standard_normal((seq, batch, size)).astype(np.float32)


@pytest.mark.parametrize("weight_type", ["QInt8", "QUInt8"])
def test_quantize_dynamic_lstm_model_and_its_onnxruntime_optimized_form(tmp_path, weight_type):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    x = lstm_matmul_model(tmp_path / "float.onnx")
    quantize_dynamic(str(tmp_path / "float.onnx"), str(tmp_path / "quantized.onnx"), weight_type=getattr(QuantType, weight_type))
    quantized = onnx.load(tmp_path / "quantized.onnx")
    assert ("com.microsoft", "DynamicQuantizeLSTM") in {(n.domain, n.op_type) for n in quantized.graph.node}
    ort, ours = run_both(quantized.SerializeToString(), {"x": x})
    np.testing.assert_allclose(ours[0], ort[0], rtol=1e-4, atol=1e-4)
    # onnxruntime's saved optimized model fuses the dynamic MatMul into its contrib ops too.
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    onnxruntime.InferenceSession(str(tmp_path / "quantized.onnx"), options, providers=["CPUExecutionProvider"])
    optimized = onnx.load(tmp_path / "optimized.onnx")
    contrib = {n.op_type for n in optimized.graph.node if n.domain == MS}
    assert "DynamicQuantizeLSTM" in contrib and contrib & {"DynamicQuantizeMatMul", "MatMulIntegerToFloat"}, contrib
    ort, ours = run_both(optimized.SerializeToString(), {"x": x})
    np.testing.assert_allclose(ours[0], ort[0], rtol=1e-4, atol=1e-4)


def bert_feeds(batch=2, seq=16):
    r = rng(21)
    mask = np.ones((batch, seq), np.int64)
    mask[-1, seq // 2:] = 0  # the last sequence is half padding
    return {"input_ids": r.integers(0, 30522, (batch, seq), dtype=np.int64), "attention_mask": mask}


@pytest.mark.heavy
def test_transformer_optimizer_bert_encoder(model_exporter, tmp_path):
    """tests/models' BERT-shaped encoder (2 layers, 768 wide) through onnxruntime's transformer
    optimizer: it fuses EmbedLayerNormalization, SkipLayerNormalization and BiasGelu (its attention
    pattern, query scaled before Q K^T, is not one the optimizer fuses into Attention)."""
    from onnxruntime.transformers.optimizer import optimize_model
    source = model_exporter(["bert_encoder"]) / "bert_encoder.onnx"
    optimized = optimize_model(str(source), model_type="bert", num_heads=12, hidden_size=768, opt_level=0)
    path = tmp_path / "bert_optimized.onnx"
    optimized.save_model_to_file(str(path))
    ops = {n.op_type for n in onnx.load(path).graph.node if n.domain == MS}
    assert {"EmbedLayerNormalization", "SkipLayerNormalization", "BiasGelu"} <= ops, ops
    ort, ours = run_both(str(path), bert_feeds())
    np.testing.assert_allclose(ours[0], ort[0], rtol=1e-3, atol=1e-3)


@pytest.mark.heavy
def test_quantize_dynamic_bert_encoder(model_exporter, tmp_path):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    source = model_exporter(["bert_encoder"]) / "bert_encoder.onnx"
    quantize_dynamic(str(source), str(tmp_path / "bert_quantized.onnx"), weight_type=QuantType.QInt8)
    ort, ours = run_both(str(tmp_path / "bert_quantized.onnx"), bert_feeds())
    np.testing.assert_allclose(ours[0], ort[0], rtol=1e-3, atol=2e-3)


# ---- docs/operators.md accounts for every contrib op onnxruntime runs on CPU ---------------------

def test_operators_doc_lists_every_onnxruntime_cpu_contrib_op():
    """Each com.microsoft(.nchwc) op with an onnxruntime CPU kernel is either a row of the
    generated table (kiln runs it) or named in the not-implemented list with its reason."""
    from onnxruntime.capi import onnxruntime_pybind11_state as capi
    doc = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "operators.md").read_text()
    table_ops = set(re.findall(r"^\| (com\.microsoft[.a-z]*) \| (\w+) \|", doc, re.M))
    section = doc[doc.index("Not implemented (onnxruntime"):doc.index("Also refused by name")]
    not_done = {op for line in section.splitlines() if line.startswith("| `")
                for op in re.findall(r"`(\w+)`", line.split(" | ")[0])}
    ort_ops = {(k.domain, k.op_name) for k in capi.get_all_opkernel_def()
               if k.provider == "CPUExecutionProvider" and k.domain.startswith("com.microsoft")}
    assert len(ort_ops) > 50
    missing = sorted(f"{d}::{op}" for d, op in ort_ops if (d, op) not in table_ops and op not in not_done)
    assert not missing, f"docs/operators.md does not account for {missing}"
    for domain, op in table_ops:  # what the table shows as run really is onnxruntime's op or kiln's addition
        assert (domain, op) in ort_ops or op == "BiasAdd", op
        assert op not in not_done, f"{op} is both run and listed as not implemented"
