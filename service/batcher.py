"""Dynamic batching: texts of concurrent requests are merged into engine batches.

Inference runs in worker threads so the event loop stays free to accept and answer requests. The
policy:

- Requests are light or heavy: heavy when their texts hold more than ``heavy_tokens`` source tokens
  together. Each kind has a lane of its own: a queue, an asyncio task forming its batches, and
  ``concurrency`` batches in flight at most (the engine decodes that many at once). A light
  request never queues behind heavy ones, and its batch starts even while every stream decodes
  heavy batches: the engine interleaves the two step by step, the less served first
  (``engine.scheduler``), so one user's heavy input delays another's sentence by little.

- A batch holds texts with *equal* ``TranslationOptions`` only, taken in arrival order, at most
  ``max_batch_sentences`` texts and ``max_batch_tokens`` source tokens (a single longer text still
  forms a batch of its own).
- A batch starts as soon as it is full, or once its oldest text has waited ``max_wait_s``, and a
  worker is free; while all are busy, work simply accumulates, so batches grow with load. Waiting
  while a worker is free only delays the first texts: the default ``max_wait_s`` is 0.
- A batch that starts while other workers are free too is split among them, each part at least
  ``MIN_PART`` texts: with two free, ten texts run as two batches of five. One batch of ten would
  leave the other worker idle while it takes about twice as long, and the clients it answers at
  once would send their next texts together again.
- Admission is bounded: a request whose texts would push the queue past ``max_queue_sentences`` is
  refused at once with ``Overloaded`` (429 with Retry-After). The queue never grows without bound.
- A request that times out (``DeadlineExceeded``, 504) or whose awaiting task is cancelled (client
  disconnect) has its texts that have not started removed from the queue, and a running batch
  whose requests have all gone is cancelled: the engine stops it at its next decoder step. A
  running batch that still serves another request finishes; the gone request's results are
  discarded.
- ``close()`` refuses new work, lets everything admitted finish, and stops the worker.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from engine.api import BatchStats, Engine, TranslatedBatch
from engine.scheduler import Cancellation, Cancelled
from service.errors import DeadlineExceeded, InternalError, Overloaded, Unavailable
from service.metrics import Metrics

log = logging.getLogger(__name__)

# Free workers split a batch into parts of at least this many texts: a decoder step has a fixed
# cost, which a smaller batch spreads over fewer rows, so a sentence costs more CPU in a small
# batch than in a large one (benchmarks/RESULTS.md, tried and dropped).
MIN_PART = 4


@dataclass(frozen=True)
class BatcherConfig:
    max_batch_sentences: int = 32
    max_batch_tokens: int = 4096
    max_wait_s: float = 0.0
    max_queue_sentences: int = 1024
    concurrency: int = 1  # batches in flight at once per lane; the engine must accept twice that many calls
    # A request with more source tokens than this is heavy (the second lane). A Multi30K sentence
    # has about 20; a 300-character paragraph about 70.
    heavy_tokens: int = 256


@dataclass(eq=False)
class _Job:
    """One request: its options, its future, and its results as they arrive."""

    options: Hashable
    future: asyncio.Future[list[Any]]
    results: list[Any]
    remaining: int
    heavy: bool
    abandoned: bool = False

    @property
    def gone(self) -> bool:
        """Nobody awaits its results any more."""
        return self.abandoned or self.future.done()


@dataclass(eq=False)
class _Item:
    """One text of a job, the unit the queue holds and batches are made of."""

    job: _Job
    index: int
    text: str
    tokens: int
    enqueued_at: float = field(default_factory=time.monotonic)


@dataclass(eq=False)
class _Running:
    """A batch the engine is decoding, and how to stop it."""

    jobs: list[_Job]
    cancellation: Cancellation = field(default_factory=Cancellation)


class _Lane:
    """A queue of texts, its batch-forming task's wake-up, and its batches in flight."""

    def __init__(self, concurrency: int) -> None:
        self.queue: deque[_Item] = deque()
        self.wakeup = asyncio.Event()
        self.free = asyncio.Semaphore(concurrency)
        self.running: set[_Running] = set()


class Batcher:
    def __init__(self, engine: Engine, config: BatcherConfig, metrics: Metrics, *, model: str = "") -> None:
        self.engine = engine
        self.model = model  # the metrics' model label
        self.config = config
        self.metrics = metrics
        self._lanes = {heavy: _Lane(config.concurrency) for heavy in (False, True)}
        self._queued = 0  # texts queued in the lanes
        self._closing = False
        self._executor = ThreadPoolExecutor(max_workers=2 * config.concurrency, thread_name_prefix="mt-engine")
        self._sentences_per_second = 0.0  # moving average of engine throughput, for Retry-After
        self._workers: list[asyncio.Task[None]] = []

    @property
    def queued_sentences(self) -> int:
        return self._queued

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._workers = [loop.create_task(self._run(lane), name="mt-batcher") for lane in self._lanes.values()]

    async def close(self) -> None:
        """Refuse new work, finish everything admitted, stop the worker threads."""
        self._closing = True
        for lane in self._lanes.values():
            lane.wakeup.set()
        await asyncio.gather(*self._workers)
        self._executor.shutdown(wait=True)

    async def translate(
        self,
        texts: Sequence[str],
        options: Hashable,
        *,
        timeout_s: float,
        request_tokens: int | None = None,
        tokens: Sequence[int] | None = None,
    ) -> list[Any]:
        """Translate ``texts`` with ``options`` inside the shared batches; results in input order.
        ``request_tokens``: the source tokens of the whole request they are part of, where it is
        sent a part at a time (a stream's sentences), which decide their lane as the whole's would.
        ``tokens``: each text's source tokens where the caller has counted them already (the cost
        check did), so that no text is encoded twice in this process."""
        if self._closing:
            raise Unavailable("the service is shutting down")
        if not texts:
            return []
        if self._queued + len(texts) > self.config.max_queue_sentences:
            raise Overloaded(
                f"queue full ({self._queued} texts waiting); retry later", retry_after_s=self._retry_after_s()
            )
        if tokens is None:
            tokens = [self.engine.count_tokens(text) for text in texts]
        heavy = max(sum(tokens), request_tokens or 0) > self.config.heavy_tokens
        job = _Job(options, asyncio.get_running_loop().create_future(), [None] * len(texts), len(texts), heavy)
        lane = self._lanes[heavy]
        lane.queue.extend(_Item(job, i, text, n) for i, (text, n) in enumerate(zip(texts, tokens, strict=True)))
        self._set_queued(self._queued + len(texts))
        lane.wakeup.set()
        try:
            async with asyncio.timeout(timeout_s):
                return await job.future
        except TimeoutError:
            self._abandon(job)
            raise DeadlineExceeded(f"request not finished within {timeout_s:g} s") from None
        except asyncio.CancelledError:
            self._abandon(job)
            raise

    # -- the worker --------------------------------------------------------------------------

    async def _run(self, lane: _Lane) -> None:
        running: set[asyncio.Task[None]] = set()
        while True:
            await lane.free.acquire()  # a worker first: until one is free, work keeps accumulating
            batch = await self._next_batch(lane)
            if batch is None:
                break
            workers = 1 + await _acquire_free(lane.free, most=len(batch) // MIN_PART - 1)
            for part in _split(batch, workers):
                task = self._start(lane, part)
                running.add(task)
                task.add_done_callback(running.discard)
        await asyncio.gather(*running)

    async def _next_batch(self, lane: _Lane) -> list[_Item] | None:
        """Wait until a batch is due (full, or its oldest text waited max_wait_s) and take it."""
        while True:
            if not lane.queue:
                if self._closing:
                    return None
                await _wait_for_work(lane, None)
                continue
            due_in = lane.queue[0].enqueued_at + self.config.max_wait_s - time.monotonic()
            batch, full = self._head_batch(lane.queue)
            if full or due_in <= 0 or self._closing:
                return self._take(lane, batch)
            await _wait_for_work(lane, due_in)

    def _head_batch(self, queue: deque[_Item]) -> tuple[list[_Item], bool]:
        """The items a batch started now would take (the head's options, within both limits) and
        whether that batch is full, i.e. a limit stopped it."""
        head = queue[0].job.options
        batch: list[_Item] = []
        tokens = 0
        for item in queue:
            if item.job.options != head:
                continue
            if batch and (
                len(batch) >= self.config.max_batch_sentences or tokens + item.tokens > self.config.max_batch_tokens
            ):
                return batch, True
            batch.append(item)
            tokens += item.tokens
        return batch, len(batch) >= self.config.max_batch_sentences

    def _take(self, lane: _Lane, batch: list[_Item]) -> list[_Item]:
        taken = set(map(id, batch))
        lane.queue = deque(item for item in lane.queue if id(item) not in taken)
        self._set_queued(self._queued - len(batch))
        now = time.monotonic()
        for item in batch:
            self.metrics.stage_duration.labels("queue", self.model).observe(now - item.enqueued_at)
        return batch

    def _start(self, lane: _Lane, batch: list[_Item]) -> asyncio.Task[None]:
        """Hand ``batch`` to a worker thread now; the returned task delivers its results."""
        options = batch[0].job.options
        texts = [item.text for item in batch]
        running = _Running(list({id(item.job): item.job for item in batch}.values()))
        lane.running.add(running)
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        work = loop.run_in_executor(self._executor, self.engine.translate_batch, texts, options, running.cancellation)

        # The worker is freed by the first callback of the engine's future, before the delivering
        # task resumes: the batcher's wake-up is then queued ahead of the requests' own, so the next
        # batch reaches the engine before these responses are written (milliseconds for 32).
        def free(_: object) -> None:
            lane.running.discard(running)
            lane.free.release()

        work.add_done_callback(free)
        return loop.create_task(self._finish(batch, work, started))

    async def _finish(self, batch: list[_Item], work: asyncio.Future[TranslatedBatch], started: float) -> None:
        try:
            translated = await work
        except Cancelled:  # every request it served has gone
            log.debug("cancelled a batch of %d texts", len(batch))
            return
        except Exception as exc:  # an engine failure fails this batch's requests, not the service
            log.exception("engine failed on a batch of %d texts", len(batch))
            error = InternalError(f"translation failed: {type(exc).__name__}")
            for job in {id(item.job): item.job for item in batch}.values():
                self._abandon(job)  # its texts in later batches would be wasted work
                if not job.future.done():
                    job.future.set_exception(error)
            return
        self._record(translated.stats, len(batch), time.monotonic() - started)
        for item, result in zip(batch, translated.results, strict=True):
            self._deliver(item, result)

    def _deliver(self, item: _Item, result: Any) -> None:
        job = item.job
        job.results[item.index] = result
        job.remaining -= 1
        if job.remaining == 0 and not job.future.done():
            job.future.set_result(job.results)

    def _record(self, stats: BatchStats, sentences: int, seconds: float) -> None:
        m = self.metrics
        m.stage_duration.labels("encode", self.model).observe(stats.encode_seconds)
        m.stage_duration.labels("decode", self.model).observe(stats.decode_seconds)
        for n_sentences, n_tokens in stats.sub_batches:
            m.batch_sentences.labels(self.model).observe(n_sentences)
            m.batch_tokens.labels(self.model).observe(n_tokens)
        rate = sentences / max(seconds, 1e-6)
        previous = self._sentences_per_second
        self._sentences_per_second = rate if previous == 0 else 0.8 * previous + 0.2 * rate

    # -- bookkeeping -------------------------------------------------------------------------

    def _abandon(self, job: _Job) -> None:
        """Drop the job's texts that have not started, and cancel the running batches that served
        only gone jobs; a running batch that still serves another job finishes."""
        job.abandoned = True
        lane = self._lanes[job.heavy]
        before = len(lane.queue)
        lane.queue = deque(item for item in lane.queue if item.job is not job)
        self._set_queued(self._queued - (before - len(lane.queue)))
        for running in lane.running:
            if job in running.jobs and all(j.gone for j in running.jobs):
                running.cancellation.set()
        lane.wakeup.set()

    def _set_queued(self, n: int) -> None:
        self._queued = n
        self.metrics.queue_depth.labels(self.model).set(n)

    def _retry_after_s(self) -> int:
        """Seconds until the current queue has likely drained (1 s when throughput is unknown)."""
        if self._sentences_per_second <= 0:
            return 1
        return max(1, min(60, math.ceil(self._queued / self._sentences_per_second)))


async def _wait_for_work(lane: _Lane, timeout_s: float | None) -> None:
    lane.wakeup.clear()
    try:
        async with asyncio.timeout(timeout_s):
            await lane.wakeup.wait()
    except TimeoutError:
        pass


async def _acquire_free(workers: asyncio.Semaphore, *, most: int) -> int:
    """Take up to ``most`` of the workers that are free now, without waiting; how many."""
    taken = 0
    while taken < most and not workers.locked():
        await workers.acquire()  # returns at once: the semaphore is not locked
        taken += 1
    return taken


def _split(batch: list[_Item], parts: int) -> list[list[_Item]]:
    """``batch`` in ``parts`` runs of consecutive texts, their sizes within one of each other."""
    size, extra = divmod(len(batch), parts)
    bounds = [i * size + min(i, extra) for i in range(parts + 1)]
    return [batch[bounds[i] : bounds[i + 1]] for i in range(parts)]
