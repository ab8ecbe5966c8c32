"""`kiln build --fp16`: MatMul, Gemm and fused Linear layers keep their weights in FP16 (packed once,
widened to FP32 as the products read them), `kiln inspect` shows them as fp16 with their f16w_
kernels, the outputs match the same network computed with FP16-rounded weights, a plan is smaller,
and --layer-precisions / --precision-constraints are obeyed (docs/precision.md)."""
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from test_bf16_cli import layer_precisions, linear_model, outputs, run


def rounded_to_half(model_path, out_path, names):
    """The same model with the initializers `names` (the weights) rounded to FP16 and back: what
    FP16 weights compute (biases stay FP32)."""
    model = onnx.load(model_path)
    for init in model.graph.initializer:
        if init.name not in names:
            continue
        values = numpy_helper.to_array(init)
        init.CopyFrom(numpy_helper.from_array(values.astype(np.float16).astype(np.float32), init.name))
    onnx.save(model, out_path)
    return out_path


def test_linear_layers_keep_fp16_weights(kiln, tmp_path):
    model = linear_model(tmp_path / "m.onnx")
    plan = tmp_path / "m.kiln"
    r = run(kiln, "build", model, "-o", plan, "--fp16", "--verbose")
    assert r.returncode == 0, r.stderr
    assert "not implemented" not in r.stderr, r.stderr
    precisions = layer_precisions(kiln, plan)
    assert precisions.get("fc1") == "fp16" and precisions.get("fc2") == "fp16", precisions
    inspect = run(kiln, "inspect", plan).stdout
    assert "f16w_fused_matmul_packed_b_" in inspect and "f16w_gemm_packed_b_" in inspect, inspect
    x = np.random.default_rng(1).uniform(-1, 1, (4, 64)).astype(np.float32)
    got = outputs(kiln, plan, x, tmp_path / "fp16")
    # Against onnxruntime on FP16-rounded weights: only the FP32 sums' order differs.
    half = rounded_to_half(model, tmp_path / "half.onnx", {"w1", "w2"})
    want = ort.InferenceSession(str(half), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    # And against the FP32 weights within FP16's rounding (2^-11 relative per weight).
    exact = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert not np.array_equal(got, exact)
    assert np.max(np.abs(got - exact)) < 96 * 64 * 2.0 ** -11 * 4


def test_fp16_plan_holds_half_the_weight_bytes(kiln, tmp_path):
    """A 1024 x 1024 Linear layer: 4 MiB of weights in FP32, 2 MiB in FP16."""
    rng = np.random.default_rng(2)
    w = numpy_helper.from_array(rng.uniform(-1, 1, (1024, 1024)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024])], [w])
    model = tmp_path / "big.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
    fp32, fp16 = tmp_path / "fp32.kiln", tmp_path / "fp16.kiln"
    assert run(kiln, "build", model, "-o", fp32).returncode == 0
    assert run(kiln, "build", model, "-o", fp16, "--fp16").returncode == 0
    saved = fp32.stat().st_size - fp16.stat().st_size
    assert 1.9 * 2**20 < saved < 2.1 * 2**20, (fp32.stat().st_size, fp16.stat().st_size)
    x = rng.uniform(-1, 1, (1, 1024)).astype(np.float32)
    got = outputs(kiln, fp16, x, tmp_path / "o")  # one row: the matrix-vector product on halves
    want = x @ numpy_helper.to_array(w).astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_fp16_constraints(kiln, tmp_path):
    model = linear_model(tmp_path / "m.onnx")
    plan = tmp_path / "m.kiln"
    r = run(kiln, "build", model, "-o", plan, "--fp16", "--layer-precisions", "fc2:fp32",
            "--precision-constraints", "obey", "--verbose")
    assert r.returncode == 0, r.stderr
    assert "precision fp32: layer 'fc2' is constrained to fp32" in r.stdout, r.stdout
    precisions = layer_precisions(kiln, plan)
    assert precisions.get("fc1") == "fp16" and precisions.get("fc2") == "fp32", precisions
    # A Sigmoid before the Linear layer stays apart and has no FP16-weight kernel: asked for fp16
    # under obey, the build names it; under prefer, it warns and runs FP32.
    w = numpy_helper.from_array(np.ones((8, 8), np.float32), "w")
    graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["s"], name="sig"),
                               helper.make_node("MatMul", ["s", "w"], ["y"], name="fc")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], [w])
    sig = tmp_path / "sig.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), sig)
    r = run(kiln, "build", sig, "-o", plan, "--fp16", "--layer-precisions", "sig:fp16",
            "--precision-constraints", "obey")
    assert r.returncode != 0, r.stdout
    assert "layer 'sig' is constrained to fp16 but no FP16-weight kernel takes" in r.stderr, r.stderr
    r = run(kiln, "build", sig, "-o", plan, "--fp16", "--layer-precisions", "sig:fp16")
    assert r.returncode == 0 and "it runs in float32" in r.stderr, r.stderr
    assert layer_precisions(kiln, plan) == {"sig": "fp32", "fc": "fp16"}
    r = run(kiln, "build", model, "-o", plan, "--layer-precisions", "fc1:fp16")
    assert r.returncode != 0 and "asks for precision float16 but the builder flag kFP16 is not set" in r.stderr
