#!/usr/bin/python3
"""Export the benchmark models of bench/run_bench.py from PyTorch to ONNX.

Runs under Debian's system python (python3-torch 1.13, python3-torchvision 0.14), not the venv:

    /usr/bin/python3 bench/export_models.py [--out build/bench-models] [--only NAME ...] [--list]

Every model has random weights (torch.manual_seed(0) before each), batch 1 and static shapes, and is
exported in eval mode to OUT/<name>.onnx; a file that already exists is kept. The model definitions and
the weight preparation (noise on constant parameters, BatchNorm statistics measured on random inputs)
are those of the test models in tests/models/export_models.py, imported from there.
"""
import argparse
import os
import pathlib
import sys
import time

import torch
import torch.nn as nn
import torchvision

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "models"))
import export_models as test_models  # noqa: E402  (tests/models/export_models.py)

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


# name -> builder(options) returning a tests/models Export. The classifiers take 1x3x224x224; SRCNN is the
# test models' one (bicubic x3 upsampling of 1x3x256x256, then 9x9, 1x1 and 5x5 convolutions at 768x768).
MODELS = {
    "resnet50": test_models.classifier(torchvision.models.resnet50),
    "mobilenet_v2": test_models.classifier(torchvision.models.mobilenet_v2),
    "efficientnet_b0": test_models.classifier(torchvision.models.efficientnet_b0),
    "squeezenet1_1": test_models.classifier(torchvision.models.squeezenet1_1),
    "bert_encoder_4l": build_bert,
    "srcnn": test_models.build_srcnn,
}


def export_model(name, path):
    """Export one model to `path` through a temporary file, so a crash leaves nothing that looks cached."""
    torch.manual_seed(0)
    test_models.export_spec(MODELS[name](None), path)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="build/bench-models", help="output directory (default build/bench-models)")
    parser.add_argument("--only", nargs="+", choices=list(MODELS), metavar="NAME", help="export only these models")
    parser.add_argument("--list", action="store_true", help="print the model names and exit")
    options = parser.parse_args(argv)
    if options.list:
        print("\n".join(MODELS))
        return 0
    os.makedirs(options.out, exist_ok=True)
    for name in options.only or MODELS:
        path = os.path.join(options.out, name + ".onnx")
        if os.path.exists(path):
            print(f"{name:20} {os.path.getsize(path) / 1e6:8.1f} MB   cached", flush=True)
            continue
        start = time.perf_counter()
        export_model(name, path)
        print(f"{name:20} {os.path.getsize(path) / 1e6:8.1f} MB {time.perf_counter() - start:6.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
