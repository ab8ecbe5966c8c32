"""FP16 models as onnxconverter-common's float16 converter makes them from FP32 ones, with and
without keep_io_types (float32 inputs and outputs around a float16 graph, or float16 throughout):
kiln runs them and stays as close to the FP32 model's output as ONNX Runtime's run of the same
FP16 file does; the float16 interior runs in float32 (no float16 layer left but the Casts at
float16 graph inputs and outputs, the model's Cast pairs removed)."""
import re
import subprocess
import warnings

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import kiln

with warnings.catch_warnings():  # the converter warns about values it clamps to float16's range
    warnings.simplefilter("ignore")
    from onnxconverter_common import float16

# Relative to the output's largest magnitude: float16's epsilon is ~1e-3, and a deep network's
# rounding adds up, so kiln may be off by twice what onnxruntime is, or by this much.
RELATIVE_FLOOR = 2e-3


def _relative_error(got, reference):
    return float(np.abs(got.astype(np.float32) - reference).max()) / float(np.abs(reference).max())


# A plan's layer line in `kiln inspect PLAN`: "  3  name (OpType)  kernel k (isa)  precision p ...".
LAYER_LINE = re.compile(r"^\s+\d+\s+(.+) \((\S+)\)\s+kernel \S+ \(\S+\)\s+precision (\S+)")


def _plan_layers(kiln_cli, model_path, shapes):
    """(op type, precision) of each layer of the plan kiln builds from the model at these input shapes."""
    plan = model_path.with_suffix(".kiln")
    fixed = [f"{name}:{'x'.join(map(str, shape))}" for name, shape in shapes.items()]
    subprocess.run([str(kiln_cli), "build", str(model_path), "-o", str(plan), "--builder-optimization-level", "0",
                    "--shapes", *fixed], check=True, capture_output=True, text=True)
    listing = subprocess.run([str(kiln_cli), "inspect", str(plan)], check=True, capture_output=True, text=True).stdout
    layers = [(m.group(2), m.group(3)) for m in map(LAYER_LINE.match, listing.splitlines()) if m]
    assert layers, listing
    return layers


def _check_layers(kiln_cli, converted, fp16_path, shapes, keep_io_types):
    """No layer computes in float16; the only Casts left are one per float16 graph input and output."""
    layers = _plan_layers(kiln_cli, fp16_path, shapes)
    assert [op for op, precision in layers if precision == "fp16" and op != "Cast"] == []
    float16_io = [v for v in list(converted.graph.input) + list(converted.graph.output)
                  if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16]
    assert bool(float16_io) == (not keep_io_types)
    model_casts = sum(node.op_type == "Cast" for node in converted.graph.node)
    plan_casts = sum(op == "Cast" for op, _ in layers)
    assert plan_casts <= len(float16_io)
    if keep_io_types:  # the converter's Casts at float32 inputs and outputs, and pairs inside: all gone
        assert model_casts >= 2 and plan_casts == 0


def _check(path, tmp_path, keep_io_types, kiln_cli=None):
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
    if kiln_cli is not None:
        _check_layers(kiln_cli, converted, tmp_path / f"{path.stem}.fp16.onnx", {first.name: shape}, keep_io_types)
    feed = {first.name: x if keep_io_types else x.astype(np.float16)}
    theirs = ort.InferenceSession(fp16_path, providers=["CPUExecutionProvider"]).run(None, feed)
    ours = kiln.InferenceSession(fp16_path).run(None, feed)
    for got, ort_fp16, reference in zip(ours, theirs, fp32):
        assert got.dtype == ort_fp16.dtype == (np.float32 if keep_io_types else np.float16)
        assert got.shape == reference.shape
        bound = max(2 * _relative_error(ort_fp16, reference), RELATIVE_FLOOR)
        assert _relative_error(got, reference) <= bound


@pytest.mark.parametrize("keep_io_types", [True, False])
def test_srcnn(repo_root, kiln, tmp_path, keep_io_types):
    _check(repo_root / "models" / "srcnn.onnx", tmp_path, keep_io_types, kiln)


@pytest.mark.parametrize("keep_io_types", [True, False])
def test_mobilenet_v2(model_exporter, kiln, tmp_path, keep_io_types):
    _check(model_exporter(["mobilenet_v2"]) / "mobilenet_v2.onnx", tmp_path, keep_io_types, kiln)


@pytest.mark.parametrize("keep_io_types", [True, False])
def test_mixed_operator_network(opset_matrix, kiln, tmp_path, keep_io_types):
    _check(opset_matrix / "mixed_opset17.onnx", tmp_path, keep_io_types, kiln)


def _float16_to_int_model(path, chain):
    """x (float16 [4, 64]) through float16 ops, then Cast to int32: Mul by w alone, or (chain) Mul,
    Add b, Sigmoid and a scale by 1000 (whose float16 results are 0.5 apart). Returns the feeds and
    the result of float16 arithmetic as ONNX defines it: every op's exact result rounded to
    float16, computed here in float64."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal(64) * 1.7).astype(np.float16)
    b = (rng.standard_normal(64) * 0.5).astype(np.float16)
    x = (rng.standard_normal((4, 64)) * 30).astype(np.float16)
    inits = [onnx.numpy_helper.from_array(w, "w")]
    nodes = [helper.make_node("Mul", ["x", "w"], ["v0"])]
    half = lambda v: v.astype(np.float16).astype(np.float64)  # noqa: E731
    v = half(x.astype(np.float64) * w)
    if chain:
        inits += [onnx.numpy_helper.from_array(b, "b"), onnx.numpy_helper.from_array(np.array(1000, np.float16), "k")]
        nodes += [helper.make_node("Add", ["v0", "b"], ["v1"]), helper.make_node("Sigmoid", ["v1"], ["v2"]),
                  helper.make_node("Mul", ["v2", "k"], ["v3"])]
        v = half(1000 * half(1 / (1 + np.exp(-half(v + b)))))
    nodes.append(helper.make_node("Cast", [nodes[-1].output[0]], ["y"], to=TensorProto.INT32))
    graph = helper.make_graph(nodes, "to_int", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [4, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [4, 64])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return {"x": x}, np.trunc(v).astype(np.int32)


def test_cast_to_int_of_one_float16_op_is_float16_arithmetic(tmp_path):
    """One widened op: its float32 result rounded once to float16 is float16 arithmetic's result, so
    the Cast is exact. (onnxruntime differs here: it computes the Mul in float32 and drops the
    rounding to float16 before the Cast, 3 of these 256 values are one off.)"""
    path = tmp_path / "one_op.onnx"
    feeds, float16_result = _float16_to_int_model(path, chain=False)
    np.testing.assert_array_equal(kiln.InferenceSession(str(path)).run(None, feeds)[0], float16_result)


def test_cast_to_int_after_a_float16_chain_is_closer_to_float16_arithmetic_than_onnxruntime(tmp_path):
    """A chain runs in float32 and is rounded to float16 once, before the Cast, where float16
    arithmetic rounds after every op: where the roundings straddle an integer the Cast is one off
    (docs/precision.md, "FP16 models"). onnxruntime, which skips the last rounding too, is further."""
    path = tmp_path / "chain.onnx"
    feeds, float16_result = _float16_to_int_model(path, chain=True)
    ours = kiln.InferenceSession(str(path)).run(None, feeds)[0]
    theirs = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert np.abs(ours.astype(np.int64) - float16_result).max() <= 1
    assert np.count_nonzero(ours != float16_result) <= np.count_nonzero(theirs != float16_result)


@pytest.mark.parametrize("product_is_an_output", [True, False])
@pytest.mark.parametrize("float16_input", [True, False])
def test_cast_to_int32_of_a_float16_product_is_rounded_to_float16_first(tmp_path, float16_input,
                                                                         product_is_an_output):
    """y = int32(p), p = h * 1.1h in float16: kiln widens the Mul to float32, but the Cast must see p rounded to
    float16 first; truncating the float32 product instead gives a different integer wherever rounding carries it
    up to one. With a float32 input x, h = Cast(x) to float16 feeds only the widened Mul, so kiln drops that Cast
    (the converter's Cast pairs go the same way) and multiplies x unrounded, as onnxruntime does too.
    onnxruntime 1.32 agrees with kiln exactly when p is also a graph output; when the Cast to int32 is p's only
    reader, onnxruntime's CPU run truncates the unrounded float32 product (at every graph optimization level,
    checked with 1.32), which float16 arithmetic does not: there the float16 rounding computed by numpy is the
    reference."""
    scale = onnx.numpy_helper.from_array(np.array(1.1, dtype=np.float16), "scale")
    nodes = [helper.make_node("Mul", ["h", "scale"], ["p"]),
             helper.make_node("Cast", ["p"], ["y"], to=TensorProto.INT32)]
    if float16_input:
        inputs = [helper.make_tensor_value_info("h", TensorProto.FLOAT16, [64, 64])]
    else:
        nodes.insert(0, helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16))
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.INT32, [64, 64])]
    if product_is_an_output:
        outputs.append(helper.make_tensor_value_info("p", TensorProto.FLOAT16, [64, 64]))
    graph = helper.make_graph(nodes, "cast_int32", inputs, outputs, [scale])
    path = tmp_path / "cast_int32.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)

    x = np.random.default_rng(7).uniform(-60, 60, (64, 64)).astype(np.float32)
    feed = {inputs[0].name: x.astype(np.float16) if float16_input else x}
    ours = kiln.InferenceSession(str(path)).run(None, feed)
    assert ours[0].dtype == np.int32
    h = x.astype(np.float16).astype(np.float32) if float16_input else x
    product = h * np.float32(np.float16(1.1))  # exact in float32 when h is a float16 value
    reference = product.astype(np.float16).astype(np.int32)
    assert np.count_nonzero(reference != product.astype(np.int32)) > 0  # the inputs reach values rounding decides
    np.testing.assert_array_equal(ours[0], reference)
    if product_is_an_output:
        theirs = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feed)
        np.testing.assert_array_equal(ours[0], theirs[0])
        np.testing.assert_array_equal(ours[1], theirs[1])
