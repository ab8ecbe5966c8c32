"""Accuracy of kiln's INT8 calibration on the benchmark models: `kiln quantize` writes each model's QDQ
version from calibration samples, then ONNX Runtime runs the float model and the QDQ model on held-out
inputs (the same Q/DQ plan kiln's builder applies; ORT is the fast way to run 100 inputs). Reports the
output SNR against FP32 (10 log10 of signal power over error power, over all held-out outputs) and, for
classifiers, top-1 agreement with FP32.

    .venv/bin/python bench/int8_accuracy.py --models build/bench-models --kiln build/kiln \
        [--only resnet50 ...] [--methods entropy minmax] [--calibration 32] [--held-out 100]

Inputs are those of bench/model_inputs.py (standard normal floats, token ids in the embedding's
range), from different seeds for calibration and held-out sets.
"""
import argparse
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import model_inputs  # noqa: E402


def samples(model_path, count, seed, work):
    """{input name: array [count, ...]} of bench/model_inputs.py's random inputs."""
    stacked = {}
    for k in range(count):
        files = model_inputs.make_inputs(model_path, work / f"s{seed}_{k}", seed=seed * 100003 + k)
        for name, path in files.items():
            stacked.setdefault(name, []).append(np.load(path))
    return {name: np.stack(arrays) for name, arrays in stacked.items()}


def outputs(model_path, inputs, count):
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    return np.stack([session.run(None, {name: a[k] for name, a in inputs.items()})[0] for k in range(count)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=pathlib.Path, default=pathlib.Path("build/bench-models"))
    parser.add_argument("--kiln", type=pathlib.Path, default=pathlib.Path("build/kiln"))
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--methods", nargs="*", default=["entropy", "minmax"])
    parser.add_argument("--calibration", type=int, default=32)
    parser.add_argument("--held-out", type=int, default=100)
    args = parser.parse_args()
    models = sorted(args.models.glob("*.onnx"))
    models = [m for m in models if ".int8" not in m.name and (not args.only or m.stem in args.only)]
    print("| model | calibrator | SNR vs FP32 (dB) | top-1 agreement |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        for model in models:
            calibration = samples(model, args.calibration, 1, work)
            held_out = samples(model, args.held_out, 2, work)
            np.savez(work / "calibration.npz", **calibration)
            reference = outputs(model, held_out, args.held_out)
            classifier = reference.ndim == 3 and reference.shape[1] == 1  # [N, 1, classes]
            for method in args.methods:
                quantized = work / f"{model.stem}.int8.onnx"
                r = subprocess.run([str(args.kiln), "quantize", str(model), "-o", str(quantized), "--calibration-data",
                                    str(work / "calibration.npz"), "--method", method, "--per-channel"],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"| {model.stem} | {method} | failed: {r.stderr.strip()} | |")
                    continue
                onnx.checker.check_model(onnx.load(str(quantized)))
                test = outputs(quantized, held_out, args.held_out)
                error = (reference - test).astype(np.float64)
                snr = 10 * np.log10(np.sum(reference.astype(np.float64) ** 2) / np.sum(error ** 2))
                top1 = f"{100 * np.mean(reference.argmax(-1) == test.argmax(-1)):.0f} %" if classifier else "n/a"
                print(f"| {model.stem} | {method} | {snr:.1f} | {top1} |", flush=True)


if __name__ == "__main__":
    main()
