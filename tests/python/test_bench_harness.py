"""bench/: the side-by-side harness on a tiny model (batch sizes, the run cap, the start-up measurement), the
worker protocol, the output comparison, the FLOP count and the results file's blocks."""
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


def tiny_graph(batch):
    """Conv 3->8 (3x3 on 8x8) + Relu + Reshape + MatMul 288x10, plus an embedding row picked by an int64 id;
    `batch` is the first dim of x and y, a number or a symbol."""
    rng = np.random.default_rng(0)
    initializers = [
        onnx.numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
        onnx.numpy_helper.from_array(rng.standard_normal((288, 10)).astype(np.float32), "m"),
        onnx.numpy_helper.from_array(rng.standard_normal((50, 10)).astype(np.float32), "table"),
        onnx.numpy_helper.from_array(np.array([0, -1], dtype=np.int64), "flat"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Reshape", ["r", "flat"], ["f"]),  # batch x 288
        helper.make_node("MatMul", ["f", "m"], ["p"]),
        helper.make_node("Gather", ["table", "ids"], ["e"]),
        helper.make_node("Add", ["p", "e"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8]),
         helper.make_tensor_value_info("ids", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 10])],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture
def tiny_model(tmp_path):
    path = tmp_path / "tiny.onnx"
    onnx.save(tiny_graph(1), path)
    return path


@pytest.fixture
def tiny_batched_model(tmp_path):
    """The tiny model with a free batch dim N on x and y (ids stays [1], broadcast by the Add)."""
    path = tmp_path / "tiny_n.onnx"
    onnx.save(tiny_graph("N"), path)
    return path


def table_row(text, heading, model):
    """The cells of `model`'s row in the first table under `heading`."""
    section = text.split(heading, 1)[1]
    row = next(line for line in section.splitlines() if line.startswith(f"| {model} |"))
    return [cell.strip() for cell in row.strip("|").split("|")]


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
    assert "## Batch 1, 1 thread" in text and "Geometric mean of kiln/ORT over 1 models" in text
    cells = table_row(text, "## Batch 1, 1 thread", "tiny")
    assert cells[1] == "2.13e-05" and cells[2] == "4"  # GFLOP, timed runs
    assert float(cells[7]) > 0  # kiln/ORT ratio
    assert "| tiny | 1 | y |" in text and "| pass |" in text


def test_flops_scale_with_the_batch_and_count_lstm_products(bench_modules, tiny_batched_model, tmp_path):
    _, flops = bench_modules
    single = 2 * (8 * 6 * 6 * 27 + 10 * 288) / 1e9
    assert flops.model_gflop(tiny_batched_model, 8) == pytest.approx(8 * single)
    seq, batch, inputs, hidden = 5, 3, 4, 6
    lstm = helper.make_graph(
        [helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=hidden)], "lstm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, batch, inputs])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(np.zeros((1, 4 * hidden, inputs), np.float32), "w"),
         onnx.numpy_helper.from_array(np.zeros((1, 4 * hidden, hidden), np.float32), "r")])
    path = tmp_path / "lstm.onnx"
    onnx.save(helper.make_model(lstm, opset_imports=[helper.make_opsetid("", 13)]), path)
    # per step and sequence: 4 gates x hidden outputs, each a dot product over input + hidden
    assert flops.model_gflop(path) == pytest.approx(2 * seq * batch * 4 * hidden * (inputs + hidden) / 1e9)


def test_flops_measure_shapes_inference_leaves_unknown(bench_modules, tmp_path):
    _, flops = bench_modules
    # x[:, :max(shape(x)) / 2] @ w: onnx shape inference does not follow the slice end through ReduceMax
    constants = {"two": np.array([2], np.int64), "zero": np.array([0], np.int64), "one": np.array([1], np.int64),
                 "w": np.ones((4, 3), np.float32)}
    graph = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("ReduceMax", ["s"], ["m"], keepdims=1),
         helper.make_node("Div", ["m", "two"], ["half"]),
         helper.make_node("Slice", ["x", "zero", "half", "one"], ["h"]),
         helper.make_node("MatMul", ["h", "w"], ["y"])], "sliced",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(value, name) for name, value in constants.items()])
    path = tmp_path / "sliced.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    assert flops.model_gflop(path) == pytest.approx(2 * 3 * 4 / 1e9)  # 1x3 outputs, 4 products each


def test_run_cap_keeps_the_least_runs_and_fits_the_budget(repo_root, monkeypatch):
    monkeypatch.syspath_prepend(str(repo_root / "bench"))
    import timing

    warmup = {"kiln": [90.0, 100.0], "ort": [150.0]}  # the slowest of each: one round takes 250 ms
    assert timing.affordable_iterations(warmup, 30, None, 5) == 30
    assert timing.affordable_iterations(warmup, 30, 2.0, 5) == 8
    assert timing.affordable_iterations(warmup, 30, 0.1, 5) == 5
    assert timing.affordable_iterations(warmup, 3, 0.1, 5) == 3
    assert timing.affordable_iterations(warmup, 30, 100.0, 5) == 30


def test_run_bench_times_batch_sizes_and_summarises_the_ratios(kiln, repo_root, tiny_batched_model, tmp_path):
    results = tmp_path / "results.md"
    results.write_text("# kiln vs ONNX Runtime on the CPU\n\n## History\n\nan earlier run\n")
    command = [sys.executable, str(repo_root / "bench/run_bench.py"), "--kiln", str(kiln), "--models",
               str(tiny_batched_model), "--batch-sizes", "1,8", "--threads", "1,2", "--quick", "--iterations", "6",
               "--max-seconds", "1e-6", "--min-iterations", "2", "--peak-gflops", "50", "--results", str(results)]
    r = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    text = results.read_text()
    assert text.index("<!-- end latency -->") < text.index("## History") and text.endswith("an earlier run\n")
    batch8 = table_row(text, "## Batch 8, 2 threads", "tiny_n")
    assert float(batch8[1]) == pytest.approx(8 * 2.13e-05, rel=1e-2) and batch8[2] == "2"  # capped at the least
    summary = table_row(text, "## kiln/ORT median latency", "tiny_n")
    assert len(summary) == 5 and all(float(cell) > 0 for cell in summary[1:])
    assert "Geometric mean over all 4 model × batch × thread cells" in text
    assert "| tiny_n | 8 | y |" in text and "| tiny_n | 8 | 2 |" in text  # accuracy and memory rows


def test_run_bench_refuses_a_batch_a_static_model_cannot_take(kiln, repo_root, tiny_model, tmp_path):
    command = [sys.executable, str(repo_root / "bench/run_bench.py"), "--kiln", str(kiln), "--models", str(tiny_model),
               "--batch-sizes", "8", "--quick", "--results", str(tmp_path / "results.md")]
    r = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "static first dim" in r.stderr and "batch 8" in r.stderr


def test_startup_times_session_plan_and_ort_and_keeps_the_latency_block(kiln, repo_root, tiny_model, tmp_path):
    results = tmp_path / "results.md"
    results.write_text("# title\n\n<!-- begin latency -->\nlatency tables\n<!-- end latency -->\n")
    command = [sys.executable, str(repo_root / "bench/startup.py"), "--kiln", str(kiln), "--models", str(tiny_model),
               "--trials", "2", "--results", str(results)]
    r = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    text = results.read_text()
    assert "latency tables\n<!-- end latency -->" in text and "<!-- begin startup -->" in text
    cells = table_row(text, "## Start-up", "tiny")
    assert cells[1] == "1" and len(cells) == 18
    numbers = [float(cell) for cell in cells[2:]]
    assert all(value > 0 for value in numbers[1:]), cells  # build s, open / first run / totals, ratios
    session_open, session_first, session_total = numbers[2:5]
    assert session_total >= max(session_open, session_first)
    assert "Geometric means over 1 models" in text


def test_workers_report_how_long_opening_the_model_took(kiln, repo_root, tiny_model, monkeypatch):
    monkeypatch.syspath_prepend(str(repo_root / "bench"))
    import workers

    for make in (lambda: workers.kiln_worker(kiln, tiny_model, 1, {}), lambda: workers.ort_worker(tiny_model, 1, {})):
        with make() as worker:
            assert worker.load()["load_ms"] > 0


def test_results_blocks_are_replaced_in_place_and_added_before_the_history(repo_root, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(repo_root / "bench"))
    import results_file

    path = tmp_path / "results.md"
    results_file.update_block(path, "latency", ["one"])
    title = "# kiln vs ONNX Runtime on the CPU\n\n"
    assert path.read_text() == title + "<!-- begin latency -->\none\n<!-- end latency -->\n"
    path.write_text(path.read_text() + "\n## History\n\nold\n")
    results_file.update_block(path, "startup", ["two"])
    results_file.update_block(path, "latency", ["three", "lines"])
    assert results_file.read_block(path, "latency") == ["three", "lines"]
    assert results_file.read_block(path, "startup") == ["two"]
    text = path.read_text()
    assert text.index("<!-- end startup -->") < text.index("## History") and text.endswith("old\n")
    path.write_text("<!-- begin latency -->\nno end\n")
    with pytest.raises(ValueError, match="no '<!-- end latency -->'"):
        results_file.update_block(path, "latency", ["x"])


def test_op_shares_lists_both_engines_ops_over_the_timed_runs(kiln, repo_root, tiny_model, monkeypatch):
    command = [sys.executable, str(repo_root / "bench/op_shares.py"), str(tiny_model), "--kiln", str(kiln),
               "--warmup", "1", "--iterations", "3", "--top", "20"]
    r = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in r.stdout.splitlines()
            if line.startswith("| ") and not line.startswith("| kiln op")]
    kiln_ops = {row[0].split(" (")[0] for row in rows if row[0]}
    ort_ops = {row[3] for row in rows if row[3]}
    assert {"Conv", "Gather"} <= ort_ops  # ORT fuses MatMul + Add into Gemm
    assert kiln_ops and all(float(row[1]) >= 0 for row in rows if row[0])
    assert sum(float(row[2]) for row in rows if row[0]) == pytest.approx(100, abs=len(rows))  # shares of all ops
    monkeypatch.syspath_prepend(str(repo_root / "bench"))
    import op_shares

    events = [{"name": "model_run", "ts": t, "dur": 10} for t in (0, 100, 200)]
    events += [{"name": "a", "ts": t + 1, "dur": 4000, "args": {"op_name": "Conv"}} for t in (0, 100, 200)]
    ops, run_ms = op_shares.op_times(events, 2, lambda e: e["args"]["op_name"])
    assert ops == {"Conv": 4.0} and run_ms == pytest.approx(0.01)  # the first (warm-up) run left out
    with pytest.raises(ValueError, match="3 model_run events, expected at least 4"):
        op_shares.op_times(events, 4, lambda e: e["args"]["op_name"])


def test_float16_models_converts_keeping_float32_io_and_the_harness_times_it(kiln, repo_root, tiny_model, tmp_path,
                                                                             monkeypatch):
    monkeypatch.syspath_prepend(str(repo_root / "bench"))
    import float16_models

    out = tmp_path / "fp16"
    path = float16_models.convert(tiny_model, out)
    assert path == out / "tiny_fp16.onnx"
    graph = onnx.load(str(path)).graph
    weights = {t.name: t.data_type for t in graph.initializer}
    assert weights["w"] == weights["m"] == weights["table"] == TensorProto.FLOAT16
    assert weights["flat"] == TensorProto.INT64
    assert [v.type.tensor_type.elem_type for v in graph.input] == [TensorProto.FLOAT, TensorProto.INT64]
    assert graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT
    stamp = path.stat().st_mtime_ns
    assert float16_models.convert(tiny_model, out) == path and path.stat().st_mtime_ns == stamp  # kept

    results = tmp_path / "results.md"
    command = [sys.executable, str(repo_root / "bench/run_bench.py"), "--kiln", str(kiln), "--models", str(path),
               "--threads", "1", "--quick", "--iterations", "4", "--peak-gflops", "50", "--tolerance", "1e-2",
               "--results", str(results)]
    r = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "| tiny_fp16 | 1 | y |" in results.read_text()


def test_autogroup_note_reads_the_niceness_and_is_empty_without_autogroups(repo_root, monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(repo_root / "bench"))
    import run_bench

    autogroup = tmp_path / "autogroup"
    autogroup.write_text("/autogroup-17 nice -15\n")
    assert run_bench.autogroup_note(autogroup) == ", autogroup nice -15"
    autogroup.write_text("")  # what the kernel prints with autogroups disabled (CI machines)
    assert run_bench.autogroup_note(autogroup) == ""
    assert run_bench.autogroup_note(tmp_path / "missing") == ""
