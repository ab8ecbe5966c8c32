"""bench/results.md's latency block: the environment, the command, the ratio summary, the timing tables per
batch size and thread count, the accuracy check and the workers' memory."""
import math


def _ms(value):
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _mib(kib):
    return f"{kib / 1024:.0f}"


def geometric_mean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def _threads(threads):
    return f"{threads} thread{'s' if threads > 1 else ''}"


def ratio(result, threads):
    timing = result.timings.get(threads)
    return timing["kiln"].median_ms / timing["ort"].median_ms if timing else None


def summary_section(results, batch_sizes, thread_counts):
    """One row per model, one kiln/ORT column per (batch, threads), the geometric mean of each column and of all."""
    columns = [(b, t) for b in batch_sizes for t in thread_counts]
    by_model = {}
    for result in results:
        by_model.setdefault(result.name, {})[result.batch] = result
    lines = [
        "## kiln/ORT median latency (lower is better)",
        "",
        "| model | " + " | ".join(f"batch {b}, {_threads(t)}" for b, t in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    every = []
    per_column = {column: [] for column in columns}
    for name, batches in by_model.items():
        cells = []
        for batch, threads in columns:
            result = batches.get(batch)
            value = ratio(result, threads) if result else None
            if value is None:
                cells.append("fail" if result and (result.accuracy_failure or result.timing_failure) else "—")
                continue
            cells.append(f"{value:.2f}")
            per_column[(batch, threads)].append(value)
            every.append(value)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("| **geometric mean** | " + " | ".join(
        f"**{geometric_mean(per_column[c]):.2f}**" if per_column[c] else "—" for c in columns) + " |")
    lines += ["", f"Geometric mean over all {len(every)} model × batch × thread cells: "
              f"**{geometric_mean(every):.2f}**; ≤ 0.90 in {sum(v <= 0.90 for v in every)} of them, ≤ 1.00 in {sum(v <= 1.0 for v in every)}.", ""]
    return lines


def accuracy_section(results, tolerance, near_zero):
    lines = [
        "## Accuracy (kiln vs ONNX Runtime, same inputs, 1 thread)",
        "",
        f"Pass when |kiln − ORT| ≤ {tolerance:g} × (|ORT| + {near_zero:g} × max|ORT|) for every element: a relative "
        f"tolerance of {tolerance:g} plus an absolute one of {tolerance:g} × {near_zero:g} × the output's largest "
        "magnitude, for elements near zero (see bench/accuracy.py). *max error* is the largest "
        f"|kiln − ORT| / (|ORT| + {near_zero:g} × max|ORT|); *rel. error, large elements* is the largest plain relative error "
        "over elements ≥ 10 % of max|ORT|, for information.",
        "",
        "| model | batch | output | max error | rel. error, large elements | max abs error | max abs ORT | result |",
        "|---|---:|---|---:|---:|---:|---:|---|",
    ]
    for result in results:
        if result.accuracy_failure:
            lines.append(f"| {result.name} | {result.batch} | — | — | — | — | — | "
                         f"**FAIL**: {result.accuracy_failure} |")
        for error in result.errors:
            verdict = "pass" if error.passed(tolerance) else f"**FAIL** {error.problem}".rstrip()
            lines.append(f"| {result.name} | {result.batch} | {error.name} | {error.max_error:.2e} | "
                         f"{error.max_relative_large:.2e} | "
                         f"{error.max_abs_error:.2e} | {error.max_abs_reference:.3g} | {verdict} |")
    return lines


def timing_section(results, batch, threads, peak):
    peak_gflops = peak.gflops(threads)
    lines = [
        f"## Batch {batch}, {_threads(threads)} (peak {peak_gflops:.0f} GFLOP/s)",
        "",
        "| model | GFLOP | runs | kiln median ms | kiln p90 ms | ORT median ms | ORT p90 ms | kiln/ORT | "
        "kiln GFLOP/s (% peak) | ORT GFLOP/s (% peak) | kiln MiB | ORT MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ratios, lighter = [], 0
    for result in results:
        timing = result.timings.get(threads)
        if timing is None:
            lines.append(f"| {result.name} | {result.gflop:.3g} | {result.timing_failure or 'not timed'} "
                         "| | | | | | | | | |")
            continue
        kiln, ort = timing["kiln"], timing["ort"]
        ratio = kiln.median_ms / ort.median_ms
        ratios.append(ratio)
        cells = [result.name, f"{result.gflop:.3g}", str(len(kiln.latencies_ms)),
                 _ms(kiln.median_ms), _ms(kiln.p90_ms), _ms(ort.median_ms),
                 _ms(ort.p90_ms), f"{ratio:.2f}"]
        for engine in (kiln, ort):
            achieved = result.gflop / (engine.median_ms / 1e3)
            cells.append(f"{achieved:.1f} ({100 * achieved / peak_gflops:.0f} %)")
        cells += [_mib(kiln.model_kib), _mib(ort.model_kib)]
        lighter += kiln.model_kib <= ort.model_kib
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Geometric mean of kiln/ORT over {len(ratios)} models: **{geometric_mean(ratios):.2f}**; "
              f"kiln/ORT ≤ 1.00 on {sum(r <= 1.0 for r in ratios)} of {len(ratios)}; kiln's peak − baseline memory "
              f"≤ ORT's on {lighter} of {len(ratios)}.", ""]
    return lines


def memory_section(results, thread_counts):
    lines = [
        "## Resident memory of the workers (MiB)",
        "",
        "Baseline = VmRSS once the worker has started (runtime libraries, and for ORT the Python interpreter, "
        "numpy and onnxruntime, imported), before the model is loaded; peak = VmHWM after all runs. The tables "
        "above compare peak − baseline.",
        "",
        "| model | batch | threads | kiln baseline | kiln peak | kiln peak − baseline | ORT baseline | ORT peak | "
        "ORT peak − baseline |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        for threads in thread_counts:
            timing = result.timings.get(threads)
            if timing:
                kiln, ort = timing["kiln"], timing["ort"]
                lines.append(f"| {result.name} | {result.batch} | {threads} | {_mib(kiln.baseline_kib)} | "
                             f"{_mib(kiln.peak_kib)} | "
                             f"{_mib(kiln.model_kib)} | {_mib(ort.baseline_kib)} | {_mib(ort.peak_kib)} | "
                             f"{_mib(ort.model_kib)} |")
    return lines


def latency_report(environment, results, batch_sizes, thread_counts, peak, tolerance, near_zero):
    """The lines of the latency block."""
    lines = ["Produced by `bench/run_bench.py` (see [bench/README.md](README.md) for the method).", ""]
    lines += [f"- **{key}**: {value}" for key, value in environment.items()]
    lines += ["", f"Peak FP32 FMA throughput: {peak.per_core_gflops:.1f} GFLOP/s per core, {peak.source}.",
              "GFLOP counts 2 × the multiply-accumulates of Conv, ConvTranspose, Gemm, MatMul and LSTM / GRU / RNN "
              "(shapes from onnx.shape_inference).", ""]
    lines += summary_section(results, batch_sizes, thread_counts)
    for batch in batch_sizes:
        for threads in thread_counts:
            lines += timing_section([r for r in results if r.batch == batch], batch, threads, peak)
    lines += accuracy_section(results, tolerance, near_zero) + [""]
    lines += memory_section(results, thread_counts)
    return lines
