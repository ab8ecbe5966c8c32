"""numpy in and out of kiln.InferenceSession: every dtype kiln holds, zero copy where possible,
copies where needed, outputs that own kiln's buffer, and ONNX Runtime's rules for lists and scalars."""
import numpy as np
import onnxruntime
import pytest

import kiln
import python_api_models as models

ml_dtypes = pytest.importorskip("ml_dtypes")


def output_storage(array):
    """The kiln TensorBuffer a returned array views (numpy wraps it in a memoryview)."""
    base = array.base
    return base.obj if isinstance(base, memoryview) else base


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("numpy_models")


def values_of(dtype, shape=(2, 3)):
    rng = np.random.default_rng(3)
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("name", sorted(models.NUMPY_TYPES))
def test_numpy_dtypes_round_trip_and_match_onnxruntime(model_dir, name):
    path = models.identity_model(model_dir / f"{name}.onnx", models.NUMPY_TYPES[name])
    x = values_of(np.dtype(name))
    session = kiln.InferenceSession(path)
    assert session.get_inputs()[0].type == onnxruntime.InferenceSession(path).get_inputs()[0].type
    y, z = session.run(None, {"x": x})
    for out in (y, z):
        assert out.dtype == x.dtype and out.shape == x.shape
        np.testing.assert_array_equal(out, x)
    ort_y, ort_z = onnxruntime.InferenceSession(path).run(None, {"x": x})
    np.testing.assert_array_equal(z, ort_z)


@pytest.mark.parametrize("name", sorted(models.ML_DTYPES_TYPES))
def test_ml_dtypes_round_trip(model_dir, name):
    path = models.identity_model(model_dir / f"{name}.onnx", models.ML_DTYPES_TYPES[name])
    dtype = np.dtype(getattr(ml_dtypes, name))
    x = np.array([[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]] if "int" not in name else [[1, -2, 3], [0, 2, -1]]).astype(dtype)
    if name.startswith("uint"):
        x = np.abs(x.astype(np.float32)).astype(dtype)
    (y,) = kiln.InferenceSession(path).run(["y"], {"x": x})
    assert y.dtype == dtype and y.shape == x.shape
    np.testing.assert_array_equal(y.view(np.uint8 if dtype.itemsize == 1 else np.uint16),
                                  x.view(np.uint8 if dtype.itemsize == 1 else np.uint16))


def test_strings_from_object_str_and_bytes_arrays(model_dir):
    session = kiln.InferenceSession(models.string_model(model_dir / "strings.onnx"))
    for words in (np.array(["cat", "ünïcode", ""], dtype=object), np.array(["cat", "ünïcode", ""]),
                  np.array([b"cat", "ünïcode".encode(), b""]), ["cat", "ünïcode", ""]):
        out, is_cat = session.run(None, {"words": words})
        assert out.dtype == object and out.tolist() == ["cat", "ünïcode", ""]
        assert is_cat.tolist() == [True, False, False]
    with pytest.raises(RuntimeError, match="element 1 of the string array is a int"):
        session.run(None, {"words": np.array(["a", 3], dtype=object)})


def test_c_contiguous_inputs_are_read_in_place():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    address, dtype, _ = kiln._kiln._input_view(x)
    assert address == x.ctypes.data and dtype == "float32"
    transposed = x.T  # not C-contiguous: copied, in C order
    address, _, copy = kiln._kiln._input_view(transposed)
    assert address != x.ctypes.data
    np.testing.assert_array_equal(copy, transposed)


@pytest.mark.parametrize("make", [
    lambda a: a[:, ::2], lambda a: a.T, lambda a: a[::-1], lambda a: np.asfortranarray(a),
    lambda a: np.frombuffer(b"\0" + a.tobytes(), dtype=a.dtype, offset=1).reshape(a.shape),  # misaligned
], ids=["strided", "transposed", "reversed", "fortran", "misaligned"])
def test_other_layouts_are_copied_correctly(model_dir, make):
    path = models.symbolic_model(model_dir / "symbolic.onnx")
    base = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    x = make(base)
    x = x.reshape(-1, 4) if x.shape[-1] != 4 else x
    expected = onnxruntime.InferenceSession(path).run(None, {"x": np.ascontiguousarray(x)})[0]
    np.testing.assert_allclose(kiln.InferenceSession(path).run(None, {"x": x})[0], expected, rtol=1e-6, atol=1e-6)


def test_misaligned_scalars_and_empty_arrays():
    raw = np.frombuffer(b"\0" + np.float64(2.5).tobytes(), dtype=np.float64, offset=1).reshape(())
    address, _, copy = kiln._kiln._input_view(raw)
    assert address != raw.ctypes.data and copy.shape == () and copy == 2.5
    _, _, empty = kiln._kiln._input_view(np.zeros((0, 3), np.int32)[:, ::2])
    assert empty.shape == (0, 2) and empty.dtype == np.int32


def test_outputs_own_kilns_buffer_and_inputs_are_untouched(model_dir):
    session = kiln.InferenceSession(models.fixed_model(model_dir / "fixed.onnx"))
    x = np.random.default_rng(2).standard_normal((1, 3, 4, 4)).astype(np.float32)
    before = x.copy()
    (y,) = session.run(None, {"x": x})
    storage = output_storage(y)
    assert isinstance(storage, kiln._kiln.TensorBuffer)
    assert storage.address == y.ctypes.data  # the array is kiln's tensor, not a copy of it
    assert y.flags.writeable and not y.flags.owndata
    np.testing.assert_array_equal(x, before)
    y[...] = 0  # the caller's to keep: a second run gives fresh results
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], np.maximum(x, 0))


def test_an_input_returned_as_an_output_is_a_copy(model_dir):
    path = models.identity_model(model_dir / "float_identity.onnx", models.NUMPY_TYPES["float32"])
    x = np.ones((2, 3), np.float32)
    y, _ = kiln.InferenceSession(path).run(None, {"x": x})
    assert not np.shares_memory(x, y)
    y[0, 0] = 5
    assert x[0, 0] == 1


def test_lists_and_scalars_as_onnxruntime_converts_them(model_dir):
    symbolic = models.symbolic_model(model_dir / "symbolic.onnx")
    for rt in (onnxruntime, kiln):
        session = rt.InferenceSession(symbolic)
        from_list = session.run(None, {"x": [[1, 2, 3, 4]]})[0]  # ints, converted to the input's float
        np.testing.assert_allclose(from_list, session.run(None, {"x": np.array([[1, 2, 3, 4]], np.float32)})[0])
    seq = models.sequence_optional_model(model_dir / "seq.onnx")
    ours = kiln.InferenceSession(seq).run(["seq"], {"a": [4.0, 5.0]})[0]
    theirs = onnxruntime.InferenceSession(seq).run(["seq"], {"a": [4.0, 5.0]})[0]
    assert [a.tolist() for a in ours] == [a.tolist() for a in theirs] == [[4, 5], [5, 6]]


def test_unsupported_numpy_dtypes_are_named(model_dir):
    session = kiln.InferenceSession(models.symbolic_model(model_dir / "symbolic.onnx"))
    with pytest.raises(RuntimeError, match="dtype complex64 has no kiln element type"):
        session.run(None, {"x": np.zeros((1, 4), np.complex64)})
    with pytest.raises(RuntimeError, match="byte order"):
        session.run(None, {"x": np.zeros((1, 4), ">f4")})
