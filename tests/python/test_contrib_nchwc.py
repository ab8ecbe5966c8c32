"""onnxruntime's com.microsoft.nchwc operators (the blocked layout of its ORT_ENABLE_ALL files):
each case builds one node (or a short chain) with onnx.helper, runs it in onnxruntime and in
kiln on the same random inputs and compares.

A blocked tensor keeps the 4-D shape [N, Cp, H, W] (Cp: C rounded up to the block size B) but
holds [N, Cp / B, H, W, B] in memory; Conv filters are reordered for B (OIHWBo for a plain
first-layer input or depthwise, OIHWBiBo otherwise). B is the CPU's: onnxruntime takes 16 with
AVX-512F and 8 with AVX2 only. kiln runs each case at onnxruntime's block size, on the very file
onnxruntime runs, and at the other one (forced with KILN_ORT_NCHWC_BLOCK, which onnxruntime on
this machine cannot run): there the same logical inputs are blocked and reordered for that size
and kiln's unblocked result is compared with onnxruntime's."""
import pathlib

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln

NCHWC = "com.microsoft.nchwc"


def ort_block_size():
    flags = pathlib.Path("/proc/cpuinfo").read_text()
    return 16 if " avx512f" in flags else 8


ORT_BLOCK = ort_block_size()
BLOCKS = [ORT_BLOCK, 24 - ORT_BLOCK]  # onnxruntime's, then the other one (8 <-> 16)


def padded(c, block):
    return (c + block - 1) // block * block


def to_blocked(x, block):
    """NCHW -> the blocked 4-D tensor [N, Cp, H, W] (padding channels zero)."""
    n, c, h, w = x.shape
    cp = padded(c, block)
    full = np.zeros((n, cp, h, w), np.float32)
    full[:, :c] = x
    return np.ascontiguousarray(full.reshape(n, cp // block, block, h, w).transpose(0, 1, 3, 4, 2)).reshape(n, cp, h, w)


def from_blocked(y, block, c):
    """The blocked 4-D tensor -> NCHW with its first c channels."""
    n, cp, h, w = y.shape
    return y.reshape(n, cp // block, h, w, block).transpose(0, 1, 4, 2, 3).reshape(n, cp, h, w)[:, :c]


def reorder_filter(w, block, per_output_block):
    """OIHW [Co, Ci', kH, kW] -> onnxruntime's [Cop, Ci', kH, kW] in OIHWBo or OIHWBiBo order."""
    co, ci, kh, kw = w.shape
    cop = padded(co, block)
    full = np.zeros((cop, ci, kh, kw), np.float32)
    full[:co] = w
    ob = full.reshape(cop // block, block, ci, kh * kw)  # [ob, bo, i, k]
    if per_output_block:  # [ob][i][k][bo]
        out = ob.transpose(0, 2, 3, 1)
    else:  # [ob][ib][k][bi][bo]
        out = ob.reshape(cop // block, block, ci // block, block, kh * kw).transpose(0, 2, 4, 3, 1)
    return np.ascontiguousarray(out).reshape(cop, ci, kh, kw)


def model_of(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "nchwc",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in inputs],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              [numpy_helper.from_array(a, n) for n, a in initializers])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(NCHWC, 1)]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


def run_ort(model, feeds):
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"]).run(None, feeds)


def run_kiln(model, feeds, block, monkeypatch):
    with monkeypatch.context() as m:
        m.setenv("KILN_ORT_NCHWC_BLOCK", str(block))
        return kiln.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)


def close(got, want, what):
    assert got.shape == want.shape, what
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4 * max(1.0, float(np.abs(want).max(initial=0))),
                               err_msg=what)


def check(build, monkeypatch):
    """build(block) -> (model, feeds, logical(outputs) -> NCHW arrays). onnxruntime runs its
    block size's file; kiln runs that file (raw outputs equal too) and the other block size's."""
    model, feeds, logical = build(ORT_BLOCK)
    want_raw = run_ort(model, feeds)
    want = logical(want_raw)
    got_raw = run_kiln(model, feeds, ORT_BLOCK, monkeypatch)
    for k, (g, w) in enumerate(zip(logical(got_raw), want)):
        close(g, w, f"output {k} at block {ORT_BLOCK}")
    other = BLOCKS[1]
    model, feeds, logical = build(other)
    for k, (g, w) in enumerate(zip(logical(run_kiln(model, feeds, other, monkeypatch)), want)):
        close(g, w, f"output {k} at block {other} (forced)")


def rng(seed=0):
    return np.random.default_rng(seed)


# ---- Conv ------------------------------------------------------------------------------------

# (name, N, Ci, Co, H, W, kernel, attrs, group)
CONV_CASES = [
    ("plain_input_3x3_s2", 1, 3, 32, 17, 15, 3, dict(strides=[2, 2], pads=[1, 1, 1, 1]), 1),
    ("plain_input_co_not_block_multiple", 2, 3, 20, 9, 10, 3, dict(pads=[1, 1, 1, 1]), 1),
    ("eight_channels", 1, 8, 16, 7, 7, 3, dict(pads=[1, 1, 1, 1]), 1),  # plain at 16, blocked at 8
    ("blocked_1x1", 2, 32, 48, 6, 5, 1, {}, 1),
    ("blocked_3x3", 1, 32, 32, 9, 8, 3, dict(pads=[1, 1, 1, 1]), 1),
    ("blocked_co_not_block_multiple", 1, 16, 40, 6, 6, 3, dict(pads=[1, 1, 1, 1]), 1),
    ("blocked_stride2_asym_pads", 1, 16, 32, 11, 10, 3, dict(strides=[2, 2], pads=[0, 1, 1, 0]), 1),
    ("blocked_dilation2", 1, 16, 16, 12, 11, 3, dict(dilations=[2, 2], pads=[2, 2, 2, 2]), 1),
    ("blocked_same_upper", 1, 16, 16, 7, 9, 3, dict(auto_pad="SAME_UPPER", strides=[2, 2]), 1),
    ("blocked_5x5_kernel_shape", 1, 16, 32, 9, 9, 5, dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2]), 1),
    ("grouped_2x32", 1, 64, 64, 6, 7, 3, dict(pads=[1, 1, 1, 1]), 2),
    ("depthwise_3x3", 2, 32, 32, 9, 9, 3, dict(pads=[1, 1, 1, 1]), 32),
    ("depthwise_3x3_s2", 1, 48, 48, 10, 9, 3, dict(strides=[2, 2], pads=[1, 1, 1, 1]), 48),
    ("depthwise_5x5", 1, 16, 16, 8, 8, 5, dict(pads=[2, 2, 2, 2]), 16),
]

ACTIVATIONS = [("none", {}), ("Relu", dict(activation="Relu")),
               ("LeakyRelu", dict(activation="LeakyRelu", activation_params=[0.1])),
               ("Tanh", dict(activation="Tanh")), ("Sigmoid", dict(activation="Sigmoid")),
               ("Clip", dict(activation="Clip", activation_params=[-0.5, 0.5])),
               ("HardSigmoid", dict(activation="HardSigmoid", activation_params=[0.2, 0.5]))]


def conv_builder(n, ci, co, h, w, k, attrs, group, bias=True, with_sum=False, seed=0):
    r = rng(seed)
    x = r.standard_normal((n, ci, h, w)).astype(np.float32)
    weights = (r.standard_normal((co, ci // group, k, k)) / np.sqrt(ci // group * k * k)).astype(np.float32)
    b = r.standard_normal(co).astype(np.float32)
    reference = helper.make_node("Conv", ["x", "w"] + (["b"] if bias else []), ["y"], group=group,
                                 **{a: v for a, v in attrs.items() if not a.startswith("activation")})
    out_shape = run_ort(model_of([reference], [("x", x)], ["y"], [("w", weights)] + ([("b", b)] if bias else [])),
                        {"x": x})[0].shape
    s = r.standard_normal(out_shape).astype(np.float32)

    def build(block):
        plain = ci < block
        depthwise = group > 1 and ci // group == 1 and co == group
        wr = reorder_filter(weights, block, plain or depthwise)
        inits = [("w", wr)]
        inputs = ["x", "w"]
        if bias:
            inits.append(("b", np.pad(b, (0, padded(co, block) - co))))
            inputs.append("b")
        feeds = {"x": x if plain else to_blocked(x, block)}
        if with_sum:
            inputs += [""] * (3 - len(inputs)) + ["sum"]
            feeds["sum"] = to_blocked(s, block)
        node = helper.make_node("Conv", inputs, ["y"], domain=NCHWC, group=group, **attrs)
        model = model_of([node], list(feeds.items()), ["y"], inits)
        return model, feeds, lambda outs: [from_blocked(outs[0], block, co)]

    return build, x, weights, b, s


@pytest.mark.parametrize("case", CONV_CASES, ids=[c[0] for c in CONV_CASES])
def test_conv(case, monkeypatch):
    _, n, ci, co, h, w, k, attrs, group = case
    build, *_ = conv_builder(n, ci, co, h, w, k, attrs, group)
    check(build, monkeypatch)


@pytest.mark.parametrize("act", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
@pytest.mark.parametrize("shape", ["plain", "blocked", "depthwise"])
def test_conv_activations(act, shape, monkeypatch):
    n, ci, co, group = {"plain": (1, 3, 32, 1), "blocked": (1, 32, 16, 1), "depthwise": (1, 32, 32, 32)}[shape]
    build, *_ = conv_builder(n, ci, co, 8, 7, 3, dict(pads=[1, 1, 1, 1], **act[1]), group)
    check(build, monkeypatch)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("act", ACTIVATIONS[:4], ids=[a[0] for a in ACTIVATIONS[:4]])
def test_conv_sum_input(bias, act, monkeypatch):
    """Y = act(Conv(X, W) + B + Sum): onnxruntime's Conv+Add fusion (the residual of ResNets)."""
    build, *_ = conv_builder(2, 32, 32, 6, 6, 3, dict(pads=[1, 1, 1, 1], **act[1]), 1, bias=bias, with_sum=True)
    check(build, monkeypatch)


def test_reordered_filters_are_what_onnxruntime_reads():
    """The test's own reorder_filter against onnxruntime: nchwc Conv on the reordered filter is the
    ONNX Conv on the plain one."""
    for ci, co, group in [(3, 20, 1), (32, 48, 1), (32, 32, 32)]:
        build, x, weights, b, _ = conv_builder(1, ci, co, 6, 6, 3, dict(pads=[1, 1, 1, 1]), group)
        model, feeds, logical = build(ORT_BLOCK)
        ref = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=group, pads=[1, 1, 1, 1])
        want = run_ort(model_of([ref], [("x", x)], ["y"], [("w", weights), ("b", b)]), {"x": x})[0]
        close(logical(run_ort(model, feeds))[0], want, f"ci {ci} co {co} group {group}")


# ---- pools -----------------------------------------------------------------------------------

POOL_CASES = [
    ("MaxPool", "k3_s2_p1", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("MaxPool", "k2_s2", dict(kernel_shape=[2, 2], strides=[2, 2])),
    ("MaxPool", "ceil_mode", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ("MaxPool", "dilation2", dict(kernel_shape=[2, 2], dilations=[2, 2])),
    ("MaxPool", "same_upper", dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")),
    ("MaxPool", "storage_order", dict(kernel_shape=[2, 2], storage_order=0)),
    ("AveragePool", "exclude_pad", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ("AveragePool", "include_pad", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)),
    ("AveragePool", "k2_s2_ceil", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    ("AveragePool", "asym_pads_include", dict(kernel_shape=[3, 2], pads=[0, 1, 2, 0], count_include_pad=1)),
    ("GlobalMaxPool", "global", {}),
    ("GlobalAveragePool", "global", {}),
]


def single_node_builder(op, c, x, **attrs):
    def build(block):
        feeds = {"x": to_blocked(x, block)}
        model = model_of([helper.make_node(op, ["x"], ["y"], domain=NCHWC, **attrs)], list(feeds.items()), ["y"])
        return model, feeds, lambda outs: [from_blocked(outs[0], block, c)]
    return build


@pytest.mark.parametrize("case", POOL_CASES, ids=[f"{c[0]}-{c[1]}" for c in POOL_CASES])
def test_pool(case, monkeypatch):
    op, _, attrs = case
    x = rng(1).standard_normal((2, 32, 11, 10)).astype(np.float32)
    check(single_node_builder(op, 32, x, **attrs), monkeypatch)


def chain_builder(c, x, body):
    """ReorderInput -> body nodes (reading 'b0', writing 'b1') -> ReorderOutput(channels=c):
    NCHW in and out, for channel counts that are not a multiple of the block."""
    def build(block):
        nodes = [helper.make_node("ReorderInput", ["x"], ["b0"], domain=NCHWC)] + body + [
            helper.make_node("ReorderOutput", ["b1"], ["y"], domain=NCHWC, channels=c)]
        return model_of(nodes, [("x", x)], ["y"]), {"x": x}, lambda outs: outs
    return build


@pytest.mark.parametrize("op,attrs", [("MaxPool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
                                      ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2])),
                                      ("GlobalAveragePool", {}),
                                      ("Upsample", dict(scales=[1, 1, 2, 2]))], ids=lambda v: v if isinstance(v, str) else "")
def test_ops_on_channels_not_a_multiple_of_the_block(op, attrs, monkeypatch):
    x = rng(2).standard_normal((1, 20, 7, 6)).astype(np.float32)
    check(chain_builder(20, x, [helper.make_node(op, ["b0"], ["b1"], domain=NCHWC, **attrs)]), monkeypatch)


# ---- Upsample --------------------------------------------------------------------------------

UPSAMPLE_CASES = [("nearest", "asymmetric", [1, 1, 2, 2]), ("nearest", "asymmetric", [1, 1, 3, 1]),
                  ("linear", "asymmetric", [1, 1, 2, 2]), ("linear", "align_corners", [1, 1, 2, 3]),
                  ("linear", "half_pixel", [1, 1, 2, 2]), ("linear", "half_pixel", [1, 1, 1, 4])]


@pytest.mark.parametrize("mode,transform,scales", UPSAMPLE_CASES,
                         ids=[f"{m}-{t}-{s[2]}x{s[3]}" for m, t, s in UPSAMPLE_CASES])
def test_upsample(mode, transform, scales, monkeypatch):
    x = rng(3).standard_normal((2, 16, 5, 4)).astype(np.float32)
    check(single_node_builder("Upsample", 16, x, scales=scales, mode=mode, coordinate_transformation_mode=transform),
          monkeypatch)


# ---- ReorderInput / ReorderOutput ------------------------------------------------------------

@pytest.mark.parametrize("channels", [12, 16, 36])
@pytest.mark.parametrize("channels_last", [0, 1])
def test_reorder_input(channels, channels_last, monkeypatch):
    """onnxruntime's ReorderInput needs a channel count that is a multiple of 4."""
    nchw = rng(4).standard_normal((2, channels, 5, 3)).astype(np.float32)
    x = nchw.transpose(0, 2, 3, 1).copy() if channels_last else nchw

    node = helper.make_node("ReorderInput", ["x"], ["y"], domain=NCHWC, channels_last=channels_last)
    model, feeds = model_of([node], [("x", x)], ["y"]), {"x": x}
    np.testing.assert_array_equal(run_kiln(model, feeds, ORT_BLOCK, monkeypatch)[0], run_ort(model, feeds)[0])
    for block in BLOCKS:
        y = run_kiln(model, feeds, block, monkeypatch)[0]
        assert y.shape[1] == padded(channels, block)
        np.testing.assert_array_equal(y, to_blocked(nchw, block))


@pytest.mark.parametrize("channels", [5, 16, 20, 32])
@pytest.mark.parametrize("channels_last", [0, 1])
def test_reorder_output(channels, channels_last, monkeypatch):
    nchw = rng(5).standard_normal((2, channels, 4, 3)).astype(np.float32)
    want = nchw.transpose(0, 2, 3, 1) if channels_last else nchw

    def build(block):
        feeds = {"x": to_blocked(nchw, block)}
        node = helper.make_node("ReorderOutput", ["x"], ["y"], domain=NCHWC, channels=channels,
                                channels_last=channels_last)
        return model_of([node], list(feeds.items()), ["y"]), feeds, lambda outs: outs
    model, feeds, _ = build(ORT_BLOCK)
    np.testing.assert_array_equal(run_ort(model, feeds)[0], want)
    for block in BLOCKS:
        model, feeds, _ = build(block)
        np.testing.assert_array_equal(run_kiln(model, feeds, block, monkeypatch)[0], want)


# ---- chains with ai.onnx ops between (what onnxruntime's transformer leaves) -------------------

def test_chain_of_conv_sum_relu_add_concat_and_pools(monkeypatch):
    """ReorderInput, Conv, a residual Conv with Sum, ai.onnx Relu / Add / Concat(axis 1) on blocked
    tensors, MaxPool, GlobalAveragePool, ReorderOutput: kiln's own passes (fusions, its NCHWc
    layout) must leave such a graph's meaning alone."""
    r = rng(6)
    x = r.standard_normal((1, 16, 8, 8)).astype(np.float32)
    w1 = (r.standard_normal((32, 16, 3, 3)) / 12).astype(np.float32)
    w2 = (r.standard_normal((32, 32, 1, 1)) / 6).astype(np.float32)
    w3 = (r.standard_normal((32, 1, 3, 3)) / 3).astype(np.float32)
    b1 = r.standard_normal(32).astype(np.float32)

    def build(block):
        nodes = [
            helper.make_node("ReorderInput", ["x"], ["bx"], domain=NCHWC),
            helper.make_node("Conv", ["bx", "w1", "b1"], ["c1"], domain=NCHWC, pads=[1, 1, 1, 1], activation="Relu"),
            helper.make_node("Conv", ["c1", "w2", "", "c1"], ["c2"], domain=NCHWC),
            helper.make_node("Relu", ["c2"], ["r2"]),
            helper.make_node("Conv", ["r2", "w3"], ["c3"], domain=NCHWC, group=32, pads=[1, 1, 1, 1]),
            helper.make_node("Add", ["c3", "r2"], ["a3"]),
            helper.make_node("Concat", ["a3", "c1"], ["cat"], axis=1),
            helper.make_node("MaxPool", ["cat"], ["mp"], domain=NCHWC, kernel_shape=[2, 2], strides=[2, 2]),
            helper.make_node("GlobalAveragePool", ["mp"], ["gp"], domain=NCHWC),
            helper.make_node("ReorderOutput", ["mp"], ["y"], domain=NCHWC, channels=64),
            helper.make_node("ReorderOutput", ["gp"], ["g"], domain=NCHWC, channels=64),
        ]
        inits = [("w1", reorder_filter(w1, block, False)), ("b1", b1), ("w2", reorder_filter(w2, block, False)),
                 ("w3", reorder_filter(w3, block, True))]
        return model_of(nodes, [("x", x)], ["y", "g"], inits), {"x": x}, lambda outs: outs
    check(build, monkeypatch)


def test_add_through_reshapes_to_5d_blocks(monkeypatch):
    """onnxruntime's transformer adds two blocked tensors whose shapes it cannot prove equal through
    Reshape to [0, Cp / B, 0, 0, B] and back to [0, Cp, 0, 0]."""
    r = rng(7)
    x = r.standard_normal((2, 16, 6, 5)).astype(np.float32)
    w1 = (r.standard_normal((24, 16, 3, 3)) / 12).astype(np.float32)
    w2 = (r.standard_normal((24, 16, 1, 1)) / 4).astype(np.float32)

    def build(block):
        cp = padded(24, block)
        nodes = [
            helper.make_node("ReorderInput", ["x"], ["bx"], domain=NCHWC),
            helper.make_node("Conv", ["bx", "w1"], ["c1"], domain=NCHWC, pads=[1, 1, 1, 1]),
            helper.make_node("Conv", ["bx", "w2"], ["c2"], domain=NCHWC, activation="Relu"),
            helper.make_node("Reshape", ["c1", "split"], ["s1"]),
            helper.make_node("Reshape", ["c2", "split"], ["s2"]),
            helper.make_node("Add", ["s1", "s2"], ["sum5"]),
            helper.make_node("Reshape", ["sum5", "unsplit"], ["sum4"]),
            helper.make_node("ReorderOutput", ["sum4"], ["y"], domain=NCHWC, channels=24),
        ]
        inits = [("w1", reorder_filter(w1, block, False)), ("w2", reorder_filter(w2, block, False)),
                 ("split", np.array([0, cp // block, 0, 0, block], np.int64)),
                 ("unsplit", np.array([0, cp, 0, 0], np.int64))]
        return model_of(nodes, [("x", x)], ["y"], inits), {"x": x}, lambda outs: outs
    check(build, monkeypatch)


# ---- malformed -------------------------------------------------------------------------------

def kiln_error(model, monkeypatch, block=ORT_BLOCK):
    with pytest.raises(Exception) as info:
        run_kiln(model, {}, block, monkeypatch)
    return str(info.value)


def test_conv_filter_rows_not_a_multiple_of_the_block_are_refused(monkeypatch):
    w = np.zeros((20, 16, 3, 3), np.float32)  # 20 rows: onnxruntime pads them to the block
    node = helper.make_node("Conv", ["x", "w"], ["y"], domain=NCHWC, name="conv1")
    model = model_of([node], [("x", np.zeros((1, 16, 4, 4), np.float32))], ["y"], [("w", w)])
    message = kiln_error(model, monkeypatch)
    assert "conv1" in message and "input 1 (W)" in message and "not a multiple of" in message, message


def test_conv_input_channels_neither_plain_nor_blocked_are_refused(monkeypatch):
    w = np.zeros((16, 20, 1, 1), np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], domain=NCHWC, name="conv2")
    model = model_of([node], [("x", np.zeros((1, 20, 4, 4), np.float32))], ["y"], [("w", w)])
    message = kiln_error(model, monkeypatch)
    assert "conv2" in message and "input 0 (X)" in message and "neither plain" in message, message


def test_wrong_ranks_are_refused(monkeypatch):
    node = helper.make_node("MaxPool", ["x"], ["y"], domain=NCHWC, name="pool3", kernel_shape=[2, 2])
    model = model_of([node], [("x", np.zeros((1, 16, 4, 4, 1), np.float32))], ["y"])
    message = kiln_error(model, monkeypatch)
    assert "pool3" in message and "input 0 (X) must be 4-D" in message, message


def test_reorder_output_channels_past_the_padded_count_are_refused(monkeypatch):
    node = helper.make_node("ReorderOutput", ["x"], ["y"], domain=NCHWC, name="out4", channels=40)
    model = model_of([node], [("x", np.zeros((1, 32, 2, 2), np.float32))], ["y"])
    message = kiln_error(model, monkeypatch)
    assert "out4" in message and "'channels' 40 does not fit input 0 (X)" in message, message


def test_pool_on_an_unblocked_channel_count_is_refused(monkeypatch):
    node = helper.make_node("GlobalAveragePool", ["x"], ["y"], domain=NCHWC, name="gap5")
    model = model_of([node], [("x", np.zeros((1, 12, 2, 2), np.float32))], ["y"])
    message = kiln_error(model, monkeypatch)
    assert "gap5" in message and "not a multiple of the NCHWc block size" in message, message
