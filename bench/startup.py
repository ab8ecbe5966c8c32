#!/usr/bin/env python3
"""Time to first result: kiln's ONNX path (Session: load + build) and its plan path (deserialize a plan built
beforehand) against ONNX Runtime's InferenceSession creation, each followed by its first run.

    .venv/bin/python bench/startup.py [--kiln build/kiln] [--models resnet50,...] [--batch-sizes 1]
        [--threads 1] [--trials 5] [--results bench/results.md]

For each model: `kiln build MODEL -o PLAN` once (timed), then one untimed round (so every file is in the page
cache) and --trials timed rounds. A round starts a fresh worker per target, in an order that rotates from
round to round: `kiln bench MODEL.onnx --serve`, `kiln bench PLAN --serve` and bench/ort_worker.py. Each
worker reports how long opening the model took inside it (`load_ms`: kiln's Session creation or the plan's
Runtime::deserializeEngine; ORT's InferenceSession constructor), then times its first run and a second one.
Process start-up (exec, shared libraries, the Python interpreter and its imports) is not counted, for either
engine. Medians over the rounds and the kiln/ORT ratios of the medians are written to the `startup` block of
--results (see bench/results_file.py), and printed.
"""
import argparse
import datetime
import os
import pathlib
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

BENCH_DIR = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import results_file  # noqa: E402
import run_bench  # noqa: E402
from model_inputs import make_inputs  # noqa: E402
from report import geometric_mean  # noqa: E402
from workers import kiln_worker, ort_worker  # noqa: E402

TARGETS = ("kiln Session", "kiln plan", "ORT")


@dataclass
class Startup:
    """One target's timings over the rounds, in ms."""

    load: list = field(default_factory=list)
    first_run: list = field(default_factory=list)
    second_run: list = field(default_factory=list)

    @property
    def total(self):
        """Median over the rounds of load + first run."""
        return statistics.median(a + b for a, b in zip(self.load, self.first_run))

    def median(self, name):
        return statistics.median(getattr(self, name))


@dataclass
class ModelStartup:
    name: str
    batch: int
    plan_mib: float = 0.0
    build_s: float = 0.0
    targets: dict = field(default_factory=lambda: {target: Startup() for target in TARGETS})
    failure: str = ""


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kiln", default=str(run_bench.REPO_ROOT / "build" / "kiln"), help="kiln binary")
    parser.add_argument("--models", default=",".join(run_bench.DEFAULT_MODELS),
                        help="comma-separated model names of bench/export_models.py or .onnx paths")
    parser.add_argument("--model-dir", default=str(run_bench.REPO_ROOT / "build" / "bench-models"))
    parser.add_argument("--batch-sizes", default="1", help="comma-separated batch sizes (default 1)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads of both engines (default 1)")
    parser.add_argument("--trials", type=int, default=5, help="timed rounds per model (default 5)")
    parser.add_argument("--results", default=str(BENCH_DIR / "results.md"), help="report file (default bench/results.md)")
    parser.add_argument("--note", action="append", default=[], help="a line for the report (repeatable)")
    options = parser.parse_args(argv)
    options.batch_sizes = [int(b) for b in options.batch_sizes.split(",")]
    if options.trials < 1 or options.threads < 1 or min(options.batch_sizes) < 1:
        parser.error("--trials, --threads and every --batch-sizes value must be >= 1")
    return options


def one_start(kiln, target, model, plan, threads, inputs):
    """(load ms inside the worker, first run ms, second run ms) of a fresh worker for `target`."""
    if target == "ORT":
        worker = ort_worker(model, threads, inputs)
    else:
        worker = kiln_worker(kiln, plan if target == "kiln plan" else model, threads, inputs)
    with worker:
        load_ms = worker.load()["load_ms"]
        first, second = worker.run(1)[0], worker.run(1)[0]
    return load_ms, first, second


def measure_model(result, kiln, model, options, work_dir, log):
    plan = work_dir / (model.stem + ".kiln")
    start = time.perf_counter()
    built = subprocess.run([str(kiln), "build", str(model), "-o", str(plan), "--threads", str(options.threads)],
                           capture_output=True, text=True)
    result.build_s = time.perf_counter() - start
    if built.returncode != 0:
        result.failure = f"kiln build failed (exit {built.returncode}): {built.stderr.strip().splitlines()[-1:]}"
        log(f"FAILURE {result.name}: {built.stderr}")
        return
    result.plan_mib = plan.stat().st_size / 2**20
    inputs = make_inputs(model, work_dir / "inputs", batch=result.batch)
    for round_index in range(options.trials + 1):  # round 0 fills the page cache and is not counted
        shift = round_index % len(TARGETS)
        for target in TARGETS[shift:] + TARGETS[:shift]:
            load_ms, first, second = one_start(kiln, target, model, plan, options.threads, inputs)
            if round_index:
                timings = result.targets[target]
                timings.load.append(load_ms)
                timings.first_run.append(first)
                timings.second_run.append(second)
    t = result.targets
    log(f"  {result.name} batch {result.batch}: build {result.build_s:.1f} s; to first result: Session "
        f"{t['kiln Session'].total:.1f} ms, plan {t['kiln plan'].total:.1f} ms, ORT {t['ORT'].total:.1f} ms")


def _ms(value):
    """Two decimals, or two significant digits below 0.1 (a tiny model's run would print 0.00)."""
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"


def report_lines(results, environment):
    lines = [
        "## Start-up: time to first result",
        "",
        "Produced by `bench/startup.py` (method in its docstring and [bench/README.md](README.md)).",
        "",
        *[f"- **{key}**: {value}" for key, value in environment.items()],
        "",
        "Medians over the rounds, ms. *open*: kiln's Session creation (parse + optimize + build, heuristic "
        "kernels) for the ONNX file, Runtime::deserializeEngine for the plan, the InferenceSession constructor for "
        "ORT. *1st*: the first run after it; *2nd*: the next run (the steady state), for comparison. *total* = open + 1st (median "
        "of the sums). Ratios are kiln/ORT of the medians; *open* ratio is Session creation / ORT's.",
        "",
        "| model | batch | plan MiB | kiln build s | Session open | Session 1st | Session total | plan open | "
        "plan 1st | plan 2nd | plan total | ORT open | ORT 1st | ORT 2nd | ORT total | Session/ORT total | "
        "plan/ORT total | Session/ORT open |",
        "|---|---:|" + "---:|" * 16,
    ]
    ratios = {"session": [], "plan": [], "open": []}
    for r in results:
        if r.failure:
            lines.append(f"| {r.name} | {r.batch} | **FAIL**: {r.failure} |" + " |" * 15)
            continue
        s, p, o = (r.targets[t] for t in TARGETS)
        session, plan, opened = s.total / o.total, p.total / o.total, s.median("load") / o.median("load")
        for key, value in zip(ratios, (session, plan, opened)):
            ratios[key].append(value)
        cells = [r.name, str(r.batch), f"{r.plan_mib:.1f}", _ms(r.build_s),
                 _ms(s.median("load")), _ms(s.median("first_run")), _ms(s.total),
                 _ms(p.median("load")), _ms(p.median("first_run")), _ms(p.median("second_run")), _ms(p.total),
                 _ms(o.median("load")), _ms(o.median("first_run")), _ms(o.median("second_run")), _ms(o.total),
                 f"{session:.2f}", f"{plan:.2f}", f"{opened:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    count = len(ratios["session"])
    lines += ["", f"Geometric means over {count} models: Session/ORT total "
              f"**{geometric_mean(ratios['session']):.2f}**, "
              f"plan/ORT total **{geometric_mean(ratios['plan']):.2f}**, Session/ORT open "
              f"**{geometric_mean(ratios['open']):.2f}** (≤ 0.5 on {sum(v <= 0.5 for v in ratios['open'])} of "
              f"{count})."]
    return lines


def main(argv):
    options = parse_args(argv)

    def log(message):
        print(message, flush=True)

    kiln = pathlib.Path(options.kiln).resolve()
    if not kiln.is_file():
        raise SystemExit(f"startup: kiln binary {kiln} does not exist (build it, or pass --kiln)")
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = run_bench.load_average()
    results = []
    with tempfile.TemporaryDirectory(prefix="kiln-startup-") as tmp:
        for name, batch, path in run_bench.resolve_models(options, log):
            result = ModelStartup(name, batch)
            work_dir = pathlib.Path(tmp) / f"{name}-b{batch}"
            work_dir.mkdir()
            try:
                measure_model(result, kiln, path, options, work_dir, log)
            except run_bench.workers.WorkerError as error:
                result.failure = str(error).splitlines()[0]
                log(f"FAILURE {name}: {error}")
            results.append(result)
    environment = {
        "Date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "CPU": f"{run_bench.cpu_model()}, {os.cpu_count()} logical CPUs",
        "kiln": f"commit {run_bench.git_commit()}, binary {os.path.relpath(kiln, run_bench.REPO_ROOT)}",
        "Rounds": f"1 untimed + {options.trials} timed, {options.threads} thread(s)",
        "Load average (1, 5, 15 min)": f"{load_before} at the start, {run_bench.load_average()} at the end",
        "Command": f"`python bench/startup.py {shlex.join(argv)}`",
    }
    for index, note in enumerate(options.note, 1):
        environment[f"Note {index}" if len(options.note) > 1 else "Note"] = note
    lines = report_lines(results, environment)
    results_file.update_block(options.results, "startup", lines)
    log("\n".join(lines))
    return 1 if any(r.failure for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
