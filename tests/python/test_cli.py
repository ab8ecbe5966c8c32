"""The kiln CLI: `kiln run` inputs, outputs and errors, and `kiln inspect`, on tiny models."""
import json
import subprocess

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from onnx import TensorProto, helper


def run(kiln, *args):
    return subprocess.run([str(kiln), *map(str, args)], capture_output=True, text=True, timeout=60)


@pytest.fixture
def add_model(tmp_path):
    """y = relu(x + b) with a symbolic batch; output name needs sanitizing."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["out/y:0"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("out/y:0", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor("b", TensorProto.FLOAT, [3], [1, -2, 3])],
    )
    path = tmp_path / "add.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="tests"), path)
    return path


def test_run_reads_npy_and_writes_outputs_with_manifest(kiln, add_model, tmp_path):
    x = np.array([[1, 2, -3], [0, 0, 0]], dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    r = run(kiln, "run", add_model, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", out)
    assert r.returncode == 0, r.stderr
    manifest = json.loads((out / "outputs.json").read_text())
    entry = manifest["outputs"][0]
    assert entry["name"] == "out/y:0" and entry["file"] == "out_y_0.npy"
    assert entry["shape"] == [2, 3] and entry["dtype"] == "float32"
    np.testing.assert_array_equal(np.load(out / entry["file"]), np.maximum(x + [1, -2, 3], 0))
    assert "name made safe" in r.stdout
    assert "min 0" in r.stdout and "max 3" in r.stdout


def test_random_inputs_are_seeded_and_use_shapes(kiln, add_model, tmp_path):
    outputs = []
    for name in ("a", "b"):
        r = run(kiln, "run", add_model, "--shapes", "x:4x3", "--seed", 7, "--output-dir", tmp_path / name)
        assert r.returncode == 0, r.stderr
        outputs.append(np.load(tmp_path / name / "out_y_0.npy"))
    assert outputs[0].shape == (4, 3)
    np.testing.assert_array_equal(outputs[0], outputs[1])


def test_dynamic_dims_default_to_one_with_a_note(kiln, add_model):
    r = run(kiln, "run", add_model)
    assert r.returncode == 0, r.stderr
    assert "input 'x' has dynamic dims" in r.stderr and "float32[1x3]" in r.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--input", "nope=x.npy"], "--input names 'nope', which is not an input"),
        (["--shapes", "x:2xA"], "bad shape '2xA'"),
        (["--input", "x=missing.npy"], "missing.npy: cannot open"),
        (["--shapes", "x:2x4"], "input 'x' has invalid dimensions (index 1: got 4, expected 3)"),
    ],
)
def test_run_errors_are_one_line_and_nonzero(kiln, add_model, args, message, tmp_path):
    r = run(kiln, "run", add_model, *args)
    assert r.returncode == 1
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_wrong_input_shape_names_input_and_index(kiln, tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["input"], ["y"])],
        "g",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 10, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 10, 10])],
    )
    path = tmp_path / "static.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    np.save(tmp_path / "x.npy", np.zeros((2, 3, 10, 10), np.float32))
    r = run(kiln, "run", path, "--input", f"input={tmp_path / 'x.npy'}")
    assert r.returncode == 1
    assert "input 'input' has invalid dimensions (index 0: got 2, expected 1)" in r.stderr


def unsupported_op_model(tmp_path, node_name):
    """A model of one node whose op kiln does not know (NoSuchOp), named `node_name`."""
    graph = helper.make_graph(
        [helper.make_node("NoSuchOp", ["x"], ["y"], name=node_name)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    path = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_unsupported_operator_exits_3(kiln, tmp_path):
    path = unsupported_op_model(tmp_path, "mystery")
    r = run(kiln, "run", path)
    assert r.returncode == 3
    assert "node 'mystery' (NoSuchOp)" in r.stderr
    r = run(kiln, "inspect", path)
    assert r.returncode == 3 and "unsupported nodes 1" in r.stdout


def test_a_type_kiln_cannot_hold_exits_3_from_every_command(kiln, tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=12345, name="cast")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    path = tmp_path / "cast.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    for command in (["inspect", path], ["run", path], ["build", path, "-o", tmp_path / "cast.kiln"]):
        r = run(kiln, *command)
        assert r.returncode == 3, (command[0], r.returncode, r.stderr)
        assert "node 'cast' (Cast): cannot cast to element type 12345" in r.stderr + r.stdout, command[0]


@pytest.mark.parametrize("op, shape_input", [("Reshape", 1), ("Expand", 1), ("ConstantOfShape", 0)])
def test_a_shape_input_of_a_billion_values_is_refused_by_rank(kiln, tmp_path, op, shape_input):
    # The output's rank is the shape input's length: once a std::bad_alloc naming nothing.
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])] if shape_input == 1 else []
    inputs.insert(shape_input, helper.make_tensor_value_info("s", TensorProto.INT64, [1000000000]))
    graph = helper.make_graph(
        [helper.make_node(op, [i.name for i in inputs], ["y"], name="grow")], "g", inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    path = tmp_path / "rank.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    for command in ("inspect", "run"):
        r = run(kiln, command, path)
        assert r.returncode == 1, (command, r.returncode, r.stderr)
        text = r.stderr + r.stdout
        assert f"node 'grow' ({op}): input {shape_input} holds 1000000000 values" in text, text
        assert "at most kiln's 64" in text


def test_names_with_control_bytes_are_escaped_in_errors(kiln, tmp_path):
    r = run(kiln, "run", unsupported_op_model(tmp_path, "line\nbreak\x1b[31m"))
    assert r.returncode == 3
    assert "node 'line\\x0abreak\\x1b[31m' (NoSuchOp)" in r.stderr
    assert r.stderr.count("\n") == 1 and "\x1b" not in r.stderr


def test_a_bad_plan_is_reported_once(kiln, add_model, tmp_path):
    plan = tmp_path / "add.kiln"
    r = run(kiln, "build", add_model, "-o", plan, "--shapes", "x:2x3")
    assert r.returncode == 0, r.stderr
    plan.write_bytes(plan.read_bytes()[:100])
    for command in ("run", "inspect"):
        r = run(kiln, command, plan)
        assert r.returncode == 1
        assert r.stderr.count("\n") == 1 and "add.kiln" in r.stderr, r.stderr


def test_malformed_file_is_a_clear_error(kiln, tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"GIF89a definitely not protobuf \xff\xff\xff")
    r = run(kiln, "run", path)
    assert r.returncode == 1
    assert "junk.onnx: not a valid ONNX model" in r.stderr


def test_inspect_lists_io_ops_and_initializers(kiln, add_model):
    r = run(kiln, "inspect", add_model)
    assert r.returncode == 0, r.stderr
    for fragment in ("ir_version", "ai.onnx:13", "x  float32[batchx3]", "Add 1", "Relu 1",
                     "initializers 1 (12 bytes)", "all nodes are supported", "producer   tests"):
        assert fragment in r.stdout, fragment


def test_operators_doc_matches_the_registry(kiln, repo_root):
    """docs/operators.md is `kiln ops --markdown`; regenerate it when an operator is added."""
    r = run(kiln, "ops", "--markdown")
    assert r.returncode == 0, r.stderr
    doc = (repo_root / "docs" / "operators.md").read_text()
    assert doc.endswith(r.stdout), "docs/operators.md is stale: regenerate the table with `build/kiln ops --markdown`"


def test_threads_give_the_same_result_as_one_thread(kiln, tmp_path):
    """A MatMul big enough to be split across the intra-op thread pool."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((256, 192)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [160, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [160, 192])],
        [onnx.numpy_helper.from_array(w, "w")],
    )
    path = tmp_path / "matmul.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    x = rng.standard_normal((160, 256)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    results = []
    for threads in (1, 2, 3):
        out = tmp_path / f"t{threads}"
        r = run(kiln, "run", path, "--input", f"x={tmp_path / 'x.npy'}", "--threads", threads, "--output-dir", out)
        assert r.returncode == 0, r.stderr
        results.append(np.load(out / "y.npy"))
    np.testing.assert_allclose(results[0], x @ w, rtol=1e-4, atol=1e-4)
    for other in results[1:]:
        np.testing.assert_array_equal(results[0], other)


def test_bench_reports_latency_statistics(kiln, add_model):
    r = run(kiln, "bench", add_model, "--iterations", 5, "--warmup", 1, "--json")
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stdout)
    assert stats["iterations"] == 5
    assert 0 < stats["min_ms"] <= stats["median_ms"] <= stats["p90_ms"] <= stats["p99_ms"] <= stats["max_ms"]
    assert stats["throughput_per_s"] > 0
    r = run(kiln, "bench", add_model, "--iterations", 0)
    assert r.returncode == 1 and "--iterations must be >= 1" in r.stderr


def test_bench_profile_lists_every_layer(kiln, add_model):
    r = run(kiln, "bench", add_model, "--iterations", 4, "--warmup", 1, "--profile", "--json", "--shapes", "x:2x3")
    assert r.returncode == 0, r.stderr
    layers = json.loads(r.stdout)["layers"]
    assert [(layer["op"], layer["input_shapes"]) for layer in layers] == [("Add", "2x3 3"), ("Relu", "2x3")]
    assert all(layer["mean_ms"] >= 0 and layer["name"] for layer in layers)
    r = run(kiln, "bench", add_model, "--iterations", 4, "--profile")
    assert r.returncode == 0, r.stderr
    assert "per-layer profile, mean ms per run over 4 runs (2 layers" in r.stdout
    assert "per operator:" in r.stdout
