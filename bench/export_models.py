#!/usr/bin/python3
"""Export the benchmark models of bench/run_bench.py from PyTorch to ONNX.

Runs under Debian's system python (python3-torch 1.13, python3-torchvision 0.14), not the venv:

    /usr/bin/python3 bench/export_models.py [--out build/bench-models] [--only NAME ...] [--batch B] [--list]

Every model has random weights (torch.manual_seed(0) before each, so batch 1 and batch B files hold the same
weights) and static shapes, and is exported in eval mode to OUT/<name>.onnx (batch 1) or OUT/<name>_bB.onnx;
a file that already exists is kept. The weight preparation (noise on constant parameters, BatchNorm
statistics measured on random inputs) is that of the test models in tests/models/export_models.py, and so
are the definitions of the models the tests also use; the detector and the CRNN are in this folder.
"""
import argparse
import os
import pathlib
import sys
import time

from dataclasses import dataclass

import torch
import torch.nn as nn
import torchvision

BENCH_DIR = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent / "tests" / "models"))  # before bench/, whose exporter has the same name
import export_models as test_models  # noqa: E402  (tests/models/export_models.py)
from crnn_model import CRNN, HEIGHT, WIDTH  # noqa: E402
from detector_model import IMAGE_SIZE, Detector  # noqa: E402
from model_names import DEFAULT_MODELS, model_file_name  # noqa: E402

BERT_LAYERS = 4
BERT_SEQUENCE = 128
BERT_VOCAB = 30522


class BertFromTokenIds(nn.Module):
    """The BERT-base-shaped encoder fed token ids only (attention mask all ones), as served for one sequence."""

    def __init__(self, layers):
        super().__init__()
        self.encoder = test_models.BertEncoder(layers, vocab=BERT_VOCAB)

    def forward(self, input_ids):
        return self.encoder(input_ids, torch.ones_like(input_ids))


def build_bert(options):
    ids = torch.randint(0, BERT_VOCAB, (1, BERT_SEQUENCE))
    return test_models.Export(BertFromTokenIds(BERT_LAYERS), (ids,), ["input_ids"], ["last_hidden_state"], 14)


LSTM_SEQUENCE, LSTM_INPUT, LSTM_HIDDEN = 100, 256, 512


def build_lstm(options):
    """Two stacked LSTM layers (256 -> 512 -> 512) over 100 time steps, time first; output and final states."""
    rnn = nn.LSTM(input_size=LSTM_INPUT, hidden_size=LSTM_HIDDEN, num_layers=2)
    return test_models.Export(test_models.Recurrent(rnn), (torch.randn(LSTM_SEQUENCE, 1, LSTM_INPUT),), ["input"],
                              ["output", "h_n", "c_n"], 13)


def build_detector(options):
    return test_models.Export(Detector(), (torch.randn(1, 3, IMAGE_SIZE, IMAGE_SIZE),), ["images"], ["detections"], 13)


def build_crnn(options):
    return test_models.Export(CRNN(), (torch.randn(1, 1, HEIGHT, WIDTH),), ["image"], ["logits"], 13)


@dataclass
class BenchModel:
    build: object  # builder(options) returning a tests/models Export at batch 1
    batch_axis: int = 0  # the inputs' batch dimension


# The classifiers take 1x3x224x224 (DeepLabV3 too); SRCNN is the test models' one (bicubic x3 upsampling of
# 1x3x256x256, then 9x9, 1x1 and 5x5 convolutions at 768x768); the LSTM's inputs are time first.
MODELS = {
    "resnet50": BenchModel(test_models.classifier(torchvision.models.resnet50)),
    "mobilenet_v2": BenchModel(test_models.classifier(torchvision.models.mobilenet_v2)),
    "efficientnet_b0": BenchModel(test_models.classifier(torchvision.models.efficientnet_b0)),
    "squeezenet1_1": BenchModel(test_models.classifier(torchvision.models.squeezenet1_1)),
    "bert_encoder_4l": BenchModel(build_bert),
    "srcnn": BenchModel(test_models.build_srcnn),
    "mobilenet_v3_large": BenchModel(test_models.classifier(torchvision.models.mobilenet_v3_large)),
    "shufflenet_v2_x1_0": BenchModel(test_models.classifier(torchvision.models.shufflenet_v2_x1_0)),
    "regnet_y_400mf": BenchModel(test_models.classifier(torchvision.models.regnet_y_400mf)),
    "resnext50_32x4d": BenchModel(test_models.classifier(torchvision.models.resnext50_32x4d)),
    "convnext_tiny": BenchModel(test_models.classifier(torchvision.models.convnext_tiny)),
    "vit_b_16": BenchModel(test_models.classifier(torchvision.models.vit_b_16)),
    "deeplabv3_mobilenet_v3_large": BenchModel(test_models.build_deeplabv3),
    "lstm_2l": BenchModel(build_lstm, batch_axis=1),
    "yolo_v5s": BenchModel(build_detector),
    "crnn": BenchModel(build_crnn),
}
assert list(MODELS) == DEFAULT_MODELS, "bench/model_names.py and MODELS list different models"


def with_batch(spec, batch, axis):
    """The export at `batch`: each batch-1 example input repeated along the batch axis (the same values, so
    token ids stay in range), for a trace with that static batch size."""
    if batch != 1:
        spec.args = tuple(torch.cat([arg] * batch, axis) for arg in spec.args)
    return spec


def export_model(name, path, batch=1):
    """Export one model to `path` through a temporary file, so a crash leaves nothing that looks cached."""
    torch.manual_seed(0)
    model = MODELS[name]
    test_models.export_spec(with_batch(model.build(None), batch, model.batch_axis), path)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="build/bench-models", help="output directory (default build/bench-models)")
    parser.add_argument("--only", nargs="+", choices=list(MODELS), metavar="NAME", help="export only these models")
    parser.add_argument("--batch", type=int, default=1, help="static batch size of the exports (default 1)")
    parser.add_argument("--list", action="store_true", help="print the model names and exit")
    options = parser.parse_args(argv)
    if options.batch < 1:
        parser.error("--batch must be >= 1")
    if options.list:
        print("\n".join(MODELS))
        return 0
    os.makedirs(options.out, exist_ok=True)
    for name in options.only or MODELS:
        path = os.path.join(options.out, model_file_name(name, options.batch))
        label = f"{name} (batch {options.batch})"
        if os.path.exists(path):
            print(f"{label:40} {os.path.getsize(path) / 1e6:8.1f} MB   cached", flush=True)
            continue
        start = time.perf_counter()
        export_model(name, path, options.batch)
        print(f"{label:40} {os.path.getsize(path) / 1e6:8.1f} MB {time.perf_counter() - start:6.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
