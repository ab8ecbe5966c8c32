"""The machine's peak FP32 FMA throughput, the denominator of "share of peak".

In order of preference: --peak-gflops (per core) given by the user; the GEMM helper's Google Benchmark
binary (kiln_micro_bench, BM_PeakFma) from a build folder, cross-checked with bench/peak_fma.c compiled
with the system C compiler (the higher wins); else peak_fma.c alone. The widest vector ISA the CPU has
is the peak (AVX-512 where present).
"""
import glob
import json
import os
import pathlib
import subprocess
import tempfile
from dataclasses import dataclass, field

BENCH_DIR = pathlib.Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent


@dataclass
class Peak:
    per_core_gflops: float
    source: str  # how it was obtained, for results.md
    by_threads: dict = field(default_factory=dict)  # threads -> measured GFLOP/s of that many cores

    def gflops(self, threads):
        """Peak of `threads` cores: measured if the source measured it, else per core x threads."""
        return self.by_threads.get(threads, self.per_core_gflops * threads)


def find_micro_bench():
    """The newest kiln_micro_bench binary in a build folder of the repository, or None."""
    patterns = ["build*/kiln_micro_bench", "build*/bench/micro/kiln_micro_bench"]
    found = [p for pattern in patterns for p in glob.glob(str(REPO_ROOT / pattern)) if os.access(p, os.X_OK)]
    return max(found, key=os.path.getmtime) if found else None


def from_micro_bench(binary):
    """Peak from BM_PeakFma's GFLOPS counters: best vector width, per thread count."""
    command = [binary, "--benchmark_filter=BM_PeakFma", "--benchmark_format=json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    by_threads = {}
    for entry in json.loads(result.stdout)["benchmarks"]:
        if entry.get("error_occurred") or "GFLOPS" not in entry:
            continue
        threads = int(entry["name"].split("threads:")[1].split("/")[0])
        by_threads[threads] = max(by_threads.get(threads, 0.0), float(entry["GFLOPS"]))
    if 1 not in by_threads:
        raise RuntimeError(f"{binary}: no 1-thread BM_PeakFma result in its output")
    return Peak(by_threads[1], f"measured by `{os.path.relpath(binary, REPO_ROOT)} --benchmark_filter=BM_PeakFma`",
                by_threads)


def from_c_probe():
    """Peak per core from bench/peak_fma.c (register-only FMA chains, timed in thread CPU time)."""
    with tempfile.TemporaryDirectory() as tmp:
        binary = os.path.join(tmp, "peak_fma")
        subprocess.run(["cc", "-O2", "-o", binary, str(BENCH_DIR / "peak_fma.c")], check=True)
        measured = json.loads(subprocess.run([binary], capture_output=True, text=True, check=True).stdout)
    best = max(v for k, v in measured.items() if k.endswith("_gflops") and v is not None)
    isa = "AVX-512" if measured.get("avx512_fma_gflops") == best else "AVX2"
    return Peak(best, f"measured by bench/peak_fma.c ({isa} FMA chains, 1 core; N cores assumed N x)")


def find_peak(user_gflops=None, log=print):
    """--peak-gflops if given; else the higher of the micro-benchmark's and the C probe's figures. Load from
    other processes can only lower a measured peak (the micro-benchmark times wall-clock time), so the
    higher of two measurements is the better estimate; both are reported."""
    if user_gflops:
        return Peak(user_gflops, "given with --peak-gflops (per core; N cores assumed N x)")
    probe = from_c_probe()
    binary = find_micro_bench()
    if not binary:
        return probe
    try:
        micro = from_micro_bench(binary)
    except (subprocess.SubprocessError, RuntimeError, ValueError, KeyError, IndexError) as error:
        log(f"warning: could not read the peak from {binary} ({error}); using bench/peak_fma.c")
        return probe
    if micro.per_core_gflops >= probe.per_core_gflops:
        micro.source += f"; bench/peak_fma.c measured {probe.per_core_gflops:.1f}"
        return micro
    log(f"warning: {binary} measured a peak of {micro.per_core_gflops:.1f} GFLOP/s per core, below "
        f"bench/peak_fma.c's {probe.per_core_gflops:.1f} (load on the machine?); using the higher")
    probe.source += (f"; the higher of two: {os.path.relpath(binary, REPO_ROOT)} --benchmark_filter=BM_PeakFma "
                     f"measured {micro.per_core_gflops:.1f} (wall-clock time, under load)")
    return probe
