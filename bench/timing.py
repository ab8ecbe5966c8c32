"""Timing kiln and ONNX Runtime side by side: both workers loaded at once, warmed up, then short batches
of runs alternating between them (the order flips every round), so that both see the same machine
state, including the load other processes put on it."""
import math
import time
from dataclasses import dataclass, field

from workers import kiln_worker, ort_worker

SETTLE_S = 0.02  # pause between engines, so that a thread pool still spinning from the last batch settles


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


def time_side_by_side(kiln, model, input_files, threads, warmup, iterations, batch, log=print):
    """Returns {"kiln": EngineTiming, "ort": EngineTiming}."""
    with kiln_worker(kiln, model, threads, input_files) as kiln_w, ort_worker(model, threads, input_files) as ort_w:
        workers = {"kiln": kiln_w, "ort": ort_w}
        timings = {name: EngineTiming(baseline_kib=w.baseline_kib) for name, w in workers.items()}
        for worker in workers.values():
            worker.load()
        for worker in workers.values():
            if warmup:
                worker.run(warmup)
        order = ["kiln", "ort"]
        done = 0
        while done < iterations:
            count = min(batch, iterations - done)
            for name in order:
                time.sleep(SETTLE_S)
                timings[name].latencies_ms += workers[name].run(count)
            done += count
            order.reverse()
        for name, worker in workers.items():
            timings[name].peak_kib = worker.peak_kib()
    return timings
