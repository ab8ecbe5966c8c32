"""INT8 post-training calibration through the CLI: `kiln quantize` writes a QDQ model that ONNX
Runtime runs and that agrees with kiln's run of it, `kiln build --int8 --calibration-data` makes a
calibrated plan (with its cache, reused without the data), and bad calibration data is named.

The network is a small PyTorch-exported conv net (Conv+BatchNorm+ReLU, Conv+ReLU, pooling, Linear),
exported by Debian's /usr/bin/python3 (torch 1.13). Accuracy is the SNR of the INT8 output against
FP32 on held-out inputs: 10 log10(signal power / error power)."""
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest

EXPORT = r"""
import sys, torch, torch.nn as nn
torch.manual_seed(0)
net = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
    nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
    nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
with torch.no_grad():  # BatchNorm statistics of the inputs it will see
    net.train()
    for _ in range(4):
        net(torch.randn(16, 3, 32, 32))
net.eval()
torch.onnx.export(net, torch.randn(1, 3, 32, 32), sys.argv[1], input_names=["input"], output_names=["output"],
                  opset_version=13)
"""
SHAPE = (1, 3, 32, 32)
MIN_SNR_DB = 25.0


def run(kiln, *args, timeout=600):
    return subprocess.run([str(kiln), *map(str, args)], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def conv_net(tmp_path_factory):
    path = tmp_path_factory.mktemp("int8") / "conv_net.onnx"
    try:
        result = subprocess.run(["/usr/bin/python3", "-c", EXPORT, str(path)], capture_output=True, text=True, timeout=600)
    except FileNotFoundError:
        pytest.skip("/usr/bin/python3 (with torch) is not installed")
    if result.returncode != 0:
        if "No module named 'torch'" in result.stderr:
            pytest.skip("Debian's python3-torch is not installed")
        pytest.fail(f"export failed:\n{result.stderr}")
    return path


def samples(seed, count):
    return np.random.default_rng(seed).standard_normal((count, *SHAPE)).astype(np.float32)


CALIBRATION = samples(1, 16)
HELD_OUT = samples(2, 20)


def ort_outputs(model, inputs):
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return np.stack([session.run(None, {"input": x})[0] for x in inputs])


def snr_db(reference, test):
    return 10 * np.log10(np.sum(reference.astype(np.float64) ** 2) / np.sum((reference - test).astype(np.float64) ** 2))


def kiln_outputs(kiln, model, inputs, tmp_path):
    outs = []
    for k, x in enumerate(inputs):
        np.save(tmp_path / "x.npy", x)
        out_dir = tmp_path / f"out{k}"
        r = run(kiln, "run", model, "--input", f"input={tmp_path / 'x.npy'}", "--output-dir", out_dir)
        assert r.returncode == 0, r.stderr
        outs.append(np.load(out_dir / "output.npy"))
    return np.stack(outs)


def qdq_ops(model):
    ops = [n.op_type for n in onnx.load(str(model)).graph.node]
    return ops.count("QuantizeLinear"), ops.count("DequantizeLinear")


@pytest.mark.parametrize("method,per_channel,compressed", [("entropy", True, False), ("minmax", False, True),
                                                           ("percentile", True, False)])
def test_quantize_writes_a_qdq_model_onnxruntime_runs_and_kiln_agrees(kiln, conv_net, tmp_path, method, per_channel,
                                                                      compressed):
    data = tmp_path / "calibration.npz"
    (np.savez_compressed if compressed else np.savez)(data, input=CALIBRATION)
    quantized = tmp_path / "conv_net.int8.onnx"
    args = ["quantize", conv_net, "-o", quantized, "--calibration-data", data, "--method", method]
    r = run(kiln, *args, *(["--per-channel"] if per_channel else []))
    assert r.returncode == 0, r.stderr
    assert "quantized" in r.stdout and "4 layers" in r.stdout, r.stdout
    assert f"calibrating: {32 if method != 'minmax' else 16}/{32 if method != 'minmax' else 16} samples" in r.stderr
    onnx.checker.check_model(onnx.load(str(quantized)))
    assert qdq_ops(quantized) == (5, 9)  # the input, 3 ReLU outputs and the Flatten output; those + 4 weights
    reference = ort_outputs(conv_net, HELD_OUT)
    int8_ort = ort_outputs(quantized, HELD_OUT)
    snr = snr_db(reference, int8_ort)
    print(f"\n{method} per_channel={per_channel}: SNR of the INT8 output vs FP32 on {len(HELD_OUT)} held-out inputs: {snr:.1f} dB")
    assert snr >= MIN_SNR_DB
    # kiln's run of the QDQ model agrees with ONNX Runtime's within one quantization step of the
    # output's range (the same integers go in; only float rounding differs).
    step = (reference.max() - reference.min()) / 255
    int8_kiln = kiln_outputs(kiln, quantized, HELD_OUT[:4], tmp_path)
    np.testing.assert_allclose(int8_kiln, int8_ort[:4], rtol=0, atol=step)


def sample_folder(root, inputs):
    for k, x in enumerate(inputs):
        (root / f"sample_{k:03d}").mkdir(parents=True)
        np.save(root / f"sample_{k:03d}" / "input.npy", x)
    return root


def test_build_int8_from_a_calibration_folder_then_from_its_cache(kiln, conv_net, tmp_path):
    data = sample_folder(tmp_path / "calibration", CALIBRATION[:8, 0])  # one rank short: batch 1 added
    cache = tmp_path / "conv_net.calib"
    plan = tmp_path / "conv_net.int8.kiln"
    r = run(kiln, "build", conv_net, "-o", plan, "--int8", "--calibration-data", data, "--calib", cache, "--verbose")
    assert r.returncode == 0, r.stderr
    assert "calibrating: 16/16 samples" in r.stderr
    assert "int8: tensor 'input': range [" in r.stdout and "(entropy)" in r.stdout, r.stdout
    assert "4 layers quantized" in r.stdout
    header = cache.read_text().splitlines()[0]
    assert header.startswith("kiln-int8-calibration calibrator=entropy kiln=") and " network=" in header
    reference = ort_outputs(conv_net, HELD_OUT[:5])
    first = kiln_outputs(kiln, plan, HELD_OUT[:5], tmp_path)
    snr = snr_db(reference, first)
    print(f"\nkiln build --int8 (entropy, per-channel weights): SNR vs FP32 on 5 held-out inputs: {snr:.1f} dB")
    assert snr >= MIN_SNR_DB
    # The cache alone (no data) builds the same engine.
    again = tmp_path / "again.kiln"
    r = run(kiln, "build", conv_net, "-o", again, "--int8", "--calib", cache)
    assert r.returncode == 0, r.stderr
    assert "calibrating" not in r.stderr
    np.testing.assert_array_equal(kiln_outputs(kiln, again, HELD_OUT[:5], tmp_path), first)


def other_network(path):
    from onnx import TensorProto, helper, numpy_helper
    weight = numpy_helper.from_array(np.ones((4, 3, 1, 1), np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["image", "w"], ["features"], name="conv"),
                               helper.make_node("Relu", ["features"], ["relu"]),
                               helper.make_node("Conv", ["relu", "w2"], ["out"], name="conv2")], "g",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              [weight, numpy_helper.from_array(np.ones((2, 4, 1, 1), np.float32), "w2")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_cache_of_another_network_and_bad_data_are_refused_by_name(kiln, conv_net, tmp_path):
    data = tmp_path / "calibration.npz"
    np.savez(data, input=CALIBRATION[:4])
    cache = tmp_path / "conv_net.calib"
    r = run(kiln, "quantize", conv_net, "-o", tmp_path / "q.onnx", "--calibration-data", data, "--calibration-cache", cache)
    assert r.returncode == 0, r.stderr
    r = run(kiln, "build", other_network(tmp_path / "other.onnx"), "-o", tmp_path / "o.kiln", "--int8", "--calib", cache)
    assert r.returncode != 0
    assert "made for another network" in r.stderr and "tensor 'image', which this network quantizes, is not in it" in r.stderr, r.stderr

    def refused(arrays, message, *extra):
        bad = tmp_path / "bad.npz"
        np.savez(bad, **arrays)
        r = run(kiln, "quantize", conv_net, "-o", tmp_path / "bad.onnx", "--calibration-data", bad, *extra)
        assert r.returncode != 0
        assert message in r.stderr, r.stderr

    refused({"image": CALIBRATION[:2]}, "no array for input 'input' (it holds image)")
    nan = CALIBRATION[:3].copy()
    nan[1, 0, 0, 0, 7] = np.nan
    refused({"input": nan}, "calibration batch 1, input 'input': holds NaN at element 7")
    refused({"input": CALIBRATION[:2, :, :, :16]}, "calibration batch 0, input 'input': shape 1x3x16x32 does not match the network's 1x3x32x32")
    refused({"input": CALIBRATION[:0]}, "holds no samples")
    r = run(kiln, "build", conv_net, "-o", tmp_path / "x.kiln", "--int8", "--calib", tmp_path / "missing.calib")
    assert r.returncode != 0 and "no such calibration cache, and no --calibration-data" in r.stderr, r.stderr
