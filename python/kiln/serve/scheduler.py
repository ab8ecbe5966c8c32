"""The per-model request queue and dynamic batcher.

One batcher task per model version forms batches, as Triton's dynamic batcher does: it waits for
a free instance, takes the oldest request, adds the queued requests that can join it (same inputs,
dtypes, shapes after dim 0 and requested outputs) while the rows stay <= max_batch_size, and waits
for more until the rows reach the largest preferred batch size (max_batch_size when none is given)
or the oldest request has waited max_queue_delay. The batch runs on that instance's thread; its
outputs are split back along dim 0. Requests queue while every instance is busy, so batches grow
with the load. Models without max_batch_size run one request at a time per instance.

The queue is bounded (max_queue requests): a request that finds it full is refused at once
(OverloadedError, HTTP 503), so memory stays bounded under any load."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import time

import numpy as np

from kiln.serve.stats import ModelStats


class OverloadedError(Exception):
    """The model's queue is full, or the model is being unloaded: the request is refused at once."""


@dataclasses.dataclass
class BatchPolicy:
    max_batch_size: int  # 0: no batching
    preferred_sizes: list[int]
    max_queue_delay_s: float

    @property
    def target_rows(self) -> int:
        return max(self.preferred_sizes) if self.preferred_sizes else self.max_batch_size


@dataclasses.dataclass
class _Request:
    feed: dict
    output_names: list[str] | None
    rows: int
    key: tuple
    future: asyncio.Future
    enqueued_ns: int


def _merge_key(feed: dict, output_names: list[str] | None) -> tuple:
    inputs = tuple(sorted((name, a.dtype.str, a.shape[1:]) for name, a in feed.items()))
    return inputs, tuple(output_names) if output_names is not None else None


class ModelScheduler:
    """Queues requests for one model version and runs them on its instances."""

    def __init__(self, name: str, runner, instances: int, policy: BatchPolicy, max_queue: int, stats: ModelStats) -> None:
        self.name = name
        self._runner = runner
        self._policy = policy
        self._max_queue = max_queue
        self._stats = stats
        self._pending: collections.deque[_Request] = collections.deque()
        self._arrived = asyncio.Event()
        self._free_instances: asyncio.Queue[int] = asyncio.Queue()
        for i in range(instances):
            self._free_instances.put_nowait(i)
        self._executor = concurrent.futures.ThreadPoolExecutor(instances, thread_name_prefix=f"kiln-{name}")
        self._running: set[asyncio.Task] = set()
        self._in_flight = 0  # submitted, not yet answered (queued, in a batch being formed, or running)
        self._executing = 0  # of those, the requests of batches running now
        self._closing = False
        self._batcher = asyncio.get_running_loop().create_task(self._form_batches())

    @property
    def queued(self) -> int:
        """Requests received and not yet running: queued, or in the batch being formed."""
        return self._in_flight - self._executing

    def submit(self, feed: dict, output_names: list[str] | None, rows: int) -> asyncio.Future:
        """Queues one request (rows: its dim 0 when batching, else 1); the future gets its outputs
        (a list of arrays in output_names' order) or the exception its run raised."""
        if self._closing:
            raise OverloadedError(f"model '{self.name}' is being unloaded")
        if len(self._pending) >= self._max_queue:
            raise OverloadedError(
                f"model '{self.name}' is overloaded: {len(self._pending)} requests are queued, the limit (max_queue) is {self._max_queue}"
            )
        future = asyncio.get_running_loop().create_future()
        self._pending.append(_Request(feed, output_names, rows, _merge_key(feed, output_names), future, time.monotonic_ns()))
        self._in_flight += 1
        self._arrived.set()
        return future

    async def close(self) -> None:
        """Refuses new requests, lets every submitted one finish, then stops the batcher and the threads."""
        self._closing = True
        while self._in_flight:
            await asyncio.sleep(0.01)
        self._batcher.cancel()
        self._executor.shutdown(wait=True)

    # -- forming batches -----------------------------------------------------------------------
    async def _form_batches(self) -> None:
        while True:
            instance = await self._free_instances.get()
            batch = await self._next_batch()
            task = asyncio.get_running_loop().create_task(self._execute(batch, instance))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _next_batch(self) -> list[_Request]:
        while not self._pending:
            self._arrived.clear()
            await self._arrived.wait()
        first = self._pending.popleft()
        batch, rows = [first], first.rows
        if self._policy.max_batch_size <= 0:
            return batch
        deadline = first.enqueued_ns + int(self._policy.max_queue_delay_s * 1e9)
        while True:
            rows = self._take_joining(batch, rows)
            remaining = (deadline - time.monotonic_ns()) / 1e9
            if rows >= self._policy.target_rows or remaining <= 0:
                return batch
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except asyncio.TimeoutError:  # (TimeoutError itself from Python 3.11 on)
                pass

    def _take_joining(self, batch: list[_Request], rows: int) -> int:
        """Moves the queued requests that can join the batch into it, oldest first."""
        key, limit = batch[0].key, self._policy.max_batch_size
        kept: collections.deque[_Request] = collections.deque()
        while self._pending:
            request = self._pending.popleft()
            if request.key == key and rows + request.rows <= limit and not request.future.done():
                batch.append(request)
                rows += request.rows
            else:
                kept.append(request)
        self._pending = kept
        return rows

    # -- running -------------------------------------------------------------------------------
    async def _execute(self, batch: list[_Request], instance: int) -> None:
        start_ns = time.monotonic_ns()
        self._executing += len(batch)
        try:
            loop = asyncio.get_running_loop()
            results, compute_ns = await loop.run_in_executor(self._executor, self._run_batch, batch, instance)
        except Exception as e:  # the thread pool itself failed: every request gets the error
            results, compute_ns = [e] * len(batch), 0
        finally:
            self._free_instances.put_nowait(instance)
        done_rows = sum(r.rows for r, result in zip(batch, results) if not isinstance(result, BaseException))
        if done_rows:
            self._stats.record_execution(done_rows, compute_ns)
        self._in_flight -= len(batch)
        self._executing -= len(batch)
        for request, result in zip(batch, results):
            self._stats.record_queue(start_ns - request.enqueued_ns)
            if not request.future.done():  # a client that went away cancels its future
                if isinstance(result, BaseException):
                    request.future.set_exception(result)
                else:
                    request.future.set_result(result)

    def _run_batch(self, batch: list[_Request], instance: int) -> tuple[list, int]:
        """Runs the batch on the instance's thread: a list with each request's outputs or the
        exception its run raised, and the compute time. When a merged run fails, each request is
        run alone, so each gets the error (and message) its own input causes."""
        start = time.monotonic_ns()
        if len(batch) == 1:
            results = [self._run_one(batch[0], instance)]
        else:
            try:
                feed = {name: np.concatenate([r.feed[name] for r in batch]) for name in batch[0].feed}
                merged = self._runner.run(feed, batch[0].output_names, instance)
                results = _split_rows(merged, [r.rows for r in batch])
            except Exception:
                results = [self._run_one(r, instance) for r in batch]
        return results, time.monotonic_ns() - start

    def _run_one(self, request: _Request, instance: int):
        try:
            return self._runner.run(request.feed, request.output_names, instance)
        except Exception as e:  # handed to the request's future
            return e


def _split_rows(outputs: list[np.ndarray], rows: list[int]) -> list[list[np.ndarray]]:
    total = sum(rows)
    for output in outputs:
        if output.ndim == 0 or output.shape[0] != total:
            raise ValueError(f"an output has shape {list(output.shape)}, not {total} rows along dim 0")
    bounds = np.cumsum([0, *rows])
    return [[output[bounds[i] : bounds[i + 1]] for output in outputs] for i in range(len(rows))]
