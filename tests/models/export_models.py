#!/usr/bin/python3
"""Export kiln's test models from PyTorch to ONNX.

Runs under Debian's system python (python3-torch 1.13, python3-torchvision 0.14),
not the repo venv:

    /usr/bin/python3 tests/models/export_models.py --out build/models [--only NAME ...] [--list]

Every model gets random weights (torch.manual_seed(0) before each model, so a
model's weights do not depend on which others are exported) and is exported in
eval mode to OUT/<name>.onnx. Existing files are kept as a cache; the cache is
keyed by file name only, so use a separate --out for a different --bert-layers.

Default initialisation alone makes poor test models: it leaves parameters that
turn ops into no-ops (zero biases, unit norm gains, ViT's all-zero head,
ConvNeXt's 1e-6 layer scale) and BatchNorm statistics under which activations
vanish (efficientnet_b0 would output ~1e-14, vit_b_16 exact zeros). So every
constant-valued parameter gets noise added, and BatchNorm running statistics
are then measured on a batch of random inputs.
"""
import argparse
import os
import sys
import time
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

import gpt2_decoder

IMAGE_SHAPE = (1, 3, 224, 224)
CALIBRATION_BATCH = 4
BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


@dataclass
class Export:
    """Everything torch.onnx.export needs for one model."""

    module: nn.Module
    args: tuple
    input_names: list
    output_names: list
    opset: int
    dynamic_axes: dict = field(default_factory=dict)


# --- torchvision -------------------------------------------------------------


def classifier(factory, dynamic_batch=False):
    """Builder for a torchvision classifier: input `input` 1x3x224x224, output `output`, opset 13."""

    def build(options):
        axes = {"input": {0: "batch"}, "output": {0: "batch"}} if dynamic_batch else {}
        return Export(factory(weights=None), (torch.randn(IMAGE_SHAPE),), ["input"], ["output"], 13, axes)

    return build


class SegmentationOut(nn.Module):
    """Return only the `out` tensor of a torchvision segmentation model's result dict."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def build_deeplabv3(options):
    model = torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None, aux_loss=False
    )
    return Export(SegmentationOut(model), (torch.randn(IMAGE_SHAPE),), ["input"], ["out"], 13)


# --- BERT-base-shaped encoder ------------------------------------------------


class SelfAttention(nn.Module):
    """Multi-head self-attention with residual + LayerNorm, written out as BERT does."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.scale = (hidden // heads) ** -0.5
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.output = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)

    def split_heads(self, x):
        batch, seq, _ = x.shape
        return x.view(batch, seq, self.heads, -1).transpose(1, 2)

    def forward(self, x, additive_mask):
        q, k, v = (self.split_heads(proj(x)) for proj in (self.query, self.key, self.value))
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scale + additive_mask
        context = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).flatten(2)
        return self.norm(x + self.output(context))


class FeedForward(nn.Module):
    """GELU (erf form) feed-forward block with residual + LayerNorm."""

    def __init__(self, hidden, inner):
        super().__init__()
        self.up = nn.Linear(hidden, inner)
        self.down = nn.Linear(inner, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x):
        return self.norm(x + self.down(F.gelu(self.up(x))))


class EncoderLayer(nn.Module):
    def __init__(self, hidden, heads, inner):
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.feed_forward = FeedForward(hidden, inner)

    def forward(self, x, additive_mask):
        return self.feed_forward(self.attention(x, additive_mask))


class BertEncoder(nn.Module):
    def __init__(self, layers, vocab=30522, hidden=768, heads=12, inner=3072, max_positions=512):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(max_positions, hidden)
        self.register_buffer("position_ids", torch.arange(max_positions).unsqueeze(0), persistent=False)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, inner) for _ in range(layers))

    def forward(self, input_ids, attention_mask):
        positions = self.position_ids[:, : input_ids.shape[1]]
        x = self.norm(self.word_embeddings(input_ids) + self.position_embeddings(positions))
        additive_mask = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            x = layer(x, additive_mask)
        return x


def build_bert(options):
    token_axes = {0: "batch", 1: "seq"}
    args = (torch.randint(0, 30522, (2, 16)), torch.ones(2, 16, dtype=torch.int64))
    return Export(
        BertEncoder(options.bert_layers),
        args,
        ["input_ids", "attention_mask"],
        ["last_hidden_state"],
        14,
        {"input_ids": token_axes, "attention_mask": token_axes, "last_hidden_state": token_axes},
    )


# --- recurrent ---------------------------------------------------------------


class Recurrent(nn.Module):
    """Run an nn.LSTM/nn.GRU and return its output followed by its final state(s)."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        output, state = self.rnn(x)
        states = state if isinstance(state, tuple) else (state,)
        return (output, *states)


def recurrent(rnn_class, state_names):
    def build(options):
        rnn = rnn_class(input_size=32, hidden_size=64, num_layers=2, batch_first=False)
        return Export(
            Recurrent(rnn),
            (torch.randn(10, 2, 32),),
            ["input"],
            ["output", *state_names],
            13,
            {"input": {0: "seq"}, "output": {0: "seq"}},
        )

    return build


# --- SRCNN (OpenMMLab deployment tutorial) -----------------------------------


class ResizeByScales(torch.autograd.Function):
    """Bicubic resize whose ONNX `scales` is a graph tensor rather than a constant."""

    @staticmethod
    def forward(ctx, x, scales):
        return F.interpolate(x, scale_factor=scales.tolist()[-2:], mode="bicubic", align_corners=False)

    @staticmethod
    def symbolic(g, x, scales):
        empty_roi = g.op("Constant", value_t=torch.tensor([], dtype=torch.float32))
        return g.op(
            "Resize",
            x,
            empty_roi,
            scales,
            coordinate_transformation_mode_s="pytorch_half_pixel",
            cubic_coeff_a_f=-0.75,
            mode_s="cubic",
            nearest_mode_s="floor",
        )


class DynamicUpsample(nn.Module):
    def forward(self, x, scales):
        return ResizeByScales.apply(x, scales)


class SRCNN(nn.Module):
    def __init__(self, upsample):
        super().__init__()
        self.upsample = upsample
        self.body = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=9, padding=4),
            nn.ReLU(),
            nn.Conv2d(64, 32, kernel_size=1),
            nn.ReLU(),
            nn.Conv2d(32, 3, kernel_size=5, padding=2),
        )

    def forward(self, x, *upsample_args):
        return self.body(self.upsample(x, *upsample_args))


def build_srcnn(options):
    upsample = nn.Upsample(scale_factor=3, mode="bicubic", align_corners=False)
    return Export(SRCNN(upsample), (torch.randn(1, 3, 256, 256),), ["input"], ["output"], 11)


def build_srcnn_dynamic(options):
    args = (torch.randn(1, 3, 256, 256), torch.tensor([1.0, 1.0, 3.0, 3.0]))
    axes = {"input": {2: "height", 3: "width"}}
    return Export(SRCNN(DynamicUpsample()), args, ["input", "factor"], ["output"], 11, axes)


# --- driver ------------------------------------------------------------------

def build_gpt2_kv(options):
    inputs, outputs, axes = gpt2_decoder.names_and_axes()
    return Export(gpt2_decoder.Gpt2Decoder(), gpt2_decoder.export_args(), inputs, outputs, 14, axes)


MODELS = {
    "resnet50": classifier(torchvision.models.resnet50, dynamic_batch=True),
    "mobilenet_v2": classifier(torchvision.models.mobilenet_v2),
    "mobilenet_v3_small": classifier(torchvision.models.mobilenet_v3_small),
    "efficientnet_b0": classifier(torchvision.models.efficientnet_b0),
    "shufflenet_v2_x1_0": classifier(torchvision.models.shufflenet_v2_x1_0),
    "squeezenet1_1": classifier(torchvision.models.squeezenet1_1),
    "convnext_tiny": classifier(torchvision.models.convnext_tiny),
    "vit_b_16": classifier(torchvision.models.vit_b_16),
    "deeplabv3_mobilenet_v3_large": build_deeplabv3,
    "bert_encoder": build_bert,
    "lstm": recurrent(nn.LSTM, ["h_n", "c_n"]),
    "gru": recurrent(nn.GRU, ["h_n"]),
    "srcnn": build_srcnn,
    "srcnn_dynamic": build_srcnn_dynamic,
    "gpt2_kv": build_gpt2_kv,
}


def perturb_constant_parameters(module):
    """Add noise to every parameter whose elements are all equal."""
    for parameter in module.parameters():
        if bool((parameter == parameter.flatten()[0]).all()):
            parameter.add_(0.1 * torch.randn_like(parameter))


def calibrate_batch_norms(module, example):
    """Set BatchNorm running statistics from one training-mode pass over random inputs.

    Assumes a model with BatchNorm takes a single batch-first input shaped like `example`.
    """
    norms = [child for child in module.modules() if isinstance(child, BATCH_NORMS)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # cumulative average: the statistics of exactly this pass
    if norms:
        module.train()
        module(torch.randn(CALIBRATION_BATCH, *example.shape[1:]))


def export_model(name, options, path):
    """Export one model to `path` (seeded, so its random weights are the same every time)."""
    torch.manual_seed(0)
    export_spec(MODELS[name](options), path)


def export_spec(spec, path):
    """Export a model spec to `path` with its constants perturbed and BatchNorm statistics calibrated,
    writing to a temporary file first so a crash leaves no cache entry."""
    with torch.no_grad():
        perturb_constant_parameters(spec.module)
        calibrate_batch_norms(spec.module, spec.args[0])
    partial = path + ".partial"
    torch.onnx.export(
        spec.module.eval(),
        spec.args,
        partial,
        input_names=spec.input_names,
        output_names=spec.output_names,
        dynamic_axes=spec.dynamic_axes,
        opset_version=spec.opset,
    )
    os.replace(partial, path)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="output directory (created if missing)")
    parser.add_argument("--only", nargs="+", choices=list(MODELS), metavar="NAME", help="export only these models")
    parser.add_argument("--list", action="store_true", help="print the model names and exit")
    parser.add_argument("--bert-layers", type=int, default=2, help="encoder layers in bert_encoder (default 2)")
    options = parser.parse_args(argv)
    if not options.list and not options.out:
        parser.error("--out is required")
    return options


def main(argv):
    options = parse_args(argv)
    if options.list:
        print("\n".join(MODELS))
        return 0
    os.makedirs(options.out, exist_ok=True)
    for name in options.only or MODELS:
        path = os.path.join(options.out, name + ".onnx")
        if os.path.exists(path):
            print(f"{name:30} {os.path.getsize(path) / 1e6:8.1f} MB   cached", flush=True)
            continue
        start = time.perf_counter()
        export_model(name, options, path)
        seconds = time.perf_counter() - start
        print(f"{name:30} {os.path.getsize(path) / 1e6:8.1f} MB {seconds:6.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
