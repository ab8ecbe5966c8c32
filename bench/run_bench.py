#!/usr/bin/env python3
"""kiln vs ONNX Runtime on the benchmark models: outputs checked, then timed side by side.

Run with the repository venv (onnx, onnxruntime, numpy):

    .venv/bin/python bench/run_bench.py [--kiln build/kiln] [--models resnet50,...] [--batch-sizes 1,8]
        [--threads 1,2] [--iterations 30] [--warmup 5] [--max-seconds S] [--quick] [--results bench/results.md]

For each model and batch size: export it if missing (bench/export_models.py under /usr/bin/python3, one
static-shaped file per batch size), make seeded random inputs, check that kiln's outputs match ORT's, then
for each thread count time both engines as persistent workers in alternating batches (see
bench/README.md). A model whose outputs do not match is reported loudly and makes the exit code 1, but is
still timed. --models also accepts .onnx paths; a batch size other than 1 needs a free first input dim there.
"""
import argparse
import datetime
import os
import pathlib
import platform
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

import onnxruntime

BENCH_DIR = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import accuracy  # noqa: E402
import flops  # noqa: E402
import peak as peak_module  # noqa: E402
import report  # noqa: E402
import timing  # noqa: E402
import workers  # noqa: E402
import results_file  # noqa: E402
from model_inputs import has_free_batch, make_inputs  # noqa: E402
from model_names import DEFAULT_MODELS, model_file_name  # noqa: E402

REPO_ROOT = BENCH_DIR.parent
SYSTEM_PYTHON = "/usr/bin/python3"  # torch lives there, not in the venv


@dataclass
class ModelResult:
    name: str
    path: pathlib.Path
    batch: int = 1
    gflop: float = 0.0
    errors: list = field(default_factory=list)  # accuracy.OutputError per output
    accuracy_failure: str = ""  # kiln could not run the model at all
    timings: dict = field(default_factory=dict)  # threads -> {"kiln": EngineTiming, "ort": EngineTiming}
    timing_failure: str = ""

    def accurate(self, tolerance):
        return not self.accuracy_failure and all(error.passed(tolerance) for error in self.errors)


def set_autogroup_nice(value):
    """With the kernel's autogroups (sched_autogroup_enabled), niceness ranks threads only within their
    session: another session's busy process, even at nice 19, still gets its group's half of the CPU
    and slows 2-thread runs about 3x. The session's autogroup gets the niceness too, where the kernel
    has them."""
    autogroup = pathlib.Path("/proc/self/autogroup")
    if autogroup.exists():
        try:
            autogroup.write_text(str(value))
        except OSError as e:
            print(f"run_bench: could not set the autogroup's niceness ({e}); other sessions' load counts", flush=True)


def autogroup_note(autogroup=pathlib.Path("/proc/self/autogroup")):
    """", autogroup nice N" for the report where the process is in an autogroup, else "". The file
    reads "/autogroup-17 nice 0"; it is empty where autogroups are disabled or a cgroup holds the task."""
    try:
        match = re.fullmatch(r"/autogroup-\d+ nice (-?\d+)\s*", autogroup.read_text())
    except OSError:
        return ""
    return f", autogroup nice {match.group(1)}" if match else ""


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kiln", default=str(REPO_ROOT / "build" / "kiln"), help="kiln binary (default build/kiln)")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help="comma-separated model names of bench/export_models.py or .onnx paths")
    parser.add_argument("--model-dir", default=str(REPO_ROOT / "build" / "bench-models"),
                        help="where exported models are kept (default build/bench-models)")
    parser.add_argument("--batch-sizes", default="1", help="comma-separated batch sizes (default 1)")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--iterations", type=int, default=30, help="timed runs per engine (default 30)")
    parser.add_argument("--max-seconds", type=float,
                        help="fewer timed runs (but at least --min-iterations) where a model, batch size and thread "
                             "count would take longer than this for both engines, judged by the warm-up runs")
    parser.add_argument("--min-iterations", type=int, default=5, help="least timed runs under --max-seconds (5)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed runs per engine first (default 5)")
    parser.add_argument("--batch", type=int, default=3, help="runs per engine before switching (default 3)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 1 warm-up and 5 timed runs, unless given explicitly")
    parser.add_argument("--peak-gflops", type=float, help="peak FP32 GFLOP/s of one core (default: measured)")
    parser.add_argument("--tolerance", type=float, default=accuracy.RELATIVE_TOLERANCE,
                        help="relative tolerance of the output check (default 1e-4; see bench/accuracy.py)")
    parser.add_argument("--near-zero", type=float, default=accuracy.NEAR_ZERO,
                        help="absolute tolerance as a fraction of max|ORT output|, times --tolerance (default 1)")
    parser.add_argument("--results", default=str(BENCH_DIR / "results.md"), help="report file (default bench/results.md)")
    parser.add_argument("--nice", type=int,
                        help="run the harness and both workers at this niceness (negative needs root): on a shared "
                             "machine a high priority keeps other processes' load out of the timings")
    parser.add_argument("--note", action="append", default=[], help="a line for the report (repeatable)")
    options = parser.parse_args(argv)
    explicit = set(arg.split("=")[0] for arg in argv)
    if options.quick:
        if "--iterations" not in explicit:
            options.iterations = 5
        if "--warmup" not in explicit:
            options.warmup = 1
    options.thread_counts = [int(t) for t in options.threads.split(",")]
    options.batch_sizes = [int(b) for b in options.batch_sizes.split(",")]
    if options.iterations < 1 or options.warmup < 0 or options.batch < 1 or min(options.thread_counts) < 1 \
            or min(options.batch_sizes) < 1 or options.min_iterations < 1:
        parser.error("--iterations, --min-iterations, --batch and every --threads and --batch-sizes value must be "
                     ">= 1, --warmup >= 0")
    if options.max_seconds is not None and (options.max_seconds <= 0 or options.warmup < 1):
        parser.error("--max-seconds must be > 0 and needs --warmup >= 1 (the warm-up runs tell how long a run takes)")
    return options


def resolve_models(options, log):
    """(name, batch, path) per requested model and batch size, batch sizes outermost, exporting the missing
    named ones. An .onnx path serves every batch size through its free first input dim."""
    names = [m for m in options.models.split(",") if m]
    exportable = [n for n in names if not n.endswith(".onnx")]
    model_dir = pathlib.Path(options.model_dir)
    for batch in options.batch_sizes:
        missing = [n for n in exportable if not (model_dir / model_file_name(n, batch)).exists()]
        if missing:
            command = [SYSTEM_PYTHON, str(BENCH_DIR / "export_models.py"), "--out", options.model_dir,
                       "--batch", str(batch), "--only", *missing]
            log("exporting: " + shlex.join(command))
            subprocess.run(command, check=True)
    models = []
    for batch in options.batch_sizes:
        for name in names:
            path = pathlib.Path(name) if name.endswith(".onnx") else model_dir / model_file_name(name, batch)
            if not path.exists():
                raise SystemExit(f"run_bench: model file {path} does not exist")
            if name.endswith(".onnx") and batch != 1 and not has_free_batch(path):
                raise SystemExit(f"run_bench: {path} has a static first dim on every input, so it cannot run at "
                                 f"batch {batch}; export it with a free batch dim")
            models.append((path.stem if name.endswith(".onnx") else name, batch, path.resolve()))
    return models


def git_commit():
    def git(*args):
        return subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return commit + (" (with uncommitted changes in the working tree)" if dirty else "")


def cpu_model():
    """lscpu's model name, with the family and model numbers that tell apart CPUs of the same name."""
    fields = {}
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("Model name") or platform.processor() or "unknown"
    if "CPU family" in fields and "Model" in fields:
        name += f" (family {fields['CPU family']}, model {fields['Model']})"
    return name


def load_average():
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def check_accuracy(result, kiln, input_files, work_dir, options, log):
    try:
        result.errors = accuracy.check_model(kiln, result.path, input_files, work_dir, options.near_zero)
    except RuntimeError as error:
        result.accuracy_failure = str(error).splitlines()[0]
        log(f"ACCURACY FAILURE {result.name}: {error}")
        return
    for error in result.errors:
        verdict = "ok" if error.passed(options.tolerance) else f"MISMATCH {error.problem}"
        log(f"  {result.name} output {error.name}: max error {error.max_error:.2e} "
            f"(max abs {error.max_abs_error:.2e}, max|ORT| {error.max_abs_reference:.3g}) {verdict}")
    if not result.accurate(options.tolerance):
        log(f"ACCURACY FAILURE {result.name}: kiln's outputs differ from ORT's beyond {options.tolerance:g}")


def benchmark_model(result, kiln, work_dir, options, log):
    try:
        result.gflop = flops.model_gflop(result.path, result.batch)
    except Exception as error:  # a model whose work cannot be counted is still checked and timed
        result.gflop = float("nan")
        log(f"{result.name} batch {result.batch}: GFLOP not counted: {error}")
    input_files = make_inputs(result.path, work_dir / "inputs", batch=result.batch)
    log(f"{result.name} batch {result.batch}: {result.gflop:.2f} GFLOP, inputs {', '.join(input_files)}")
    check_accuracy(result, kiln, input_files, work_dir / "kiln-outputs", options, log)
    if result.accuracy_failure:
        result.timing_failure = "kiln cannot run it"
        return
    for threads in options.thread_counts:
        try:
            result.timings[threads] = timing.time_side_by_side(
                kiln, result.path, input_files, threads, options.warmup, options.iterations, options.batch, log,
                options.max_seconds, options.min_iterations)
        except workers.WorkerError as error:
            result.timing_failure = str(error).splitlines()[0]
            log(f"TIMING FAILURE {result.name}, {threads} threads: {error}")
            continue
        kiln_t, ort_t = result.timings[threads]["kiln"], result.timings[threads]["ort"]
        log(f"  {threads} thread(s): kiln median {kiln_t.median_ms:.2f} ms p90 {kiln_t.p90_ms:.2f}, ORT median "
            f"{ort_t.median_ms:.2f} ms p90 {ort_t.p90_ms:.2f}, ratio {kiln_t.median_ms / ort_t.median_ms:.2f}")


def main(argv):
    options = parse_args(argv)

    def log(message):
        print(message, flush=True)

    if options.nice is not None:
        os.setpriority(os.PRIO_PROCESS, 0, options.nice)  # the workers inherit it
        set_autogroup_nice(options.nice)
    kiln = pathlib.Path(options.kiln).resolve()
    if not kiln.is_file():
        raise SystemExit(f"run_bench: kiln binary {kiln} does not exist (build it, or pass --kiln)")
    command = "python bench/run_bench.py " + shlex.join(argv)
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = load_average()
    models = resolve_models(options, log)
    peak = peak_module.find_peak(options.peak_gflops, log)
    log(f"peak {peak.per_core_gflops:.1f} GFLOP/s per core ({peak.source})")
    results = []
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as tmp:
        for name, batch, path in models:
            result = ModelResult(name, path, batch)
            benchmark_model(result, kiln, pathlib.Path(tmp) / f"{name}-b{batch}", options, log)
            results.append(result)
    environment = {
        "Date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "CPU": f"{cpu_model()}, {os.cpu_count()} logical CPUs",
        "kiln": f"commit {git_commit()}, binary {os.path.relpath(kiln, REPO_ROOT)}",
        "ONNX Runtime": f"{onnxruntime.__version__} (CPUExecutionProvider, sequential, inter-op 1 thread)",
        "Runs": f"{options.warmup} warm-up + {options.iterations} timed per engine, alternating in batches of "
                f"{options.batch}" + ("" if options.max_seconds is None else
                                      f"; fewer (at least {options.min_iterations}) where that would take over "
                                      f"{options.max_seconds:g} s for both engines (the tables give the count)"),
        "Load average (1, 5, 15 min)": f"{load_before} at the start, {load_average()} at the end",
        "Priority": f"harness and workers at nice {os.getpriority(os.PRIO_PROCESS, 0)}" + autogroup_note(),
        "Command": f"`{command}`",
    }
    for index, note in enumerate(options.note, 1):
        environment[f"Note {index}" if len(options.note) > 1 else "Note"] = note
    results_file.update_block(options.results, "latency",
                              report.latency_report(environment, results, options.batch_sizes, options.thread_counts,
                                                    peak, options.tolerance, options.near_zero))
    log(f"wrote {options.results}")
    failed = [f"{r.name} (batch {r.batch})" for r in results if not r.accurate(options.tolerance) or r.timing_failure]
    if failed:
        log(f"FAILED: {', '.join(failed)} (outputs differ from ORT's or a run failed; see {options.results})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
