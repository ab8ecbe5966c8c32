"""bench/: the side-by-side harness on a tiny model, the worker protocol, and the output comparison."""
import json
import subprocess
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from onnx import TensorProto, helper


@pytest.fixture
def bench_modules(repo_root, monkeypatch):
    monkeypatch.syspath_prepend(str(repo_root / "bench"))
    import accuracy
    import flops

    return accuracy, flops


@pytest.fixture
def tiny_model(tmp_path):
    """Conv 3->8 (3x3 on 8x8) + Relu + Reshape + MatMul 288x10, plus an embedding row picked by an int64 id."""
    rng = np.random.default_rng(0)
    initializers = [
        onnx.numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
        onnx.numpy_helper.from_array(rng.standard_normal((288, 10)).astype(np.float32), "m"),
        onnx.numpy_helper.from_array(rng.standard_normal((50, 10)).astype(np.float32), "table"),
        onnx.numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "flat"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Reshape", ["r", "flat"], ["f"]),
        helper.make_node("MatMul", ["f", "m"], ["p"]),
        helper.make_node("Gather", ["table", "ids"], ["e"]),
        helper.make_node("Add", ["p", "e"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8]),
         helper.make_tensor_value_info("ids", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        initializers,
    )
    path = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_flops_counts_conv_and_matmul_macs(bench_modules, tiny_model):
    _, flops = bench_modules
    # Conv: 8 x 6 x 6 outputs, 3 x 3 x 3 products each; MatMul: 10 outputs, 288 products each
    assert flops.model_macs(onnx.load(tiny_model)) == 8 * 6 * 6 * 27 + 10 * 288


def test_compare_allows_1e4_relative_plus_1e4_of_the_output_range(bench_modules):
    accuracy, _ = bench_modules
    want = np.array([100.0, 1.0, 0.0], dtype=np.float32)

    def error(got):
        return accuracy.compare("y", np.array(got, dtype=np.float32), want)

    # bound per element: 1e-4 x (|want| + max|want|) = 2e-2, 1.01e-2, 1e-2
    assert error([100.01, 1.0, 0.0]).passed() and error([100.01, 1.0, 0.0]).max_error == pytest.approx(5e-5, rel=1e-3)
    assert error([100.0, 1.0, 5e-3]).passed()
    assert not error([100.0, 1.0, 2e-2]).passed()
    assert not error([100.0, 1.015, 0.0]).passed()
    assert error([100.01, 1.0, 0.0]).max_relative_large == pytest.approx(1e-4, rel=1e-3)
    shape = accuracy.compare("y", want[:2], want)
    assert not shape.passed() and "shape" in shape.problem


def test_kiln_serve_speaks_the_worker_protocol(kiln, tiny_model):
    commands = "load\nrun 2\nbogus\n"
    r = subprocess.run([str(kiln), "bench", str(tiny_model), "--serve", "--threads", "1"], input=commands,
                       capture_output=True, text=True, timeout=60)
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert [e["event"] for e in events] == ["started", "loaded", "ran", "error"]
    assert [i["name"] for i in events[1]["inputs"]] == ["x", "ids"]
    assert len(events[2]["latencies_ms"]) == 2 and all(ms > 0 for ms in events[2]["latencies_ms"])
    assert "bogus" in events[3]["message"] and r.returncode != 0


def test_run_bench_checks_times_and_reports_a_tiny_model(kiln, repo_root, tiny_model, tmp_path):
    results = tmp_path / "results.md"
    command = [sys.executable, str(repo_root / "bench/run_bench.py"), "--kiln", str(kiln), "--models", str(tiny_model),
               "--threads", "1", "--quick", "--iterations", "4", "--peak-gflops", "50", "--results", str(results)]
    r = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    text = results.read_text()
    assert "## 1 thread" in text and "Geometric mean of kiln/ORT over 1 models" in text
    row = next(line for line in text.splitlines() if line.startswith("| tiny | 2.13e-05 |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert float(cells[6]) > 0  # kiln/ORT ratio
    assert "| tiny | y |" in text and "| pass |" in text
