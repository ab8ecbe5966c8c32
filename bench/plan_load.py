"""Plan load time and peak memory against the ONNX path (docs/performance.md, "Compiled plans").

For each model: `kiln build` it once, then, over several trials,
  load:  a `kiln bench --serve` worker (workers.py) times `load` (open + make the inputs) on the
         plan and on the ONNX file, then runs once and reads its peak RSS (VmHWM);
  run:   `/usr/bin/time -v kiln run` on each, its wall time and maximum resident set size.
Medians over the trials are printed as a Markdown table.

    .venv/bin/python bench/plan_load.py --kiln build/kiln --models build/bench-models/resnet50.onnx,...
"""
import argparse
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from model_inputs import make_inputs  # noqa: E402
from workers import kiln_worker  # noqa: E402


def timed_load(kiln, model, threads, inputs):
    """(load ms, peak RSS MiB after one run) of a fresh worker."""
    with kiln_worker(kiln, model, threads, inputs) as worker:
        start = time.perf_counter()
        worker.load()
        load_ms = (time.perf_counter() - start) * 1e3
        worker.run(1)
        return load_ms, worker.peak_kib() / 1024


def timed_run(kiln, model, threads, inputs, out_dir):
    """(wall s, max RSS MiB) of `kiln run` as /usr/bin/time -v reports them."""
    args = ["/usr/bin/time", "-v", str(kiln), "run", str(model), "--threads", str(threads),
            "--output-dir", str(out_dir), *[f"--input={name}={path}" for name, path in inputs.items()]]
    r = subprocess.run(args, capture_output=True, text=True, check=True)
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", r.stderr)
    hours = int(wall.group(1) or 0)
    seconds = hours * 3600 + int(wall.group(2)) * 60 + float(wall.group(3))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1))
    return seconds, rss / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kiln", required=True, type=pathlib.Path)
    parser.add_argument("--models", required=True, help="comma-separated .onnx paths")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()

    print("| model | plan MiB | build s | load ms plan / ONNX | peak RSS MiB (load + 1 run) plan / ONNX | "
          "`kiln run` s plan / ONNX | `kiln run` max RSS MiB plan / ONNX |")
    print("|---|---|---|---|---|---|---|")
    for model in map(pathlib.Path, args.models.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = pathlib.Path(tmp)
            plan = tmp / (model.stem + ".kiln")
            start = time.perf_counter()
            subprocess.run([str(args.kiln), "build", str(model), "-o", str(plan), "--threads", str(args.threads)],
                           check=True, capture_output=True)
            build_s = time.perf_counter() - start
            inputs = make_inputs(model, tmp / "inputs")
            rows = {}
            for target in (plan, model):
                loads, peaks, walls, rss = [], [], [], []
                for _ in range(args.trials):
                    load_ms, peak = timed_load(args.kiln, target, args.threads, inputs)
                    seconds, max_rss = timed_run(args.kiln, target, args.threads, inputs, tmp / "out")
                    loads.append(load_ms)
                    peaks.append(peak)
                    walls.append(seconds)
                    rss.append(max_rss)
                rows[target] = [statistics.median(v) for v in (loads, peaks, walls, rss)]
            p, o = rows[plan], rows[model]
            print(f"| {model.stem} | {plan.stat().st_size / 2**20:.1f} | {build_s:.1f} | {p[0]:.1f} / {o[0]:.1f} | "
                  f"{p[1]:.0f} / {o[1]:.0f} | {p[2]:.2f} / {o[2]:.2f} | {p[3]:.0f} / {o[3]:.0f} |", flush=True)


if __name__ == "__main__":
    main()
