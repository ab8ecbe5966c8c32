"""FP16 variants of benchmark models, made as users make them: onnxconverter-common's float16 converter with
keep_io_types=True (float32 graph inputs and outputs around a float16 graph).

    .venv/bin/python bench/float16_models.py [--out build/bench-models-fp16] MODEL.onnx ...

writes OUT/<name>_fp16.onnx for each MODEL (a file that already exists is kept) and prints its path. Pass the
paths to bench/run_bench.py --models or bench/startup.py --models, which take .onnx paths.
"""
import argparse
import pathlib
import warnings

import onnx

with warnings.catch_warnings():  # the converter warns about values it clamps to float16's range
    warnings.simplefilter("ignore")
    from onnxconverter_common import float16


def float16_path(model, out_dir):
    """OUT/<name>_fp16.onnx for MODEL's file name <name>.onnx."""
    return pathlib.Path(out_dir) / f"{pathlib.Path(model).stem}_fp16.onnx"


def convert(model, out_dir):
    """Write the float16 variant of the ONNX file MODEL into OUT (kept if it is there); return its path."""
    target = float16_path(model, out_dir)
    if target.exists():
        return target
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converted = float16.convert_float_to_float16(onnx.load(str(model)), keep_io_types=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    onnx.save(converted, str(partial))
    partial.replace(target)
    return target


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help="FP32 ONNX files")
    parser.add_argument("--out", default="build/bench-models-fp16", help="output folder (default %(default)s)")
    args = parser.parse_args()
    for model in args.models:
        print(convert(model, args.out))


if __name__ == "__main__":
    main()
