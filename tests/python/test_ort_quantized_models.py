"""CNNs quantized by onnxruntime's own tools run in kiln as in onnxruntime (issue 21, item 2).

MobileNetV2 and ResNet-50 (tests/models/export_models.py, random weights) go through
onnxruntime.quantization: quantize_static in the QOperator format (QLinearConv, QLinearAdd,
QLinearGlobalAveragePool, QGemm ...) and in the QDQ format, per-channel and per-tensor, u8 and s8
activations, MinMax calibration on 4 fixed random images; and quantize_dynamic (ConvInteger,
MatMulInteger, DynamicQuantizeLinear). kiln and onnxruntime run each on the same image.

Static models: both compute in integers and requantize at every layer, so the outputs must agree
within one step of the output's quantization scale (integer rounding of a real-valued requantize
can differ by one where the two order the float multiply differently). Dynamic models: float
outputs within 1e-4 of the largest output (the activations are quantized per run from the same
min/max, the products are exact integers, the rest is float32 arithmetic).
"""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                      quantize_dynamic, quantize_static)

import kiln

IMAGE = (1, 3, 224, 224)


class FixedImages(CalibrationDataReader):
    def __init__(self, input_name):
        rng = np.random.default_rng(0)
        self.samples = iter([{input_name: rng.standard_normal(IMAGE).astype(np.float32)} for _ in range(4)])

    def get_next(self):
        return next(self.samples, None)


@pytest.fixture(scope="module")
def float_models(model_exporter):
    return model_exporter(["mobilenet_v2", "resnet50"])


def input_name(path):
    return onnx.load(str(path), load_external_data=False).graph.input[0].name


def output_scale(path):
    """The scale of the DequantizeLinear that writes the graph's output."""
    model = onnx.load(str(path))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    node = next(n for n in model.graph.node if n.output[0] == model.graph.output[0].name)
    assert node.op_type == "DequantizeLinear", node.op_type
    return float(inits[node.input[1]])


def run_both(path, feeds):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    expected = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    actual = kiln.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert actual.shape == expected.shape
    return actual, expected


def image(name, seed=1):
    return {name: np.random.default_rng(seed).standard_normal(IMAGE).astype(np.float32)}


STATIC = [  # (format, per_channel, activation type)
    ("QOperator", True, QuantType.QUInt8),
    ("QOperator", False, QuantType.QInt8),
    ("QDQ", True, QuantType.QUInt8),
]


@pytest.mark.parametrize("quant_format,per_channel,activations", STATIC,
                         ids=[f"{f}-{'per_channel' if c else 'per_tensor'}-{a.name}" for f, c, a in STATIC])
@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet50"])
def test_quantize_static_matches_onnxruntime_within_one_step(float_models, tmp_path, name, quant_format, per_channel,
                                                             activations):
    source = float_models / f"{name}.onnx"
    path = tmp_path / f"{name}_{quant_format}.onnx"
    quantize_static(str(source), str(path), FixedImages(input_name(source)),
                    quant_format=getattr(QuantFormat, quant_format), per_channel=per_channel,
                    activation_type=activations, weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax)
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert ("QLinearConv" in ops) == (quant_format == "QOperator"), ops
    actual, expected = run_both(path, image(input_name(path)))
    steps = np.abs(actual.astype(np.float64) - expected) / output_scale(path)
    assert steps.max() <= 1.0 + 1e-4, f"{steps.max():.3f} steps at the output's scale"
    assert actual.argmax() == expected.argmax()


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet50"])
def test_quantize_dynamic_matches_onnxruntime(float_models, tmp_path, name):
    path = tmp_path / f"{name}_dynamic.onnx"
    quantize_dynamic(str(float_models / f"{name}.onnx"), str(path), weight_type=QuantType.QInt8)
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert {"ConvInteger", "DynamicQuantizeLinear"} <= ops, ops
    actual, expected = run_both(path, image(input_name(path)))
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-4 * np.abs(expected).max())
    assert actual.argmax() == expected.argmax()
