"""kiln BF16 (`kiln build --bf16`) against kiln FP32 and ONNX Runtime FP32, per model and thread count.

For each model and N in --threads, plans built with `kiln build --threads N`: FP32; --bf16 (each
eligible layer timed in BF16 and FP32 by the builder, the faster kept); and --bf16 with every
Conv / MatMul / Gemm node constrained to bf16 (--layer-precisions ...:bf16, prefer), which shows
what BF16 arithmetic itself costs and loses. Then four persistent workers (bench/workers.py:
`kiln bench PLAN --serve` three times, bench/ort_worker.py on the ONNX file) timed round-robin, a
batch each, waiting at each switch until the engine that ran last is idle (timing.settle), as
run_bench.py does for two. Accuracy on --accuracy-inputs seeded random inputs
(model_inputs.make_inputs, seeds 1..n), of each BF16 plan against the FP32 plan: SNR in dB over
all outputs (10 log10 of sum ref^2 over sum (bf16 - ref)^2) and, for outputs whose last axis has
more than one class, the share of rows whose argmax agrees (top-1 agreement). Beside them the FP32
plan on the same inputs rounded to BF16: the SNR the model's own amplification leaves from that one
rounding, which no BF16 build of the model can beat. Prints a Markdown table (for
docs/performance.md).

  .venv/bin/python bench/precision_bench.py --kiln build/kiln --models build/bench-models/resnet50.onnx
"""
import argparse
import json
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

import ml_dtypes
import numpy as np
import onnx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from model_inputs import make_inputs  # noqa: E402
from timing import SETTLE_S, percentile, settle  # noqa: E402
from workers import Worker, input_args, ort_worker  # noqa: E402


def bf16_constraints(model):
    """--layer-precisions constraining every Conv, MatMul and Gemm node of the model to bf16."""
    nodes = onnx.load(str(model), load_external_data=False).graph.node
    names = [n.name for n in nodes if n.op_type in ("Conv", "MatMul", "Gemm") and n.name]
    return ["--layer-precisions", ",".join(f"{name}:bf16" for name in names), "--precision-constraints", "prefer"]


def build_plan(kiln, model, plan, threads, flags):
    command = [str(kiln), "build", str(model), "-o", str(plan), "--threads", str(threads), *flags]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout + result.stderr


def layer_precisions(kiln, plan):
    """{precision: layer count} from `kiln inspect`."""
    counts = {}
    for line in subprocess.run([str(kiln), "inspect", str(plan)], capture_output=True, text=True, check=True).stdout.splitlines():
        if ")  kernel " in line and "  precision " in line:
            p = line.split("  precision ")[1].split()[0]
            counts[p] = counts.get(p, 0) + 1
    return counts


def time_round_robin(workers, warmup, iterations, batch):
    """{name: [latencies ms]} of the workers (a dict name -> Worker), each run `iterations` times."""
    for w in workers.values():
        w.load()
        if warmup:
            w.run(warmup)
    latencies = {name: [] for name in workers}
    order = list(workers)
    last = None
    done = 0
    while done < iterations:
        count = min(batch, iterations - done)
        for name in order:
            if last is None or last == name:
                time.sleep(SETTLE_S)
            else:
                settle(workers[last].process.pid)
            latencies[name] += workers[name].run(count)
            last = name
        done += count
        order = order[1:] + order[:1]  # rotate who goes first
    return latencies


def run_outputs(kiln, plan, input_files, out_dir):
    command = [str(kiln), "run", str(plan), "--output-dir", str(out_dir), *input_args(input_files)]
    subprocess.run(command, capture_output=True, text=True, check=True)
    manifest = json.loads((pathlib.Path(out_dir) / "outputs.json").read_text())
    return {e["name"]: np.load(pathlib.Path(out_dir) / e["file"]).astype(np.float64) for e in manifest["outputs"]}


def bf16_rounded(input_files, out_dir):
    """The float32 inputs rounded to bfloat16 (to nearest, ties to even) and back, as new .npy files."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rounded = {}
    for name, path in input_files.items():
        array = np.load(path)
        if array.dtype == np.float32:
            array = array.astype(ml_dtypes.bfloat16).astype(np.float32)
        rounded[name] = out_dir / pathlib.Path(path).name
        np.save(rounded[name], array)
    return rounded


def accuracy(kiln, model, fp32_plan, bf16_plans, inputs, work):
    """{name: (SNR dB, top-1 agreement)} of each plan in bf16_plans against fp32_plan, and under
    "input rounding" the FP32 plan run on the inputs rounded to BF16: what the model's own
    amplification of one BF16 rounding allows, the ceiling for any BF16 build of it (left out when
    the model has no float32 input)."""
    feeds = [make_inputs(model, work / f"in{seed}", seed=seed) for seed in range(1, inputs + 1)]
    has_float_input = any(np.load(path).dtype == np.float32 for path in feeds[0].values())
    plans = {**bf16_plans, **({"input rounding": fp32_plan} if has_float_input else {})}
    signal = 0.0
    noise, agree = dict.fromkeys(plans, 0.0), dict.fromkeys(plans, 0)
    rows = 0
    for seed, files in enumerate(feeds, 1):
        ref = run_outputs(kiln, fp32_plan, files, work / f"fp32_{seed}")
        for name, want in ref.items():
            signal += float(np.sum(want ** 2))
            if want.ndim >= 1 and want.shape[-1] > 1:
                rows += int(np.prod(want.shape[:-1]))
        for plan_name, plan in plans.items():
            feed = bf16_rounded(files, work / f"rounded{seed}") if plan_name == "input rounding" else files
            got = run_outputs(kiln, plan, feed, work / f"{plan_name.replace(' ', '_')}_{seed}")
            for name, want in ref.items():
                noise[plan_name] += float(np.sum((got[name] - want) ** 2))
                if want.ndim >= 1 and want.shape[-1] > 1:
                    agree[plan_name] += int(np.sum(np.argmax(want, -1) == np.argmax(got[name], -1)))
    return {name: (10 * np.log10(signal / noise[name]) if noise[name] > 0 else float("inf"),
                   agree[name] / rows if rows else None) for name in plans}


def cpu_model():
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--models", required=True, help="comma-separated .onnx paths")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=3)
    parser.add_argument("--accuracy-inputs", type=int, default=100)
    args = parser.parse_args(argv)
    rows = []
    print(f"CPU: {cpu_model()}; load average {open('/proc/loadavg').read().split()[:3]}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        for model in [pathlib.Path(m) for m in args.models.split(",")]:
            inputs = make_inputs(model, work / f"{model.stem}_bench")
            for threads in [int(t) for t in args.threads.split(",")]:
                flags = {"kiln fp32": [], "kiln bf16": ["--bf16"], "kiln bf16 all": ["--bf16", *bf16_constraints(model)]}
                plans = {}
                for name, f in flags.items():
                    plans[name] = work / f"{model.stem}_{threads}_{name.replace(' ', '_')}.kiln"
                    build_plan(args.kiln, model, plans[name], threads, f)
                precisions = {name: layer_precisions(args.kiln, plans[name]) for name in ("kiln bf16", "kiln bf16 all")}
                workers = {name: Worker(name, [args.kiln, "bench", str(plan), "--serve", *input_args(inputs)])
                           for name, plan in plans.items()}
                workers["ort fp32"] = ort_worker(model, threads, inputs)
                try:
                    lat = time_round_robin(workers, args.warmup, args.iterations, args.batch)
                finally:
                    for w in workers.values():
                        w.close()
                med = {name: percentile(v, 0.5) for name, v in lat.items()}
                row = {"model": model.stem, "threads": threads, **{k: round(v, 2) for k, v in med.items()},
                       "precisions": precisions}
                if threads == int(args.threads.split(",")[0]) and args.accuracy_inputs:
                    bf16_plans = {name: plans[name] for name in ("kiln bf16", "kiln bf16 all")}
                    measured = accuracy(args.kiln, model, plans["kiln fp32"], bf16_plans, args.accuracy_inputs,
                                        work / "acc")
                    for name, (snr, top1) in measured.items():
                        row[f"{name} snr_db"] = round(snr, 1)
                        row[f"{name} top1"] = None if top1 is None else round(100 * top1, 1)
                print(json.dumps(row), flush=True)
                rows.append(row)
    print("\n| model | threads | kiln FP32 ms | kiln --bf16 ms (timed) | kiln BF16 everywhere ms | ORT FP32 ms | "
          "FP32 / --bf16 | FP32 / BF16 everywhere | ORT / --bf16 | SNR dB (--bf16, everywhere) | top-1 agreement | "
          "SNR dB, input rounded only | layers in BF16 (--bf16, everywhere) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f32, timed, forced, ort = r["kiln fp32"], r["kiln bf16"], r["kiln bf16 all"], r["ort fp32"]
        snr = f"{r.get('kiln bf16 snr_db', '')}, {r.get('kiln bf16 all snr_db', '')}" if "kiln bf16 snr_db" in r else ""
        top1 = f"{r.get('kiln bf16 top1')} %, {r.get('kiln bf16 all top1')} %" if r.get("kiln bf16 top1") is not None else ""
        ceiling = r.get("input rounding snr_db", "no float input")
        counts = ", ".join(str(r["precisions"][n].get("bf16", 0)) + "/" + str(sum(r["precisions"][n].values()))
                           for n in ("kiln bf16", "kiln bf16 all"))
        print(f"| {r['model']} | {r['threads']} | {f32} | {timed} | {forced} | {ort} | {f32 / timed:.2f}x | "
              f"{f32 / forced:.2f}x | {ort / timed:.2f}x | {snr} | {top1} | {ceiling} | {counts} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
