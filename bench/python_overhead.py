#!/usr/bin/env python3
"""Per-run overhead of kiln's Python API over its C++ Session::run, beside onnxruntime's Python run,
on a tiny model (y = x + 1, float32 [1, 16]), both on one intra-op thread.

    .venv/bin/python bench/python_overhead.py [--iterations 20000] [--repeats 5]

Prints medians in microseconds: kiln through Python (InferenceSession.run), kiln's C++
Session::run on the same feed (timed in C++, kiln._kiln.Session._time_cpp_runs), their
difference (the Python overhead), and onnxruntime through Python. The results go to
docs/performance.md ("Python API overhead")."""
import argparse
import pathlib
import platform
import statistics
import subprocess
import tempfile
import time

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

import kiln


def tiny_model(path):
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["y"], name="add")], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
        [numpy_helper.from_array(np.ones((1, 16), np.float32), "one")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def per_call_us(run, iterations):
    """Median over calls of batches of 100, in microseconds per call."""
    samples = []
    batch = 100
    for _ in range(max(1, iterations // batch)):
        start = time.perf_counter()
        for _ in range(batch):
            run()
        samples.append((time.perf_counter() - start) / batch * 1e6)
    return statistics.median(samples)


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5, help="measurements of each; the median is printed")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as d:
        path = tiny_model(pathlib.Path(d) / "tiny.onnx")
        kiln_options = kiln.SessionOptions()
        kiln_options.intra_op_num_threads = 1
        ours = kiln.InferenceSession(path, kiln_options)
        ort_options = onnxruntime.SessionOptions()
        ort_options.intra_op_num_threads = 1
        theirs = onnxruntime.InferenceSession(path, ort_options, providers=["CPUExecutionProvider"])
    feed = {"x": np.random.default_rng(0).random((1, 16), dtype=np.float32)}
    np.testing.assert_allclose(ours.run(None, feed)[0], theirs.run(None, feed)[0])

    results = {"kiln Python": [], "kiln C++": [], "onnxruntime Python": []}
    for _ in range(args.repeats):
        results["kiln Python"].append(per_call_us(lambda: ours.run(None, feed), args.iterations))
        cpp = ours._sess._time_cpp_runs(feed, args.iterations)
        results["kiln C++"].append(statistics.median(cpp) * 1e6)
        results["onnxruntime Python"].append(per_call_us(lambda: theirs.run(None, feed), args.iterations))
    median = {k: statistics.median(v) for k, v in results.items()}

    print(f"CPU: {cpu_model()}; kiln {kiln.__version__}, onnxruntime {onnxruntime.__version__}, numpy {np.__version__}")
    print(f"tiny model (Add, float32 [1, 16]), 1 intra-op thread, {args.iterations} calls x {args.repeats}; medians")
    print(f"{'':28s}{'us per run':>12s}")
    for name, value in median.items():
        print(f"{name:28s}{value:12.2f}")
    print(f"{'kiln Python overhead':28s}{median['kiln Python'] - median['kiln C++']:12.2f}")


if __name__ == "__main__":
    main()
