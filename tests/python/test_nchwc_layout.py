"""The blocked NCHWc layout pass (src/opt/nchwc_layout.cpp) end to end, against ONNX Runtime.

Small PyTorch blocks in the shapes the pass has rules for (ResNet bottleneck with downsample,
MobileNetV2 inverted residuals with 24 channels, an EfficientNet MBConv with squeeze-excitation,
SqueezeNet fire modules, SRCNN, max / average / global pooling) are exported by EXPORT_SCRIPT
under Debian's /usr/bin/python3 (torch), then run by `kiln run` with the layout pass on (the
default) and off (--no-nchwc), and as a plan from `kiln build`. Batch 2 everywhere.

Tolerance as in test_models.py: |kiln - ort| <= 1e-4 * |ort| + 1e-4 * max|ort|.
"""
import json
import subprocess

import numpy as np
import onnxruntime as ort
import pytest

RTOL = 1e-4
ATOL_FRACTION = 1e-4
TIMEOUT_S = 300
MODELS_SUBDIR = "nchwc_layout_v2"  # bump when EXPORT_SCRIPT changes: exports are cached by name

EXPORT_SCRIPT = r'''
import sys, os
import torch
import torch.nn as nn
from torchvision.models.resnet import Bottleneck
from torchvision.models.mobilenetv2 import InvertedResidual
from torchvision.models.efficientnet import MBConv, MBConvConfig
from torchvision.models.squeezenet import Fire

def randomize(module):
    # Random BatchNorm statistics and affine parameters, so no layer is an identity.
    g = torch.Generator().manual_seed(1)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return module.eval()

class Pools(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(16, 32, 3, padding=1)
        self.max = nn.MaxPool2d(3, 2, 1)
        self.avg = nn.AvgPool2d(3, 2, 1, count_include_pad=False)
        self.conv2 = nn.Conv2d(32, 48, 1)
        self.avg_ceil = nn.AvgPool2d(2, 2, ceil_mode=True, count_include_pad=True)
        self.max_dilated = nn.MaxPool2d(2, 1, dilation=2)
        self.conv3 = nn.Conv2d(48, 32, 1)
        self.fc = nn.Linear(32, 10)
    def forward(self, x):
        y = self.avg(torch.relu(self.max(self.conv1(x))))
        # torch exports this AvgPool (ceil_mode with count_include_pad) as Pad + AveragePool: plain
        y = self.max_dilated(self.avg_ceil(self.conv2(y)))
        z = nn.functional.adaptive_avg_pool2d(self.conv3(y), 1)
        return self.fc(torch.flatten(z, 1)), y

def models():
    torch.manual_seed(0)
    stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
    down = nn.Sequential(nn.Conv2d(64, 128, 1, 2, bias=False), nn.BatchNorm2d(128))
    yield "resnet_bottleneck", nn.Sequential(stem, Bottleneck(64, 32, 2, down), Bottleneck(128, 32)), (2, 3, 64, 64)
    yield "mobilenet_inverted_residual", nn.Sequential(InvertedResidual(24, 24, 1, 6), InvertedResidual(24, 32, 2, 6)), (2, 24, 28, 28)
    mb = MBConvConfig(6, 5, 1, 40, 40, 1)
    yield "efficientnet_mbconv", MBConv(mb, 0.0, nn.BatchNorm2d), (2, 40, 14, 14)
    yield "squeezenet_fire", nn.Sequential(Fire(64, 16, 64, 64), nn.MaxPool2d(3, 2, ceil_mode=True), Fire(128, 16, 24, 24)), (2, 64, 15, 15)
    yield "srcnn", nn.Sequential(nn.Conv2d(3, 64, 9, padding=4), nn.ReLU(), nn.Conv2d(64, 32, 1), nn.ReLU(), nn.Conv2d(32, 3, 5, padding=2)), (2, 3, 33, 33)
    yield "pools", Pools(), (2, 16, 17, 17)

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for name, module, shape in models():
    path = os.path.join(out, name + ".onnx")
    if os.path.exists(path):
        continue
    module = randomize(module)
    x = torch.randn(shape)
    outputs = ["y", "features"] if name == "pools" else ["y"]
    torch.onnx.export(module, (x,), path + ".tmp", input_names=["x"], output_names=outputs, opset_version=13)
    os.replace(path + ".tmp", path)
'''

MODELS = ["resnet_bottleneck", "mobilenet_inverted_residual", "efficientnet_mbconv", "squeezenet_fire", "srcnn", "pools"]


@pytest.fixture(scope="module")
def models_dir(build_dir, tmp_path_factory):
    out = build_dir / "models" / MODELS_SUBDIR
    script = tmp_path_factory.mktemp("nchwc_export") / "export.py"
    script.write_text(EXPORT_SCRIPT)
    result = subprocess.run(["/usr/bin/python3", str(script), str(out)], capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        pytest.fail(f"export failed:\n{result.stdout}{result.stderr}", pytrace=False)
    return out


def run(command):
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=TIMEOUT_S)
    if result.returncode != 0:
        pytest.fail(f"{' '.join(map(str, command))} exited with {result.returncode}: {result.stderr.strip()}", pytrace=False)
    return result.stdout


def run_kiln(kiln, model, feeds, workdir, *extra):
    command = [kiln, "run", model]
    for index, (name, array) in enumerate(feeds.items()):
        path = workdir / f"input{index}.npy"
        np.save(path, array)
        command += ["--input", f"{name}={path}"]
    out_dir = workdir / "outputs"
    out_dir.mkdir()
    run(command + ["--output-dir", out_dir, *extra])
    manifest = json.loads((out_dir / "outputs.json").read_text())
    return {entry["name"]: np.load(out_dir / entry["file"]) for entry in manifest["outputs"]}


def reference(model):
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.standard_normal(i.shape, dtype=np.float32) for i in session.get_inputs()}
    names = [o.name for o in session.get_outputs()]
    return feeds, dict(zip(names, session.run(names, feeds)))


def assert_close(got, expected, what):
    assert sorted(got) == sorted(expected), f"{what}: outputs {sorted(got)}, expected {sorted(expected)}"
    for name, want in expected.items():
        have = got[name]
        assert have.shape == want.shape and have.dtype == want.dtype, f"{what} {name}: {have.dtype}{have.shape} vs {want.dtype}{want.shape}"
        atol = ATOL_FRACTION * np.abs(want).max()
        error = np.nan_to_num(np.abs(have.astype(np.float64) - want), nan=np.inf)
        bad = error > RTOL * np.abs(want) + atol
        assert not bad.any(), f"{what} {name}: {bad.sum()} of {bad.size} elements differ, max error {error.max():.3g}"


def layer_kernels(kiln, model, workdir, *extra):
    """The `kiln build --verbose` kernel lines of the model (one per layer)."""
    return run([kiln, "build", model, "-o", workdir / "model.kiln", "--verbose", *extra])


@pytest.mark.parametrize("name", MODELS)
def test_matches_onnxruntime_with_and_without_the_layout(name, kiln, models_dir, tmp_path):
    model = models_dir / f"{name}.onnx"
    feeds, expected = reference(model)
    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    assert_close(run_kiln(kiln, model, feeds, tmp_path / "on"), expected, f"{name} (NCHWc layout)")
    assert_close(run_kiln(kiln, model, feeds, tmp_path / "off", "--no-nchwc"), expected, f"{name} (--no-nchwc)")


# The ops each model runs blocked, as `kiln build --verbose` names their kernels.
BLOCKED_KERNELS = {
    "resnet_bottleneck": ["NchwcConv", "NchwcMaxPool"],
    "mobilenet_inverted_residual": ["NchwcConv"],
    "efficientnet_mbconv": ["NchwcConv", "NchwcGlobalAveragePool"],
    "squeezenet_fire": ["NchwcConv", "NchwcMaxPool"],
    "srcnn": ["NchwcConv"],
    "pools": ["NchwcConv", "NchwcMaxPool", "NchwcAveragePool", "NchwcGlobalAveragePool"],
}


@pytest.mark.parametrize("name", MODELS)
def test_build_lays_out_blocked_unless_told_not_to(name, kiln, models_dir, tmp_path):
    model = models_dir / f"{name}.onnx"
    on = layer_kernels(kiln, model, tmp_path)
    for kernel in BLOCKED_KERNELS[name]:
        assert f"({kernel}): kernel " in on, f"{name}: no {kernel} layer in\n{on}"
    assert "ReorderFromNchwc" in on
    off = layer_kernels(kiln, model, tmp_path, "--no-nchwc")
    assert "Nchwc" not in off, f"{name} --no-nchwc still has blocked layers:\n{off}"


def test_plan_runs_blocked_and_matches_onnxruntime(kiln, models_dir, tmp_path):
    model = models_dir / "resnet_bottleneck.onnx"
    feeds, expected = reference(model)
    plan = tmp_path / "resnet_bottleneck.kiln"
    run([kiln, "build", model, "-o", plan])
    assert "NchwcConv" in run([kiln, "inspect", plan])
    (tmp_path / "plan").mkdir()
    assert_close(run_kiln(kiln, plan, feeds, tmp_path / "plan"), expected, "plan")
    plain = tmp_path / "plain.kiln"
    run([kiln, "build", model, "-o", plain, "--no-nchwc"])
    assert "no-nchwc" in run([kiln, "inspect", plain])
    (tmp_path / "plain").mkdir()
    assert_close(run_kiln(kiln, plain, feeds, tmp_path / "plain"), expected, "plan built with --no-nchwc")
    refused = subprocess.run([str(kiln), "run", str(plan), "--no-nchwc"], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert refused.returncode != 0 and "kiln build --no-nchwc" in refused.stderr
