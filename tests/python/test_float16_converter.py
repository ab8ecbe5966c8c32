"""FP16 models as onnxconverter-common's float16 converter makes them from FP32 ones, with and
without keep_io_types (float32 inputs and outputs around a float16 graph, or float16 throughout):
kiln runs them and stays as close to the FP32 model's output as ONNX Runtime's run of the same
FP16 file does."""
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import kiln

with warnings.catch_warnings():  # the converter warns about values it clamps to float16's range
    warnings.simplefilter("ignore")
    from onnxconverter_common import float16

# Relative to the output's largest magnitude: float16's epsilon is ~1e-3, and a deep network's
# rounding adds up, so kiln may be off by twice what onnxruntime is, or by this much.
RELATIVE_FLOOR = 2e-3


def _relative_error(got, reference):
    return float(np.abs(got.astype(np.float32) - reference).max()) / float(np.abs(reference).max())


def _check(path, tmp_path, keep_io_types):
    model = onnx.load(str(path))
    first = model.graph.input[0]
    shape = [d.dim_value or 2 for d in first.type.tensor_type.shape.dim]
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    fp32 = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {first.name: x})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converted = float16.convert_float_to_float16(model, keep_io_types=keep_io_types)
    fp16_path = str(tmp_path / f"{path.stem}.fp16.onnx")
    onnx.save(converted, fp16_path)
    feed = {first.name: x if keep_io_types else x.astype(np.float16)}
    theirs = ort.InferenceSession(fp16_path, providers=["CPUExecutionProvider"]).run(None, feed)
    ours = kiln.InferenceSession(fp16_path).run(None, feed)
    for got, ort_fp16, reference in zip(ours, theirs, fp32):
        assert got.dtype == ort_fp16.dtype == (np.float32 if keep_io_types else np.float16)
        assert got.shape == reference.shape
        bound = max(2 * _relative_error(ort_fp16, reference), RELATIVE_FLOOR)
        assert _relative_error(got, reference) <= bound


@pytest.mark.parametrize("keep_io_types", [True, False])
def test_srcnn(repo_root, tmp_path, keep_io_types):
    _check(repo_root / "models" / "srcnn.onnx", tmp_path, keep_io_types)


@pytest.mark.parametrize("keep_io_types", [True, False])
def test_mobilenet_v2(model_exporter, tmp_path, keep_io_types):
    _check(model_exporter(["mobilenet_v2"]) / "mobilenet_v2.onnx", tmp_path, keep_io_types)


@pytest.mark.parametrize("keep_io_types", [True, False])
def test_mixed_operator_network(opset_matrix, tmp_path, keep_io_types):
    _check(opset_matrix / "mixed_opset17.onnx", tmp_path, keep_io_types)
