#!/usr/bin/env python3
"""QDQ versions of the benchmark models made by ONNX Runtime's own quantizer, to time kiln's INT8 path
against ORT's on models neither engine wrote:

    .venv/bin/python bench/ort_qdq_models.py --models build/bench-models --only resnet50 mobilenet_v2 \
        [--calibration 8] [--per-channel]
    .venv/bin/python bench/run_bench.py --models build/bench-models/resnet50.qdq.onnx,...

Writes MODELS/<name>.qdq.onnx (quantize_static, QuantFormat.QDQ, uint8 activations and int8 weights,
MinMax calibration on bench/model_inputs.py's random inputs from seeds 1..N). The pre-processing step
ORT recommends runs first (ONNX shape inference only: no graph optimization, no symbolic shapes).
"""
import argparse
import pathlib
import sys
import tempfile

import numpy as np
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import model_inputs  # noqa: E402


class RandomInputs(CalibrationDataReader):
    """bench/model_inputs.py's inputs for seeds 1..count, one feed dict per call."""

    def __init__(self, model_path, count, work):
        self._feeds = []
        for seed in range(1, count + 1):
            paths = model_inputs.make_inputs(model_path, pathlib.Path(work) / str(seed), seed=seed)
            self._feeds.append({name: np.load(path) for name, path in paths.items()})
        self._next = iter(self._feeds)

    def get_next(self):
        return next(self._next, None)


def quantize(model_path, out_path, count, per_channel):
    with tempfile.TemporaryDirectory() as work:
        prepared = pathlib.Path(work) / "prepared.onnx"
        quant_pre_process(str(model_path), str(prepared), skip_optimization=True, skip_symbolic_shape=True)
        quantize_static(str(prepared), str(out_path), RandomInputs(prepared, count, work),
                        quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, per_channel=per_channel)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=pathlib.Path, default=pathlib.Path("build/bench-models"))
    parser.add_argument("--only", nargs="+", default=["resnet50", "mobilenet_v2", "bert_encoder_4l"])
    parser.add_argument("--calibration", type=int, default=8, help="calibration inputs per model")
    parser.add_argument("--per-channel", action="store_true", help="one weight scale per output channel")
    args = parser.parse_args()
    for name in args.only:
        source = args.models / f"{name}.onnx"
        target = args.models / f"{name}.qdq.onnx"
        quantize(source, target, args.calibration, args.per_channel)
        print(f"{target}", flush=True)


if __name__ == "__main__":
    main()
