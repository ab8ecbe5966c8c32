"""The TensorRT-style Python API (issue 16, item 4): the seeds' TensorRT scripts with `trt.` replaced
by `kiln.` (ONNX -> parser -> config with a profile -> plan file -> runtime -> context), compared with
onnxruntime; networks built by hand, compared with numpy; TensorRT 8's binding-index wrapper; bad input."""
import pathlib

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
SRCNN = REPO_ROOT / "models" / "srcnn.onnx"
RNG = np.random.default_rng(7)


class Recording(kiln.ILogger):
    """A subclassed logger, as TensorRT scripts write them."""

    def __init__(self):
        super().__init__()
        self.messages = []

    def log(self, severity, msg):
        self.messages.append((severity, msg))

    def errors(self):
        return "\n".join(m for s, m in self.messages if s <= kiln.Logger.ERROR)


def dynamic_batch_model(path):
    """x [N, 3, 8, 8] -> Conv(4, 3x3, pad 1) -> Relu -> GlobalAveragePool -> Flatten -> Gemm(5) -> Softmax."""
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)
    fc = RNG.standard_normal((5, 4)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc"], ["logits"], transB=1, name="fc"),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1, name="softmax"),
    ]
    graph = helper.make_graph(
        nodes, "dynamic_batch", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 5])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"), numpy_helper.from_array(fc, "fc")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def build_plan(model_path, shapes, logger=None, from_bytes=False):
    """The seeds' build script: parser -> config with a profile -> build_serialized_network."""
    logger = logger or kiln.Logger(kiln.Logger.ERROR)
    builder = kiln.Builder(logger)
    network = builder.create_network(1 << int(kiln.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = kiln.OnnxParser(network, logger)
    ok = parser.parse(onnx.load(str(model_path)).SerializeToString()) if from_bytes else parser.parse_from_file(str(model_path))
    assert ok, [str(parser.get_error(i)) for i in range(parser.num_errors)]
    config = builder.create_builder_config()
    config.set_memory_pool_limit(kiln.MemoryPoolType.WORKSPACE, 1 << 30)
    profile = builder.create_optimization_profile()
    for name, (lo, opt, hi) in shapes.items():
        profile.set_shape(name, lo, opt, hi)
    assert config.add_optimization_profile(profile) == 0
    return builder.build_serialized_network(network, config)


def ort_run(model_path, feed):
    return onnxruntime.InferenceSession(str(model_path), providers=["CPUExecutionProvider"]).run(None, feed)


def test_srcnn_onnx_to_plan_file_to_runtime_matches_onnxruntime(tmp_path):
    plan = build_plan(SRCNN, {"input": [(1, 3, 256, 256)] * 3}, from_bytes=True)
    assert isinstance(plan, kiln.IHostMemory) and plan.nbytes == len(bytes(plan)) > 0
    engine_file = tmp_path / "srcnn.kiln"
    with open(engine_file, "wb") as f:
        f.write(plan)
    with kiln.Logger() as logger, kiln.Runtime(logger) as runtime:
        engine = runtime.deserialize_cuda_engine(engine_file.read_bytes())
    assert engine.num_io_tensors == 2
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    assert names == ["input", "output"] == list(engine)
    assert engine.get_tensor_mode("input") == kiln.TensorIOMode.INPUT
    assert engine.get_tensor_mode("output") == kiln.TensorIOMode.OUTPUT
    assert engine.get_tensor_dtype("output") == kiln.float32 and kiln.nptype(kiln.float32) is np.float32
    assert engine.get_tensor_shape("input") == (1, 3, 256, 256)

    x = RNG.random((1, 3, 256, 256), dtype=np.float32)
    context = engine.create_execution_context()
    context.set_input_shape("input", x.shape)
    out_shape = context.get_tensor_shape("output")
    assert out_shape == (1, 3, 768, 768)
    y = np.empty(out_shape, np.float32)
    context.set_tensor_address("input", x)
    context.set_tensor_address("output", y)
    assert context.execute_async_v3(0)
    (expected,) = ort_run(SRCNN, {"input": x})
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)
    # infer: the same through a dict; a re-serialized engine gives the same.
    again = kiln.Runtime(kiln.Logger()).deserialize_engine(engine.serialize()).create_execution_context()
    np.testing.assert_allclose(again.infer({"input": x})["output"], expected, rtol=1e-4, atol=1e-4)


def test_dynamic_batch_profile_min_opt_max_and_rejected_shape(tmp_path):
    model = dynamic_batch_model(tmp_path / "dyn.onnx")
    plan = build_plan(model, {"x": [(1, 3, 8, 8), (4, 3, 8, 8), (8, 3, 8, 8)]})
    engine = kiln.Runtime(kiln.Logger()).deserialize_engine(plan)
    assert engine.get_tensor_shape("x") == (-1, 3, 8, 8)
    assert engine.get_tensor_profile_shape("x", 0) == [(1, 3, 8, 8), (4, 3, 8, 8), (8, 3, 8, 8)]
    context = engine.create_execution_context()
    for batch in (1, 3, 8):
        x = RNG.standard_normal((batch, 3, 8, 8)).astype(np.float32)
        got = context.infer({"x": x})["probs"]
        (expected,) = ort_run(model, {"x": x})
        assert got.shape == (batch, 5)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(kiln.InvalidArgument, match=r"'x'.*9"):
        context.set_input_shape("x", (9, 3, 8, 8))
    with pytest.raises(kiln.InvalidArgument, match="'x'"):
        context.infer({"x": np.zeros((16, 3, 8, 8), np.float32)})


def test_seed_network_by_hand_max_pool_with_stride(tmp_path):
    """The seed's first example: input -> max pool (window 2, stride 2) -> output, with build_engine."""
    logger = kiln.Logger(kiln.Logger.ERROR)
    with kiln.Builder(logger) as builder, builder.create_builder_config() as config, builder.create_network(
            1 << int(kiln.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)) as network:
        input_tensor = network.add_input(name="input", dtype=kiln.float32, shape=(1, 3, 224, 224))
        pool = network.add_pooling(input=input_tensor, type=kiln.PoolingType.MAX, window_size=(2, 2))
        pool.stride = (2, 2)
        pool.get_output(0).name = "output"
        network.mark_output(pool.get_output(0))
        profile = builder.create_optimization_profile()
        profile.set_shape("input", *[[1, 3, 224, 224]] * 3)
        config.add_optimization_profile(profile)
        builder.max_batch_size = 1
        config.max_workspace_size = 1 << 30
        assert config.max_workspace_size == 1 << 30
        engine = builder.build_engine(network, config)
        with open(tmp_path / "model_python_trt.engine", mode="wb") as f:
            f.write(bytearray(engine.serialize()))
    assert network.num_layers == 1 and network.get_layer(0).type == "MaxPool"
    assert pool.stride_nd == (2, 2)
    x = RNG.standard_normal((1, 3, 224, 224)).astype(np.float32)
    y = engine.create_execution_context().infer({"input": x})["output"]
    np.testing.assert_array_equal(y, x.reshape(1, 3, 112, 2, 112, 2).max(axis=(3, 5)))


def test_conv_relu_fc_network_with_numpy_weights_matches_numpy():
    logger = Recording()
    builder = kiln.Builder(logger)
    network = builder.create_network()
    w = RNG.standard_normal((4, 2, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)
    fc_w = RNG.standard_normal((3, 4 * 2 * 2)).astype(np.float32)
    fc_b = RNG.standard_normal(3).astype(np.float32)
    reference = w.copy(), b.copy(), fc_w.copy(), fc_b.copy()
    x = network.add_input("x", kiln.float32, (-1, 2, 4, 4))
    conv = network.add_convolution_nd(x, 4, (3, 3), kiln.Weights(w), b)
    conv.stride_nd = (2, 2)
    conv.padding_nd = (1, 1)
    relu = network.add_activation(conv.get_output(0), kiln.ActivationType.RELU)
    fc = network.add_fully_connected(relu.get_output(0), 3, fc_w, kiln.Weights(fc_b))
    soft = network.add_softmax(fc.get_output(0))
    soft.axes = 1 << 1
    soft.get_output(0).name = "y"
    network.mark_output(soft.get_output(0))
    for array in (w, b, fc_w, fc_b):  # the network holds its own copy of the weights
        array[...] = np.nan
    assert [network.get_layer(i).type for i in range(network.num_layers)] == ["Conv", "Relu", "Gemm", "Softmax"]
    assert network.num_inputs == 1 and network.get_input(0).name == "x"
    assert network.num_outputs == 1 and network.get_output(0).name == "y"
    assert conv.get_output(0).shape == (-1, 4, 2, 2) and conv.padding_nd == (1, 1)
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 2, 4, 4), (2, 2, 4, 4), (4, 2, 4, 4))
    config.add_optimization_profile(profile)
    engine = kiln.Runtime(logger).deserialize_engine(builder.build_serialized_network(network, config))
    data = RNG.standard_normal((3, 2, 4, 4)).astype(np.float32)
    got = engine.create_execution_context().infer({"x": data})["y"]

    w, b, fc_w, fc_b = reference
    padded = np.pad(data.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv_out = np.zeros((3, 4, 2, 2))
    for i in range(2):
        for j in range(2):
            patch = padded[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3]
            conv_out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w) + b
    hidden = np.maximum(conv_out, 0).reshape(3, -1) @ fc_w.T + fc_b
    expected = np.exp(hidden - hidden.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert logger.errors() == ""


def test_constant_elementwise_and_matrix_multiply_match_numpy():
    builder = kiln.Builder(kiln.Logger(kiln.Logger.ERROR))
    network = builder.create_network()
    a = network.add_input("a", kiln.float32, (2, 3))
    bias = np.array([[1.0, -2.0, 0.5]], np.float32)
    constant = network.add_constant((1, 3), bias)
    added = network.add_elementwise(a, constant.get_output(0), kiln.ElementWiseOperation.SUM)
    added.name = "add_bias"
    product = network.add_matrix_multiply(added.get_output(0), kiln.MatrixOperation.NONE, a,
                                          kiln.MatrixOperation.TRANSPOSE)
    product.get_output(0).name = "gram"
    network.mark_output(product.get_output(0))
    assert network.get_layer(1).name == "add_bias" and len(network) == 3
    assert product.get_output(0).shape == (2, 2)
    engine = builder.build_engine(network, builder.create_builder_config())
    data = RNG.standard_normal((2, 3)).astype(np.float32)
    got = engine.create_execution_context().infer({"a": data})["gram"]
    np.testing.assert_allclose(got, (data + bias) @ data.T, rtol=1e-5, atol=1e-6)
    with pytest.raises(kiln.InvalidArgument, match="Add"):  # shapes that do not broadcast
        network.add_elementwise(a, network.add_input("b", kiln.float32, (4,)), kiln.ElementWiseOperation.SUM)


def test_layer_properties_after_creation():
    network = kiln.Builder(kiln.Logger()).create_network()
    x = network.add_input("x", np.float32, (1, 6, 4, 4))
    shuffle = network.add_shuffle(x)
    assert shuffle.reshape_dims is None
    shuffle.first_transpose = (0, 2, 3, 1)
    shuffle.reshape_dims = (1, 16, 6)
    assert shuffle.get_output(0).shape == (1, 16, 6)
    concat = network.add_concatenation([x, x])
    assert concat.axis == 1 and concat.get_output(0).shape == (1, 12, 4, 4)
    concat.axis = 3
    assert concat.get_output(0).shape == (1, 6, 4, 8)
    resize = network.add_resize(x)
    resize.scales = [1, 1, 2, 2]
    resize.resize_mode = kiln.InterpolationMode.NEAREST
    assert resize.get_output(0).shape == (1, 6, 8, 8)
    resize.shape = (1, 6, 2, 2)
    assert resize.get_output(0).shape == (1, 6, 2, 2) and resize.scales == []
    leaky = network.add_activation(x, kiln.ActivationType.LEAKY_RELU)
    leaky.alpha = 0.1
    assert leaky.alpha == pytest.approx(0.1)
    with pytest.raises(AttributeError, match="Concat layer .* has no property 'stride_nd'"):
        concat.stride_nd = (2, 2)
    with pytest.raises(kiln.InvalidArgument, match="reshape"):
        shuffle.reshape_dims = (7, 7)
    assert shuffle.get_output(0).shape == (1, 16, 6)  # unchanged after a refused value
    for layer, out in ((shuffle, "s"), (concat, "c"), (resize, "r"), (leaky, "l")):
        layer.get_output(0).name = out
        network.mark_output(layer.get_output(0))
    engine = kiln.Builder(kiln.Logger()).build_engine(network, kiln.Builder(kiln.Logger()).create_builder_config())
    data = RNG.standard_normal((1, 6, 4, 4)).astype(np.float32)
    out = engine.create_execution_context().infer({"x": data})
    np.testing.assert_array_equal(out["s"], data.transpose(0, 2, 3, 1).reshape(1, 16, 6))
    np.testing.assert_array_equal(out["c"], np.concatenate([data, data], axis=3))
    np.testing.assert_array_equal(out["r"].shape, (1, 6, 2, 2))
    np.testing.assert_allclose(out["l"], np.where(data > 0, data, 0.1 * data), rtol=1e-6)


class TRTWrapper:
    """The seed's TensorRT 8 wrapper, numpy instead of torch: binding indices, profile shapes,
    set_binding_shape / get_binding_shape and execute_async_v2 with addresses."""

    def __init__(self, engine, output_names=None):
        self.engine = engine
        if isinstance(self.engine, str):
            with kiln.Logger() as logger, kiln.Runtime(logger) as runtime:
                with open(self.engine, mode="rb") as f:
                    engine_bytes = f.read()
                self.engine = runtime.deserialize_cuda_engine(engine_bytes)
        self.context = self.engine.create_execution_context()
        names = [_ for _ in self.engine]
        input_names = list(filter(self.engine.binding_is_input, names))
        self._input_names = input_names
        self._output_names = output_names or list(set(names) - set(input_names))

    def forward(self, inputs):
        bindings = [None] * (len(self._input_names) + len(self._output_names))
        keep = []
        for input_name, input_tensor in inputs.items():
            profile = self.engine.get_profile_shape(0, input_name)
            assert input_tensor.ndim == len(profile[0]), "Input dim is different from engine profile."
            for s_min, s_input, s_max in zip(profile[0], input_tensor.shape, profile[2]):
                assert s_min <= s_input <= s_max
            idx = self.engine.get_binding_index(input_name)
            input_tensor = np.ascontiguousarray(input_tensor)
            keep.append(input_tensor)
            self.context.set_binding_shape(idx, tuple(input_tensor.shape))
            bindings[idx] = input_tensor.ctypes.data
        outputs = {}
        for output_name in self._output_names:
            idx = self.engine.get_binding_index(output_name)
            shape = tuple(self.context.get_binding_shape(idx))
            output = np.empty(shape, kiln.nptype(self.engine.get_binding_dtype(idx)))
            outputs[output_name] = output
            bindings[idx] = output.ctypes.data
        self.context.execute_async_v2(bindings, 0)
        return outputs


def test_tensorrt8_wrapper_with_binding_indices_and_addresses(tmp_path):
    model = dynamic_batch_model(tmp_path / "dyn.onnx")
    plan_path = tmp_path / "model.engine"
    plan_path.write_bytes(bytes(build_plan(model, {"x": [(1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 8, 8)]})))
    wrapper = TRTWrapper(str(plan_path), ["probs"])
    assert wrapper.engine.num_bindings == 2 and wrapper.engine.binding_is_input(0)
    assert wrapper.engine.get_binding_index("probs") == 1 and wrapper.engine.get_binding_index("nope") == -1
    x = RNG.standard_normal((3, 3, 8, 8)).astype(np.float32)
    got = wrapper.forward({"x": x})["probs"]
    np.testing.assert_allclose(got, ort_run(model, {"x": x})[0], rtol=1e-5, atol=1e-6)
    context = wrapper.context
    assert context.get_binding_shape(1) == (3, 5) and context.all_binding_shapes_specified
    y = np.empty((3, 5), np.float32)
    assert context.execute_v2([x, y])  # arrays in binding order
    np.testing.assert_allclose(y, got, rtol=1e-6)


def test_parse_of_garbage_bytes_lists_errors():
    logger = Recording()
    network = kiln.Builder(logger).create_network()
    parser = kiln.OnnxParser(network, logger)
    assert parser.parse(b"\x08\x01garbage that is not a model \xff\xfe") is False
    assert parser.num_errors >= 1
    error = parser.get_error(0)
    assert error.code() == kiln.ErrorCode.MODEL_DESERIALIZE_FAILED
    assert error.desc() and error.node() == -1 and str(error)
    with pytest.raises(IndexError):
        parser.get_error(parser.num_errors)
    assert parser.parse_from_file("/no/such/model.onnx") is False
    assert parser.get_error(parser.num_errors - 1).code() == kiln.ErrorCode.IO_ERROR


def test_unsupported_nodes_are_all_reported(tmp_path):
    nodes = [helper.make_node("NoSuchOp", ["x"], ["a"], name="first", domain="nowhere"),
             helper.make_node("AlsoMissing", ["a"], ["y"], name="second", domain="nowhere")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("nowhere", 1)])
    parser = kiln.OnnxParser(kiln.Builder(kiln.Logger(kiln.Logger.INTERNAL_ERROR)).create_network(),
                             kiln.Logger(kiln.Logger.INTERNAL_ERROR))
    assert not parser.parse(model.SerializeToString())
    errors = [parser.get_error(i) for i in range(parser.num_errors)]
    assert {e.node_name() for e in errors} >= {"first", "second"}
    assert all(e.code() == kiln.ErrorCode.UNSUPPORTED_NODE for e in errors if e.node_name())


@pytest.fixture(scope="module")
def small_plan(tmp_path_factory):
    model = dynamic_batch_model(tmp_path_factory.mktemp("plan") / "dyn.onnx")
    return bytes(build_plan(model, {"x": [(1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 8, 8)]}))


def test_truncated_or_other_version_plan_raises(small_plan):
    runtime = kiln.Runtime(kiln.Logger(kiln.Logger.INTERNAL_ERROR))
    with pytest.raises(kiln.Fail, match="plan is truncated"):
        runtime.deserialize_engine(small_plan[: len(small_plan) // 2])
    with pytest.raises(kiln.Fail, match="not a kiln plan"):
        runtime.deserialize_engine(b"not a plan at all, but long enough to have a header of 64 bytes....")
    other_version = bytearray(small_plan)
    other_version[8:12] = (999).to_bytes(4, "little")  # the format version follows the 8-byte magic
    with pytest.raises(kiln.Fail, match="plan format version 999 is not supported"):
        runtime.deserialize_engine(bytes(other_version))


def test_wrong_names_and_buffers_raise_clear_errors(small_plan):
    engine = kiln.Runtime(kiln.Logger()).deserialize_engine(small_plan)
    context = engine.create_execution_context()
    with pytest.raises(kiln.InvalidArgument, match="no tensor 'nope'; its tensors are 'x', 'probs'"):
        engine.get_tensor_shape("nope")
    with pytest.raises(kiln.InvalidArgument, match="no tensor 'nope'"):
        context.set_tensor_address("nope", np.zeros(3, np.float32))
    with pytest.raises(kiln.InvalidArgument, match="binding index 5 is out of range"):
        engine.get_binding_shape(5)
    with pytest.raises(kiln.InvalidArgument, match="'nope' is not an input"):
        context.infer({"nope": np.zeros(3, np.float32)})
    context.set_input_shape("x", (2, 3, 8, 8))
    with pytest.raises(kiln.InvalidArgument, match="'x' holds float32, the array given is float64"):
        context.set_tensor_address("x", np.zeros((2, 3, 8, 8)))
    with pytest.raises(kiln.InvalidArgument, match="C-contiguous"):
        context.set_tensor_address("x", np.zeros((2, 3, 8, 16), np.float32)[..., ::2])
    context.set_tensor_address("x", np.zeros((2, 3, 8, 8), np.float32))
    with pytest.raises(kiln.InvalidArgument, match="probs"):
        context.set_tensor_address("probs", np.zeros((1, 5), np.float32))  # 20 bytes for 2 x 5 floats
        context.execute_async_v3(0)
    with pytest.raises(kiln.InvalidArgument, match="execute_v2: 1 bindings given, the engine has 2"):
        context.execute_v2([0])
