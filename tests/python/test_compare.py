"""Intermediate outputs (`kiln run --outputs / --mark-all`, SessionOptions) checked against
onnxruntime for every tensor, and `kiln compare`: metrics against numpy, a planted wrong kernel
found at its layer, and --bisect finding the layer that must stay FP32."""
import json
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime
import pytest

from compare_models import bf16_sensitive_input, bf16_sensitive_model, resnet_style_model, tanh_chain_model


def run(*args, timeout=300):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)


def dump_ort(model, out, *inputs):
    """Runs python -m kiln.tools.dump_ort and returns its manifest."""
    args = [sys.executable, "-m", "kiln.tools.dump_ort", model, "--out", out]
    for name, path in inputs:
        args += ["--input", f"{name}={path}"]
    r = run(*args)
    assert r.returncode == 0, r.stderr
    return json.loads((pathlib.Path(out) / "outputs.json").read_text())


def load_dir(folder):
    """{tensor name: array} of a folder written by kiln run --output-dir or dump_ort."""
    folder = pathlib.Path(folder)
    manifest = json.loads((folder / "outputs.json").read_text())
    return {e["name"]: np.load(folder / e["file"]) for e in manifest["outputs"]}


def node_outputs(model_path):
    """Every tensor a node other than Constant computes, in graph order."""
    model = onnx.load(model_path)
    return [o for n in model.graph.node if n.op_type != "Constant" for o in n.output if o]


@pytest.fixture
def fault_library(build_dir):
    path = build_dir / "tests/plugins/libkiln_test_faults.so"
    if not path.is_file():
        pytest.skip(f"fault-injection library not built: {path}")
    return path


def check_mark_all_matches_ort(kiln, model, tmp_path, inputs, atol, rtol, atol_fraction=0.0):
    """Every node output kiln's --mark-all writes matches onnxruntime's within atol + atol_fraction *
    max|ort| + rtol * |ort| (the fraction for deep nets, whose float32 sums drift with depth)."""
    ort_dir, kiln_dir = tmp_path / "ort", tmp_path / "kiln"
    manifest = dump_ort(model, ort_dir, *inputs)
    feeds = [f"{e['name']}={ort_dir / e['file']}" for e in manifest["inputs"]]
    r = run(kiln, "run", model, "--mark-all", "--output-dir", kiln_dir, *[a for f in feeds for a in ("--input", f)])
    assert r.returncode == 0, r.stderr
    ours, theirs = load_dir(kiln_dir), load_dir(ort_dir)
    expected = node_outputs(model)
    assert set(expected) <= set(ours), f"not marked: {sorted(set(expected) - set(ours))}"
    for name in expected:
        assert ours[name].shape == theirs[name].shape, name
        scale = float(np.abs(theirs[name]).max()) if theirs[name].size else 0.0
        np.testing.assert_allclose(ours[name], theirs[name], atol=atol + atol_fraction * scale, rtol=rtol, err_msg=name)
    return expected


def test_mark_all_matches_onnxruntime_for_every_tensor_of_a_resnet_style_net(kiln, tmp_path):
    model = resnet_style_model(tmp_path / "resnet.onnx")
    names = check_mark_all_matches_ort(kiln, model, tmp_path, [], atol=1e-4, rtol=1e-3)
    assert len(names) == 18  # every Conv, BatchNorm, Relu, Add ... output, the ones BN folding and fusion remove included


@pytest.mark.heavy
def test_mark_all_matches_onnxruntime_for_every_tensor_of_resnet50(kiln, tmp_path, model_exporter):
    model = model_exporter(["resnet50"]) / "resnet50.onnx"
    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32))
    names = check_mark_all_matches_ort(kiln, model, tmp_path, [("input", tmp_path / "x.npy")], atol=1e-4, rtol=1e-3,
                                       atol_fraction=5e-4)
    assert len(names) > 100  # every Conv, Relu, Add, pool, Flatten and Gemm output


@pytest.mark.heavy
def test_mark_all_matches_onnxruntime_for_every_tensor_of_bert(kiln, tmp_path, model_exporter):
    model = model_exporter(["bert_encoder"]) / "bert_encoder.onnx"
    rng = np.random.default_rng(0)
    np.save(tmp_path / "ids.npy", rng.integers(0, 30522, (1, 16)).astype(np.int64))
    np.save(tmp_path / "mask.npy", np.ones((1, 16), np.int64))
    names = check_mark_all_matches_ort(kiln, model, tmp_path,
                                       [("input_ids", tmp_path / "ids.npy"), ("attention_mask", tmp_path / "mask.npy")],
                                       atol=2e-4, rtol=2e-3)
    assert len(names) > 100


def test_marked_tensor_swallowed_by_a_fusion_is_produced(kiln, tmp_path):
    """Conv + BatchNorm + Relu fuse into one layer; marking the Conv's and BatchNorm's outputs keeps them."""
    model = resnet_style_model(tmp_path / "resnet.onnx")
    ort = dump_ort(model, tmp_path / "ort")
    theirs = load_dir(tmp_path / "ort")
    x = tmp_path / "ort" / ort["inputs"][0]["file"]
    r = run(kiln, "run", model, "--input", f"x={x}", "--outputs", "stem.conv,block.b.bn", "--output-dir", tmp_path / "k")
    assert r.returncode == 0, r.stderr
    ours = load_dir(tmp_path / "k")
    assert list(ours) == ["probs", "stem.conv", "block.b.bn"]
    for name in ours:
        np.testing.assert_allclose(ours[name], theirs[name], atol=1e-4, rtol=1e-3, err_msg=name)
    # In a plan: unmarked, the stem's Conv, BatchNorm and Relu are one layer; with stem.conv marked
    # (kiln build --outputs) the Conv stays alone and the plan outputs its tensor.
    for marks, fused in (([], "fused stem_conv, stem_bn, stem_relu"), (["--outputs", "stem.conv"], "stem_bn (BatchNormalization)")):
        plan = tmp_path / f"plan{len(marks)}.kiln"
        assert run(kiln, "build", model, "-o", plan, *marks).returncode == 0
        inspected = run(kiln, "inspect", plan).stdout
        assert fused in inspected, inspected
    assert "stem.conv  float32[1x16x16x16]" in inspected


def test_marking_an_unknown_tensor_names_it(kiln, tmp_path):
    model = resnet_style_model(tmp_path / "resnet.onnx")
    r = run(kiln, "run", model, "--outputs", "stem.conv,no_such_tensor")
    assert r.returncode == 1
    assert "cannot mark 'no_such_tensor' as an output: the graph has no tensor of that name" in r.stderr


def test_a_plan_refuses_marked_outputs(kiln, tmp_path):
    model = resnet_style_model(tmp_path / "resnet.onnx")
    plan = tmp_path / "resnet.kiln"
    assert run(kiln, "build", model, "-o", plan).returncode == 0
    r = run(kiln, "run", plan, "--mark-all")
    assert r.returncode == 1
    assert "whose outputs were chosen when it was built" in r.stderr


def test_python_session_returns_marked_intermediates(tmp_path):
    import kiln

    model = str(resnet_style_model(tmp_path / "resnet.onnx"))
    x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)
    options = kiln.SessionOptions()
    options.add_session_config_entry("kiln.extra_outputs", "stem.conv, block.sum")
    session = kiln.InferenceSession(model, options)
    assert [o.name for o in session.get_outputs()] == ["probs", "stem.conv", "block.sum"]
    stem, total = session.run(["stem.conv", "block.sum"], {"x": x})
    reference = onnx.load(model)
    for name in ("stem.conv", "block.sum"):
        reference.graph.output.append(onnx.ValueInfoProto(name=name))
    ort = onnxruntime.InferenceSession(reference.SerializeToString(), providers=["CPUExecutionProvider"])
    want_stem, want_sum = ort.run(["stem.conv", "block.sum"], {"x": x})
    np.testing.assert_allclose(stem, want_stem, atol=1e-4, rtol=1e-3)
    np.testing.assert_allclose(total, want_sum, atol=1e-4, rtol=1e-3)

    options = kiln.SessionOptions()
    options.add_session_config_entry("kiln.mark_all_outputs", "1")
    names = [o.name for o in kiln.InferenceSession(model, options).get_outputs()]
    assert names[0] == "probs" and set(names) == set(node_outputs(model))


def compare_json(kiln, *args):
    r = run(kiln, "compare", *args, "--json")
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)


def test_compare_with_reference_mode_and_with_onnxruntime_passes(kiln, tmp_path):
    model = resnet_style_model(tmp_path / "resnet.onnx")
    code, report = compare_json(kiln, model, "--reference")
    assert code == 0 and report["passed"] and report["first_failure"] is None
    assert len(report["tensors"]) == 18
    dump_ort(model, tmp_path / "ort")
    code, report = compare_json(kiln, model, "--ref-outputs", tmp_path / "ort")
    assert code == 0, report
    assert [t["name"] for t in report["tensors"]] == node_outputs(model)  # topological order
    assert report["tensors"][0]["node"] == "stem_conv" and report["tensors"][0]["op_type"] == "Conv"


def plus_one_with_saved_reference(tmp_path, x, reference, name="y"):
    """The model name = x + 1 and a folder as kiln run writes it, holding x and `reference` as name."""
    onnx_model = onnx.helper.make_model(
        onnx.helper.make_graph([onnx.helper.make_node("Add", ["x", "one"], [name], name="plus_one")], "g",
                               [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [x.size])],
                               [onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, [x.size])],
                               [onnx.numpy_helper.from_array(np.array([1.0], np.float32), "one")]),
        opset_imports=[onnx.helper.make_opsetid("", 13)])
    model = tmp_path / "plus_one.onnx"
    onnx.save(onnx_model, model)
    folder = tmp_path / "saved"
    folder.mkdir()
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", reference.astype(np.float32))
    (folder / "outputs.json").write_text(json.dumps({"engine": "numpy", "inputs": [{"name": "x", "file": "x.npy"}],
                                                     "outputs": [{"name": name, "file": "y.npy"}]}))
    return model, folder


def test_compare_metrics_match_numpy(kiln, tmp_path):
    """The reference folder holds y = x + 1 with planted errors; kiln computes it exactly."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(64).astype(np.float32)
    ref = (x + 1 + rng.standard_normal(64) * 1e-3).astype(np.float32)
    ref[3] += 0.5
    ref[10] = np.nan  # a NaN on one side only: a mismatch, left out of the other metrics
    model, folder = plus_one_with_saved_reference(tmp_path, x, ref)
    code, report = compare_json(kiln, model, "--ref-outputs", folder, "--atol", "1e-3", "--rtol", "1e-3")
    (t,) = report["tensors"]
    finite = ~np.isnan(ref)
    a, r = (x + 1).astype(np.float64)[finite], ref.astype(np.float64)[finite]
    d = np.abs(a - r)
    assert code == 1 and not t["passed"] and t["non_finite"] == 1 and t["elements"] == 64
    assert t["max_abs"] == pytest.approx(d.max(), rel=1e-9)
    assert t["max_rel"] == pytest.approx((d / np.abs(r)).max(), rel=1e-9)
    assert t["mean_abs"] == pytest.approx(d.mean(), rel=1e-9)
    assert t["cosine"] == pytest.approx(a @ r / np.sqrt((a @ a) * (r @ r)), rel=1e-9)
    assert t["snr_db"] == pytest.approx(10 * np.log10((r @ r) / (d @ d)), rel=1e-9)
    assert t["mismatches"] == int((d > 1e-3 + 1e-3 * np.abs(r)).sum()) + 1
    assert report["reference"].startswith("numpy")


def test_min_snr_judges_tensors_by_their_snr(kiln, tmp_path):
    rng = np.random.default_rng(8)
    x = rng.standard_normal(256).astype(np.float32)
    model, folder = plus_one_with_saved_reference(tmp_path, x, x + 1 + rng.standard_normal(256) * 0.01)
    code, report = compare_json(kiln, model, "--ref-outputs", folder)
    (y,) = report["tensors"]
    assert code == 1 and y["mismatches"] > 100 and report["min_snr_db"] is None  # element tolerance
    snr = y["snr_db"]
    code, report = compare_json(kiln, model, "--ref-outputs", folder, "--min-snr", str(snr - 0.5))
    assert code == 0 and report["passed"] and report["min_snr_db"] == pytest.approx(snr - 0.5)
    assert report["tensors"][0]["mismatches"] == y["mismatches"]  # still counted, not the verdict
    code, report = compare_json(kiln, model, "--ref-outputs", folder, "--min-snr", str(snr + 0.5))
    assert code == 1 and report["first_failure"]["tensor"] == "y"
    r = run(kiln, "compare", model, "--ref-outputs", folder, "--min-snr", "30")
    assert "tolerance: snr_db >= 30 per tensor" in r.stdout


def test_min_snr_fails_a_nan_on_one_side(kiln, tmp_path):
    x = np.random.default_rng(9).standard_normal(256).astype(np.float32)
    reference = x + 1
    reference[5] = np.nan
    model, folder = plus_one_with_saved_reference(tmp_path, x, reference)
    code, report = compare_json(kiln, model, "--ref-outputs", folder, "--min-snr", "-100")
    assert code == 1 and report["tensors"][0]["non_finite"] == 1


def test_compare_table_keeps_long_names_and_counts_apart(kiln, tmp_path):
    """A name longer than the header's column and a 13-digit-wide mismatch count stay separate columns."""
    name, n = "a_tensor_name_longer_than_the_tensor_column_is_wide", 200000
    x = np.random.default_rng(6).standard_normal(n).astype(np.float32)
    model, folder = plus_one_with_saved_reference(tmp_path, x, x + 1.5, name)  # every element off by 0.5
    r = run(kiln, "compare", model, "--ref-outputs", folder)
    assert r.returncode == 1, r.stderr
    header = next(line for line in r.stdout.splitlines() if line.startswith("tensor "))
    row = next(line for line in r.stdout.splitlines() if line.startswith(name))
    cells = row.split()
    assert header.split()[:8] == ["tensor", "max_abs", "max_rel", "mean_abs", "cosine", "snr_db", "mismatches",
                                  "result"]
    assert cells[0] == name and cells[6] == f"{n}/{n}" and cells[7] == "FAIL"
    assert float(cells[1]) == pytest.approx(0.5, rel=1e-3)
    # Right-aligned numbers end under their headers.
    assert row.index(cells[6]) + len(cells[6]) == header.index("mismatches") + len("mismatches")


def test_compare_finds_a_planted_wrong_kernel_at_its_layer(kiln, tmp_path, fault_library):
    model = tanh_chain_model(tmp_path / "chain.onnx")
    code, report = compare_json(kiln, model, "--reference", "--plugins", fault_library)
    assert code == 1
    assert report["first_failure"] == {"tensor": "act.out", "node": "act", "op_type": "Tanh"}
    passed = {t["name"]: t["passed"] for t in report["tensors"]}
    assert passed["first.out"] and not passed["act.out"]
    act = next(t for t in report["tensors"] if t["name"] == "act.out")
    assert act["max_abs"] == pytest.approx(0.5, abs=1e-5) and act["mismatches"] == act["elements"] == 16
    # Against onnxruntime the same layer is found, and the table names it.
    dump_ort(model, tmp_path / "ort")
    r = run(kiln, "compare", model, "--ref-outputs", tmp_path / "ort", "--plugins", fault_library)
    assert r.returncode == 1
    assert "first failing tensor in topological order: 'act.out', computed by node 'act' (Tanh)" in r.stdout
    # Without the fault both pass.
    assert run(kiln, "compare", model, "--ref-outputs", tmp_path / "ort").returncode == 0


def test_compare_a_plan_against_its_model(kiln, tmp_path):
    model = resnet_style_model(tmp_path / "resnet.onnx")
    plan = tmp_path / "resnet.kiln"
    assert run(kiln, "build", model, "-o", plan).returncode == 0
    code, report = compare_json(kiln, model, "--against", plan)
    assert code == 0 and [t["name"] for t in report["tensors"]] == ["probs"]


def test_compare_needs_one_reference(kiln, tmp_path):
    model = resnet_style_model(tmp_path / "resnet.onnx")
    r = run(kiln, "compare", model)
    assert r.returncode == 1 and "give one thing to compare with" in r.stderr


def has_avx512_bf16():
    return "avx512_bf16" in pathlib.Path("/proc/cpuinfo").read_text()


@pytest.mark.skipif(not has_avx512_bf16(), reason="BF16 kernels need AVX512_BF16")
def test_bisect_finds_the_layer_that_must_stay_fp32(kiln, tmp_path):
    model = bf16_sensitive_model(tmp_path / "sensitive.onnx")
    np.save(tmp_path / "x.npy", bf16_sensitive_input())
    args = [model, "--bf16", "--layer-precisions", "sensitive:bf16,tolerant:bf16", "--input", f"x={tmp_path / 'x.npy'}",
            "--atol", "0.05", "--rtol", "0.02"]
    code, report = compare_json(kiln, *args, "--bisect")
    assert code == 1
    assert report["first_failure"]["node"] == "sensitive"
    bisect = report["bisect"]
    assert bisect["found"] and bisect["fp32_layers"] == ["sensitive"]
    assert bisect["candidates"] == ["sensitive", "tolerant"]
    # The build it proposes passes.
    code, report = compare_json(kiln, model, "--bf16", "--layer-precisions", bisect["layer_precisions"],
                                "--input", f"x={tmp_path / 'x.npy'}", "--atol", "0.05", "--rtol", "0.02", "--outputs", "y")
    assert code == 0, report
    (y,) = report["tensors"]
    assert y["name"] == "y" and y["max_abs"] > 0  # `tolerant` really ran in BF16


@pytest.mark.skipif(not has_avx512_bf16(), reason="BF16 kernels need AVX512_BF16")
def test_bisect_to_an_snr(kiln, tmp_path):
    model = bf16_sensitive_model(tmp_path / "sensitive.onnx")
    np.save(tmp_path / "x.npy", bf16_sensitive_input())
    args = [model, "--bf16", "--layer-precisions", "sensitive:bf16,tolerant:bf16", "--input", f"x={tmp_path / 'x.npy'}",
            "--outputs", "y"]
    code, report = compare_json(kiln, *args)
    snr = next(t for t in report["tensors"] if t["name"] == "y")["snr_db"]
    assert code == 1 and np.isfinite(snr)
    # An SNR the BF16 build reaches passes without bisecting.
    code, report = compare_json(kiln, *args, "--min-snr", str(snr - 1), "--bisect")
    assert code == 0 and "bisect" not in report
    # One only FP32 reaches (equal outputs: inf): both layers stay FP32.
    code, report = compare_json(kiln, *args, "--min-snr", "300", "--bisect")
    assert code == 1 and report["bisect"]["found"]
    assert sorted(report["bisect"]["fp32_layers"]) == ["sensitive", "tolerant"]


def test_int8_build_compared_and_bisected_against_fp32(kiln, tmp_path):
    model = resnet_style_model(tmp_path / "resnet.onnx")
    calibration = tmp_path / "calib.npz"
    np.savez(calibration, x=np.random.default_rng(0).standard_normal((8, 1, 3, 16, 16)).astype(np.float32))
    code, report = compare_json(kiln, model, "--int8", "--calibration-data", calibration, "--atol", "0.05", "--rtol", "0.05")
    by_name = {t["name"]: t for t in report["tensors"]}
    assert len(by_name) == 18 and report["tested"] == "kiln plan, int8" and report["reference"] == "kiln plan, fp32"
    assert by_name["stem.conv"]["max_abs"] > 0  # really quantized
    assert by_name["probs"]["cosine"] > 0.99
    # A tolerance INT8 cannot meet on the output: bisect names layers to keep in FP32, and that build passes.
    args = ["--int8", "--calibration-data", calibration, "--outputs", "probs", "--atol", "1e-4", "--rtol", "1e-3"]
    code, report = compare_json(kiln, model, *args, "--bisect")
    assert code == 1
    bisect = report["bisect"]
    assert bisect["candidates"] == ["stem_conv", "block.a_conv", "block.b_conv", "down_conv", "fc"]
    assert bisect["found"] and bisect["fp32_layers"] and bisect["builds"] == 6
    code, report = compare_json(kiln, model, *args, "--layer-precisions", bisect["layer_precisions"])
    assert code == 0, report
