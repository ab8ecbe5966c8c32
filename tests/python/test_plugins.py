"""Plugins through the CLI (issue 6): a plugin from a separate shared library (tests/plugins) loaded
with --plugins, built into a plan and run from the plan in a new process; the simple `Plugin` node;
the error cases; and the built-in example plugins against PyTorch (import -> build -> plan -> run)."""
import json
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def run(kiln, *args, timeout=600):
    return subprocess.run([str(kiln), *map(str, args)], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def plugin_lib(build_dir):
    path = build_dir / "tests" / "plugins" / "libkiln_test_plugins.so"
    if not path.is_file():
        pytest.skip(f"test plugin library not built: {path}")
    return path


BIAS = np.array([0.5, -0.5, 1.0, 0.0], np.float32)


def scale_crop_model(path, alpha=None):
    """kiln.test::ScaleCrop(x, bias): y = alpha x + bias, crop = y[:, :ceil(4 / 3)]."""
    node = helper.make_node("ScaleCrop", ["x", "bias"], ["y", "crop"], name="scale_crop", domain="kiln.test",
                            alpha=2.0 if alpha is None else alpha, crop_divisor=3, plugin_version="2",
                            factors=[1.0, 2.5], sizes=[3, 4], tag="t", names=["a", "b"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("crop", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(BIAS, "bias")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("kiln.test", 1)])
    onnx.save(model, path)
    return path


PROFILE = ["--min-shapes", "x:1x4", "--opt-shapes", "x:2x4", "--max-shapes", "x:8x4"]


def test_shared_library_plugin_built_into_a_plan_and_run_in_a_new_process(kiln, plugin_lib, tmp_path):
    model = scale_crop_model(tmp_path / "m.onnx")
    built = run(kiln, "build", model, "-o", tmp_path / "m.kiln", "--plugins", plugin_lib, *PROFILE)
    assert built.returncode == 0, built.stderr
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    ran = run(kiln, "run", tmp_path / "m.kiln", "--plugins", plugin_lib, "--input", f"x={tmp_path / 'x.npy'}",
              "--output-dir", tmp_path / "out")
    assert ran.returncode == 0, ran.stderr
    y = 2 * x + BIAS
    np.testing.assert_allclose(np.load(tmp_path / "out" / "y.npy"), y, rtol=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "crop.npy"), y[:, :2], rtol=1e-6)
    bench = run(kiln, "bench", tmp_path / "m.kiln", "--plugins", plugin_lib, "--iterations", 3, "--warmup", 1,
                "--shapes", "x:3x4", "--json")
    assert bench.returncode == 0, bench.stderr
    assert json.loads(bench.stdout)["iterations"] == 3
    inspected = run(kiln, "inspect", tmp_path / "m.kiln", "--plugins", plugin_lib)
    assert inspected.returncode == 0, inspected.stderr
    assert "scale_crop (ScaleCrop)  kernel plugin_kiln.test::ScaleCrop" in inspected.stdout


def test_simple_plugin_node_with_json_info(kiln, plugin_lib, tmp_path):
    node = helper.make_node("Plugin", ["x"], ["y"], name="clamp", info=json.dumps({"lo": -0.5, "hi": 2}))
    node.attribute.append(helper.make_attribute("name", "TestClamp"))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "clamp.onnx")
    assert run(kiln, "build", tmp_path / "clamp.onnx", "-o", tmp_path / "clamp.kiln", "--plugins",
               plugin_lib).returncode == 0
    x = np.array([-3, -0.5, 0.25, 1.5, 2, 9], np.float32)
    np.save(tmp_path / "x.npy", x)
    ran = run(kiln, "run", tmp_path / "clamp.kiln", "--plugins", plugin_lib, "--input", f"x={tmp_path / 'x.npy'}",
              "--output-dir", tmp_path / "out")
    assert ran.returncode == 0, ran.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "y.npy"), np.clip(x, -0.5, 2))


def test_missing_plugin_at_parse_names_op_domain_version_and_libraries(kiln, tmp_path):
    model = scale_crop_model(tmp_path / "m.onnx")
    result = run(kiln, "build", model, "-o", tmp_path / "m.kiln", *PROFILE)
    assert result.returncode == 3, result.stderr
    assert "kiln.test::ScaleCrop" in result.stderr
    assert "no plugin 'ScaleCrop' (version '2', namespace 'kiln.test') is registered" in result.stderr
    assert "plugin libraries searched: none loaded" in result.stderr


def test_missing_plugin_at_plan_load_names_it(kiln, plugin_lib, tmp_path):
    model = scale_crop_model(tmp_path / "m.onnx")
    assert run(kiln, "build", model, "-o", tmp_path / "m.kiln", "--plugins", plugin_lib, *PROFILE).returncode == 0
    result = run(kiln, "run", tmp_path / "m.kiln", "--shapes", "x:2x4")
    assert result.returncode == 3, result.stderr
    assert "the plan needs plugin 'ScaleCrop' (version '2', namespace 'kiln.test') for node 'scale_crop'" in result.stderr
    assert "which is not registered" in result.stderr


def test_field_of_the_wrong_type(kiln, plugin_lib, tmp_path):
    model = scale_crop_model(tmp_path / "m.onnx", alpha="two")
    result = run(kiln, "build", model, "-o", tmp_path / "m.kiln", "--plugins", plugin_lib, *PROFILE)
    assert result.returncode != 0
    assert ("node 'scale_crop' (kiln.test::ScaleCrop): plugin 'ScaleCrop' field 'alpha' expects type float, "
            "given string") in result.stderr


def test_plugin_whose_enqueue_fails(kiln, plugin_lib, tmp_path):
    node = helper.make_node("AlwaysFails", ["x"], ["y"], name="doomed", domain="kiln.test")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("kiln.test", 1)])
    onnx.save(model, tmp_path / "f.onnx")
    assert run(kiln, "build", tmp_path / "f.onnx", "-o", tmp_path / "f.kiln", "--plugins", plugin_lib).returncode == 0
    result = run(kiln, "run", tmp_path / "f.kiln", "--plugins", plugin_lib)
    assert result.returncode == 1
    assert ("node 'doomed' (kiln.test::AlwaysFails): plugin 'AlwaysFails' (version '1', namespace 'kiln.test') "
            "enqueue failed: RUNTIME_ERROR: AlwaysFails refuses to compute") in result.stderr


def test_unloadable_plugin_library_names_path_and_reason(kiln, tmp_path):
    bogus = tmp_path / "libbogus.so"
    bogus.write_text("not a shared library")
    result = run(kiln, "run", "nothing.onnx", "--plugins", bogus)
    assert result.returncode == 1
    assert f"{bogus}: cannot load the plugin library: " in result.stderr
    assert "invalid ELF header" in result.stderr or "too short" in result.stderr


# ---- the built-in example plugins, against PyTorch's outputs (tests/models/export_plugin_models.py)

EXAMPLES = ["srcnn_dynamic_trt_resize", "trt_resize_align_corners", "myselu", "deform_conv2d", "deform_conv2d_no_mask"]


@pytest.fixture(scope="module")
def plugin_models(repo_root, build_dir):
    out = build_dir / "models"
    script = repo_root / "tests/models/export_plugin_models.py"
    if not script.is_file():
        pytest.skip("tests/models/export_plugin_models.py is missing")
    command = ["/usr/bin/python3", str(script), "--out", str(out), "--only", *EXAMPLES]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        pytest.fail(f"plugin model export failed: {' '.join(command)}\n{result.stdout}{result.stderr}", pytrace=False)
    return out


def shape_args(profile):
    args = []
    for key, flag in (("min_shapes", "--min-shapes"), ("opt_shapes", "--opt-shapes"), ("max_shapes", "--max-shapes")):
        for name, dims in profile.get(key, {}).items():
            args += [flag, f"{name}:{'x'.join(map(str, dims))}"]
    return args


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_plugin_matches_pytorch(kiln, plugin_models, tmp_path, name):
    manifest = json.loads((plugin_models / f"{name}.json").read_text())
    plan = tmp_path / f"{name}.kiln"
    built = run(kiln, "build", plugin_models / manifest["model"], "-o", plan, *shape_args(manifest["profile"]))
    assert built.returncode == 0, built.stdout + built.stderr
    for case in manifest["cases"]:
        inputs = [a for tensor, file in case["inputs"].items() for a in ("--input", f"{tensor}={plugin_models / file}")]
        out_dir = tmp_path / case["name"]
        ran = run(kiln, "run", plan, *inputs, "--output-dir", out_dir)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        for tensor, file in case["outputs"].items():
            want = np.load(plugin_models / file)
            got = np.load(out_dir / f"{tensor}.npy")
            assert got.shape == want.shape, (case["name"], tensor)
            # max relative error <= 1e-4, relative to the output's largest magnitude
            err = np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-12)
            assert err <= 1e-4, f"{name} case {case['name']} output {tensor}: max relative error {err:.3g}"
