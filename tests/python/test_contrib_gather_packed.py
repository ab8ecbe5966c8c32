"""com.microsoft GatherPacked (onnxruntime 1.32's CPU kernel is the oracle): rows of a GGML
block-packed uint8 table gathered by int32 / int64 indices and dequantized to float32, float16 or
bfloat16. Every format kiln decodes, output_dtype and index type runs in onnxruntime and kiln on
the same random rows (random bytes with each block's float16 scales overwritten by finite values
of moderate size, so no row decodes to inf or NaN) and random indices, some negative or past the
vocabulary (both read row 0). The outputs must be bit-identical: kiln multiplies in GGML's order
and rounds once to the output type, as onnxruntime does. Bad inputs are refused by name."""
import ml_dtypes
import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto

import kiln
from test_contrib_llm_recent_ops import BF16, F16, F32, KILN_ERRORS, feeds, model, rng

U8, I32, I64 = TensorProto.UINT8, TensorProto.INT32, TensorProto.INT64
VOCAB = 5

# GGML type id: (name, values per block, bytes per block, byte offsets of float16 scales).
FORMATS = {
    0: ("F32", 1, 4, ()), 1: ("F16", 1, 2, ()), 30: ("BF16", 1, 2, ()),
    2: ("Q4_0", 32, 18, (0,)), 6: ("Q5_0", 32, 22, (0,)), 8: ("Q8_0", 32, 34, (0,)),
    20: ("IQ4_NL", 32, 18, (0,)), 13: ("Q5_K", 256, 176, (0, 2)), 14: ("Q6_K", 256, 210, (208,)),
    23: ("IQ4_XS", 256, 136, (0,)),
}
LATTICE = {16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 22: "IQ2_S"}
OUTPUTS = {1: F32, 10: F16, 16: BF16}


def packed_rows(r, packed_type, blocks):
    """VOCAB random rows of `blocks` blocks, every float16 scale finite and moderate."""
    name, values, size, scales = FORMATS[packed_type]
    if name in ("F32", "F16", "BF16"):
        x = r.standard_normal((VOCAB, blocks)).astype(np.float32) * 4
        typed = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16}[name]
        return np.ascontiguousarray(x.astype(typed)).view(np.uint8).reshape(VOCAB, blocks * size)
    rows = r.integers(0, 256, (VOCAB, blocks, size), dtype=np.uint8)
    for offset in scales:
        d = (r.uniform(0.01, 2.0, (VOCAB, blocks)) * r.choice([-1, 1], (VOCAB, blocks))).astype(np.float16)
        rows[:, :, offset:offset + 2] = d.view(np.uint8).reshape(VOCAB, blocks, 2)
    return rows.reshape(VOCAB, blocks * size)


def gather_model(data, indices, index_elem, out_elem, **attrs):
    inputs = [("data", data, U8), ("indices", indices, index_elem)]
    return model("GatherPacked", inputs, [("output", out_elem)], **attrs), feeds(inputs)


def run_ort(m, f):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(m, options, providers=["CPUExecutionProvider"]).run(None, f)[0]


@pytest.mark.parametrize("index_elem", [I32, I64])
@pytest.mark.parametrize("output_dtype", sorted(OUTPUTS))
@pytest.mark.parametrize("packed_type", sorted(FORMATS))
def test_matches_onnxruntime(packed_type, output_dtype, index_elem):
    r = rng(packed_type * 100 + output_dtype)
    _, values, _, _ = FORMATS[packed_type]
    blocks = 3 if values > 1 else 40
    data = packed_rows(r, packed_type, blocks)
    ids = np.array([[0, 4, -1, 2], [VOCAB, 3, -7, 1000], [1, 2, 3, 4]],
                   dtype=np.int32 if index_elem == I32 else np.int64)
    m, f = gather_model(data, ids, index_elem, OUTPUTS[output_dtype], packed_type=packed_type,
                        output_dtype=output_dtype, K=blocks * values)
    want = run_ort(m, f)
    got = kiln.InferenceSession(m).run(None, f)[0]
    assert got.shape == want.shape == (3, 4, blocks * values)
    assert got.dtype == want.dtype
    assert np.isfinite(want).all()
    np.testing.assert_array_equal(got.view(np.uint32 if got.dtype == np.float32 else np.uint16),
                                  want.view(np.uint32 if want.dtype == np.float32 else np.uint16))


def test_default_output_is_bfloat16_and_scalar_index():
    data = packed_rows(rng(1), 2, 1)
    m, f = gather_model(data, np.array(3, dtype=np.int64), I64, BF16, packed_type=2, K=32)
    want, got = run_ort(m, f), kiln.InferenceSession(m).run(None, f)[0]
    assert got.shape == want.shape == (32,)
    np.testing.assert_array_equal(got, want)


def test_empty_indices_and_empty_vocabulary():
    data = np.zeros((0, 18), dtype=np.uint8)
    m, f = gather_model(data, np.zeros((2, 0), dtype=np.int64), I64, F32, packed_type=2,
                        output_dtype=1, K=32)
    assert kiln.InferenceSession(m).run(None, f)[0].shape == run_ort(m, f).shape == (2, 0, 32)


def refused(data, indices, match, index_elem=I64, out_elem=F32, **attrs):
    """onnxruntime refuses the node too; kiln's message names the node and the fault."""
    m, f = gather_model(data, indices, index_elem, out_elem, **attrs)
    with pytest.raises(Exception):
        run_ort(m, f)
    with pytest.raises(KILN_ERRORS, match=f"GatherPacked_node.*{match}"):
        kiln.InferenceSession(m).run(None, f)


ONE = np.array([0], dtype=np.int64)


def test_wrong_row_bytes():
    refused(np.zeros((3, 17), np.uint8), ONE, r"must have 18 bytes per row", packed_type=2,
            output_dtype=1, K=32)
    refused(np.zeros((3, 176), np.uint8), ONE, r"must have 352 bytes per row", packed_type=13,
            output_dtype=1, K=512)


@pytest.mark.parametrize("packed_type,k", [(2, 48), (13, 128), (23, 300), (0, 0), (8, -32)])
def test_k_not_a_positive_multiple(packed_type, k):
    refused(np.zeros((3, 18), np.uint8), ONE, r"attribute 'K' must be a positive multiple",
            packed_type=packed_type, output_dtype=1, K=k)


@pytest.mark.parametrize("packed_type", [3, 4, 5, 7, 9, 12, 15, 19, 21, 24, 29, 31, -1])
def test_unknown_packed_type(packed_type):
    refused(np.zeros((3, 18), np.uint8), ONE, f"attribute 'packed_type' {packed_type} is not a GGML type",
            packed_type=packed_type, output_dtype=1, K=32)


@pytest.mark.parametrize("output_dtype", [0, 2, 11, 7])
def test_bad_output_dtype(output_dtype):
    refused(np.zeros((3, 18), np.uint8), ONE, r"attribute 'output_dtype' must be 1 \(float32\)",
            packed_type=2, output_dtype=output_dtype, K=32)


def test_data_not_uint8():
    m = model("GatherPacked", [("data", np.zeros((3, 18), np.int8), TensorProto.INT8),
                               ("indices", ONE, I64)], [("output", F32)],
              packed_type=2, output_dtype=1, K=32)
    f = {"data": np.zeros((3, 18), np.int8), "indices": ONE}
    with pytest.raises(Exception):
        run_ort(m, f)
    with pytest.raises(KILN_ERRORS, match="GatherPacked_node.*data must be uint8"):
        kiln.InferenceSession(m).run(None, f)


def test_indices_not_integer():
    m = model("GatherPacked", [("data", np.zeros((3, 18), np.uint8), U8),
                               ("indices", np.zeros(1, np.float32), F32)], [("output", F32)],
              packed_type=2, output_dtype=1, K=32)
    with pytest.raises(KILN_ERRORS, match="GatherPacked_node.*indices must be int32 or int64"):
        kiln.InferenceSession(m).run(None, {"data": np.zeros((3, 18), np.uint8),
                                            "indices": np.zeros(1, np.float32)})


@pytest.mark.parametrize("shape", [(3, 18, 1), (54,)])
def test_data_not_2d(shape):
    refused(np.zeros(shape, np.uint8), ONE, r"data must be 2-D", packed_type=2, output_dtype=1, K=32)


def test_indices_into_empty_vocabulary():
    refused(np.zeros((0, 18), np.uint8), ONE, r"data has no rows", packed_type=2, output_dtype=1,
            K=32)


@pytest.mark.parametrize("packed_type", sorted(LATTICE))
def test_lattice_formats_refused_by_name(packed_type):
    """onnxruntime runs these; kiln refuses them as not implemented, naming the format."""
    data = np.zeros((2, {16: 66, 17: 74, 18: 98, 22: 82}[packed_type]), np.uint8)
    m, f = gather_model(data, ONE, I64, F32, packed_type=packed_type, output_dtype=1, K=256)
    assert run_ort(m, f).shape == (1, 256)
    with pytest.raises(kiln.NotImplemented,
                       match=f"GatherPacked_node.*{LATTICE[packed_type]}.*lattice grids"):
        kiln.InferenceSession(m).run(None, f)


def test_row_bytes_past_int64_are_refused():
    """K float32 values of 4 bytes would wrap int64: a checked product, refused by name."""
    refused(np.zeros((1, 4), np.uint8), ONE, r"bytes per row of data would be .* past int64",
            packed_type=0, output_dtype=1, K=1 << 62)


def test_wrong_row_bytes_of_a_dynamic_shape_refused_at_run():
    """data declared (vocab, bytes) symbolically: the row bytes are checked on the fed tensor."""
    m, f = gather_model(np.zeros((3, 18), np.uint8), ONE, I64, F32, packed_type=2, output_dtype=1, K=32)
    proto = onnx.load_from_string(m)
    for dim, name in zip(proto.graph.input[0].type.tensor_type.shape.dim, ["vocab", "bytes"]):
        dim.ClearField("dim_value")
        dim.dim_param = name
    session = kiln.InferenceSession(proto.SerializeToString())
    assert session.run(None, f)[0].shape == (1, 32)
    with pytest.raises(KILN_ERRORS, match="GatherPacked_node.*must have 18 bytes per row"):
        session.run(None, {"data": np.zeros((3, 17), np.uint8), "indices": ONE})
