"""`kiln build --bf16` with `--layer-precisions` and `--precision-constraints`, `kiln inspect`'s
per-layer precision, and the results of a BF16 plan against ONNX Runtime's FP32 ones within
BF16's rounding (docs/precision.md)."""
import json
import re
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

HAS_BF16 = "avx512_bf16" in open("/proc/cpuinfo").read()


def run(kiln, *args):
    return subprocess.run([str(kiln), *map(str, args)], capture_output=True, text=True, timeout=300)


def linear_model(path):
    """x [4, 64] -> fc1 (MatMul + Add) -> Relu -> fc2 (Gemm) -> y."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.uniform(-1, 1, s).astype(np.float32), n)
             for n, s in (("w1", (64, 96)), ("b1", (96,)), ("w2", (40, 96)), ("b2", (40,)))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m"], name="fc1"),
             helper.make_node("Add", ["m", "b1"], ["a"], name="bias1"),
             helper.make_node("Relu", ["a"], ["h"], name="relu"),
             helper.make_node("Gemm", ["h", "w2", "b2"], ["y"], name="fc2", transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 40])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def layer_precisions(kiln, plan):
    r = run(kiln, "inspect", plan)
    assert r.returncode == 0, r.stderr
    return {m.group(1): m.group(2) for m in re.finditer(r"\d+  (\S+) \([^)]*\)  kernel \S+ \(\S+\)  precision (\S+)", r.stdout)}


def outputs(kiln, plan, x, tmp_path):
    tmp_path.mkdir(parents=True, exist_ok=True)
    np.save(tmp_path / "x.npy", x)
    r = run(kiln, "run", plan, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    manifest = json.loads((tmp_path / "out" / "outputs.json").read_text())
    return np.load(tmp_path / "out" / manifest["outputs"][0]["file"])


@pytest.mark.skipif(not HAS_BF16, reason="this CPU has no AVX512_BF16")
def test_constrained_layers_run_bf16_and_fp32_as_asked(kiln, tmp_path):
    model = linear_model(tmp_path / "m.onnx")
    plan = tmp_path / "m.kiln"
    r = run(kiln, "build", model, "-o", plan, "--bf16", "--layer-precisions", "fc1:bf16,fc2:fp32",
            "--precision-constraints", "obey", "--verbose")
    assert r.returncode == 0, r.stderr
    assert "precision fp32: layer 'fc2' is constrained to fp32" in r.stdout, r.stdout
    precisions = layer_precisions(kiln, plan)
    assert precisions.get("fc1") == "bf16", precisions  # fc1 (MatMul, with its bias and Relu fused)
    assert precisions.get("fc2") == "fp32", precisions
    assert "flags      bf16 obey-precision-constraints" in run(kiln, "inspect", plan).stdout
    x = np.random.default_rng(1).uniform(-1, 1, (4, 64)).astype(np.float32)
    want = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = outputs(kiln, plan, x, tmp_path)
    # fc1's 64 products each off by at most 2^-7 of |x w| (< 1): 0.5 on h, times fc2's 96 weights < 1.
    assert np.max(np.abs(got - want)) < 96 * 64 * 2.0 ** -7
    fp32 = tmp_path / "fp32.kiln"
    assert run(kiln, "build", model, "-o", fp32).returncode == 0
    assert not np.array_equal(got, outputs(kiln, fp32, x, tmp_path / "f")), "the BF16 plan computed exactly as FP32"


def test_layer_precision_errors_name_the_problem(kiln, tmp_path):
    model = linear_model(tmp_path / "m.onnx")
    plan = tmp_path / "m.kiln"
    r = run(kiln, "build", model, "-o", plan, "--bf16", "--layer-precisions", "fc1:fp64")
    assert r.returncode != 0 and "layer precision 'fc1:fp64' is not NAME:TYPE" in r.stderr, r.stderr
    r = run(kiln, "build", model, "-o", plan, "--bf16", "--layer-precisions", "nothere:fp32")
    assert r.returncode != 0 and "the model has no layer named 'nothere'" in r.stderr, r.stderr
    r = run(kiln, "build", model, "-o", plan, "--layer-precisions", "fc1:bf16")
    assert r.returncode != 0 and "asks for precision bfloat16 but the builder flag kBF16 is not set" in r.stderr, r.stderr
    r = run(kiln, "build", model, "-o", plan, "--bf16", "--precision-constraints", "maybe")
    assert r.returncode != 0 and "--precision-constraints takes obey or prefer, not 'maybe'" in r.stderr, r.stderr
