"""The rest of onnxruntime's session API on kiln: options, run options, profiling, IOBinding (checked
against onnxruntime), OrtValue, pickling and subclassing, plugin libraries."""
import json
import pickle

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
import python_api_models as models

X = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)


@pytest.fixture(scope="module")
def symbolic(tmp_path_factory):
    return models.symbolic_model(tmp_path_factory.mktemp("api") / "symbolic.onnx")


def expected_y(path, x=X):
    return onnxruntime.InferenceSession(path).run(None, {"x": x})[0]


@pytest.mark.parametrize("level", list(kiln.GraphOptimizationLevel))
@pytest.mark.parametrize("threads", [0, 1, 3])
def test_every_optimization_level_and_thread_count_gives_the_same_result(symbolic, level, threads):
    options = kiln.SessionOptions()
    options.graph_optimization_level = level
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 2
    options.execution_mode = kiln.ExecutionMode.ORT_PARALLEL
    options.enable_cpu_mem_arena = options.enable_mem_pattern = False
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = kiln.InferenceSession(symbolic, sess_options=options)
    assert session.get_session_options() is options
    np.testing.assert_allclose(session.run(None, {"x": X})[0], expected_y(symbolic), rtol=1e-5, atol=1e-6)


def test_options_defaults_and_names_match_onnxruntime():
    ours, theirs = kiln.SessionOptions(), onnxruntime.SessionOptions()
    for name in ("intra_op_num_threads", "inter_op_num_threads", "log_severity_level", "log_verbosity_level",
                 "enable_cpu_mem_arena", "enable_mem_pattern", "enable_profiling", "optimized_model_filepath",
                 "profile_file_prefix", "logid", "enable_mem_reuse", "use_deterministic_compute"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert str(ours.graph_optimization_level) == str(theirs.graph_optimization_level)
    assert str(ours.execution_mode) == str(theirs.execution_mode)
    for enum in ("GraphOptimizationLevel", "ExecutionMode"):
        assert {m.name: int(m) for m in getattr(kiln, enum)} == {
            name: int(m) for name, m in getattr(onnxruntime, enum).__members__.items()}
    theirs.add_session_config_entry("k", "v")
    ours.add_session_config_entry("k", "v")
    assert ours.get_session_config_entry("k") == theirs.get_session_config_entry("k") == "v"
    with pytest.raises(kiln.Fail):
        ours.get_session_config_entry("absent")


def test_negative_threads_are_refused(symbolic):
    options = kiln.SessionOptions()
    options.intra_op_num_threads = -1
    with pytest.raises(kiln.InvalidArgument, match="intra_op_num_threads must be >= 0"):
        kiln.InferenceSession(symbolic, options)


def test_optimized_model_filepath_warns_that_kiln_does_not_write_it(symbolic, tmp_path):
    options = kiln.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "opt.onnx")
    with pytest.warns(UserWarning, match="does not write the optimized model"):
        kiln.InferenceSession(symbolic, options)


def test_run_options_terminate_fails_like_onnxruntime(symbolic):
    messages = []
    for rt in (onnxruntime, kiln):
        run_options = rt.RunOptions()
        run_options.log_severity_level = 2
        run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        assert run_options.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
        run_options.terminate = True
        session = rt.InferenceSession(symbolic)
        with pytest.raises(Exception) as info:
            session.run(None, {"x": X}, run_options)
        assert type(info.value).__name__ == "Fail"
        messages.append(str(info.value).split(" : ")[:3])
        run_options.terminate = False
        np.testing.assert_allclose(session.run(None, {"x": X}, run_options)[0], expected_y(symbolic), rtol=1e-5, atol=1e-6)
    assert messages[0] == messages[1]


def test_profiling_writes_a_chrome_trace(symbolic, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    options = kiln.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = "kiln_profile"
    options.graph_optimization_level = kiln.GraphOptimizationLevel.ORT_DISABLE_ALL  # every node stays
    session = kiln.InferenceSession(symbolic, options)
    session.run(None, {"x": X})
    session.run(None, {"x": X})
    path = session.end_profiling()
    assert path.startswith("kiln_profile_") and path.endswith(".json")
    events = json.loads((tmp_path / path).read_text())
    runs = [e for e in events if e["name"] == "model_run"]
    nodes = [e for e in events if e["cat"] == "Node"]
    assert len(runs) == 2
    assert sorted({e["name"] for e in nodes}) == ["add", "matmul", "relu"]
    assert {e["args"]["op_name"] for e in nodes} == {"MatMul", "Add", "Relu"}
    for e in events:
        assert e["ph"] == "X" and e["dur"] >= 0 and e["ts"] >= 0 and isinstance(e["pid"], int)
    assert kiln.InferenceSession(symbolic).end_profiling() == ""  # not enabled, as in onnxruntime


def iobinding_script(rt, path):
    """onnxruntime's documented IOBinding workflow, with one output to a buffer of the caller's."""
    session = rt.InferenceSession(path)
    binding = session.io_binding()
    binding.bind_cpu_input("x", X)
    binding.bind_output("y")
    session.run_with_iobinding(binding)
    copied = binding.copy_outputs_to_cpu()[0]
    values = binding.get_outputs()
    first = (values[0].numpy(), values[0].shape(), values[0].data_type(), values[0].device_name())
    target = np.full((3, 3), -1, np.float32)
    binding.clear_binding_outputs()
    binding.bind_output("y", "cpu", 0, np.float32, list(target.shape), target.ctypes.data)
    x2 = X * 2
    binding.bind_input("x", "cpu", 0, np.float32, list(x2.shape), x2.ctypes.data)
    session.run_with_iobinding(binding)
    return copied, first, target


def test_iobinding_matches_onnxruntime(symbolic):
    theirs = iobinding_script(onnxruntime, symbolic)
    ours = iobinding_script(kiln, symbolic)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours[1][0], theirs[1][0], rtol=1e-5, atol=1e-6)
    assert ours[1][1:] == theirs[1][1:]
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours[2], expected_y(symbolic, X * 2), rtol=1e-5, atol=1e-6)


def test_ortvalues(symbolic):
    session = kiln.InferenceSession(symbolic)
    value = kiln.OrtValue.ortvalue_from_numpy(X)
    assert value.data_ptr() == X.ctypes.data and value.shape() == [3, 4] and value.is_tensor()
    (y,) = session.run_with_ort_values(None, {"x": value})
    np.testing.assert_allclose(y.numpy(), expected_y(symbolic), rtol=1e-5, atol=1e-6)
    zeros = kiln.OrtValue.ortvalue_from_shape_and_type([2, 2], TensorProto.FLOAT)
    assert zeros.numpy().dtype == np.float32 and zeros.data_type() == "tensor(float)"
    with pytest.raises(kiln.InvalidArgument, match="CPU only"):
        kiln.OrtValue.ortvalue_from_numpy(X, "cuda", 0)


def test_iobinding_of_another_session_is_refused(symbolic):
    a, b = kiln.InferenceSession(symbolic), kiln.InferenceSession(symbolic)
    with pytest.raises(ValueError, match="IOBinding must be used with the session that created it."):
        b.run_with_iobinding(a.io_binding())


def test_a_bound_output_buffer_of_the_wrong_shape_is_refused(symbolic):
    session = kiln.InferenceSession(symbolic)
    binding = session.io_binding()
    binding.bind_cpu_input("x", X)
    wrong = np.zeros((2, 3), np.float32)
    binding.bind_output("y", "cpu", 0, np.float32, [2, 3], wrong.ctypes.data)
    with pytest.raises(kiln.InvalidArgument, match="output 'y' is float32 \\(3, 3\\).*bound to it is float32 \\(2, 3\\)"):
        session.run_with_iobinding(binding)


class LabelledSession(kiln.InferenceSession):
    """A subclass as packages write them: extra state, and the model read at construction."""

    def __init__(self, path, labels):
        super().__init__(path, providers=["CPUExecutionProvider"])
        self.labels = labels

    def classify(self, x):
        return [self.labels[i] for i in self.run(None, {"x": x})[0].argmax(axis=1)]


def test_subclass_and_pickle(symbolic):
    session = LabelledSession(symbolic, ["a", "b", "c"])
    expected = session.classify(X)
    clone = pickle.loads(pickle.dumps(session))
    assert type(clone) is LabelledSession and clone.labels == ["a", "b", "c"]
    assert clone.classify(X) == expected
    assert [i.name for i in clone.get_inputs()] == ["x"]
    plain = pickle.loads(pickle.dumps(kiln.InferenceSession(symbolic)))
    np.testing.assert_allclose(plain.run(None, {"x": X})[0], expected_y(symbolic), rtol=1e-5, atol=1e-6)


def test_a_session_from_bytes_does_not_pickle(symbolic):
    with open(symbolic, "rb") as f:
        session = kiln.InferenceSession(f.read())
    with pytest.raises(TypeError, match="made from bytes"):
        pickle.dumps(session)


def test_plugin_library_serves_custom_ops(build_dir, tmp_path):
    library = build_dir / "tests" / "plugins" / "libkiln_test_plugins.so"
    if not library.is_file():
        pytest.skip(f"test plugin library not built: {library}")
    bias = np.array([0.5, -0.5, 1.0, 0.0], np.float32)
    node = helper.make_node("ScaleCrop", ["x", "bias"], ["y", "crop"], name="scale_crop", domain="kiln.test",
                            alpha=2.0, crop_divisor=3, plugin_version="2", factors=[1.0, 2.5], sizes=[3, 4],
                            tag="t", names=["a", "b"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("crop", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(bias, "bias")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("kiln.test", 1)])
    onnx.save(model, str(tmp_path / "plugin.onnx"))
    options = kiln.SessionOptions()
    options.register_custom_ops_library(str(library))
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    y, crop = kiln.InferenceSession(str(tmp_path / "plugin.onnx"), options).run(None, {"x": x})
    np.testing.assert_allclose(y, 2 * x + bias)
    np.testing.assert_allclose(crop, (2 * x + bias)[:, :2])


def test_a_missing_plugin_library_is_named():
    with pytest.raises(kiln.Fail, match="no_such_library.so"):
        kiln.SessionOptions().register_custom_ops_library("/nonexistent/no_such_library.so")


def test_paths_and_byte_buffers_load_alike(symbolic):
    import pathlib

    data = pathlib.Path(symbolic).read_bytes()
    for source in (pathlib.Path(symbolic), symbolic, data, bytearray(data), memoryview(data)):
        np.testing.assert_allclose(kiln.InferenceSession(source).run(None, {"x": X})[0], expected_y(symbolic),
                                   rtol=1e-5, atol=1e-6)
