"""The build-then-run workflow through the CLI: `kiln build` plans, `kiln run` / `kiln inspect` on
plans, and the dynamic-axes lesson checked against ONNX Runtime itself."""
import json
import re
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper


def run(kiln, *args, timeout=300):
    return subprocess.run([str(kiln), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def conv_model(path, dims):
    """Conv(3->3, 3x3, no padding) with the input dims given (ints fixed, strings symbolic)."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((3, 3, 3, 3)).astype(np.float32), "weight")
    bias = numpy_helper.from_array(np.array([0.1, -0.2, 0.3], np.float32), "bias")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["input", "weight", "bias"], ["output"], name="conv")],
        "g",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, None)],
        [weight, bias],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


EXPORTS = {
    "static": ([1, 3, 10, 10], []),
    "dynamic_batch": (["batch", 3, 10, 10], ["--min-shapes", "input:1x3x10x10", "--opt-shapes", "input:1x3x10x10",
                                             "--max-shapes", "input:8x3x10x10"]),
    "dynamic_hw": ([1, 3, "height", "width"], ["--min-shapes", "input:1x3x5x5", "--opt-shapes", "input:1x3x10x10",
                                               "--max-shapes", "input:1x3x32x32"]),
}
INPUTS = [(1, 3, 10, 10), (2, 3, 10, 10), (1, 3, 20, 20)]


def ort_outcome(model, x):
    try:
        return ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0], None
    except Exception as e:  # onnxruntime raises its own exception types
        return None, str(e)


@pytest.mark.parametrize("export", EXPORTS)
def test_dynamic_axes_accept_and_reject_like_onnxruntime(kiln, tmp_path, export):
    dims, profile = EXPORTS[export]
    model = conv_model(tmp_path / f"{export}.onnx", dims)
    plan = tmp_path / f"{export}.kiln"
    r = run(kiln, "build", model, "-o", plan, *profile)
    assert r.returncode == 0, r.stderr
    for shape in INPUTS:
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        np.save(tmp_path / "x.npy", x)
        expected, ort_error = ort_outcome(model, x)
        for target in (model, plan):
            out = tmp_path / "out"
            r = run(kiln, "run", target, "--input", f"input={tmp_path / 'x.npy'}", "--output-dir", out)
            label = f"{target.name} with {shape}: ORT {'fails: ' + ort_error if ort_error else 'succeeds'}"
            assert (r.returncode == 0) == (ort_error is None), f"{label}; kiln: {r.stderr}"
            if ort_error is None:
                np.testing.assert_allclose(np.load(out / "output.npy"), expected, rtol=1e-4, atol=1e-4)
                continue
            # ORT: "Got invalid dimensions for input: input for the following indices index: 0 Got: 2 Expected: 1"
            index, got, want = re.search(r"index: (\d+) Got: (\d+) Expected: (\d+)", ort_error).groups()
            assert "input 'input' has invalid dimensions" in r.stderr, label
            assert f"index {index}: got {got}, expected {want}" in r.stderr, f"{label}; kiln: {r.stderr}"


def test_build_reports_stages_and_a_summary(kiln, tmp_path):
    model = conv_model(tmp_path / "m.onnx", ["batch", 3, 10, 10])
    r = run(kiln, "build", model, "-o", tmp_path / "m.kiln", "--shapes", "input:2x3x10x10", "--threads", 2,
            "--workspace", 64, "--verbose", "--builder-optimization-level", 0)  # the heuristics' kernel, named below
    assert r.returncode == 0, r.stderr
    for stage in ("[1/5] parse", "[2/5] optimize", "[3/5] select kernels", "[4/5] plan memory", "[5/5] serialize"):
        assert stage in r.stdout, stage
    assert re.search(r"built .*m\.kiln: 1 layers -> 1 after optimization, arena [\d.]+ MiB "
                     r"\(intermediates sum [\d.]+ MiB\), plan [\d.]+ MiB", r.stdout)
    assert re.search(r"layer 'conv' \(Conv\): kernel f32_conv_\w+_avx(2|512) ", r.stdout), r.stdout  # --verbose
    assert "declined f32_conv_depthwise_avx512: " in r.stdout  # the earlier candidates, with their reasons


def test_inspect_shows_a_plans_layers_io_and_profiles(kiln, tmp_path):
    model = conv_model(tmp_path / "m.onnx", ["batch", 3, 10, 10])
    plan = tmp_path / "m.kiln"
    assert run(kiln, "build", model, "-o", plan, "--min-shapes", "input:1x3x10x10", "--opt-shapes",
               "input:2x3x10x10", "--max-shapes", "input:4x3x10x10", "--fp16", "--builder-optimization-level", 0).returncode == 0
    r = run(kiln, "inspect", plan)
    assert r.returncode == 0, r.stderr
    for fragment in ("plan ", "format     5", "cpu        avx2 fma f16c", "flags      fp16", "opt level  0 (heuristics only)", "input  float32[?x3x10x10]",
                     "0  input  min 1x3x10x10  opt 2x3x10x10  max 4x3x10x10", "conv (Conv)  kernel f32_conv_", "declined f32_conv_depthwise_avx512: ",
                     "MiB at opt shapes (intermediates sum "):
        assert fragment in r.stdout, fragment


def test_run_on_a_plan_uses_profile_opt_shapes_for_random_inputs(kiln, tmp_path):
    model = conv_model(tmp_path / "m.onnx", ["batch", 3, 10, 10])
    plan = tmp_path / "m.kiln"
    assert run(kiln, "build", model, "-o", plan, "--min-shapes", "input:1x3x10x10", "--opt-shapes",
               "input:3x3x10x10", "--max-shapes", "input:4x3x10x10").returncode == 0
    r = run(kiln, "run", plan, "--output-dir", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    manifest = json.loads((tmp_path / "out" / "outputs.json").read_text())
    assert manifest["outputs"][0]["shape"] == [3, 3, 8, 8]


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "input 'input' has dynamic dims (batchx3x10x10) but the builder config has no optimization profile"),
        (["--min-shapes", "input:1x3x10x10"], "input 'input' needs --opt-shapes too"),
        (["--shapes", "input:2x3x9x10"], "index 2: the network fixes this dim to 10"),
        (["--min-shapes", "input:4x3x10x10", "--opt-shapes", "input:2x3x10x10", "--max-shapes", "input:8x3x10x10"],
         "index 0: min 4 is greater than opt 2"),
    ],
)
def test_build_rejects_bad_profiles(kiln, tmp_path, args, message):
    model = conv_model(tmp_path / "m.onnx", ["batch", 3, 10, 10])
    r = run(kiln, "build", model, "-o", tmp_path / "m.kiln", *args)
    assert r.returncode == 1
    assert message in r.stderr


def test_build_lists_every_unsupported_node_and_exits_3(kiln, tmp_path):
    graph = helper.make_graph(
        [helper.make_node("NoSuchOp", ["x"], ["a"], name="first"), helper.make_node("Relu", ["a"], ["b"]),
         helper.make_node("OtherOp", ["b"], ["y"], name="second")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    path = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    r = run(kiln, "build", path, "-o", tmp_path / "bad.kiln")
    assert r.returncode == 3
    assert "node 0 'first' (NoSuchOp)" in r.stderr and "node 2 'second' (OtherOp)" in r.stderr


def test_damaged_plans_are_clear_errors(kiln, tmp_path):
    model = conv_model(tmp_path / "m.onnx", [1, 3, 10, 10])
    plan = tmp_path / "m.kiln"
    assert run(kiln, "build", model, "-o", plan).returncode == 0
    data = plan.read_bytes()
    # A byte of the output's name: inside the header checksum (the packed weights at the end of the
    # file are checked only on request, Runtime::setVerifyPackedWeights).
    at = data.index(b"output")
    cases = {
        "truncated.kiln": (data[: len(data) // 2], "plan is truncated"),
        "flipped.kiln": (data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :], "plan checksum mismatch"),
        "version.kiln": (data[:8] + (9).to_bytes(4, "little") + data[12:], "plan format version 9 is not supported"),
    }
    for name, (content, message) in cases.items():
        (tmp_path / name).write_bytes(content)
        for command in ("run", "inspect"):
            r = run(kiln, command, tmp_path / name)
            assert r.returncode == 1, (name, command)
            assert message in r.stderr, (name, command, r.stderr)


@pytest.mark.heavy
def test_resnet50_plan_with_batch_profile_matches_onnxruntime(kiln, tmp_path, model_exporter):
    model = model_exporter(["resnet50"]) / "resnet50.onnx"
    name = onnx.load(str(model), load_external_data=False).graph.input[0].name
    plan = tmp_path / "resnet50.kiln"
    r = run(kiln, "build", model, "-o", plan, "--min-shapes", f"{name}:1x3x224x224", "--opt-shapes",
            f"{name}:4x3x224x224", "--max-shapes", f"{name}:8x3x224x224", timeout=900)
    assert r.returncode == 0, r.stderr
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    for batch in (1, 8):
        x = np.random.default_rng(batch).standard_normal((batch, 3, 224, 224)).astype(np.float32)
        np.save(tmp_path / "x.npy", x)
        out = tmp_path / f"out{batch}"
        r = run(kiln, "run", plan, "--input", f"{name}={tmp_path / 'x.npy'}", "--output-dir", out, timeout=900)
        assert r.returncode == 0, r.stderr
        expected = session.run(None, {name: x})[0]
        got = np.load(out / json.loads((out / "outputs.json").read_text())["outputs"][0]["file"])
        atol = 1e-4 * np.abs(expected).max()
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=atol)


def test_inspect_reports_concats_computed_in_place_and_run_matches_numpy(kiln, tmp_path):
    # Relu(x) and Neg(x) are written straight into their slabs of Concat's output (axis 1, batch 1);
    # that output is an intermediate (a graph output is the caller's, not the arena's).
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["x"], ["b"]),
         helper.make_node("Concat", ["a", "b"], ["c"], axis=1), helper.make_node("Neg", ["c"], ["y"])],
        "concat", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4, 4])])
    model = tmp_path / "concat.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
    plan = tmp_path / "concat.kiln"
    assert run(kiln, "build", model, "-o", plan).returncode == 0
    r = run(kiln, "inspect", plan)
    assert r.returncode == 0, r.stderr
    assert "concats    1 computed in place (their inputs written into the output: 0 KiB not copied per run)" in r.stdout
    x = np.random.default_rng(0).standard_normal((1, 4, 4, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = run(kiln, "run", plan, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "y.npy"), np.concatenate([-np.maximum(x, 0), x], axis=1))
