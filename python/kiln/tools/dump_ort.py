"""Runs a model in onnxruntime with every tensor marked as an output and saves them as .npy.

    python -m kiln.tools.dump_ort MODEL.onnx [--input NAME=FILE.npy]... [--shapes NAME:1x3x224x224]...
                                  [--seed N] --out DIR

DIR then holds one .npy file per tensor (every node output of the top-level graph, as
Polygraphy's `--onnx-outputs mark all`), the inputs it ran on, and outputs.json naming them in the
layout `kiln run --output-dir` writes, so that `kiln compare MODEL --ref-outputs DIR` compares kiln
with onnxruntime tensor by tensor on the same inputs. Needs the onnx and onnxruntime packages.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

import numpy as np

# onnxruntime's input type names -> numpy dtypes, for random inputs.
_NUMPY_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
                "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_,
                "tensor(uint8)": np.uint8, "tensor(int8)": np.int8}


def safe_file_name(name: str) -> str:
    """The tensor name with every character but letters, digits, '.', '_' and '-' made '_' (as kiln run does)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return "_" + safe if safe in ("", ".", "..") else safe


def mark_all_outputs(model) -> list[str]:
    """Adds every node output of the top-level graph to the model's outputs (each once, the
    model's own outputs first); returns the names of all outputs in order."""
    import onnx

    names = [o.name for o in model.graph.output]
    seen = set(names)
    for node in model.graph.node:
        for name in node.output:
            if name and name not in seen:
                model.graph.output.append(onnx.ValueInfoProto(name=name))
                seen.add(name)
                names.append(name)
    return names


def parse_shapes(values: list[str]) -> dict[str, list[int]]:
    shapes = {}
    for value in values:
        name, sep, dims = value.rpartition(":")
        if not sep or not name:
            raise SystemExit(f"bad --shapes value {value!r}: expected NAME:1x3x224x224")
        shapes[name] = [int(d) for d in dims.split("x")] if dims else []
    return shapes


def make_inputs(session, files: list[str], shapes: dict[str, list[int]], seed: int) -> dict[str, np.ndarray]:
    """Inputs from .npy files, else seeded random values (free dims from --shapes, or 1)."""
    given = {}
    for value in files:
        name, sep, path = value.partition("=")
        if not sep or not name:
            raise SystemExit(f"bad --input value {value!r}: expected NAME=FILE.npy")
        given[name] = np.load(path)
    names = {i.name for i in session.get_inputs()}
    for name in [*given, *shapes]:
        if name not in names:
            raise SystemExit(f"'{name}' is not an input of the model (inputs: {', '.join(sorted(names))})")
    rng = np.random.default_rng(seed)
    feeds = {}
    for info in session.get_inputs():
        if info.name in given:
            feeds[info.name] = given[info.name]
            continue
        shape = shapes.get(info.name) or [d if isinstance(d, int) and d >= 0 else 1 for d in info.shape]
        if info.type not in _NUMPY_TYPES:
            raise SystemExit(f"input '{info.name}' is {info.type}, which has no random value; give it with --input")
        dtype = np.dtype(_NUMPY_TYPES[info.type])
        if dtype.kind == "f":
            feeds[info.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[info.name] = rng.integers(0, 2, shape).astype(dtype)
        else:
            feeds[info.name] = rng.integers(0, 8, shape).astype(dtype)
    return feeds


def save(out: pathlib.Path, named: list[tuple[str, np.ndarray]], used: set[str]) -> list[dict]:
    """Saves each array as OUT/<safe name>.npy (suffixed where two names meet); returns manifest entries."""
    entries = []
    for name, value in named:
        base = safe_file_name(name)
        file = base + ".npy"
        k = 1
        while file in used:
            file = f"{base}_{k}.npy"
            k += 1
        used.add(file)
        array = np.asarray(value)
        np.save(out / file, array)
        entries.append({"name": name, "file": file, "format": "npy", "kind": "tensor", "dtype": str(array.dtype),
                        "shape": list(array.shape)})
    return entries


def dump(model_path: str, out: str, files: list[str], shapes: dict[str, list[int]], seed: int) -> dict:
    """Runs the model with all tensors marked and writes them, the inputs and outputs.json to `out`."""
    import onnx
    import onnxruntime

    model = onnx.load(model_path)
    names = mark_all_outputs(model)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feeds = make_inputs(session, files, shapes, seed)
    values = session.run(names, feeds)
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    used: set[str] = set()
    manifest = {"engine": f"onnxruntime {onnxruntime.__version__}",
                "inputs": save(folder, [(n, feeds[n]) for n in feeds], used),
                "outputs": save(folder, list(zip(names, values)), used)}
    (folder / "outputs.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kiln.tools.dump_ort", description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="ONNX model file")
    parser.add_argument("--input", "--inputs", dest="input", action="append", default=[], metavar="NAME=FILE.npy",
                        help="an input's value (repeatable); other inputs get seeded random values")
    parser.add_argument("--shapes", action="append", default=[], metavar="NAME:DIMS", help="shape of a random input")
    parser.add_argument("--seed", type=int, default=0, help="seed for random inputs")
    parser.add_argument("--out", required=True, help="folder for the .npy files and outputs.json")
    args = parser.parse_args(argv)
    manifest = dump(args.model, args.out, args.input, parse_shapes(args.shapes), args.seed)
    print(f"{manifest['engine']}: wrote {len(manifest['outputs'])} tensors and {len(manifest['inputs'])} inputs to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
