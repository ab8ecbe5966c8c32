"""Exports one small network that touches many operators at every opset torch's TorchScript
exporter offers (9 to 17 in Debian's torch 1.13), with its input and torch's outputs.

Run under Debian's /usr/bin/python3 (torch 1.13, numpy 1.x):
    /usr/bin/python3 tests/models/export_opset_matrix.py --out build/models/opset_matrix
Writes mixed_opset<N>.onnx, input.npy and expected_<output>.npy (torch's results) into --out.
"""
import argparse
import pathlib

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

OPSETS = range(9, 18)


class Mixed(nn.Module):
    """Convolutions, normalisations, pooling, resizing, slicing, a recurrent layer, attention-style
    matrix products and reductions: what old opsets spell differently (Upsample, Slice attributes,
    Pad attributes, Clip attributes, Squeeze axes attribute, ReduceSum axes attribute...)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.deconv = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.norm = nn.LayerNorm(16)
        self.gru = nn.GRU(16, 12, batch_first=True)
        self.head = nn.Linear(12, 5)

    def forward(self, x):
        y = F.relu6(self.bn(self.conv(x)))                       # Clip (attributes before opset 11)
        y = F.hardswish(self.depthwise(y)) + y                    # HardSigmoid/HardSwish, Add
        y = F.max_pool2d(y, 2)                                    # 16x16 -> 8x8
        y = F.interpolate(y, scale_factor=2.0, mode="nearest")    # Upsample (9) / Resize (10+)
        y = F.pad(y, (1, 1, 0, 0))[:, :, :, 1:-1]                 # Pad and Slice, attribute vs input forms
        y = self.deconv(y)                                        # 32x32
        y = F.avg_pool2d(y, 2)                                    # back to 16x16
        pooled = y.mean(dim=(2, 3), keepdim=True)                 # ReduceMean
        y = y * torch.sigmoid(pooled)                             # squeeze-excitation style gate
        seq = y.flatten(2).transpose(1, 2)                        # [N, 256, 4]
        seq = seq.reshape(seq.shape[0], 64, 16)                   # Reshape from a shape computation
        seq = self.norm(seq)                                      # LayerNorm (decomposed before 17)
        scores = torch.softmax(seq @ seq.transpose(1, 2) / 4.0, dim=-1)
        seq = scores @ seq
        out, h = self.gru(seq)                                    # GRU
        logits = self.head(out[:, -1])                            # Gather/Slice of the last step
        summary = torch.cat([logits.sum(dim=1, keepdim=True), h.squeeze(0).amax(dim=1, keepdim=True)], 1)
        return torch.log_softmax(logits, dim=1), summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, required=True)
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = Mixed().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 1.5)
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        expected = model(x)
    np.save(out / "input.npy", x.numpy())
    for name, value in zip(("log_probs", "summary"), expected):
        np.save(out / f"expected_{name}.npy", value.numpy())
    for opset in OPSETS:
        torch.onnx.export(model, (x,), str(out / f"mixed_opset{opset}.onnx"), opset_version=opset,
                          input_names=["x"], output_names=["log_probs", "summary"],
                          dynamic_axes={"x": {0: "batch"}})


if __name__ == "__main__":
    main()
