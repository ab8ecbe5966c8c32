"""kiln inspect --graph / --graph-onnx: the optimized network and the ONNX model as imported,
rendered by Graphviz; the SVG's structure is read back (one node per layer, input and output,
labels with op types, kernels, fused nodes and shapes, edges labelled with shapes) and checked
against what `kiln inspect PLAN` prints."""
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

TIMEOUT_S = 300
SVG = "{http://www.w3.org/2000/svg}"

pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed (scripts/setup)")


def run(kiln, *args, env=None):
    return subprocess.run([str(kiln), *map(str, args)], capture_output=True, text=True, timeout=TIMEOUT_S, env=env)


@pytest.fixture
def conv_model(tmp_path):
    """conv1 + relu1, conv2 + residual add + relu2, global average pool: kiln fuses it to 4 layers."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("w1", (32, 3, 3, 3)), ("b1", (32,)), ("w2", (32, 32, 3, 3)))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y"], name="relu2"),
             helper.make_node("GlobalAveragePool", ["y"], ["p"], name="gap")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 32, 1, 1])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "conv.onnx"
    onnx.save(model, path)
    return path


def svg_nodes(path):
    """Each drawn node's lines of text, by its DOT id (the SVG <title>)."""
    root = ET.parse(path).getroot()
    nodes = {}
    for g in root.iter(f"{SVG}g"):
        if g.get("class") == "node":
            nodes[g.find(f"{SVG}title").text] = [t.text.replace("\xa0", " ") for t in g.iter(f"{SVG}text")]
    return nodes


def svg_edge_labels(path):
    root = ET.parse(path).getroot()
    return [[t.text for t in g.iter(f"{SVG}text")] for g in root.iter(f"{SVG}g") if g.get("class") == "edge"]


def plan_layers(kiln, plan):
    """name -> "kernel ID (ISA)" of each layer, as `kiln inspect PLAN` prints them."""
    out = run(kiln, "inspect", plan).stdout
    return {name: f"kernel {kernel} ({isa})"
            for name, kernel, isa in re.findall(r"^  \d+  (\S+) \(\S+\)  kernel (\S+) \((\S+)\)", out, re.M)}


def test_graph_of_optimized_network(kiln, conv_model, tmp_path):
    r = run(kiln, "inspect", conv_model, "--graph", tmp_path / "net.svg", "--graph-onnx", tmp_path / "onnx.svg")
    assert r.returncode == 0, r.stderr
    optimized, imported = svg_nodes(tmp_path / "net.svg"), svg_nodes(tmp_path / "onnx.svg")
    assert len(imported) == 6 + 2  # six ONNX nodes, the input and the output
    assert sorted(lines[0] for id_, lines in imported.items() if id_.startswith("n")) == sorted(
        ["conv1", "relu1", "conv2", "add", "relu2", "gap"])
    assert imported["n3"] == ["add", "Add", "out float32[1x32x32x32]"]
    assert imported["input0"] == ["input", "x", "float32[1x3x32x32]"]
    layers = {lines[0]: lines for id_, lines in optimized.items() if id_.startswith("n")}
    assert len(optimized) == len(layers) + 2 and len(layers) < 6  # fused: fewer layers than nodes
    conv2 = layers["conv2"]
    assert "fused conv2, add, relu2" in conv2
    if conv2[1] == "kiln::NchwcConv":  # the blocked layout (docs/performance.md), where the CPU has it
        assert conv2[2].startswith("kernel f32_nchwc_conv") and "layout nchwc16, precision fp32" in conv2
        out = "float32[1x2x32x32x16]"
    else:
        assert conv2[1] == "kiln::FusedConv" and "layout plain, precision fp32" in conv2
        out = "float32[1x32x32x32]"
    assert f"out {out}" in conv2
    edges = svg_edge_labels(tmp_path / "net.svg")
    assert ["float32[1x3x32x32]"] in edges and [out] in edges
    assert ["float32[1x32x1x1]"] in edges  # into the output


def test_graph_of_plan_matches_inspect(kiln, conv_model, tmp_path):
    plan = tmp_path / "conv.kiln"
    assert run(kiln, "build", conv_model, "-o", plan).returncode == 0
    r = run(kiln, "inspect", plan, "--graph", tmp_path / "plan.svg")
    assert r.returncode == 0, r.stderr
    drawn = {lines[0]: lines[2] for id_, lines in svg_nodes(tmp_path / "plan.svg").items() if id_.startswith("n")}
    layers = plan_layers(kiln, plan)
    assert drawn == layers and len(layers) > 0


def test_graph_dot_and_png(kiln, conv_model, tmp_path):
    assert run(kiln, "inspect", conv_model, "--graph", tmp_path / "net.dot", "--graph-onnx", tmp_path / "m.png").returncode == 0
    dot = (tmp_path / "net.dot").read_text()
    assert dot.startswith("digraph kiln {") and dot.count("->") >= 4 and "kiln::NchwcConv" in dot
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_graph_errors(kiln, conv_model, tmp_path):
    r = run(kiln, "inspect", conv_model, "--graph", tmp_path / "net.jpg")
    assert r.returncode == 1 and "--graph writes .dot, .svg or .png files, not '.jpg'" in r.stderr
    plan = tmp_path / "conv.kiln"
    assert run(kiln, "build", conv_model, "-o", plan).returncode == 0
    r = run(kiln, "inspect", plan, "--graph-onnx", tmp_path / "m.svg")
    assert r.returncode == 1 and "--graph-onnx needs an ONNX model" in r.stderr
    r = run(kiln, "inspect", conv_model, "--graph", tmp_path / "net.svg", env={**os.environ, "PATH": str(tmp_path)})
    assert r.returncode == 1 and "needs Graphviz's `dot`, which is not on PATH" in r.stderr
    assert not (tmp_path / "net.svg").exists()
