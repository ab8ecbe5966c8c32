"""The squeeze-excitation Mul folded into the 1x1 projection conv after it (src/opt/fold_se_scale.cpp,
NchwcConv's X scale in src/ir/ops/nchwc.h), end to end against ONNX Runtime.

Small PyTorch blocks are exported by EXPORT_SCRIPT under Debian's /usr/bin/python3 (torch): a
torchvision EfficientNet MBConv (projection Co 24 on a 28x28 map: folded), a hand-written SE
block with the gate as the Mul's first operand and 72 channels (not a multiple of 16, Co 16 on
12x12: folded, 8 * Co <= H * W), and one on a 7x7 map whose projection has more outputs than
pixels (Co 80 > 49: the Mul stays). Batch 2, run with 1 and 2 threads and as a plan; `kiln inspect` lists the Mul
among the layers the projection conv was fused from.
"""
import subprocess

import pytest

from test_nchwc_layout import assert_close, reference, run, run_kiln

MODELS_SUBDIR = "nchwc_se_fold_v2"  # bump when EXPORT_SCRIPT changes: exports are cached by name

EXPORT_SCRIPT = r'''
import sys, os
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.models.efficientnet import MBConv, MBConvConfig

class SeBlock(nn.Module):
    """3x3 expand + SiLU, squeeze-excitation gate, 1x1 projection (+ the input when shapes allow)."""
    def __init__(self, cin, channels, cout, gate_first):
        super().__init__()
        self.expand = nn.Conv2d(cin, channels, 3, padding=1)
        self.fc1 = nn.Conv2d(channels, channels // 4, 1)
        self.fc2 = nn.Conv2d(channels // 4, channels, 1)
        self.project = nn.Conv2d(channels, cout, 1)
        self.gate_first = gate_first
        self.residual = cin == cout
    def forward(self, x):
        e = F.silu(self.expand(x))
        gate = torch.sigmoid(self.fc2(F.silu(self.fc1(F.adaptive_avg_pool2d(e, 1)))))
        y = self.project(gate * e if self.gate_first else e * gate)
        return y + x if self.residual else y

def randomize(module):
    g = torch.Generator().manual_seed(1)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return module.eval()

def models():
    torch.manual_seed(0)
    yield "mbconv_28x28", MBConv(MBConvConfig(6, 3, 1, 24, 24, 1), 0.0, nn.BatchNorm2d), (2, 24, 28, 28)
    yield "se_gate_first_72ch", SeBlock(16, 72, 16, True), (2, 16, 12, 12)
    yield "se_7x7_wide_projection", SeBlock(40, 120, 80, False), (2, 40, 7, 7)

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for name, module, shape in models():
    path = os.path.join(out, name + ".onnx")
    if os.path.exists(path):
        continue
    torch.onnx.export(randomize(module), (torch.randn(shape),), path + ".tmp", input_names=["x"],
                      output_names=["y"], opset_version=13)
    os.replace(path + ".tmp", path)
'''

# Model -> (its projection conv, the SE Mul, whether the Mul folds into the projection).
MODELS = {
    "mbconv_28x28": ("/block/block.3/block.3.0/Conv", "/block/block.2/Mul", True),
    "se_gate_first_72ch": ("/project/Conv", "/Mul_2", True),
    "se_7x7_wide_projection": ("/project/Conv", "/Mul_2", False),
}


@pytest.fixture(scope="module")
def models_dir(build_dir, tmp_path_factory):
    out = build_dir / "models" / MODELS_SUBDIR
    script = tmp_path_factory.mktemp("se_fold_export") / "export.py"
    script.write_text(EXPORT_SCRIPT)
    result = subprocess.run(["/usr/bin/python3", str(script), str(out)], capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        pytest.fail(f"export failed:\n{result.stdout}{result.stderr}", pytrace=False)
    return out


def inspected_layers(kiln, model, workdir):
    plan = workdir / "model.kiln"
    run([kiln, "build", model, "-o", plan])
    return plan, [line for line in run([kiln, "inspect", plan]).splitlines() if " kernel " in line and " fused " in line]


@pytest.mark.parametrize("name", MODELS)
def test_se_fold_matches_onnxruntime(name, kiln, models_dir, tmp_path):
    model = models_dir / f"{name}.onnx"
    feeds, expected = reference(model)
    plan, layers = inspected_layers(kiln, model, tmp_path)
    projection, mul, folds = MODELS[name]
    fused = {line.split()[1]: line.split(" fused ")[-1].split(", ") for line in layers}
    assert projection in fused, f"{name}: no layer {projection} in\n" + "\n".join(layers)
    if folds:
        assert mul not in fused, f"{name}: the SE Mul {mul} still runs:\n" + "\n".join(layers)
        assert mul in fused[projection], f"{name}: {projection} does not list {mul} as fused:\n" + "\n".join(layers)
    else:
        assert mul in fused and mul not in fused[projection], f"{name}: the SE Mul should stay:\n" + "\n".join(layers)
    for threads in (1, 2):
        workdir = tmp_path / f"threads{threads}"
        workdir.mkdir()
        got = run_kiln(kiln, model, feeds, workdir, "--threads", str(threads))
        assert_close(got, expected, f"{name} ({threads} threads)")
    (tmp_path / "plan").mkdir()
    assert_close(run_kiln(kiln, plan, feeds, tmp_path / "plan"), expected, f"{name} (plan)")
