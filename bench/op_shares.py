#!/usr/bin/env python3
"""Where the time goes: per operator, kiln's layer times (from `kiln bench --trace`) beside ONNX Runtime's node
times (from its profiler), on the same inputs and thread count, as a Markdown table.

    .venv/bin/python bench/op_shares.py MODEL.onnx [--kiln build/kiln] [--threads 1] [--batch 1]
        [--warmup 3] [--iterations 10] [--top 8]

Both traces are Chrome-trace JSON arrays; a run is a `model_run` event, a layer (kiln) or node (ORT
`*_kernel_time`) an event with `args.op_name`. Only events inside the last --iterations runs count, so the
warm-up runs are left out; times are means per run. kiln's rows name the kernel that ran the layer. The
per-layer clocks add a little time per layer, so compare the shares rather than the totals with
bench/run_bench.py's latencies.
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
from collections import defaultdict

import numpy as np
import onnxruntime as ort

BENCH_DIR = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
from model_inputs import make_inputs  # noqa: E402


def op_times(events, runs, key):
    """{key(event): mean ms per run} over the layer events that lie inside the last `runs` model_run events,
    and the mean ms of those runs."""
    windows = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == "model_run")[-runs:]
    if len(windows) < runs:
        raise ValueError(f"the trace has {len(windows)} model_run events, expected at least {runs}")
    totals = defaultdict(float)
    for event in events:
        op = event.get("args", {}).get("op_name")
        if op and any(start <= event["ts"] < end for start, end in windows):
            label = key(event)
            if label:
                totals[label] += event["dur"] / 1e3 / runs
    return dict(totals), sum(end - start for start, end in windows) / 1e3 / runs


def kiln_trace(kiln, model, inputs, threads, warmup, iterations, work_dir):
    trace = work_dir / "kiln-trace.json"
    command = [str(kiln), "bench", str(model), "--threads", str(threads), "--warmup", str(warmup),
               "--iterations", str(iterations), "--trace", str(trace),
               *[f"--input={name}={path}" for name, path in inputs.items()]]
    subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(trace.read_text())


def ort_trace(model, inputs, threads, warmup, iterations, work_dir):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.enable_profiling = True
    options.profile_file_prefix = str(work_dir / "ort-profile")
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    feeds = {name: np.load(path) for name, path in inputs.items()}
    for _ in range(warmup + iterations):
        session.run(None, feeds)
    return json.loads(pathlib.Path(session.end_profiling()).read_text())


def kiln_label(event):
    kernel = event["args"].get("kernel")
    return f"{event['args']['op_name']} ({kernel})" if kernel else event["args"]["op_name"]


def ort_label(event):
    return event["args"]["op_name"] if event["name"].endswith("_kernel_time") else None


def table(kiln, ort_ops, top):
    (k_ops, k_run), (o_ops, o_run) = kiln, ort_ops
    k_rows = sorted(k_ops.items(), key=lambda item: -item[1])[:top]
    o_rows = sorted(o_ops.items(), key=lambda item: -item[1])[:top]
    k_sum, o_sum = sum(k_ops.values()), sum(o_ops.values())
    lines = [f"kiln: {k_run:.2f} ms per run, {k_sum:.2f} in layers; ORT: {o_run:.2f} ms per run, {o_sum:.2f} in nodes",
             "", "| kiln op (kernel) | ms | % | ORT op | ms | % |", "|---|---:|---:|---|---:|---:|"]
    for index in range(max(len(k_rows), len(o_rows))):
        cells = []
        for rows, total in ((k_rows, k_sum), (o_rows, o_sum)):
            if index < len(rows):
                label, ms = rows[index]
                cells += [label, f"{ms:.2f}", f"{100 * ms / total:.0f}"]
            else:
                cells += ["", "", ""]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=pathlib.Path)
    parser.add_argument("--kiln", default=str(BENCH_DIR.parent / "build" / "kiln"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=1, help="value of a free first input dim (default 1)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--top", type=int, default=8, help="rows per engine (default 8)")
    options = parser.parse_args(argv)
    if options.iterations < 1 or options.warmup < 0 or options.threads < 1 or options.top < 1:
        parser.error("--iterations, --threads and --top must be >= 1, --warmup >= 0")
    with tempfile.TemporaryDirectory(prefix="kiln-op-shares-") as tmp:
        work_dir = pathlib.Path(tmp)
        inputs = make_inputs(options.model, work_dir / "inputs", batch=options.batch)
        runs = (options.threads, options.warmup, options.iterations, work_dir)
        kiln = op_times(kiln_trace(options.kiln, options.model, inputs, *runs), options.iterations, kiln_label)
        ort_ops = op_times(ort_trace(options.model, inputs, *runs), options.iterations, ort_label)
    print(f"{options.model.name}, batch {options.batch}, {options.threads} thread(s), means over "
          f"{options.iterations} runs after {options.warmup} warm-up")
    print("\n".join(table(kiln, ort_ops, options.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
