"""Timing kiln and ONNX Runtime side by side: both workers loaded at once, warmed up, then short batches
of runs alternating between them (the order flips every round), so that both see the same machine
state, including the load other processes put on it."""
import math
import os
import time
from dataclasses import dataclass, field

from workers import kiln_worker, ort_worker

SETTLE_S = 0.02  # least pause between engines
QUIET_S = 0.01  # the engine that ran last counts as settled once it used no CPU for this long
SETTLE_LIMIT_S = 1.0  # ... or after this long, whatever it does


def cpu_seconds(pid):
    """CPU time of all threads of a process, from /proc/PID/task/*/schedstat (nanosecond resolution)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:  # the thread exited meanwhile
            pass
    return total / 1e9


def settle(pid):
    """Waits until the worker that ran last is idle: thread pools keep spinning after a run (ONNX Runtime's
    for tens of milliseconds, kiln's for one), and a pool still spinning would take a core from the other
    engine's next batch. Returns the seconds waited."""
    start = time.perf_counter()
    time.sleep(SETTLE_S)
    used = cpu_seconds(pid)
    while time.perf_counter() - start < SETTLE_LIMIT_S:
        time.sleep(QUIET_S)
        now = cpu_seconds(pid)
        if now - used < QUIET_S * 0.05:  # under 5 % of a core: a sleeping pool, not a spinning one
            break
        used = now
    return time.perf_counter() - start


def percentile(values, fraction):
    """Nearest-rank percentile, as `kiln bench` computes it."""
    ordered = sorted(values)
    rank = math.ceil(fraction * len(ordered))
    return ordered[min(max(rank, 1), len(ordered)) - 1]


@dataclass
class EngineTiming:
    latencies_ms: list = field(default_factory=list)
    baseline_kib: int = 0  # VmRSS after start-up, before the model is loaded
    peak_kib: int = 0  # VmHWM at the end

    @property
    def median_ms(self):
        return percentile(self.latencies_ms, 0.5)

    @property
    def p90_ms(self):
        return percentile(self.latencies_ms, 0.9)

    @property
    def model_kib(self):
        """Peak resident memory the model and its runs added on top of the baseline."""
        return self.peak_kib - self.baseline_kib


def affordable_iterations(warmup_ms, iterations, max_seconds, min_iterations):
    """Timed runs per engine that fit in `max_seconds` for both engines together, judged by the slowest
    warm-up run of each (None: no limit); never fewer than `min_iterations` nor more than `iterations`."""
    if max_seconds is None or not all(warmup_ms.values()):
        return iterations
    per_round_ms = sum(max(latencies) for latencies in warmup_ms.values())
    return max(min(min_iterations, iterations), min(iterations, int(max_seconds * 1e3 / per_round_ms)))


def time_side_by_side(kiln, model, input_files, threads, warmup, iterations, batch, log=print, max_seconds=None,
                      min_iterations=5):
    """Returns {"kiln": EngineTiming, "ort": EngineTiming}. With `max_seconds`, fewer timed runs than
    `iterations` when they would take longer than that (see affordable_iterations)."""
    with kiln_worker(kiln, model, threads, input_files) as kiln_w, ort_worker(model, threads, input_files) as ort_w:
        workers = {"kiln": kiln_w, "ort": ort_w}
        timings = {name: EngineTiming(baseline_kib=w.baseline_kib) for name, w in workers.items()}
        for worker in workers.values():
            worker.load()
        warmup_ms = {name: worker.run(warmup) if warmup else [] for name, worker in workers.items()}
        planned = affordable_iterations(warmup_ms, iterations, max_seconds, min_iterations)
        if planned < iterations:
            log(f"  {planned} timed runs per engine instead of {iterations}: --max-seconds {max_seconds:g}")
        iterations = planned
        order = ["kiln", "ort"]
        done = 0
        last = None
        while done < iterations:
            count = min(batch, iterations - done)
            for name in order:
                if last is None or last == name:  # the order flipped: the same engine again
                    time.sleep(SETTLE_S)
                else:
                    settle(workers[last].process.pid)
                timings[name].latencies_ms += workers[name].run(count)
                last = name
            done += count
            order.reverse()
        for name, worker in workers.items():
            timings[name].peak_kib = worker.peak_kib()
    return timings
