"""QDQ models from onnxruntime's quantizer run as integer layers in kiln.

Small PyTorch models (tests/python/qdq_export_models.py, exported by Debian's torch 1.13) are
quantized by onnxruntime.quantization.quantize_static (QDQ format, per-channel weights, MinMax
calibration on a fixed set of 8 random inputs, u8 activations / s8 weights and s8 / s8), then run by
kiln and onnxruntime on the same inputs: every output element agrees within one quantization step
at the output's scale, and `kiln build --verbose` / `kiln inspect PLAN` report every Conv, MatMul
and Gemm of the model as INT8. The kiln::QConv / kiln::QGemm kernels are also checked alone
against onnxruntime's QLinearConv and com.microsoft QGemm.
"""
import json
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static

SHAPES = {"convnet": (1, 3, 32, 32), "mlp": (1, 8, 32), "senet": (1, 3, 32, 32), "firenet": (1, 3, 33, 33)}
TYPES = {"u8s8": QuantType.QUInt8, "s8s8": QuantType.QInt8}


class FixedInputs(CalibrationDataReader):
    def __init__(self, shape):
        rng = np.random.default_rng(0)
        self.samples = iter([{"input": rng.standard_normal(shape).astype(np.float32)} for _ in range(8)])

    def get_next(self):
        return next(self.samples, None)


@pytest.fixture(scope="module")
def float_models(repo_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("qdq_float")
    script = repo_root / "tests/python/qdq_export_models.py"
    result = subprocess.run(["/usr/bin/python3", str(script), str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def quantized(float_models, name, types, tmp_path):
    path = tmp_path / f"{name}_{types}.onnx"
    quantize_static(str(float_models / f"{name}.onnx"), str(path), FixedInputs(SHAPES[name]),
                    quant_format=QuantFormat.QDQ, per_channel=True, calibrate_method=CalibrationMethod.MinMax,
                    activation_type=TYPES[types], weight_type=QuantType.QInt8)
    return path


def run_kiln(kiln, model, feeds, tmp_path):
    tmp_path.mkdir(parents=True, exist_ok=True)
    args = [str(kiln), "run", str(model), "--output-dir", str(tmp_path / "out")]
    for name, value in feeds.items():
        np.save(tmp_path / f"{name}.npy", value)
        args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    outputs = json.loads((tmp_path / "out" / "outputs.json").read_text())["outputs"]
    return [np.load(tmp_path / "out" / o["file"]) for o in outputs]


def output_scale(model_path):
    """The scale of the DequantizeLinear that writes the graph's output."""
    model = onnx.load(str(model_path))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    node = next(n for n in model.graph.node if n.output[0] == model.graph.output[0].name)
    assert node.op_type == "DequantizeLinear"
    return float(inits[node.input[1]])


def layers_of(model_path, ops=("Conv", "MatMul", "Gemm")):
    return [n.name for n in onnx.load(str(model_path)).graph.node if n.op_type in ops]


@pytest.mark.parametrize("types", ["u8s8", "s8s8"])
@pytest.mark.parametrize("name", ["convnet", "mlp", "senet", "firenet"])
def test_quantize_static_model_matches_onnxruntime_within_one_step(kiln, float_models, name, types, tmp_path):
    model = quantized(float_models, name, types, tmp_path)
    scale = output_scale(model)
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for sample in range(3):
        feeds = {"input": rng.standard_normal(SHAPES[name]).astype(np.float32)}
        expected = session.run(None, feeds)[0]
        actual = run_kiln(kiln, model, feeds, tmp_path / str(sample))[0]
        assert actual.shape == expected.shape
        steps = np.abs(actual.astype(np.float64) - expected) / scale
        assert steps.max() <= 1.0 + 1e-4, f"sample {sample}: {steps.max():.3f} steps at the output's scale {scale}"


@pytest.mark.parametrize("name", ["convnet", "mlp"])
def test_build_and_inspect_report_every_layer_as_int8(kiln, float_models, name, tmp_path):
    model = quantized(float_models, name, "u8s8", tmp_path)
    plan = tmp_path / "model.kiln"
    built = subprocess.run([str(kiln), "build", str(model), "-o", str(plan), "--verbose"], capture_output=True,
                           text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    inspected = subprocess.run([str(kiln), "inspect", str(plan)], capture_output=True, text=True, timeout=300)
    assert inspected.returncode == 0, inspected.stderr
    layers = layers_of(model)
    assert layers
    for text in (built.stdout + built.stderr, inspected.stdout):
        for layer in layers:
            assert f"INT8  layer '{layer}' runs as kiln::Q" in text, f"{layer} not reported as INT8:\n{text}"
        assert "FP32  layer" not in text
    # The plan runs the integer layers as the model does.
    feeds = {"input": np.random.default_rng(2).standard_normal(SHAPES[name]).astype(np.float32)}
    np.testing.assert_array_equal(run_kiln(kiln, plan, feeds, tmp_path / "plan")[0],
                                  run_kiln(kiln, model, feeds, tmp_path / "model")[0])


def test_build_reports_why_a_layer_stays_float(kiln, tmp_path):
    """A Conv whose weight is dequantized from a graph input cannot be prepacked: it stays float."""
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "x_scale", "x_zp"], ["xf"], name="dq_x"),
        helper.make_node("DequantizeLinear", ["w", "w_scale", "w_zp"], ["wf"], name="dq_w"),
        helper.make_node("Conv", ["xf", "wf"], ["y"], name="conv"),
    ]
    inits = [numpy_helper.from_array(np.array(0.1, np.float32), "x_scale"),
             numpy_helper.from_array(np.array(128, np.uint8), "x_zp"),
             numpy_helper.from_array(np.array(0.01, np.float32), "w_scale"),
             numpy_helper.from_array(np.array(0, np.int8), "w_zp")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 2, 4, 4]),
                                           helper.make_tensor_value_info("w", TensorProto.INT8, [3, 2, 1, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])], inits)
    model = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(model))
    built = subprocess.run([str(kiln), "build", str(model), "-o", str(tmp_path / "m.kiln"), "--verbose"],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    assert "FP32  layer 'conv' (Conv) does not run INT8: weight DQ not constant" in built.stdout + built.stderr
    inspected = subprocess.run([str(kiln), "inspect", str(tmp_path / "m.kiln")], capture_output=True, text=True)
    assert "FP32  layer 'conv'" in inspected.stdout and "weight DQ not constant" in inspected.stdout


# --- the kernels alone against onnxruntime's ------------------------------------------------------------------


def one_node_model(path, node, inputs, output_type, output_shape, domains):
    inits = [numpy_helper.from_array(v, k) for k, v in inputs.items() if k != "x"]
    x = inputs["x"]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)],
                              [helper.make_tensor_value_info("y", output_type, output_shape)], inits)
    opsets = [helper.make_opsetid("", 13)] + [helper.make_opsetid(d, 1) for d in domains]
    onnx.save(helper.make_model(graph, opset_imports=opsets), str(path))
    return path


def ort_then_kiln(kiln, make_node, values, output_type, output_shape, domains, tmp_path):
    """(onnxruntime's output, kiln's) for the one-node models make_node(domain) gives, one per domain
    (onnxruntime's first, then "kiln"), on input x."""
    outputs = []
    for domain in domains:
        path = one_node_model(tmp_path / f"{domain or 'onnx'}.onnx", make_node(domain), values, output_type, output_shape,
                              [domain] if domain else [])
        if domain == "kiln":
            outputs.append(run_kiln(kiln, path, {"x": values["x"]}, tmp_path / domain)[0])
        else:
            session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            outputs.append(session.run(None, {"x": values["x"]})[0])
    expected, actual = outputs
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    return expected, actual


@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("float_output", [False, True])
def test_qgemm_kernel_matches_onnxruntime_qgemm(kiln, tmp_path, trans_b, float_output):
    rng = np.random.default_rng(3)
    m, k, n = 5, 37, 11
    b = rng.integers(-127, 128, (n, k) if trans_b else (k, n)).astype(np.int8)
    values = {"x": rng.integers(0, 256, (m, k)).astype(np.uint8), "a_scale": np.array(0.031, np.float32),
              "a_zp": np.array(121, np.uint8), "B": b, "b_scale": rng.uniform(0.002, 0.01, n).astype(np.float32),
              "b_zp": np.zeros(n, np.int8), "C": rng.integers(-3000, 3000, n).astype(np.int32)}
    names = ["x", "a_scale", "a_zp", "B", "b_scale", "b_zp", "C"]
    if not float_output:
        values.update({"y_scale": np.array(0.07, np.float32), "y_zp": np.array(117, np.uint8)})
        names += ["y_scale", "y_zp"]
    out_type = TensorProto.FLOAT if float_output else TensorProto.UINT8
    expected, actual = ort_then_kiln(
        kiln, lambda domain: helper.make_node("QGemm", names, ["y"], name="qgemm", domain=domain, transB=trans_b, alpha=1.0),
        values, out_type, [m, n], ["com.microsoft", "kiln"], tmp_path)
    if float_output:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-4)
    else:
        assert np.abs(actual.astype(int) - expected.astype(int)).max() <= 1


def test_qconv_kernel_matches_onnxruntime_qlinearconv(kiln, tmp_path):
    rng = np.random.default_rng(4)
    values = {"x": rng.integers(0, 256, (1, 6, 9, 8)).astype(np.uint8), "x_scale": np.array(0.02, np.float32),
              "x_zp": np.array(130, np.uint8), "W": rng.integers(-127, 128, (8, 3, 3, 3)).astype(np.int8),
              "w_scale": rng.uniform(0.003, 0.02, 8).astype(np.float32), "w_zp": np.zeros(8, np.int8),
              "y_scale": np.array(0.15, np.float32), "y_zp": np.array(125, np.uint8),
              "B": rng.integers(-2000, 2000, 8).astype(np.int32)}
    names = ["x", "x_scale", "x_zp", "W", "w_scale", "w_zp", "y_scale", "y_zp", "B"]
    attrs = dict(group=2, pads=[1, 1, 0, 2], strides=[2, 1])
    expected, actual = ort_then_kiln(
        kiln, lambda domain: helper.make_node("QConv" if domain else "QLinearConv", names, ["y"], name="conv", domain=domain,
                                              **attrs),
        values, TensorProto.UINT8, [1, 8, 4, 9], ["", "kiln"], tmp_path)
    assert np.abs(actual.astype(int) - expected.astype(int)).max() <= 1


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul", "QLinearGlobalAveragePool"])
def test_quantized_elementwise_kernels_match_onnxruntime(kiln, tmp_path, op):
    rng = np.random.default_rng(5)
    values = {"x": rng.integers(0, 256, (2, 4, 5, 3)).astype(np.uint8), "x_scale": np.array(0.043, np.float32),
              "x_zp": np.array(118, np.uint8)}
    names = ["x", "x_scale", "x_zp"]
    if op != "QLinearGlobalAveragePool":
        values.update({"B": rng.integers(0, 256, (4, 1, 3)).astype(np.uint8), "b_scale": np.array(0.021, np.float32),
                       "b_zp": np.array(140, np.uint8)})
        names += ["B", "b_scale", "b_zp"]
    values.update({"y_scale": np.array(0.057 if op != "QLinearMul" else 0.011, np.float32), "y_zp": np.array(121, np.uint8)})
    names += ["y_scale", "y_zp"]
    shape = [2, 4, 1, 1] if op == "QLinearGlobalAveragePool" else [2, 4, 5, 3]
    attrs = {"channels_last": 0} if op == "QLinearGlobalAveragePool" else {}
    expected, actual = ort_then_kiln(
        kiln, lambda domain: helper.make_node(op, names, ["y"], name="q", domain=domain, **(attrs if domain != "kiln" else {})),
        values, TensorProto.UINT8, shape, ["com.microsoft", "kiln"], tmp_path)
    assert np.abs(actual.astype(int) - expected.astype(int)).max() <= 1


def cpu_has_avx512_vnni():
    with open("/proc/cpuinfo") as f:
        return "avx512_vnni" in f.read()


def kernels_of(kiln, model):
    """The kernel id `kiln build --verbose` chose for each layer, by layer name."""
    result = subprocess.run([str(kiln), "build", str(model), "-o", str(model.with_suffix(".plan")), "--verbose"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    chosen = {}
    for line in (result.stdout + result.stderr).splitlines():
        line = line.strip()
        if line.startswith("layer '") and ": kernel " in line:
            chosen[line.split("'")[1]] = line.split(": kernel ")[1].split()[0]
    return chosen


def layer_ops(kiln, model, tmp_path):
    """The op of each layer `kiln build --verbose` lists, in order."""
    result = subprocess.run([str(kiln), "build", str(model), "-o", str(tmp_path / "ops.plan"), "--verbose"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return [line.split("(")[1].split(")")[0] for line in (result.stdout + result.stderr).splitlines()
            if line.strip().startswith("layer '") and ": kernel " in line]


# kiln::QConv with channels_last = 1 (what opt/nhwc_int8_layout.cpp makes): X [N, H, W, C]. Each case:
# X's NCHW shape and type, W's shape, the weights' kind (s8 symmetric; u8 with zero point 128, which
# is symmetric too once stored as s8; u8 with zero point 3), the attributes, and the kernel that runs it.
CHANNELS_LAST_CASES = {
    "direct_3x3": ((1, 8, 9, 7), np.uint8, (40, 8, 3, 3), "s8",
                   dict(pads=[1, 0, 2, 1], strides=[2, 1], dilations=[1, 2]), "u8s8_qconv_nhwc_avx512vnni"),
    "direct_1x1_batch_2": ((2, 12, 5, 6), np.uint8, (33, 12, 1, 1), "s8", {}, "u8s8_qconv_nhwc_avx512vnni"),
    "direct_u8_weights": ((1, 16, 6, 6), np.uint8, (24, 16, 3, 3), "u8_128", dict(pads=[1, 1, 1, 1]),
                          "u8s8_qconv_nhwc_avx512vnni"),
    "depthwise": ((1, 20, 7, 9), np.uint8, (20, 1, 3, 3), "s8", dict(group=20, pads=[1, 1, 1, 1], strides=[2, 2]),
                  "u8s8_qconv_depthwise_nhwc_avx512vnni"),
    "depthwise_stride_1_batch_2": ((2, 33, 6, 10), np.uint8, (33, 1, 3, 3), "s8", dict(group=33, pads=[1, 1, 1, 1]),
                                   "u8s8_qconv_depthwise_nhwc_avx512vnni"),
    "depthwise_u8_weights": ((1, 16, 6, 6), np.uint8, (16, 1, 3, 4), "u8_128", dict(group=16, pads=[1, 2, 1, 1]),
                             "u8s8_qconv_depthwise_nhwc_avx512vnni"),
    "depthwise_weights_past_int8": ((1, 16, 6, 6), np.uint8, (16, 1, 3, 3), "u8_3", dict(group=16, pads=[1, 1, 1, 1]),
                                    "u8s8_qconv_depthwise_avx512"),
    "depthwise_5_wide": ((1, 16, 8, 8), np.uint8, (16, 1, 5, 5), "s8", dict(group=16, pads=[2, 2, 2, 2]),
                         "u8s8_qconv_depthwise_avx512"),
    "depthwise_s8": ((1, 18, 6, 5), np.int8, (18, 1, 5, 5), "s8", dict(group=18, pads=[2, 2, 2, 2]),
                     "s8s8_qconv_depthwise_avx512"),
    "asymmetric_weights": ((1, 8, 6, 6), np.uint8, (16, 8, 3, 3), "u8_3", dict(pads=[1, 1, 1, 1]),
                           "any_qconv_reference"),
    "channels_not_multiple_of_4": ((1, 6, 6, 6), np.uint8, (16, 6, 3, 3), "s8", {}, "any_qconv_reference"),
    "grouped": ((1, 8, 6, 6), np.uint8, (8, 4, 3, 3), "s8", dict(group=2), "any_qconv_reference"),
    "s8_activations": ((1, 8, 5, 5), np.int8, (8, 8, 3, 3), "s8", dict(pads=[1, 1, 1, 1]), "any_qconv_reference"),
}


@pytest.mark.parametrize("case", list(CHANNELS_LAST_CASES))
def test_channels_last_qconv_matches_channels_first_and_onnxruntime(kiln, tmp_path, case):
    x_shape, x_type, w_shape, weights, attrs, kernel = CHANNELS_LAST_CASES[case]
    rng = np.random.default_rng(6)
    info = np.iinfo(x_type)
    out_channels = w_shape[0]
    if weights == "s8":
        w, w_zp = rng.integers(-128, 128, w_shape).astype(np.int8), np.zeros(out_channels, np.int8)
    else:
        w = rng.integers(0, 256, w_shape).astype(np.uint8)
        w_zp = np.full(out_channels, 128 if weights == "u8_128" else 3, np.uint8)
    x = rng.integers(info.min, info.max + 1, x_shape).astype(x_type)
    values = {"x_scale": np.array(0.02, np.float32), "x_zp": np.array(info.min + 130, x_type), "W": w,
              "w_scale": rng.uniform(0.003, 0.02, out_channels).astype(np.float32), "w_zp": w_zp,
              "y_scale": np.array(0.3, np.float32), "y_zp": np.array(info.min + 125, x_type),
              "B": rng.integers(-2000, 2000, out_channels).astype(np.int32)}
    names = ["x", "x_scale", "x_zp", "W", "w_scale", "w_zp", "y_scale", "y_zp", "B"]
    out_type = helper.np_dtype_to_tensor_dtype(np.dtype(x_type))
    ort_path = one_node_model(tmp_path / "onnx.onnx", helper.make_node("QLinearConv", names, ["y"], name="conv", **attrs),
                              {"x": x, **values}, out_type, None, [])
    expected = ort.InferenceSession(str(ort_path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    outputs = {}
    for last in (0, 1):
        node = helper.make_node("QConv", names, ["y"], name="conv", domain="kiln", channels_last=last, **attrs)
        feed = x.transpose(0, 2, 3, 1).copy() if last else x
        path = one_node_model(tmp_path / f"kiln_{last}.onnx", node, {"x": feed, **values}, out_type, None, ["kiln"])
        y = run_kiln(kiln, path, {"x": feed}, tmp_path / f"run_{last}")[0]
        outputs[last] = y.transpose(0, 3, 1, 2) if last else y
        if last and cpu_has_avx512_vnni():
            assert kernels_of(kiln, path)["conv"] == kernel
    np.testing.assert_array_equal(outputs[1], outputs[0])
    assert outputs[1].shape == expected.shape
    assert np.abs(outputs[1].astype(int) - expected.astype(int)).max() <= 1


@pytest.mark.parametrize("types", ["u8s8", "s8s8"])
@pytest.mark.parametrize("name", ["convnet", "senet", "firenet"])
def test_channels_last_layout_gives_the_same_bytes_as_channels_first(kiln, float_models, name, types, tmp_path):
    """The quantized models, with their convolutions channels-last (the default) and all NCHW
    (--no-nchwc): bit for bit the same output, through a plan too."""
    model = quantized(float_models, name, types, tmp_path)
    x = np.random.default_rng(7).standard_normal(SHAPES[name]).astype(np.float32)
    np.save(tmp_path / "input.npy", x)
    outputs = []
    for target, extra in ((model, []), (model, ["--no-nchwc"])):
        out = tmp_path / f"out{len(outputs)}"
        result = subprocess.run([str(kiln), "run", str(target), "--input", f"input={tmp_path / 'input.npy'}",
                                 "--output-dir", str(out)] + extra, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        outputs.append(np.load(out / "output.npy"))
    plan = tmp_path / f"{name}.plan"
    result = subprocess.run([str(kiln), "build", str(model), "-o", str(plan)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    outputs.append(run_kiln(kiln, plan, {"input": x}, tmp_path / "plan")[0])
    np.testing.assert_array_equal(outputs[0], outputs[1])
    np.testing.assert_array_equal(outputs[2], outputs[1])
    if cpu_has_avx512_vnni() and types == "u8s8" and name == "convnet":
        chosen = kernels_of(kiln, model).values()
        assert sum(k == "u8s8_qconv_nhwc_avx512vnni" for k in chosen) >= 3  # conv_a, conv_b, down
    if cpu_has_avx512_vnni() and types == "u8s8" and name == "senet":
        # Every activation a table lookup, the depthwise layer on the quad kernel, channels-last from
        # the stem's SiLU (the stem has 3 channels) to the last pool: two Transposes in all.
        ops = layer_ops(kiln, model, tmp_path)
        assert ops.count("QLinearLookup") == 5 and ops.count("Transpose") == 2, ops
        assert kernels_of(kiln, model)["/depthwise/Conv"] == "u8s8_qconv_depthwise_nhwc_avx512vnni"
    if cpu_has_avx512_vnni() and types == "u8s8" and name == "firenet":
        # The concatenations and the MaxPool between the fire modules stay channels-last.
        ops = layer_ops(kiln, model, tmp_path)
        assert ops.count("QLinearConcat") == 2 and ops.count("NhwcMaxPool") == 1, ops
        assert ops.count("Transpose") == 2, ops
