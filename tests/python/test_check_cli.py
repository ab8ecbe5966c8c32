"""kiln check: planted defects in small models, each found with a message naming the node, the
tensor and the rule; several at once in one model; clean models (built here and exported from
PyTorch) pass with exit code 0."""
import pathlib
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

TIMEOUT_S = 300


def run_check(kiln, path, *args):
    return subprocess.run([str(kiln), "check", str(path), *args], capture_output=True, text=True, timeout=TIMEOUT_S)


def float_input(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def save(tmp_path, nodes, inputs, outputs, initializers=(), opset=17, name="model.onnx", domains=()):
    """Writes a model without onnx.checker, which would refuse the defects."""
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    path = tmp_path / name
    onnx.save(model, path)
    return path


def weights(name, shape, dtype=np.float32):
    return numpy_helper.from_array(np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape), name)


def relu_chain(tmp_path, **kwargs):
    nodes = [helper.make_node("Relu", ["x"], ["t"], name="r1"), helper.make_node("Relu", ["t"], ["y"], name="r2")]
    return save(tmp_path, nodes, [float_input("x", [2, 3])], [float_input("y", [2, 3])], **kwargs)


def cycle(tmp_path):
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="add"), helper.make_node("Relu", ["a"], ["b"], name="relu")]
    return save(tmp_path, nodes, [float_input("x", [2])], [float_input("a", [2])])


def wrong_order(tmp_path):
    nodes = [helper.make_node("Relu", ["t"], ["y"], name="second"), helper.make_node("Relu", ["x"], ["t"], name="first")]
    return save(tmp_path, nodes, [float_input("x", [2])], [float_input("y", [2])])


def duplicate_output(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")]
    return save(tmp_path, nodes, [float_input("x", [2])], [float_input("y", [2])])


def undefined_input(tmp_path):
    nodes = [helper.make_node("Add", ["x", "nowhere"], ["y"], name="add")]
    return save(tmp_path, nodes, [float_input("x", [2])], [float_input("y", [2])])


def initializer_elem_type(tmp_path):
    """Conv's weights as int32: ONNX's type constraint T of Conv is float only."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")]
    return save(tmp_path, nodes, [float_input("x", [1, 1, 4, 4])], [float_input("y", None)],
                [weights("w", [1, 1, 3, 3], np.int32)])


def declared_type_mismatch(tmp_path):
    """A graph input declared float32 whose initializer (its default) holds int64."""
    nodes = [helper.make_node("Add", ["x", "bias"], ["y"], name="add")]
    return save(tmp_path, nodes, [float_input("x", [3]), float_input("bias", [3])], [float_input("y", [3])],
                [weights("bias", [3], np.int64)])


def bad_attribute_type(tmp_path):
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="conv")
    conv.attribute.append(helper.make_attribute("strides", [1.0, 1.0]))  # floats, Conv's strides are ints
    return save(tmp_path, [conv], [float_input("x", [1, 1, 4, 4])], [float_input("y", None)], [weights("w", [1, 1, 3, 3])])


def unknown_and_missing_attribute(tmp_path):
    nodes = [helper.make_node("Cast", ["x"], ["y"], name="cast", bogus=3)]  # no 'to', which Cast requires
    return save(tmp_path, nodes, [float_input("x", [2])], [float_input("y", [2])])


def unsupported_op(tmp_path):
    node = helper.make_node("FancyScale", ["x", "w"], ["y"], name="fancy", domain="my.ops", alpha=0.5, mode="fast",
                            pads=[1, 2])
    return save(tmp_path, [node], [float_input("x", [2, 3])], [float_input("y", [2, 3])], [weights("w", [3])],
                domains=["my.ops"])


def opset_too_new(tmp_path):
    return relu_chain(tmp_path, opset=99)


def not_an_onnx_operator(tmp_path):
    nodes = [helper.make_node("Relux", ["x"], ["y"], name="typo")]
    return save(tmp_path, nodes, [float_input("x", [2])], [float_input("y", [2])])


def operator_newer_than_opset(tmp_path):
    nodes = [helper.make_node("Gelu", ["x"], ["y"], name="gelu")]  # Gelu is opset 20
    return save(tmp_path, nodes, [float_input("x", [2])], [float_input("y", [2])], opset=13)


def too_many_inputs(tmp_path):
    nodes = [helper.make_node("Relu", ["x", "x"], ["y"], name="relu")]
    return save(tmp_path, nodes, [float_input("x", [2])], [float_input("y", [2])])


def missing_external_file(tmp_path):
    w = weights("w", [3])
    onnx.external_data_helper.set_external_data(w, location="weights.bin")
    w.data_location = TensorProto.EXTERNAL
    w.ClearField("raw_data")
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    return save(tmp_path, nodes, [float_input("x", [3])], [float_input("y", [3])], [w])


def short_external_file(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"\0" * 8)  # 3 floats need 12
    return missing_external_file(tmp_path)


def matmul_mismatch(tmp_path):
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    return save(tmp_path, nodes, [float_input("x", [2, 3])], [float_input("y", None)], [weights("w", [4, 5])])


def initializer_size(tmp_path):
    w = weights("w", [3])
    w.raw_data = b"\0" * 8  # 3 floats need 12
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    return save(tmp_path, nodes, [float_input("x", [3])], [float_input("y", [3])], [w])


def undeclared_domain(tmp_path):
    nodes = [helper.make_node("Thing", ["x"], ["y"], name="thing", domain="not.imported")]
    return save(tmp_path, nodes, [float_input("x", [2])], [float_input("y", [2])])


def output_not_produced(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    return save(tmp_path, nodes, [float_input("x", [2])], [float_input("y", [2]), float_input("z", [2])])


def unnamed_graph(tmp_path):
    path = relu_chain(tmp_path)
    model = onnx.load(path)
    model.graph.name = ""
    onnx.save(model, path)
    return path


DEFECTS = [
    (unnamed_graph, ["[graph] the graph has no name"]),
    (cycle, ["[cycle] 2 nodes form or depend on a cycle: node 'add' (Add), node 'relu' (Relu)"]),
    (wrong_order, ["[topological-order] node 'second' (Relu) input 0 't' is produced by a later node, node 'first' (Relu)"]),
    (duplicate_output, ["[unique-names] tensor 'y' is defined again as an output of node 'b' (Neg)"]),
    (undefined_input, ["[undefined-input] node 'add' (Add) input 1 'nowhere' is not produced by any node, initializer or graph input"]),
    (initializer_elem_type, ["[shape-inference]", "node 'conv' (Conv)", "'w' is int32"]),
    (declared_type_mismatch, ["[type] graph input 'bias' is declared float32 but its initializer holds int64"]),
    (bad_attribute_type, ["[attribute] node 'conv' (Conv) attribute 'strides' has type floats; Conv-11 expects ints"]),
    (unknown_and_missing_attribute, ["[attribute] node 'cast' (Cast) attribute 'bogus' is not an attribute of Cast-",
                                     "[attribute] node 'cast' (Cast) lacks attribute 'to' (int), which Cast-"]),
    (opset_too_new, ["[opset-import] ai.onnx opset 99 is newer than the newest ONNX opset kiln knows"]),
    (not_an_onnx_operator, ["[operator-schema] node 'typo' (Relux): ai.onnx has no operator 'Relux'"]),
    (operator_newer_than_opset, ["[operator-schema] node 'gelu' (Gelu): ai.onnx has no operator 'Gelu' at opset 13 (it first appears in opset 20)"]),
    (too_many_inputs, ["[operator-inputs] node 'relu' (Relu) has 2 inputs; Relu-14 takes 1"]),
    (missing_external_file, ["[external-data] initializer 'w': cannot open external data file", "weights.bin"]),
    (short_external_file, ["[external-data] initializer 'w': external data range [0, +12) is past the end of", "(8 bytes)"]),
    (matmul_mismatch, ["[shape-inference]", "node 'mm' (MatMul)", "3", "4"]),
    (initializer_size, ["[tensor-data] initializer 'w': raw_data has 8 bytes but shape 3 of float32 needs 12"]),
    (undeclared_domain, ["[opset-import] node 'thing' (Thing) uses domain 'not.imported', which the model does not import"]),
    (output_not_produced, ["[graph-output] graph output 'z' is not produced by any node, initializer or input"]),
]


@pytest.mark.parametrize("make, expected", DEFECTS, ids=[d[0].__name__ for d in DEFECTS])
def test_check_finds_planted_defect(kiln, tmp_path, make, expected):
    r = run_check(kiln, make(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    for text in expected:
        assert text in r.stdout, f"{text!r} not in:\n{r.stdout}"


def test_check_lists_every_problem_at_once(kiln, tmp_path):
    conv = helper.make_node("Conv", ["x", "w"], ["c"], name="conv")
    conv.attribute.append(helper.make_attribute("strides", [1.0, 1.0]))
    nodes = [conv, helper.make_node("Add", ["c", "nowhere"], ["s"], name="add"),
             helper.make_node("MatMul", ["v", "m"], ["y"], name="mm")]
    path = save(tmp_path, nodes, [float_input("x", [1, 1, 4, 4]), float_input("v", [2, 3])],
                [float_input("s", None), float_input("y", None)], [weights("w", [1, 1, 3, 3]), weights("m", [4, 5])])
    r = run_check(kiln, path)
    assert r.returncode == 1
    assert "[attribute] node 'conv' (Conv) attribute 'strides'" in r.stdout
    assert "[undefined-input] node 'add' (Add) input 1 'nowhere'" in r.stdout
    assert f"{path}: 2 problems" in r.stdout
    # The model does not load, so kiln's own checks say why they did not run.
    assert "kiln's own checks (supported operators, shape inference) did not run" in r.stdout


def test_check_unsupported_op_prints_plugin_skeletons(kiln, tmp_path):
    r = run_check(kiln, unsupported_op(tmp_path))
    assert r.returncode == 3, r.stdout + r.stderr  # only unsupported operators: exit code 3, as kiln inspect
    assert "[kiln-support] node 'fancy' (my.ops::FancyScale): operator my.ops::FancyScale at opset 1 is not supported" in r.stdout
    out = r.stdout
    for text in [
        "//   input 0: 'x' float32[2x3]", "//   input 1: 'w' float32[3]", "//   output 0: 'y' float32[2x3]",
        "struct FancyScale : kiln::SimplePlugin<FancyScale>",
        'const float alpha = fields().getFloat("alpha", 0.5f);',
        'const std::string mode = fields().getString("mode", "fast");',
        'const std::vector<int64_t> pads = fields().getInts("pads", {1, 2});',
        'KILN_REGISTER_SIMPLE_PLUGIN(FancyScale, "FancyScale", "1", "my.ops");',
        '@kiln.custom_op("my.ops", "FancyScale")',
        'def fancy_scale(x, w, *, alpha=0.5, mode="fast", pads=(1, 2)):',
    ]:
        assert text in out, f"{text!r} not in:\n{out}"


def two_output_op(tmp_path):
    """kiln.test::ScaleCrop, the test plugin library's two-output plugin (tests/plugins)."""
    node = helper.make_node("ScaleCrop", ["x", "bias"], ["y", "crop"], name="scale_crop", domain="kiln.test",
                            alpha=2.0, crop_divisor=3, plugin_version="2", names=["a", "b"])
    return save(tmp_path, [node], [float_input("x", [2, 4])], [float_input("y", None), float_input("crop", None)],
                [weights("bias", [4])], domains=["kiln.test"])


def skeletons(out, node):
    """The C++ and the Python skeleton printed for the node."""
    cpp_start = out.index("plugin skeleton:\n") + len("plugin skeleton:\n")
    python_start = out.index(f"# for node '{node}'")
    return out[cpp_start:python_start], out[python_start:]


def compile_cpp(repo_root, tmp_path, source):
    (tmp_path / "plugin.cpp").write_text(source)
    return subprocess.run(["g++", "-std=c++20", "-fsyntax-only", "-Wall", "-Werror", "-Wno-unused-variable",
                           f"-I{repo_root / 'include'}", str(tmp_path / "plugin.cpp")],
                          capture_output=True, text=True, timeout=TIMEOUT_S)


@pytest.mark.parametrize("make, node", [(unsupported_op, "fancy"), (two_output_op, "scale_crop")])
def test_skeletons_compile(kiln, repo_root, tmp_path, make, node):
    cpp, python = skeletons(run_check(kiln, make(tmp_path)).stdout, node)
    compile(python, "skeleton.py", "exec")  # raises SyntaxError if the text is not Python
    r = compile_cpp(repo_root, tmp_path, cpp)
    assert r.returncode == 0, r.stderr + cpp


def test_two_output_skeleton_is_a_full_plugin(kiln, tmp_path):
    cpp, python = skeletons(run_check(kiln, two_output_op(tmp_path)).stdout, "scale_crop")
    for text in ["class ScaleCrop : public kiln::IPlugin", "int getNbOutputs() const override { return 2; }",
                 'std::string getPluginVersion() const override { return "2"; }',
                 'const float alpha = fields_.getFloat("alpha", 2.0f);',
                 'const int64_t crop_divisor = fields_.getInt("crop_divisor", 3);',
                 'const std::vector<std::string> names = fields_.getStrings("names");',
                 "KILN_REGISTER_PLUGIN(ScaleCropCreator);", "//   output 1: 'crop'"]:
        assert text in cpp, f"{text!r} not in:\n{cpp}"
    assert "plugin_version" not in cpp.split("#include")[1]  # the version selects the plugin; it is no field
    assert '@kiln.custom_op("kiln.test", "ScaleCrop", num_outputs=2, version="2")' in python
    assert "def scale_crop(x, bias, *, alpha=2.0, crop_divisor=3, names=(\"a\", \"b\")):" in python


def test_kiln_plugin_node_is_no_onnx_defect(kiln, tmp_path):
    """kiln's `Plugin` node (the simple path of docs/plugins.md) is not an unknown ai.onnx operator."""
    node = helper.make_node("Plugin", ["x"], ["y"], name="clamp", info='{"lo": -0.5}')
    node.attribute.append(helper.make_attribute("name", "NoSuchClamp"))
    r = run_check(kiln, save(tmp_path, [node], [float_input("x", [2])], [float_input("y", [2])]))
    assert r.returncode == 3, r.stdout + r.stderr
    assert "[operator-schema]" not in r.stdout and "[kiln-support] node 'clamp'" in r.stdout


def test_check_with_the_plugin_loaded(kiln, build_dir, tmp_path):
    library = build_dir / "tests" / "plugins" / "libkiln_test_plugins.so"
    if not library.is_file():
        pytest.skip(f"test plugin library not built: {library}")
    path = two_output_op(tmp_path)
    assert run_check(kiln, path).returncode == 3
    r = run_check(kiln, path, "--plugins", library)
    assert r.returncode == 0 and "no problems found" in r.stdout, r.stdout + r.stderr
    # A plugin op in the default domain is no ONNX operator: a problem unless a plugin runs it.
    node = helper.make_node("TestClamp", ["x"], ["y"], name="clamp")
    path = save(tmp_path, [node], [float_input("x", [2])], [float_input("y", [2])], name="clamp.onnx")
    r = run_check(kiln, path)
    assert r.returncode == 1 and "[operator-schema] node 'clamp' (TestClamp): ai.onnx has no operator 'TestClamp'" in r.stdout
    r = run_check(kiln, path, "--plugins", library)
    assert r.returncode == 0 and "no problems found" in r.stdout, r.stdout + r.stderr


def test_check_shapes_option(kiln, tmp_path):
    """A dynamic input: clean at its declared shape, a MatMul mismatch at the shape given."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    path = save(tmp_path, nodes, [float_input("x", ["n", "k"])], [float_input("y", None)], [weights("w", [3, 4])])
    assert run_check(kiln, path).returncode == 0
    assert run_check(kiln, path, "--shapes", "x:2x3").returncode == 0
    r = run_check(kiln, path, "--shapes", "x:2x5")
    assert r.returncode == 1 and "[shape-inference]" in r.stdout and "node 'mm' (MatMul)" in r.stdout, r.stdout
    r = run_check(kiln, path, "--shapes", "nope:2x3")
    assert r.returncode == 1 and "--shapes names 'nope', which is not an input of the model" in r.stderr


def test_check_unreadable_file(kiln, tmp_path):
    r = run_check(kiln, tmp_path / "absent.onnx")
    assert r.returncode == 1 and "absent.onnx: cannot open the model file" in r.stderr
    (tmp_path / "junk.onnx").write_bytes(b"\xff\xff\xff not protobuf")
    r = run_check(kiln, tmp_path / "junk.onnx")
    assert r.returncode == 1 and "not a valid ONNX model" in r.stderr


def loop_model(tmp_path):
    """A Loop whose body reads an outer-scope tensor: valid, so check must not flag the outer read."""
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "step"], ["acc_out"], name="body_add"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         float_input("acc_in", [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), float_input("acc_out", [2])])
    nodes = [helper.make_node("Neg", ["x"], ["step"], name="neg"),
             helper.make_node("Loop", ["trips", "", "x"], ["y"], name="loop", body=body)]
    trips = numpy_helper.from_array(np.array(3, dtype=np.int64), "trips")
    return save(tmp_path, nodes, [float_input("x", [2])], [float_input("y", [2])], [trips])


def float8_cast(tmp_path):
    """Element types newer than Debian's libonnx (float8, opset 19) are valid ONNX."""
    nodes = [helper.make_node("Cast", ["x"], ["y"], name="cast", to=TensorProto.FLOAT8E4M3FN)]
    return save(tmp_path, nodes, [float_input("x", [2])], [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [2])],
                opset=19)


def test_check_clean_small_models(kiln, tmp_path):
    for make in (relu_chain, loop_model, float8_cast):
        r = run_check(kiln, make(tmp_path))
        assert r.returncode == 0, r.stdout + r.stderr
        assert "no problems found" in r.stdout


@pytest.mark.heavy
@pytest.mark.parametrize("name", ["resnet50", "bert_encoder", "lstm"])
def test_check_clean_exported_models(kiln, model_exporter, name):
    path = model_exporter([name]) / f"{name}.onnx"
    r = run_check(kiln, path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{path}: no problems found" in r.stdout


ONNX_TEST_DATA = pathlib.Path("/usr/share/libonnx-testdata/data")


@pytest.mark.heavy
@pytest.mark.skipif(not ONNX_TEST_DATA.is_dir(), reason="Debian's libonnx-testdata is not installed (scripts/setup)")
def test_check_passes_onnx_test_models(kiln):
    """ONNX's own test models are valid: none may break an ONNX rule; kiln may lack an operator
    (exit code 3, [kiln-support] lines only)."""
    models = sorted(ONNX_TEST_DATA.glob("*/*/model.onnx"))
    assert len(models) > 1000
    wrong = []
    for path in models:
        r = run_check(kiln, path)
        rules = {line.split("]")[0] + "]" for line in r.stdout.splitlines() if line.startswith("  [")}
        if r.returncode not in (0, 3) or not rules <= {"  [kiln-support]"}:
            wrong.append(f"{path}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    assert not wrong, "\n".join(wrong[:5])
