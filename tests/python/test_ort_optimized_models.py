"""Models as onnxruntime saves them optimized (SessionOptions.optimized_model_filepath) run in kiln
(issue 21, item 2).

MobileNetV2 and the BERT encoder (tests/models/export_models.py) are saved by onnxruntime at each
graph optimization level; kiln runs the saved file and must match onnxruntime's run of the original
model. Basic-level files hold only ONNX ops (constants folded, redundant nodes gone); extended ones
com.microsoft FusedConv, FusedMatMul and BiasGelu. At ORT_ENABLE_ALL, onnxruntime rewrites
the CNNs (MobileNetV2, ResNet-50) into its com.microsoft.nchwc blocked layout, whose block size
is that of the machine that saved the file (this one); kiln runs those files, directly and
through a plan (`kiln build`, then `kiln run`), and matches onnxruntime's run of the same file.
The transformer optimizer's outputs (bert, and gpt2 on a decoder with a KV cache) run too.
"""
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import kiln

LEVELS = {"basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
          "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
          "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}


@pytest.fixture(scope="module")
def models(model_exporter):
    return model_exporter(["mobilenet_v2", "bert_encoder"])


def feeds_for(path):
    """Random inputs; free dims are batch 2, sequence 16; an attention mask pads half of the last row."""
    rng = np.random.default_rng(0)
    feeds = {}
    for value in onnx.load(str(path), load_external_data=False).graph.input:
        shape = [d.dim_value or (2 if axis == 0 else 16) for axis, d in enumerate(value.type.tensor_type.shape.dim)]
        if "mask" in value.name:
            feeds[value.name] = np.ones(shape, np.int64)
            feeds[value.name][-1, shape[-1] // 2:] = 0
        elif value.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            feeds[value.name] = rng.integers(0, 100, shape).astype(np.int64)
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def saved_by_onnxruntime(source, level, out):
    options = ort.SessionOptions()
    options.graph_optimization_level = LEVELS[level]
    options.optimized_model_filepath = str(out)
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    return {(n.domain, n.op_type) for n in onnx.load(str(out)).graph.node if n.domain}


CASES = [("mobilenet_v2", "basic", set()),
         ("mobilenet_v2", "extended", {("com.microsoft", "FusedConv")}),
         ("bert_encoder", "basic", set()),
         ("bert_encoder", "extended", {("com.microsoft", "FusedMatMul"), ("com.microsoft", "BiasGelu")}),
         ("bert_encoder", "all", {("com.microsoft", "FusedMatMul"), ("com.microsoft", "BiasGelu")})]


@pytest.mark.parametrize("name,level,contrib_ops", CASES, ids=[f"{n}-{lv}" for n, lv, _ in CASES])
def test_saved_optimized_model_matches_onnxruntime(models, tmp_path, name, level, contrib_ops):
    source = models / f"{name}.onnx"
    saved = tmp_path / f"{name}_{level}.onnx"
    assert saved_by_onnxruntime(source, level, saved) == contrib_ops
    feeds = feeds_for(source)
    expected = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    actual = kiln.InferenceSession(str(saved), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-5 * np.abs(expected).max())


@pytest.fixture(scope="module")
def cnn_models(model_exporter):
    return model_exporter(["mobilenet_v2", "resnet50"])


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet50"])
def test_level_all_nchwc_file_runs_directly_and_as_a_plan(cnn_models, request, tmp_path, name):
    """The ORT_ENABLE_ALL file (nchwc Conv with the first layer on the plain input, depthwise
    layers, fused Relu / Clip and the residual Adds fused as Sum, MaxPool, GlobalAveragePool,
    ReorderOutput) in a kiln session and as a plan built from it, against onnxruntime's run of
    the same file (and that against its run of the original model)."""
    source = cnn_models / f"{name}.onnx"
    saved = tmp_path / f"{name}_all.onnx"
    ops = saved_by_onnxruntime(source, "all", saved)
    assert {("com.microsoft.nchwc", "Conv"), ("com.microsoft.nchwc", "ReorderOutput")} <= ops, ops
    feeds = feeds_for(source)
    expected = ort.InferenceSession(str(saved), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    original = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    atol = 1e-4 * np.abs(expected).max()
    np.testing.assert_allclose(original, expected, rtol=0, atol=atol)
    actual = kiln.InferenceSession(str(saved), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(actual, expected, rtol=0, atol=atol)

    cli = request.getfixturevalue("kiln")  # the binary (the fixture's name hides the module here)
    graph = onnx.load(str(saved), load_external_data=False).graph
    (input_name, x), = feeds.items()
    np.save(tmp_path / "x.npy", x)
    plan = tmp_path / f"{name}.kiln"
    shape = "x".join(map(str, x.shape))
    built = subprocess.run([str(cli), "build", str(saved), "-o", str(plan), "--shapes", f"{input_name}:{shape}"],
                           capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr
    out = tmp_path / "out"
    ran = subprocess.run([str(cli), "run", str(plan), "--input", f"{input_name}={tmp_path / 'x.npy'}",
                          "--output-dir", str(out)], capture_output=True, text=True, timeout=900)
    assert ran.returncode == 0, ran.stderr
    np.testing.assert_allclose(np.load(out / f"{graph.output[0].name}.npy"), expected, rtol=0, atol=atol)


@pytest.mark.parametrize("level", ["basic", "extended", "all"])
def test_transformer_optimizer_after_each_onnxruntime_level(models, tmp_path, level):
    """optimize_model(opt_level=1/2/99) is onnxruntime's session optimization at that level, then the
    transformer fusions. Its opt_level >= 1 entry imports torch only to read its version, and the
    test venv has no torch (Debian's torch 1.13 lives with numpy 1), so the test takes the same two
    steps itself: the session's saved file, then optimize_model(opt_level=0) on it."""
    from onnxruntime.transformers.optimizer import optimize_model
    source = models / "bert_encoder.onnx"
    saved = tmp_path / f"bert_{level}.onnx"
    saved_by_onnxruntime(source, level, saved)
    fused = tmp_path / f"bert_{level}_fused.onnx"
    optimize_model(str(saved), model_type="bert", num_heads=12, hidden_size=768, opt_level=0).save_model_to_file(
        str(fused))
    ops = {n.op_type for n in onnx.load(str(fused)).graph.node if n.domain == "com.microsoft"}
    assert {"EmbedLayerNormalization", "BiasGelu"} <= ops, ops
    feeds = feeds_for(source)
    expected = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    actual = kiln.InferenceSession(str(fused), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-5 * np.abs(expected).max())


def gpt2_feeds(ids, past_length, pasts):
    batch, seq = ids.shape
    feeds = {"input_ids": ids,
             "position_ids": np.tile(np.arange(past_length, past_length + seq), (batch, 1)).astype(np.int64),
             "attention_mask": np.ones((batch, past_length + seq), np.int64)}
    feeds.update({f"past_{i}": past for i, past in enumerate(pasts)})
    return feeds


def test_gpt2_optimizer_on_a_decoder_with_a_kv_cache(model_exporter, tmp_path):
    """tests/models/gpt2_decoder.py (2 layers, hidden 64, 4 heads, past/present per layer) through
    the transformer optimizer with model_type "gpt2": a prompt of 8 tokens with an empty cache, then
    one generation step with the presents fed back as the pasts. kiln runs the optimized file and is
    compared, output by output, with onnxruntime's run of the original one."""
    from onnxruntime.transformers.optimizer import optimize_model
    source = model_exporter(["gpt2_kv"]) / "gpt2_kv.onnx"
    fused = tmp_path / "gpt2_fused.onnx"
    optimize_model(str(source), model_type="gpt2", num_heads=4, hidden_size=64, opt_level=0).save_model_to_file(
        str(fused))
    ops = {n.op_type for n in onnx.load(str(fused)).graph.node if n.domain == "com.microsoft"}
    assert {"FastGelu", "SkipLayerNormalization"} <= ops, ops
    reference = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    ours = kiln.InferenceSession(str(fused), providers=["CPUExecutionProvider"])
    batch, prompt = 2, 8
    empty = [np.zeros((2, batch, 4, 0, 16), np.float32)] * 2
    ids = np.random.default_rng(0).integers(0, 100, (batch, prompt)).astype(np.int64)
    expected = reference.run(None, gpt2_feeds(ids, 0, empty))
    actual = ours.run(None, gpt2_feeds(ids, 0, empty))
    step = expected[0][:, -1].argmax(-1)[:, None].astype(np.int64)
    expected_step = reference.run(None, gpt2_feeds(step, prompt, expected[1:]))
    actual_step = ours.run(None, gpt2_feeds(step, prompt, actual[1:]))
    assert actual_step[1].shape == (2, batch, 4, prompt + 1, 16)
    for a, e in zip(actual + actual_step, expected + expected_step):
        np.testing.assert_allclose(a, e, rtol=0, atol=1e-5 * max(1.0, np.abs(e).max()))
