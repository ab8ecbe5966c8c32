"""Graphs laid out as older or careless exporters write them, run as ONNX Runtime runs them: weights
listed among the inputs before the real input (IR version 3, where every initializer had to be an
input), overridable initializers (IR version 4 on), and initializers that no node uses (ignored,
with one warning)."""
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln

WEIGHT = np.arange(6, dtype=np.float32).reshape(3, 2) / 4
BIAS = np.array([0.5, -1.0], np.float32)
X = np.array([[1.0, -2.0, 3.0]], np.float32)


def _matmul_add_model(path, ir_version, weights_as_inputs, unused=()):
    """y = x @ w + b; the weights' value infos come before x in graph.input when asked."""
    def info(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
    inputs = [info("w", [3, 2]), info("b", [2])] if weights_as_inputs else []
    if ir_version < 4:
        inputs += [info(name, [4]) for name in unused]  # IR 3: every initializer is an input
    inputs.append(info("x", [1, 3]))
    initializers = [numpy_helper.from_array(WEIGHT, "w"), numpy_helper.from_array(BIAS, "b")]
    initializers += [numpy_helper.from_array(np.ones(4, np.float32), name) for name in unused]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"])],
        "layout", inputs, [info("y", [1, 2])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9 if ir_version < 4 else 17)])
    model.ir_version = ir_version
    onnx.save(model, str(path))
    return str(path)


def _sessions(path):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]), kiln.InferenceSession(path)


def _names(args):
    return [a.name for a in args]


def test_ir3_weights_listed_as_inputs_are_weights(tmp_path):
    path = _matmul_add_model(tmp_path / "ir3.onnx", 3, weights_as_inputs=True)
    reference, session = _sessions(path)
    assert _names(session.get_inputs()) == _names(reference.get_inputs()) == ["x"]
    assert _names(session.get_overridable_initializers()) == _names(reference.get_overridable_initializers()) == []
    np.testing.assert_allclose(session.run(None, {"x": X})[0], reference.run(None, {"x": X})[0], rtol=1e-6)
    np.testing.assert_allclose(session.run(None, {"x": X})[0], X @ WEIGHT + BIAS, rtol=1e-6)


def test_ir8_initializers_listed_as_inputs_can_be_overridden(tmp_path):
    path = _matmul_add_model(tmp_path / "ir8.onnx", 8, weights_as_inputs=True)
    reference, session = _sessions(path)
    assert _names(session.get_inputs()) == _names(reference.get_inputs()) == ["x"]
    assert _names(session.get_overridable_initializers()) == _names(reference.get_overridable_initializers()) == ["w", "b"]
    other = np.full((3, 2), 2.0, np.float32)
    got = session.run(None, {"x": X, "w": other})[0]
    np.testing.assert_allclose(got, reference.run(None, {"x": X, "w": other})[0], rtol=1e-6)
    np.testing.assert_allclose(got, X @ other + BIAS, rtol=1e-6)


@pytest.mark.parametrize("ir_version", [3, 8])
def test_unused_initializers_are_ignored_with_one_warning(tmp_path, capfd, ir_version):
    unused = [f"unused_{i}" for i in range(7)]
    path = _matmul_add_model(tmp_path / "unused.onnx", ir_version, weights_as_inputs=False, unused=unused)
    reference, session = _sessions(path)
    warning = (f"{path}: 7 initializers are not used by any node ('unused_0', 'unused_1', 'unused_2', "
               "'unused_3', 'unused_4' and 2 more); kiln ignores them")
    assert capfd.readouterr().err.count(warning) == 1
    assert _names(session.get_inputs()) == ["x"]
    np.testing.assert_allclose(session.run(None, {"x": X})[0], reference.run(None, {"x": X})[0], rtol=1e-6)


def test_one_unused_initializer_is_named_in_the_cli(kiln, tmp_path):
    path = _matmul_add_model(tmp_path / "one.onnx", 8, weights_as_inputs=False, unused=["stale"])
    warning = f"{path}: 1 initializer is not used by any node ('stale'); kiln ignores it"
    check = subprocess.run([str(kiln), "check", path], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0 and f"{path}: no problems found" in check.stdout
    assert f"warning: {warning}" in check.stderr
    built = subprocess.run([str(kiln), "build", path, "-o", str(tmp_path / "one.plan")],
                           capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    assert built.stderr.count(warning) == 1


def test_an_initializer_only_a_subgraph_reads_is_used(tmp_path, capfd):
    branch = lambda name, value: helper.make_graph(  # noqa: E731
        [helper.make_node("Add", ["x", value], [name + "_y"])], name, [],
        [helper.make_tensor_value_info(name + "_y", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch("then", "a"), else_branch=branch("else", "b"))],
        "outer",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.array([1, 2], np.float32), "a"), numpy_helper.from_array(np.array([10, 20], np.float32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = str(tmp_path / "if.onnx")
    onnx.save(model, path)
    reference, session = _sessions(path)
    assert "not used by any node" not in capfd.readouterr().err
    feed = {"c": np.array(False), "x": np.array([0.5, 0.25], np.float32)}
    np.testing.assert_array_equal(session.run(None, feed)[0], reference.run(None, feed)[0])
    np.testing.assert_array_equal(session.run(None, feed)[0], [10.5, 20.25])
