"""Stopping runaway runs from Python: RunOptions.terminate set from another thread stops a run in
progress, and the session config entry kiln.max_loop_iterations caps a Loop whose condition never
turns false, and kiln.memory_limit_mb refuses a run whose buffers are over it (issue 22)."""
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln


def endless_loop_model(path):
    """count = Loop(cond = true, count0) { count + 1; cond stays true }: never ends by itself."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["c", "one"], ["c_next"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("c", TensorProto.INT64, []),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("c_next", TensorProto.INT64, []),
        ],
        [helper.make_tensor("one", TensorProto.INT64, [], [1])],
    )
    loop = helper.make_node("Loop", ["", "cond", "count0"], ["count"], name="forever", body=body)
    graph = helper.make_graph(
        [loop],
        "endless",
        [
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("count0", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("count", TensorProto.INT64, [])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, path)
    return str(path)


FEED = {"cond": np.array(True), "count0": np.array(0, np.int64)}


def test_terminate_set_from_another_thread_stops_a_run_in_progress(tmp_path):
    session = kiln.InferenceSession(endless_loop_model(tmp_path / "endless.onnx"))
    run_options = kiln.RunOptions()
    timer = threading.Timer(0.2, lambda: setattr(run_options, "terminate", True))
    timer.start()
    try:
        with pytest.raises(kiln.Fail, match=r"run terminated \(RunOptions.terminate was set\) before "):
            session.run(None, FEED, run_options)
    finally:
        timer.cancel()
    assert run_options.terminate is True


def test_max_loop_iterations_caps_a_loop_that_never_ends(tmp_path):
    options = kiln.SessionOptions()
    options.add_session_config_entry("kiln.max_loop_iterations", "1000")
    session = kiln.InferenceSession(endless_loop_model(tmp_path / "endless.onnx"), options)
    with pytest.raises(kiln.Fail, match="reached the cap of 1000 iterations per run"):
        session.run(None, FEED)


def test_max_loop_iterations_must_be_a_non_negative_integer(tmp_path):
    options = kiln.SessionOptions()
    options.add_session_config_entry("kiln.max_loop_iterations", "-5")
    with pytest.raises(kiln.InvalidArgument, match="kiln.max_loop_iterations must be an integer >= 0"):
        kiln.InferenceSession(endless_loop_model(tmp_path / "endless.onnx"), options)


def tile_model(path):
    """y = Tile(Relu(x), repeats): the output's size follows the run-time repeats."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Tile", ["r", "repeats"], ["y"], name="grow")],
        "tile",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4]),
            helper.make_tensor_value_info("repeats", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return str(path)


def test_memory_limit_refuses_a_run_whose_output_is_over_it_and_runs_smaller_ones(tmp_path):
    options = kiln.SessionOptions()
    options.add_session_config_entry("kiln.memory_limit_mb", "1")
    session = kiln.InferenceSession(tile_model(tmp_path / "tile.onnx"), options)
    x = np.arange(-8, 8, dtype=np.float32).reshape(4, 4)
    small = session.run(None, {"x": x, "repeats": np.array([2, 3], np.int64)})[0]
    np.testing.assert_array_equal(small, np.tile(np.maximum(x, 0), (2, 3)))
    # 4*256 x 4*512 floats = 8 MiB, over the 1 MiB limit.
    with pytest.raises(kiln.InvalidArgument, match=r"grow.*needs 8388608 bytes, over the allocation limit of 1048576 bytes"):
        session.run(None, {"x": x, "repeats": np.array([256, 512], np.int64)})


def test_memory_limit_must_be_a_non_negative_integer(tmp_path):
    options = kiln.SessionOptions()
    options.add_session_config_entry("kiln.memory_limit_mb", "lots")
    with pytest.raises(kiln.InvalidArgument, match="kiln.memory_limit_mb must be an integer >= 0"):
        kiln.InferenceSession(tile_model(tmp_path / "tile.onnx"), options)
