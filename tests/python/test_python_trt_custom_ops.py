"""Custom ops written in Python (issue 16, item 5) and the plugin registry from Python: an ONNX model
with a custom node through InferenceSession and through the builder, compared with numpy; the network
API; an op that raises; a plan loaded without the registration; 4 threads; C++ plugins' creators."""
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln

DOMAIN = "kiln.pytest"


@pytest.fixture
def scaled_tanh():
    """y = tanh(x) * alpha + offset, alpha and offset from the node's attributes."""

    @kiln.custom_op(DOMAIN, "ScaledTanh")
    def op(x, *, alpha=1.0, offset=0.0):
        return np.tanh(x) * alpha + offset

    yield op
    op.unregister()


@pytest.fixture
def pair_sum():
    """Two inputs [n, k] and [n, m] -> ([n, k + m] concatenation, [n] row sums), with a shape function."""

    def shape(a, b, **attrs):
        return [(a[0], a[1] + b[1]), (a[0],)]

    @kiln.custom_op(DOMAIN, "PairSum", shape=shape, num_outputs=2, dtypes=[np.float32, np.float32])
    def op(a, b):
        joined = np.concatenate([a, b], axis=1)
        return joined, joined.sum(axis=1)

    yield op
    op.unregister()


def custom_model(path, op_type="ScaledTanh", **attrs):
    """x [N, 4] -> Relu -> my op (attrs) -> Mul by 2 -> y."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node(op_type, ["r"], ["t"], name="my_node", domain=DOMAIN, **attrs),
        helper.make_node("Add", ["t", "t"], ["y"], name="double"),
    ]
    graph = helper.make_graph(nodes, "custom", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)])
    onnx.save(model, path)
    return str(path)


def expected_scaled_tanh(x, alpha, offset):
    return 2 * (np.tanh(np.maximum(x, 0)) * alpha + offset)


def build_engine(model_path, batch=(1, 2, 8)):
    logger = kiln.Logger(kiln.Logger.ERROR)
    builder = kiln.Builder(logger)
    network = builder.create_network()
    parser = kiln.OnnxParser(network, logger)
    assert parser.parse_from_file(model_path), [str(parser.get_error(i)) for i in range(parser.num_errors)]
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (batch[0], 4), (batch[1], 4), (batch[2], 4))
    config.add_optimization_profile(profile)
    return builder.build_serialized_network(network, config)


X = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)


def test_onnx_model_with_python_op_through_inference_session(scaled_tanh, tmp_path):
    model = custom_model(tmp_path / "m.onnx", alpha=3.0, offset=0.5)
    session = kiln.InferenceSession(model)
    (y,) = session.run(None, {"x": X})
    np.testing.assert_allclose(y, expected_scaled_tanh(X, 3.0, 0.5), rtol=1e-6)
    assert scaled_tanh(np.zeros(2), alpha=2.0, offset=1.0).tolist() == [1.0, 1.0]  # still the function


def test_onnx_model_with_python_op_through_the_builder(scaled_tanh, tmp_path):
    plan = build_engine(custom_model(tmp_path / "m.onnx", alpha=-2.0))
    engine = kiln.Runtime(kiln.Logger()).deserialize_engine(plan)
    y = engine.create_execution_context().infer({"x": X})["y"]
    np.testing.assert_allclose(y, expected_scaled_tanh(X, -2.0, 0.0), rtol=1e-6)


def test_python_op_from_the_network_api_with_a_shape_function(pair_sum):
    logger = kiln.Logger(kiln.Logger.ERROR)
    builder = kiln.Builder(logger)
    network = builder.create_network()
    a = network.add_input("a", kiln.float32, (-1, 2))
    b = network.add_input("b", kiln.float32, (-1, 3))
    layer = network.add_plugin_v2([a, b], pair_sum.create_plugin())
    assert layer.num_outputs == 2 and layer.get_output(0).shape == (-1, 5)
    layer.get_output(0).name, layer.get_output(1).name = "joined", "sums"
    network.mark_output(layer.get_output(0))
    network.mark_output(layer.get_output(1))
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("a", (1, 2), (2, 2), (4, 2))
    profile.set_shape("b", (1, 3), (2, 3), (4, 3))
    config.add_optimization_profile(profile)
    engine = builder.build_engine(network, config)
    av = np.arange(6, dtype=np.float32).reshape(3, 2)
    bv = np.ones((3, 3), np.float32)
    out = engine.create_execution_context().infer({"a": av, "b": bv})
    np.testing.assert_array_equal(out["joined"], np.concatenate([av, bv], axis=1))
    np.testing.assert_array_equal(out["sums"], np.concatenate([av, bv], axis=1).sum(1))


def test_raising_op_becomes_a_kiln_error_naming_node_and_exception(tmp_path):
    @kiln.custom_op(DOMAIN, "Raises")
    def raises(x):
        raise ValueError("this op always fails")

    try:
        session = kiln.InferenceSession(custom_model(tmp_path / "m.onnx", op_type="Raises"))
        with pytest.raises(kiln.Fail, match=r"(?s)my_node.*ValueError: this op always fails"):
            session.run(None, {"x": X})
        engine = kiln.Runtime(kiln.Logger()).deserialize_engine(build_engine(str(tmp_path / "m.onnx")))
        with pytest.raises(kiln.Fail, match=r"(?s)my_node.*ValueError: this op always fails"):
            engine.create_execution_context().infer({"x": X})
    finally:
        raises.unregister()


def test_wrong_output_shape_is_an_error_naming_the_op(tmp_path):
    @kiln.custom_op(DOMAIN, "WrongShape")
    def wrong(x):
        return x[:, :2]

    try:
        session = kiln.InferenceSession(custom_model(tmp_path / "m.onnx", op_type="WrongShape"))
        with pytest.raises(kiln.Fail, match="WrongShape' returned output 0 of shape 3x2; its shape function gives 3x4"):
            session.run(None, {"x": X})
    finally:
        wrong.unregister()


def test_plan_with_python_op_needs_the_registration_to_load(tmp_path):
    @kiln.custom_op(DOMAIN, "Ephemeral")
    def ephemeral(x):
        return x + 1

    plan = build_engine(custom_model(tmp_path / "m.onnx", op_type="Ephemeral"))
    ephemeral.unregister()
    runtime = kiln.Runtime(kiln.Logger(kiln.Logger.INTERNAL_ERROR))
    with pytest.raises(kiln.NotImplemented, match=r"Ephemeral.*kiln\.pytest.*not registered"):
        runtime.deserialize_engine(plan)

    @kiln.custom_op(DOMAIN, "Ephemeral")
    def again(x):
        return x + 1

    try:
        y = runtime.deserialize_engine(plan).create_execution_context().infer({"x": X})["y"]
        np.testing.assert_allclose(y, 2 * (np.maximum(X, 0) + 1), rtol=1e-6)
    finally:
        again.unregister()


def test_four_python_threads_run_a_model_with_a_python_op(scaled_tanh, tmp_path):
    session = kiln.InferenceSession(custom_model(tmp_path / "m.onnx", alpha=0.5))
    engine = kiln.Runtime(kiln.Logger()).deserialize_engine(build_engine(str(tmp_path / "m.onnx")))
    inputs = [np.random.default_rng(i).standard_normal((8, 4)).astype(np.float32) for i in range(4)]
    results, errors = {}, []

    def work(i):
        try:
            context = engine.create_execution_context()
            for _ in range(25):
                (a,) = session.run(None, {"x": inputs[i]})
                b = context.infer({"x": inputs[i]})["y"]
                np.testing.assert_array_equal(a, b)
            results[i] = a
        except Exception as e:  # reported below, in the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(4):
        np.testing.assert_allclose(results[i], expected_scaled_tanh(inputs[i], 0.5, 0.0), rtol=1e-6)


EXIT_SCRIPT = """
import numpy as np, kiln
from onnx import TensorProto, helper
@kiln.custom_op("d", "Twice")
def twice(x):
    return x * 2
graph = helper.make_graph([helper.make_node("Twice", ["x"], ["y"], domain="d")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("d", 1)])
session = kiln.InferenceSession(model.SerializeToString())  # a global, alive at exit, holding the op
print(session.run(None, {"x": np.ones(2, np.float32)})[0].tolist())
"""


def test_interpreter_exits_cleanly_with_a_session_holding_a_python_op():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", EXIT_SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[2.0, 2.0]"
    assert "leaked" not in done.stderr, done.stderr  # nanobind's report of objects never freed


def test_registering_the_same_op_twice_is_refused(scaled_tanh):
    with pytest.raises(kiln.InvalidArgument, match="ScaledTanh"):
        kiln.custom_op(DOMAIN, "ScaledTanh")(lambda x: x)


def test_registry_lists_creators_with_their_fields(scaled_tanh):
    creators = {(c.name, c.plugin_namespace): c for c in kiln.get_plugin_registry().plugin_creator_list}
    selu = creators[("MYSELU", "")]  # kiln's built-in example plugin
    assert selu.plugin_version == "1"
    assert [(f.name, f.type) for f in selu.field_names] == [
        ("attr1", kiln.PluginFieldType.STRING), ("attr2", kiln.PluginFieldType.INTS), ("attr3", kiln.PluginFieldType.FLOAT)]
    assert (scaled_tanh.name, DOMAIN) in creators  # Python ops are creators too
    assert kiln.get_plugin_registry().get_plugin_creator("NoSuchPlugin", "1", "") is None


def test_cpp_plugin_from_a_field_collection_in_a_network():
    selu = kiln.get_plugin_registry().get_plugin_creator("MYSELU", "1", "")
    fields = kiln.PluginFieldCollection([
        kiln.PluginField("attr1", np.array("text"), None),
        kiln.PluginField("attr2", np.array([3], np.int32), None),  # INTS: a one-element list
        kiln.PluginField("attr3", np.array([0.5], np.float32), None),
    ])
    plugin = selu.create_plugin("selu", fields)
    assert plugin.plugin_type == "MYSELU" and plugin.num_outputs == 1
    with pytest.raises(kiln.InvalidGraph, match="field 'attr3' expects type float, given string"):
        selu.create_plugin("bad", {"attr3": "not a float"})
    builder = kiln.Builder(kiln.Logger(kiln.Logger.ERROR))
    network = builder.create_network()
    x = network.add_input("x", kiln.float32, (2, 3))
    layer = network.add_plugin_v2([x], plugin)
    layer.get_output(0).name = "y"
    network.mark_output(layer.get_output(0))
    engine = builder.build_engine(network, builder.create_builder_config())
    data = np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)
    y = engine.create_execution_context().infer({"x": data})["y"]
    np.testing.assert_allclose(y, data / (1 + np.exp(-data)), rtol=1e-5, atol=1e-6)
