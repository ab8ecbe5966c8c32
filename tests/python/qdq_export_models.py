#!/usr/bin/python3
"""Export the small float models tests/python/test_qdq_models.py quantizes.

Runs under Debian's system python (torch 1.13), not the repo venv:

    /usr/bin/python3 tests/python/qdq_export_models.py OUT_DIR

Writes OUT_DIR/convnet.onnx (convolutions with a residual block, max and global average
pooling, a Linear head: Conv, MaxPool, Add, GlobalAveragePool, Flatten, Gemm) and OUT_DIR/mlp.onnx
(two transformer-style MLP blocks on [1, 8, 32]: MatMul + Add, GELU, residual Add, LayerNorm,
then a mean over tokens and a Linear head: Gemm) and OUT_DIR/senet.onnx (an EfficientNet-style
block: SiLU after the stem and the depthwise convolution, a squeeze-and-excitation scale (global
average pool, two 1x1 convolutions, Sigmoid, a broadcast Mul), a 1x1 projection, Tanh, pooling and
a Linear head) and OUT_DIR/firenet.onnx (SqueezeNet's fire modules: a 1x1 squeeze, 1x1 and 3x3
expands concatenated along the channels, a ceil-mode MaxPool between them). Weights are random
(seed 0).
"""
import pathlib
import sys

import torch
import torch.nn as nn


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.conv_a = nn.Conv2d(16, 16, 3, padding=1)
        self.conv_b = nn.Conv2d(16, 16, 3, padding=1)
        self.down = nn.Conv2d(16, 32, 1, stride=2)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.stem(x)))
        x = torch.relu(x + self.conv_b(torch.relu(self.conv_a(x))))
        x = torch.relu(self.down(x))
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.head(x)


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(x + self.down(nn.functional.gelu(self.up(x))))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(32), Block(32))
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.blocks(x).mean(dim=1))


class SeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.depthwise = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.squeeze = nn.Conv2d(16, 4, 1)
        self.excite = nn.Conv2d(4, 16, 1)
        self.project = nn.Conv2d(16, 24, 1)
        self.head = nn.Linear(24, 10)

    def forward(self, x):
        x = nn.functional.silu(self.stem(x))
        x = nn.functional.silu(self.depthwise(x))
        scale = nn.functional.adaptive_avg_pool2d(x, 1)
        x = x * torch.sigmoid(self.excite(nn.functional.silu(self.squeeze(scale))))
        x = torch.tanh(self.project(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Fire(nn.Module):
    def __init__(self, width, squeeze, expand):
        super().__init__()
        self.squeeze = nn.Conv2d(width, squeeze, 1)
        self.expand1x1 = nn.Conv2d(squeeze, expand, 1)
        self.expand3x3 = nn.Conv2d(squeeze, expand, 3, padding=1)

    def forward(self, x):
        x = torch.relu(self.squeeze(x))
        return torch.cat([torch.relu(self.expand1x1(x)), torch.relu(self.expand3x3(x))], 1)


class FireNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2)
        self.fire1 = Fire(16, 8, 16)
        self.pool = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.fire2 = Fire(32, 8, 24)
        self.head = nn.Linear(48, 10)

    def forward(self, x):
        x = self.pool(self.fire1(torch.relu(self.stem(x))))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(self.fire2(x), 1), 1))


def main(out):
    out.mkdir(parents=True, exist_ok=True)
    for name, module, shape in [("convnet", ConvNet(), (1, 3, 32, 32)), ("mlp", Mlp(), (1, 8, 32)),
                                ("senet", SeNet(), (1, 3, 32, 32)), ("firenet", FireNet(), (1, 3, 33, 33))]:
        torch.manual_seed(0)
        module = type(module)().eval()
        torch.onnx.export(module, (torch.randn(shape),), str(out / f"{name}.onnx"), input_names=["input"],
                          output_names=["output"], opset_version=13)


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
