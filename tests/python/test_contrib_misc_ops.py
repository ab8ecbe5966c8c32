"""The smaller com.microsoft operators of onnxruntime's CPU EP (ExpandDims, GatherND, Pad, Range,
Trilu, Unique, GridSample, ...): each case builds one node with onnx.helper (opset import
com.microsoft 1), runs it in onnxruntime and in kiln on the same random inputs (fixed seed) and
compares: exactly for integer outputs, to 1e-5 otherwise. One bad input per op checks kiln's
error message."""
import subprocess

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_contrib_ops import contrib_model as model_of
from test_contrib_ops import feeds_of

import kiln

MS = "com.microsoft"


def check(op, inputs, outputs, constants=(), tol=1e-5, **attrs):
    """Runs the node in onnxruntime and kiln; every output equal (integers, strings, bools) or
    within tol. Returns kiln's outputs."""
    model = model_of(op, inputs, outputs, constants, **attrs)
    feeds = feeds_of(inputs, constants)
    ort = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    ours = kiln.InferenceSession(model).run(None, feeds)
    assert len(ours) == len(ort)
    for (name, _), want, got in zip([o for o in outputs if o], ort, ours):
        got, want = np.asarray(got), np.asarray(want)
        assert got.shape == want.shape, f"{op} output {name}: {got.shape} != {want.shape}"
        assert got.dtype == want.dtype, f"{op} output {name}: {got.dtype} != {want.dtype}"
        if want.dtype.kind in "f":
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"{op} output {name}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{op} output {name}")
    return ours


def refused(op, inputs, outputs, constants=(), **attrs):
    """kiln's error message for the node (it must fail, at load or at run)."""
    model = model_of(op, inputs, outputs, constants, **attrs)
    with pytest.raises((kiln.Fail, kiln.InvalidArgument, kiln.InvalidGraph, kiln.NotImplemented)) as info:
        kiln.InferenceSession(model).run(None, feeds_of(inputs, constants))
    message = str(info.value)
    assert f"{op}_node" in message, message
    return message


def rng(seed=0):
    return np.random.default_rng(seed)


def values(r, shape, dtype):
    if np.dtype(dtype).kind == "f":
        return r.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return r.integers(0, 2, shape).astype(bool)
    return r.integers(-50 if np.dtype(dtype).kind == "i" else 0, 50, shape).astype(dtype)


# ---- ONNX ops under com.microsoft ---------------------------------------------------------------

EXPAND_DIMS_TYPES = [np.float32, np.float64, np.int64, np.uint64, np.int32, np.uint32, np.int16,
                     np.uint16, np.int8, np.uint8, np.float16, np.bool_]


@pytest.mark.parametrize("dtype", EXPAND_DIMS_TYPES)
@pytest.mark.parametrize("axis", [0, 1, 3, -1, -4])
def test_expand_dims(dtype, axis):
    x = values(rng(), (2, 3, 4), dtype)
    check("ExpandDims", [("X", x), ("axis", np.array(axis, np.int32))], [("Y", dtype)])


def test_expand_dims_strings_and_constant_axis():
    x = np.array([["a", "bc"], ["", "d"]], dtype=object)
    check("ExpandDims", [("X", x), ("axis", np.array(1, np.int32))], [("Y", object)], {"axis"})


def test_expand_dims_axis_out_of_range():
    message = refused("ExpandDims", [("X", np.zeros((2, 3), np.float32)), ("axis", np.array(3, np.int32))],
                      [("Y", np.float32)])
    assert "3" in message and "axis" in message.lower(), message


GATHER_ND_TYPES = [np.float32, np.float64, np.int64, np.int32, np.uint8, np.int8, np.float16, np.bool_]


@pytest.mark.parametrize("dtype", GATHER_ND_TYPES)
@pytest.mark.parametrize("index_type", [np.int32, np.int64])
@pytest.mark.parametrize("data_shape,index_shape", [((4, 5), (3, 2)), ((4, 5), (3, 1)),
                                                    ((3, 4, 5), (2, 2, 2)), ((3, 4, 5), (6, 3))])
def test_gather_nd(dtype, index_type, data_shape, index_shape):
    r = rng()
    data = values(r, data_shape, dtype)
    k = index_shape[-1]
    dims = np.array(data_shape[:k])
    indices = (r.integers(0, 1 << 20, index_shape) % dims - (r.integers(0, 2, index_shape) * dims)).astype(index_type)
    check("GatherND", [("data", data), ("indices", indices)], [("output", dtype)])


def test_gather_nd_strings():
    data = np.array([["a", "b"], ["c", "d"]], dtype=object)
    check("GatherND", [("data", data), ("indices", np.array([[1, 0], [0, 1]], np.int64))], [("output", object)])


def test_gather_nd_index_out_of_range():
    message = refused("GatherND", [("data", np.zeros((2, 3), np.float32)), ("indices", np.array([[2, 0]], np.int64))],
                      [("output", np.float32)])
    assert "out of range" in message, message


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("pads", [[1, 2, 0, 1], [0, 0, 2, 2], [1, -1, 0, 2]])
@pytest.mark.parametrize("pads_2d", [False, True])
@pytest.mark.parametrize("value", [None, 0.5, [1.5]])
def test_pad(mode, pads, pads_2d, value):
    x = values(rng(), (3, 4), np.float32)
    p = np.array([pads] if pads_2d else pads, np.int64)
    v = None if value is None else np.array(value, np.float32)
    check("Pad", [("data", x), ("pads", p), ("value", v)], [("output", np.float32)], mode=mode)


def test_pad_constant_pads_3d():
    x = values(rng(), (2, 3, 4), np.float32)
    check("Pad", [("data", x), ("pads", np.array([0, 1, 2, 1, 0, 1], np.int64))], [("output", np.float32)],
          {"pads"}, mode="reflect")


def test_pad_wrong_pads_length():
    message = refused("Pad", [("data", np.zeros((2, 3), np.float32)), ("pads", np.array([1, 0, 0], np.int64))],
                      [("output", np.float32)])
    assert "pads" in message, message


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16, np.int32, np.int64])
@pytest.mark.parametrize("start,limit,delta", [(1, 10, None), (10, 1, -3), (2, 30, 4), (5, 5, 2), (-4, 7, 3)])
@pytest.mark.parametrize("shaped", [False, True])
def test_range(dtype, start, limit, delta, shaped):
    def arg(v):
        return None if v is None else np.array([v] if shaped else v, dtype)
    check("Range", [("start", arg(start)), ("limit", arg(limit)), ("delta", arg(delta))], [("Y", dtype)])


def test_range_float_steps():
    args = [("start", np.array(1.0, np.float32)), ("limit", np.array(2.0, np.float32)),
            ("delta", np.array(0.3, np.float32))]
    check("Range", args, [("Y", np.float32)])
    check("Range", args, [("Y", np.float32)], {"start", "limit", "delta"})


def test_range_zero_delta():
    message = refused("Range", [("start", np.array(1, np.int64)), ("limit", np.array(5, np.int64)),
                                ("delta", np.array(0, np.int64))], [("Y", np.int64)])
    assert "delta" in message, message


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 2, -1, 7, -9])
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 6, 3)])
def test_trilu(dtype, upper, k, shape):
    x = values(rng(), shape, dtype)
    check("Trilu", [("X", x), ("k", None if k is None else np.array(k, np.int64))], [("Y", dtype)], upper=upper)


def test_trilu_rank_1():
    message = refused("Trilu", [("X", np.zeros((4,), np.float32))], [("Y", np.float32)])
    assert "rank 2" in message, message


@pytest.mark.parametrize("n", [0, 1, 7, 40])
def test_unique(n):
    """Values in order of first occurrence (onnxruntime's contrib Unique has no `sorted`), the
    index of each x in y, counts; -0.0 equals 0.0. (onnxruntime requires all three outputs.)"""
    x = rng().integers(-5, 5, n).astype(np.float32) * 0.5
    if n > 1:
        x[0] = -0.0
    check("Unique", [("x", x)], [("y", np.float32), ("idx", np.int64), ("counts", np.int64)])


def test_unique_of_other_dtypes_runs_in_kiln():
    """onnxruntime registers float only; kiln's kernel takes any dtype, in the same order."""
    x = np.array([3, 1, 3, 2, 1, 7], np.int64)
    model = model_of("Unique", [("x", x)], [("y", np.int64), ("idx", np.int64), ("counts", np.int64)])
    y, idx, counts = kiln.InferenceSession(model).run(None, {"x": x})
    np.testing.assert_array_equal(y, [3, 1, 2, 7])
    np.testing.assert_array_equal(idx, [0, 1, 0, 2, 1, 3])
    np.testing.assert_array_equal(counts, [2, 2, 1, 1])


def test_unique_groups_nans_as_one_value():
    """NaN equals NaN and sorts after the numbers (numpy's unique), in ONNX's Unique and so in this
    one; onnxruntime's contrib Unique makes each NaN a value of its own (docs/operators.md)."""
    x = np.array([np.nan, 1, np.nan, 0, -0.0, 2, np.nan, 1], np.float32)
    model = model_of("Unique", [("x", x)], [("y", np.float32), ("idx", np.int64), ("counts", np.int64)])
    y, idx, counts = kiln.InferenceSession(model).run(None, {"x": x})
    np.testing.assert_array_equal(y, [np.nan, 1, 0, 2])
    np.testing.assert_array_equal(idx, [0, 1, 0, 2, 2, 3, 0, 1])
    np.testing.assert_array_equal(counts, [3, 2, 2, 1])
    onnx_unique = helper.make_model(helper.make_graph(
        [helper.make_node("Unique", ["x"], ["y", "i", "inv", "c"], sorted=1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info(n, t, None) for n, t in
         (("y", TensorProto.FLOAT), ("i", TensorProto.INT64), ("inv", TensorProto.INT64), ("c", TensorProto.INT64))]),
        opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    for got, want in zip(kiln.InferenceSession(onnx_unique).run(None, {"x": x}),
                         np.unique(x, return_index=True, return_inverse=True, return_counts=True)):
        np.testing.assert_array_equal(got, want)


def test_unique_2d():
    message = refused("Unique", [("x", np.zeros((2, 3), np.float32))],
                      [("y", np.float32), ("idx", np.int64), ("counts", np.int64)])
    assert "1-D" in message, message


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample(mode, padding_mode, align_corners):
    r = rng()
    x = r.standard_normal((2, 3, 5, 6)).astype(np.float32)
    grid = r.uniform(-2.5, 2.5, (2, 4, 7, 2)).astype(np.float32)
    check("GridSample", [("X", x), ("Grid", grid)], [("Y", np.float32)], tol=1e-4,
          mode=mode, padding_mode=padding_mode, align_corners=align_corners)


def test_grid_sample_bad_mode():
    x, grid = np.zeros((1, 1, 2, 2), np.float32), np.zeros((1, 2, 2, 2), np.float32)
    message = refused("GridSample", [("X", x), ("Grid", grid)], [("Y", np.float32)], mode="linear")
    assert "mode" in message, message


# ---- small self-contained ops --------------------------------------------------------------------

@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-4), (np.float64, 1e-10), (np.float16, 1e-2)])
@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 4, 4), (2, 3, 5, 5), (0, 3, 3)])
def test_inverse(dtype, tol, shape):
    r = rng()
    n = shape[-1]
    x = (r.standard_normal(shape) + 2 * n * np.eye(n)).astype(dtype)  # well conditioned
    check("Inverse", [("X", x)], [("Y", dtype)], tol=tol)


def test_inverse_of_non_square():
    message = refused("Inverse", [("X", np.zeros((2, 3), np.float32))], [("Y", np.float32)])
    assert "square" in message, message


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean", None])
@pytest.mark.parametrize("n,m,k", [(3, 4, 5), (1, 1, 1), (7, 2, 16), (0, 3, 2)])
def test_cdist(dtype, metric, n, m, k):
    r = rng()
    a, b = r.standard_normal((n, k)).astype(dtype), r.standard_normal((m, k)).astype(dtype)
    attrs = {} if metric is None else {"metric": metric}
    check("CDist", [("A", a), ("B", b)], [("C", dtype)], tol=1e-4, **attrs)


def test_cdist_mismatched_k():
    message = refused("CDist", [("A", np.zeros((3, 4), np.float32)), ("B", np.zeros((2, 3), np.float32))],
                      [("C", np.float32)])
    assert "last dim" in message, message


MURMUR_INPUTS = {
    "int32": np.array([0, 1, -1, 2**20, -7], np.int32),
    "uint32": np.array([0, 1, 2**32 - 1, 12345], np.uint32),
    "int64": np.array([[0, 1], [-1, 2**40]], np.int64),
    "uint64": np.array([0, 2**63 + 5], np.uint64),
    "float32": np.array([0.0, -0.0, 1.5, -3.25e7], np.float32),
    "float64": np.array([0.0, 1.5, np.pi], np.float64),
    "string": np.array(["", "a", "ab", "abc", "abcd", "hello world", "\u00e9t\u00e9"], dtype=object),
}


@pytest.mark.parametrize("kind", sorted(MURMUR_INPUTS))
@pytest.mark.parametrize("positive", [0, 1])
@pytest.mark.parametrize("seed", [0, 42, -3])
def test_murmur_hash3(kind, positive, seed):
    x = MURMUR_INPUTS[kind]
    check("MurmurHash3", [("X", x)], [("Y", np.uint32 if positive else np.int32)], positive=positive, seed=seed)


def test_murmur_hash3_of_bool():
    message = refused("MurmurHash3", [("X", np.array([True]))], [("Y", np.uint32)])
    assert "X must be int32" in message, message


def test_sample_op():
    x = values(rng(), (2, 3, 4), np.float32)
    check("SampleOp", [("X", x)], [("Y", np.float32)])
    check("SampleOp", [("X", x)], [("Y", np.float32)], {"X"})


def test_sample_op_without_input():
    node = helper.make_node("SampleOp", [], ["Y"], domain=MS, name="SampleOp_node")
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    with pytest.raises((kiln.Fail, kiln.InvalidArgument, kiln.InvalidGraph)) as info:
        kiln.InferenceSession(model.SerializeToString())
    assert "SampleOp_node" in str(info.value) and "input 0" in str(info.value), str(info.value)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", None])
@pytest.mark.parametrize("crop", [(3, 4), (1, 1), (1, 5), (6, 2)])
@pytest.mark.parametrize("extrapolation", [None, 2.5])
def test_crop_and_resize(mode, crop, extrapolation):
    r = rng()
    x = r.standard_normal((2, 3, 7, 9)).astype(np.float32)
    rois = r.uniform(-0.2, 1.2, (5, 4)).astype(np.float32)  # some outside the image, some flipped
    rois[0] = [0.1, 0.2, 0.8, 0.9]
    batch = r.integers(0, 2, 5).astype(np.int32)
    attrs = {k: v for k, v in (("mode", mode), ("extrapolation_value", extrapolation)) if v is not None}
    inputs = [("X", x), ("rois", rois), ("batch_indices", batch), ("crop_size", np.array(crop, np.int32))]
    check("CropAndResize", inputs, [("Y", np.float32)], **attrs)
    check("CropAndResize", inputs, [("Y", np.float32)], {"crop_size"}, **attrs)


def test_crop_and_resize_batch_index_out_of_range():
    inputs = [("X", np.zeros((1, 1, 4, 4), np.float32)), ("rois", np.array([[0, 0, 1, 1]], np.float32)),
              ("batch_indices", np.array([1], np.int32)), ("crop_size", np.array([2, 2], np.int32))]
    message = refused("CropAndResize", inputs, [("Y", np.float32)])
    assert "batch_indices[0] = 1 is out of range" in message, message


@pytest.mark.parametrize("attrs", [{}, {"strides": [2, 2]}, {"strides": [2, 1], "dilations": [1, 2]},
                                   {"strides": [3, 2], "output_padding": [1, 1]}, {"group": 2}])
@pytest.mark.parametrize("pads", [[0, 0, 0, 0], [1, 0, 2, 1]])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("pads_constant", [False, True])
def test_conv_transpose_with_dynamic_pads(attrs, pads, bias, pads_constant):
    r = rng()
    x = r.standard_normal((2, 4, 5, 6)).astype(np.float32)
    w = r.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = r.standard_normal((3 * attrs.get("group", 1),)).astype(np.float32) if bias else None
    p = np.array(pads, np.int64)
    constants = {"W", "Pads"} if pads_constant else set()
    check("ConvTransposeWithDynamicPads", [("X", x), ("W", w), ("Pads", p), ("B", b)], [("Y", np.float32)],
          constants, tol=1e-4, **attrs)


def test_conv_transpose_with_dynamic_pads_two_pads_in_one_session():
    r = rng()
    x = r.standard_normal((1, 2, 4, 4)).astype(np.float32)
    w = r.standard_normal((2, 2, 3, 3)).astype(np.float32)
    model = model_of("ConvTransposeWithDynamicPads", [("X", x), ("W", w), ("Pads", np.zeros(4, np.int64))],
                     [("Y", np.float32)])
    ours = kiln.InferenceSession(model)
    ort = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    for pads in ([0, 0, 0, 0], [1, 1, 0, 2], [0, 0, 0, 0]):
        feeds = {"X": x, "W": w, "Pads": np.array(pads, np.int64)}
        np.testing.assert_allclose(ours.run(None, feeds)[0], ort.run(None, feeds)[0], rtol=1e-4, atol=1e-4)


def test_conv_transpose_with_dynamic_pads_wrong_pads_length():
    inputs = [("X", np.zeros((1, 1, 4, 4), np.float32)), ("W", np.zeros((1, 1, 3, 3), np.float32)),
              ("Pads", np.array([1, 1], np.int64))]
    message = refused("ConvTransposeWithDynamicPads", inputs, [("Y", np.float32)])
    assert "pads" in message, message


def test_conv_transpose_with_dynamic_pads_requires_pads():
    """Optional in the schema, but onnxruntime's kernel fails without it ("Dynamic pads tensor is
    required"); kiln refuses it when the model is loaded."""
    inputs = [("X", np.zeros((1, 1, 4, 4), np.float32)), ("W", np.zeros((1, 1, 3, 3), np.float32))]
    message = refused("ConvTransposeWithDynamicPads", inputs, [("Y", np.float32)])
    assert "'Pads' is required" in message, message


# ---- token and sequence ops --------------------------------------------------------------------

@pytest.mark.parametrize("ngram_size", [1, 2, 3, 4, 9])
@pytest.mark.parametrize("batch,length", [(1, 6), (3, 12), (2, 1)])
def test_ngram_repeat_block(ngram_size, batch, length):
    r = rng(ngram_size)
    ids = r.integers(0, 4, (batch, length)).astype(np.int64)  # a small vocabulary: n-grams repeat
    scores = r.standard_normal((batch, 7)).astype(np.float32)
    check("NGramRepeatBlock", [("input_ids", ids), ("scores", scores)], [("scores_out", np.float32)],
          ngram_size=ngram_size)


def test_ngram_repeat_block_token_past_vocab():
    ids = np.array([[1, 5, 1]], np.int64)
    message = refused("NGramRepeatBlock", [("input_ids", ids), ("scores", np.zeros((1, 3), np.float32))],
                      [("scores_out", np.float32)], ngram_size=2)
    assert "out of range for a vocabulary of 3" in message, message


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("grams", [(1, 3), (2, 2), (1, 1), (2, 4)])
@pytest.mark.parametrize("with_pred", [True, False])
def test_bifurcation_detector(seed, grams, with_pred):
    r = rng(seed)
    src = r.integers(0, 5, 10).astype(np.int64)
    prev = int(r.integers(0, 11))
    pred = np.concatenate([src[prev:], [7]]).astype(np.int64)  # agrees with src from prev ...
    cut = int(r.integers(0, len(pred)))
    pred[cut:] = r.integers(0, 5, len(pred) - cut)  # ... up to a random point
    cur = r.integers(0, 5, int(r.integers(0, 6))).astype(np.int64)
    inputs = [("src_tokens", src), ("cur_tokens", cur), ("prev_suffix_match_idx", np.array(prev, np.int64)),
              ("pred_tokens", pred if with_pred else None)]
    check("BifurcationDetector", inputs, [("tokens", np.int64), ("suffix_match_idx", np.int64)],
          min_ngram_size=grams[0], max_ngram_size=grams[1])


def test_bifurcation_detector_pred_tokens_of_wrong_length():
    inputs = [("src_tokens", np.arange(5, dtype=np.int64)), ("cur_tokens", np.arange(2, dtype=np.int64)),
              ("prev_suffix_match_idx", np.array(1, np.int64)), ("pred_tokens", np.arange(3, dtype=np.int64))]
    message = refused("BifurcationDetector", inputs, [("tokens", np.int64), ("suffix_match_idx", np.int64)])
    assert "pred_tokens" in message, message


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (6, 4), (1, 4, 4), (1, 7)])
@pytest.mark.parametrize("ties", [False, True])
def test_dynamic_time_warping(shape, ties):
    r = rng()
    cost = (r.integers(0, 3, shape) if ties else r.uniform(0, 1, shape)).astype(np.float32)
    check("DynamicTimeWarping", [("input", cost)], [("output", np.int32)])


def test_dynamic_time_warping_batch_of_two():
    message = refused("DynamicTimeWarping", [("input", np.zeros((2, 3, 3), np.float32))], [("output", np.int32)])
    assert "[1, M, N]" in message, message


@pytest.mark.parametrize("window", [1, 2, 3])
@pytest.mark.parametrize("words,chars", [(1, 4), (5, 6)])
def test_word_conv_embedding(window, words, chars):
    """Words of different lengths padded with char 0, chars outside C (embedded as zeros), words
    shorter than the window (their first `window` chars are convolved, padding included)."""
    r = rng(window)
    seq = r.integers(1, 9, (words, chars)).astype(np.int32)
    for s in range(words):  # every word has a first char: onnxruntime leaves an empty word's row unset
        seq[s, int(r.integers(1, chars + 1)):] = 0
    seq[-1, -1] = 11  # past C's 9 rows
    filters, dim = 5, 4
    w = (0.3 * r.standard_normal((filters, 1, window, dim))).astype(np.float32)
    b_ = r.standard_normal(filters).astype(np.float32)
    c = r.standard_normal((9, dim)).astype(np.float32)
    inputs = [("Sequence", seq), ("W", w), ("B", b_), ("C", c)]
    check("WordConvEmbedding", inputs, [("Y", np.float32)], {"W", "B", "C"})
    check("WordConvEmbedding", inputs, [("Y", np.float32)], embedding_size=filters, conv_window_size=window,
          char_embedding_size=dim)


def test_word_conv_embedding_attribute_disagrees_with_weights():
    inputs = [("Sequence", np.array([[1, 2]], np.int32)), ("W", np.zeros((2, 1, 2, 4), np.float32)),
              ("B", np.zeros(2, np.float32)), ("C", np.zeros((3, 4), np.float32))]
    message = refused("WordConvEmbedding", inputs, [("Y", np.float32)], conv_window_size=3)
    assert "'conv_window_size' = 3 differs from W's window 2" in message, message


def test_word_conv_embedding_window_past_word():
    inputs = [("Sequence", np.array([[1, 2]], np.int32)), ("W", np.zeros((2, 1, 3, 4), np.float32)),
              ("B", np.zeros(2, np.float32)), ("C", np.zeros((3, 4), np.float32))]
    message = refused("WordConvEmbedding", inputs, [("Y", np.float32)])
    assert "window 3 is longer than the 2 chars" in message, message


@pytest.mark.parametrize("spatial,attrs", [
    ((9,), {"kernel_shape": [3]}),
    ((9,), {"kernel_shape": [2], "strides": [2], "pads": [1, 1]}),
    ((6, 7), {"kernel_shape": [2, 2]}),
    ((6, 7), {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1]}),
    ((6, 7), {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER"}),
    ((4, 5, 6), {"kernel_shape": [2, 2, 3], "strides": [1, 2, 2]}),
])
@pytest.mark.parametrize("mask_nc", [(2, 3), (1, 1), (2, 1)])
@pytest.mark.parametrize("zeros", [0.0, 0.2])
def test_maxpool_with_mask(spatial, attrs, mask_nc, zeros):
    """onnxruntime's quirks included: the mask read from (channel * spatial) mod (mask N * C) on,
    a zero ending the scan along the last axis only, element 0 untested in 2-D and 3-D."""
    r = rng(len(spatial))
    x = r.standard_normal((2, 3) + spatial).astype(np.float32)
    m = (r.uniform(0, 1, mask_nc + spatial) >= zeros).astype(np.int32)
    check("MaxpoolWithMask", [("X", x), ("M", m)], [("Y", np.float32)], **attrs)


def test_maxpool_with_mask_spatial_mismatch():
    inputs = [("X", np.zeros((1, 1, 4, 4), np.float32)), ("M", np.ones((1, 1, 4, 3), np.int32))]
    message = refused("MaxpoolWithMask", inputs, [("Y", np.float32)], kernel_shape=[2, 2])
    assert "spatial dims" in message, message


TOKENIZER_TEXT = np.array([["Hello World", "I love computer science !"],
                           ["a,b;; c,,d", "élan vital, été 42x"],
                           ["", "abab a ab aab 123"]], dtype=object)


@pytest.mark.parametrize("split", [
    {"separators": [" "]}, {"separators": [" ", ","]}, {"separators": ["[,;] *", " "]},
    {"separators": ["a|ab"]}, {"separators": ["o", "l"]}, {"separators": [""]},
    {"tokenexp": "[a-zA-Z]+"}, {"tokenexp": "[0-9]+|[a-z]+"}, {"tokenexp": "a|ab"}, {"tokenexp": "."},
    {"tokenexp": "[^ ,;]+"}, {"tokenexp": "(a|ab)b?"}, {"separators": ["(,|;)+"]}, {"tokenexp": "[a-z]+?"},
])
@pytest.mark.parametrize("mark", [0, 1])
@pytest.mark.parametrize("mincharnum", [1, 2, 3])
@pytest.mark.parametrize("rows", [None, 1])
def test_tokenizer(split, mark, mincharnum, rows):
    if mincharnum > 1 and (split.get("separators") == [""] or split.get("tokenexp") == "."):
        pytest.skip("character tokenization needs mincharnum 1 (both refuse it)")
    x = TOKENIZER_TEXT if rows is None else TOKENIZER_TEXT[rows]
    check("Tokenizer", [("X", x)], [("Y", object)], mark=mark, mincharnum=mincharnum, pad_value="#", **split)


def test_tokenizer_empty_input_and_all_separators():
    for x in (np.zeros((2, 0), dtype=object), np.array(["   ", " "], dtype=object)):
        check("Tokenizer", [("X", x)], [("Y", object)], mark=1, mincharnum=1, pad_value="", separators=[" "])


def test_tokenizer_bad_expression():
    message = refused("Tokenizer", [("X", np.array(["a b"], dtype=object))], [("Y", object)],
                      mark=0, mincharnum=1, pad_value="", tokenexp="[a-")
    assert "not a valid regular expression" in message, message


@pytest.mark.parametrize("split", [{"tokenexp": "(?i)[a-z]+"}, {"tokenexp": "\\pL+"}, {"tokenexp": "[é-ö]|."},
                                   {"separators": ["(?i)O"]}])
def test_tokenizer_re2_syntax(split):
    """RE2's syntax, which onnxruntime compiles the expressions with: case folding, Unicode
    classes, and classes and '.' matching whole UTF-8 characters."""
    check("Tokenizer", [("X", TOKENIZER_TEXT)], [("Y", object)], mark=0, mincharnum=1, pad_value="#", **split)


def test_tokenizer_on_a_string_of_a_million_characters():
    """Linear in the string, no recursion (a backtracking engine ran out of stack at 10^5)."""
    x = np.array(["ab" * 500000, "ab " * 1000], dtype=object)
    ours = check("Tokenizer", [("X", x)], [("Y", object)], mark=0, mincharnum=1, pad_value="#", tokenexp="(a|b)+")
    assert ours[0].shape == (2, 1000) and len(ours[0][0, 0]) == 10 ** 6


# ---- AttnLSTM ----------------------------------------------------------------------------------

def attn_lstm_inputs(r, direction, layer, seq_lens, mem_lens, bias, states, peepholes):
    seq, batch, inp, hidden, steps, depth, attn = 4, 2, 3, 5, 6, 4, 3
    d = 2 if direction == "bidirectional" else 1
    size = layer or depth

    def f(*shape, scale=0.5):
        return (scale * r.standard_normal(shape)).astype(np.float32)
    return [("X", f(seq, batch, inp, scale=1.0)), ("W", f(d, 4 * hidden, inp + size)), ("R", f(d, 4 * hidden, hidden)),
            ("B", f(d, 8 * hidden) if bias else None),
            ("sequence_lens", np.array([4, 2], np.int32) if seq_lens else None),
            ("initial_h", f(d, batch, hidden) if states else None), ("initial_c", f(d, batch, hidden) if states else None),
            ("P", f(d, 3 * hidden) if peepholes else None),
            ("QW", f(d, hidden, attn)), ("MW", f(d, depth, attn)), ("V", f(d, attn)), ("M", f(batch, steps, depth, scale=1.0)),
            ("memory_seq_lens", np.array([6, 3], np.int32) if mem_lens else None),
            ("AW", f(d, hidden + depth, layer) if layer else None)]


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layer", [0, 7])
@pytest.mark.parametrize("lengths", [(False, False), (True, True)])
@pytest.mark.parametrize("extras", [(False, False, False), (True, True, True)])
def test_attn_lstm(direction, layer, lengths, extras):
    inputs = attn_lstm_inputs(rng(), direction, layer, *lengths, *extras)
    check("AttnLSTM", inputs, [("Y", np.float32), ("Y_h", np.float32), ("Y_c", np.float32)], tol=1e-5,
          direction=direction, hidden_size=5)


@pytest.mark.parametrize("attrs", [{"clip": 0.3}, {"input_forget": 1},
                                   {"activations": ["HardSigmoid", "Tanh", "Softsign"],
                                    "activation_alpha": [0.3], "activation_beta": [0.4]}])
def test_attn_lstm_attributes(attrs):
    inputs = attn_lstm_inputs(rng(1), "forward", 7, True, True, True, False, True)
    check("AttnLSTM", inputs, [("Y", np.float32), ("Y_h", np.float32), ("Y_c", np.float32)], tol=1e-5,
          hidden_size=5, **attrs)


def test_attn_lstm_w_without_attention_columns():
    inputs = dict(attn_lstm_inputs(rng(), "forward", 0, False, False, False, False, False))
    inputs["W"] = inputs["W"][:, :, :3].copy()  # input columns only
    message = refused("AttnLSTM", list(inputs.items()), [("Y", np.float32)], hidden_size=5)
    assert "W has shape 1x20x3, expected 1x20x7" in message, message


# ---- through a plan ----------------------------------------------------------------------------

def plan_cases():
    r = rng(3)
    return {
        "ConvTransposeWithDynamicPads": ([("X", r.standard_normal((1, 2, 4, 4)).astype(np.float32)),
                                          ("W", r.standard_normal((2, 2, 3, 3)).astype(np.float32)),
                                          ("Pads", np.array([1, 0, 0, 1], np.int64))], [("Y", np.float32)], {"W", "Pads"}, {}),
        "Unique": ([("x", np.array([3, 1, 3, 2], np.float32))],
                   [("y", np.float32), ("idx", np.int64), ("counts", np.int64)], set(), {}),
        "AttnLSTM": ([(n, a) for n, a in attn_lstm_inputs(r, "bidirectional", 7, True, True, True, True, True) if a is not None],
                     [("Y", np.float32), ("Y_h", np.float32), ("Y_c", np.float32)], {"W", "R", "QW", "MW", "V", "AW"},
                     {"hidden_size": 5, "direction": "bidirectional"}),
        "GridSample": ([("X", r.standard_normal((1, 2, 4, 5)).astype(np.float32)),
                        ("Grid", r.uniform(-2, 2, (1, 3, 3, 2)).astype(np.float32))], [("Y", np.float32)], set(),
                       {"mode": "bicubic", "padding_mode": "border"}),
        "Tokenizer": ([("X", np.array(["a b", "cd e f"], dtype=object))], [("Y", object)], set(),
                      {"mark": 1, "mincharnum": 1, "pad_value": "#", "separators": [" "]}),
    }


@pytest.mark.parametrize("op", sorted(plan_cases()))
def test_plan_of_contrib_op_gives_the_model_outputs(op, build_dir, tmp_path):
    """kiln build writes the op into a plan; kiln run of the plan equals kiln run of the model."""
    binary = build_dir / "kiln"
    if not binary.is_file():
        pytest.skip(f"kiln binary not built: {binary}")
    inputs, outputs, constants, attrs = plan_cases()[op]
    model = tmp_path / "model.onnx"
    model.write_bytes(model_of(op, inputs, outputs, constants, **attrs))
    subprocess.run([binary, "build", model, "-o", tmp_path / "model.kiln"], check=True, capture_output=True)
    args = []
    for name, value in feeds_of(inputs, constants).items():
        if value.dtype == object:
            (tmp_path / f"{name}.pb").write_bytes(numpy_helper.from_array(value).SerializeToString())
            args += ["--input", f"{name}={tmp_path / name}.pb"]
        else:
            np.save(tmp_path / f"{name}.npy", value)
            args += ["--input", f"{name}={tmp_path / name}.npy"]
    results = []
    for source in ("model.onnx", "model.kiln"):
        out = tmp_path / f"{source}.out"
        run = subprocess.run([binary, "run", tmp_path / source, *args, "--output-dir", out], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        results.append(sorted(p.read_bytes() for p in out.iterdir()))
    assert results[0] == results[1]
