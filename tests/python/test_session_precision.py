"""The session config entry kiln.precision: "bf16" builds the InferenceSession with BF16 layers
where the CPU has AVX512_BF16 (kiln::SessionOptions::bf16), "fp16" with FP16 weights
(kiln::SessionOptions::fp16), compared with onnxruntime's FP32."""
import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln


def cpu_has_avx512_bf16():
    with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
        return " avx512_bf16" in f.read()


def matmul_model(path):
    """x [N, 64] @ w [64, 48] -> Relu -> y."""
    w = (np.sin(0.29 * np.arange(64 * 48)) * 0.3).astype(np.float32).reshape(64, 48)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 48])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def session(path, precision=None):
    options = kiln.SessionOptions()
    if precision is not None:
        options.add_session_config_entry("kiln.precision", precision)
    return kiln.InferenceSession(str(path), options)


def test_bf16_session_is_close_to_fp32_and_rounds_like_bf16(tmp_path):
    path = matmul_model(tmp_path / "matmul.onnx")
    x = np.random.default_rng(3).uniform(-1, 1, (16, 64)).astype(np.float32)
    (want,) = onnxruntime.InferenceSession(str(path)).run(None, {"x": x})
    (fp32,) = session(path, "fp32").run(None, {"x": x})
    (bf16,) = session(path, "bf16").run(None, {"x": x})
    fp32_error = np.abs(fp32 - want).max()
    bf16_error = np.abs(bf16 - want).max()
    assert fp32_error < 1e-4
    if not cpu_has_avx512_bf16():
        assert bf16_error == fp32_error  # no BF16 kernels here: FP32, with a warning
        return
    assert bf16_error > 10 * fp32_error  # operands rounded to 8 bits of mantissa
    assert bf16_error < 64 * 0.3 * 2 * 2.0**-8


def test_fp16_session_computes_with_half_rounded_weights(tmp_path):
    path = matmul_model(tmp_path / "matmul.onnx")
    x = np.random.default_rng(4).uniform(-1, 1, (16, 64)).astype(np.float32)
    (fp16,) = session(path, "fp16").run(None, {"x": x})
    w = numpy_helper.to_array(onnx.load(path).graph.initializer[0])
    np.testing.assert_allclose(fp16, np.maximum(x @ w.astype(np.float16).astype(np.float32), 0),
                               rtol=1e-5, atol=1e-5)
    assert not np.array_equal(fp16, np.maximum(x @ w, 0))


def test_unknown_precision_is_refused_naming_the_entry(tmp_path):
    path = matmul_model(tmp_path / "matmul.onnx")
    with pytest.raises(kiln.InvalidArgument, match="kiln.precision must be fp32, bf16 or fp16"):
        session(path, "fp64")
