"""kiln extract: sub-models of ResNet-50, a BERT encoder, and Loop / If models whose bodies read
outer-scope tensors. Each result passes onnx.checker's full check, and its outputs, run by
onnxruntime and by kiln on the cut tensors' values, match those tensors in the full model run by
onnxruntime. Also: external data, inferred value infos, and the errors."""
import json
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

TIMEOUT_S = 300


def extract(kiln, model, inputs, outputs, out):
    command = [str(kiln), "extract", str(model), "--inputs", ",".join(inputs), "--outputs", ",".join(outputs), "-o", str(out)]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)


def ort_tensors(model_path, feeds, names):
    """The named tensors of the full model, run by onnxruntime with them marked as outputs."""
    model = onnx.load(str(model_path))
    del model.graph.output[:]
    model.graph.output.extend([helper.make_empty_tensor_value_info(n) for n in names])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip(names, session.run(names, feeds)))


def kiln_run(kiln, model_path, feeds, tmp_path):
    """The model's outputs run by `kiln run` on the given inputs (name -> array)."""
    args = [str(kiln), "run", str(model_path), "--output-dir", str(tmp_path / "kiln_out")]
    for i, (name, value) in enumerate(feeds.items()):
        file = tmp_path / f"input_{i}.npy"
        np.save(file, value)
        args += ["--input", f"{name}={file}"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert r.returncode == 0, r.stderr
    listing = json.loads((tmp_path / "kiln_out" / "outputs.json").read_text())["outputs"]
    return {o["name"]: np.load(tmp_path / "kiln_out" / o["file"]) for o in listing}


def check_sub_model(kiln, tmp_path, full, feeds, inputs, outputs, rtol=1e-4, atol=1e-4):
    """Extracts, checks with onnx.checker, and compares ORT and kiln on the sub-model against the
    full model's tensors. Returns the sub-model."""
    sub_path = tmp_path / "sub.onnx"
    r = extract(kiln, full, inputs, outputs, sub_path)
    assert r.returncode == 0, r.stderr
    onnx.checker.check_model(str(sub_path), full_check=True)
    reference = ort_tensors(full, feeds, inputs + outputs)
    sub_feeds = {n: reference[n] for n in inputs}
    session = ort.InferenceSession(str(sub_path), providers=["CPUExecutionProvider"])
    got = dict(zip(outputs, session.run(outputs, sub_feeds)))
    by_kiln = kiln_run(kiln, sub_path, sub_feeds, tmp_path)
    for name in outputs:
        # ORT itself fuses the sub-model differently from the whole: both within float32 rounding
        # of the reference (as tests/python/test_models.py: rtol plus atol of the tensor's scale).
        scale = float(np.max(np.abs(reference[name]))) if reference[name].size else 0.0
        for engine, value in (("onnxruntime", got[name]), ("kiln", by_kiln[name])):
            np.testing.assert_allclose(value, reference[name], rtol=rtol, atol=atol * max(scale, 1.0),
                                       err_msg=f"{engine}, tensor {name}")
    sub = onnx.load(str(sub_path))
    assert [i.name for i in sub.graph.input] == inputs and [o.name for o in sub.graph.output] == outputs
    return sub


def node_output(model, op_type, occurrence):
    """The first output of the model's occurrence-th node of that op type."""
    nodes = [n for n in model.graph.node if n.op_type == op_type]
    return nodes[occurrence].output[0]


@pytest.mark.heavy
def test_extract_resnet50_stage(kiln, model_exporter, tmp_path):
    full = model_exporter(["resnet50"]) / "resnet50.onnx"
    model = onnx.load(str(full), load_external_data=False)
    cut_in, cut_out = node_output(model, "Relu", 3), node_output(model, "Add", 5)  # from block 1 to stage 2's end
    feeds = {"input": np.random.default_rng(0).standard_normal((1, 3, 224, 224), dtype=np.float32)}
    sub = check_sub_model(kiln, tmp_path, full, feeds, [cut_in], [cut_out])
    ops = {n.op_type for n in sub.graph.node}
    assert ops <= {"Conv", "Relu", "Add"} and 0 < len(sub.graph.node) < len(model.graph.node)
    assert all(i.name != "input" for i in sub.graph.input)


@pytest.mark.heavy
def test_extract_bert_encoder_layer(kiln, model_exporter, tmp_path):
    full = model_exporter(["bert_encoder"]) / "bert_encoder.onnx"
    model = onnx.load(str(full), load_external_data=False)
    # The hidden state after the embeddings' LayerNorm, to the first layer's output; the layer's
    # attention also needs the mask, computed from the graph input attention_mask.
    norms = [n for n in model.graph.node if n.op_type == "LayerNormalization"]
    if norms:
        cut_in, cut_out = norms[0].output[0], norms[2].output[0]
    else:  # LayerNorm exported as its primitive ops: the hidden states are the Adds after each Mul by gamma
        cut_in, cut_out = node_output(model, "Add", 2), node_output(model, "Add", 8)
    rng = np.random.default_rng(0)
    feeds = {"input_ids": rng.integers(0, 30522, (2, 16), dtype=np.int64), "attention_mask": np.ones((2, 16), np.int64)}
    feeds["attention_mask"][1, 8:] = 0
    check_sub_model(kiln, tmp_path, full, feeds, [cut_in, "attention_mask"], [cut_out], rtol=1e-4, atol=1e-4)


def float_info(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def save(tmp_path, nodes, inputs, outputs, initializers=(), name="full.onnx", **save_args):
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(initializers)),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    path = tmp_path / name
    onnx.save(model, str(path), **save_args)
    return path


def loop_model(tmp_path, **save_args):
    """x -> Mul(2) -> s; bias = s + 1 (read only inside the Loop body); y = relu(loop(s) + bias)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "bias"], ["acc_out"], name="body_add"),  # bias: outer scope
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         float_info("acc_in", [2, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), float_info("acc_out", [2, 3])])
    nodes = [helper.make_node("Mul", ["x", "two"], ["s"], name="double"),
             helper.make_node("Add", ["s", "one"], ["bias"], name="bias"),
             helper.make_node("Loop", ["trips", "", "s"], ["looped"], name="loop", body=body),
             helper.make_node("Relu", ["looped"], ["y"], name="relu")]
    inits = [numpy_helper.from_array(np.array(3, np.int64), "trips"), numpy_helper.from_array(np.full((2, 3), 2, np.float32), "two"),
             numpy_helper.from_array(np.full((2, 3), 1, np.float32), "one")]
    return save(tmp_path, nodes, [float_info("x", [2, 3])], [float_info("y", [2, 3])], inits, **save_args)


def test_extract_loop_keeps_outer_scope_tensors(kiln, tmp_path):
    full = loop_model(tmp_path)
    feeds = {"x": np.random.default_rng(1).standard_normal((2, 3), dtype=np.float32)}
    sub = check_sub_model(kiln, tmp_path, full, feeds, ["s"], ["y"])
    assert [n.name for n in sub.graph.node] == ["bias", "loop", "relu"]  # bias: read by the body only
    assert sorted(i.name for i in sub.graph.initializer) == ["one", "trips"]
    shape = [d.dim_value for d in sub.graph.input[0].type.tensor_type.shape.dim]
    assert shape == [2, 3]  # 's' has no value_info in the model: kiln inferred it


def test_extract_if_branches(kiln, tmp_path):
    then_branch = helper.make_graph([helper.make_node("Mul", ["h", "h"], ["t"], name="then_mul")], "then", [],
                                    [float_info("t", [4])])
    else_branch = helper.make_graph([helper.make_node("Neg", ["g"], ["e"], name="else_neg")], "else", [],
                                    [float_info("e", [4])])
    nodes = [helper.make_node("Sigmoid", ["x"], ["h"], name="sig"),
             helper.make_node("Tanh", ["x"], ["g"], name="tanh"),
             helper.make_node("ReduceSum", ["x"], ["total"], name="sum", keepdims=0),
             helper.make_node("Greater", ["total", "zero"], ["positive"], name="gt"),
             helper.make_node("If", ["positive"], ["chosen"], name="if", then_branch=then_branch, else_branch=else_branch),
             helper.make_node("Add", ["chosen", "x"], ["y"], name="out")]
    full = save(tmp_path, nodes, [float_info("x", [4])], [float_info("y", [4])],
                [numpy_helper.from_array(np.array(0, np.float32), "zero")])
    for values in ([1.0, 2.0, -0.5, 0.25], [-1.0, -2.0, 0.5, 0.25]):
        feeds = {"x": np.array(values, np.float32)}
        sub = check_sub_model(kiln, tmp_path, full, feeds, ["h", "g", "positive"], ["chosen"])
        assert [n.name for n in sub.graph.node] == ["if"]


def test_extract_external_data_is_copied(kiln, tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    full = loop_model(source, save_as_external_data=True, all_tensors_to_one_file=True, location="full.bin",
                      size_threshold=0)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    r = extract(kiln, full, ["s"], ["y"], out_dir / "sub.onnx")
    assert r.returncode == 0, r.stderr
    assert (out_dir / "sub.onnx.data").is_file()
    onnx.checker.check_model(str(out_dir / "sub.onnx"), full_check=True)
    sub = onnx.load(str(out_dir / "sub.onnx"))  # loads the external data from out/
    s = np.random.default_rng(2).standard_normal((2, 3), dtype=np.float32)
    got = ort.InferenceSession(str(out_dir / "sub.onnx"), providers=["CPUExecutionProvider"]).run(["y"], {"s": s})[0]
    np.testing.assert_allclose(got, np.maximum(s + 3 * (s + 1), 0), rtol=1e-6)
    raw = onnx.load(str(out_dir / "sub.onnx"), load_external_data=False)
    for init in raw.graph.initializer:
        assert init.data_location == TensorProto.EXTERNAL
        assert {e.key: e.value for e in init.external_data}["location"] == "sub.onnx.data"
    assert {i.name: numpy_helper.to_array(i).tolist() for i in sub.graph.initializer} == {"one": [[1.0] * 3] * 2, "trips": 3}


def test_extract_sorts_nodes_of_an_unsorted_model(kiln, tmp_path):
    """kiln runs a model whose nodes are out of order; the sub-model is in order for onnx.checker."""
    nodes = [helper.make_node("Relu", ["t2"], ["y"], name="last"), helper.make_node("Neg", ["t1"], ["t2"], name="middle"),
             helper.make_node("Sigmoid", ["x"], ["t1"], name="first")]
    model = helper.make_model(helper.make_graph(nodes, "g", [float_info("x", [3])], [float_info("y", [3])]),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, tmp_path / "unsorted.onnx")
    r = extract(kiln, tmp_path / "unsorted.onnx", ["x"], ["y"], tmp_path / "sub.onnx")
    assert r.returncode == 0, r.stderr
    onnx.checker.check_model(str(tmp_path / "sub.onnx"), full_check=True)
    assert [n.name for n in onnx.load(str(tmp_path / "sub.onnx")).graph.node] == ["first", "middle", "last"]


def test_extract_refuses_uncomputable_output(kiln, tmp_path):
    full = loop_model(tmp_path)
    r = extract(kiln, full, ["bias"], ["y"], tmp_path / "sub.onnx")
    assert r.returncode == 1
    assert ("output 'y' cannot be computed from the given inputs: it needs tensor 'x', a graph input of the model "
            "(add it to --inputs)") in r.stderr
    assert not (tmp_path / "sub.onnx").exists()
    r = extract(kiln, full, ["s"], ["nothing"], tmp_path / "sub.onnx")
    assert r.returncode == 1 and "tensor 'nothing' is not in the model" in r.stderr
