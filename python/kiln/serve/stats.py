"""Inference statistics of each model version: Triton's statistics extension (GET .../stats) and
the same counters as Prometheus metrics (/metrics), under Triton's metric names so that existing
dashboards read them. Updated only on the event loop's thread, so no locking."""

from __future__ import annotations

import collections
import dataclasses
import time

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily


@dataclasses.dataclass
class _Duration:
    count: int = 0
    ns: int = 0

    def add(self, ns: int) -> None:
        self.count += 1
        self.ns += ns

    def as_dict(self) -> dict:
        return {"count": self.count, "ns": self.ns}


class ModelStats:
    """Counts and times of one model version."""

    def __init__(self, name: str, version: str) -> None:
        self.name, self.version = name, version
        self.success = _Duration()  # request times, arrival to response, of successful requests
        self.fail = _Duration()
        self.queue = _Duration()
        self.compute = _Duration()  # one per execution (batch)
        self.inference_count = 0  # rows inferred (a batch of 8 rows counts 8)
        self.execution_count = 0
        self.last_inference_ms = 0
        self.batches: dict[int, _Duration] = collections.defaultdict(_Duration)
        self.queued = lambda: 0  # the scheduler's requests not yet running, set when it starts

    def record_request(self, ok: bool, duration_ns: int) -> None:
        (self.success if ok else self.fail).add(duration_ns)
        self.last_inference_ms = int(time.time() * 1000)

    def record_queue(self, ns: int) -> None:
        self.queue.add(ns)

    def record_execution(self, rows: int, compute_ns: int) -> None:
        self.compute.add(compute_ns)
        self.execution_count += 1
        self.inference_count += rows
        self.batches[rows].add(compute_ns)

    def as_dict(self) -> dict:
        """One entry of Triton's {"model_stats": [...]}."""
        zero = {"count": 0, "ns": 0}
        return {
            "name": self.name,
            "version": self.version,
            "last_inference": self.last_inference_ms,
            "inference_count": self.inference_count,
            "execution_count": self.execution_count,
            "inference_stats": {
                "success": self.success.as_dict(),
                "fail": self.fail.as_dict(),
                "queue": self.queue.as_dict(),
                "compute_input": zero,
                "compute_infer": self.compute.as_dict(),
                "compute_output": zero,
            },
            "batch_stats": [
                {"batch_size": size, "compute_input": zero, "compute_infer": d.as_dict(), "compute_output": zero}
                for size, d in sorted(self.batches.items())
            ],
        }


class StatsCollector:
    """A prometheus_client collector over the stats of the models loaded now."""

    def __init__(self, all_stats) -> None:
        self._all_stats = all_stats  # () -> iterable of ModelStats

    def collect(self):
        labels = ["model", "version"]
        families = {
            "success": CounterMetricFamily("nv_inference_request_success", "Successful inference requests", labels=labels),
            "failure": CounterMetricFamily("nv_inference_request_failure", "Failed inference requests", labels=labels),
            "count": CounterMetricFamily("nv_inference_count", "Inferences performed (a batch counts its rows)", labels=labels),
            "exec": CounterMetricFamily("nv_inference_exec_count", "Model executions (batches) performed", labels=labels),
            "request_us": CounterMetricFamily(
                "nv_inference_request_duration_us", "Request time, arrival to response (microseconds)", labels=labels
            ),
            "queue_us": CounterMetricFamily("nv_inference_queue_duration_us", "Time requests waited in the queue (microseconds)", labels=labels),
            "compute_us": CounterMetricFamily(
                "nv_inference_compute_infer_duration_us", "Time the model computed (microseconds)", labels=labels
            ),
            "pending": GaugeMetricFamily(
                "nv_inference_pending_request_count", "Requests received and not yet running (queued or in the batch being formed)", labels=labels
            ),
        }
        for s in self._all_stats():
            key = [s.name, s.version]
            families["success"].add_metric(key, s.success.count)
            families["failure"].add_metric(key, s.fail.count)
            families["count"].add_metric(key, s.inference_count)
            families["exec"].add_metric(key, s.execution_count)
            families["request_us"].add_metric(key, (s.success.ns + s.fail.ns) // 1000)
            families["queue_us"].add_metric(key, s.queue.ns // 1000)
            families["compute_us"].add_metric(key, s.compute.ns // 1000)
            families["pending"].add_metric(key, s.queued())
        yield from families.values()
