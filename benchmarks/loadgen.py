"""The service benchmark's load generator: closed-loop clients against a running service.

At a concurrency C, C clients (each with one connection of its own, on uvloop, spread over
processes of at most ``CLIENTS_PER_PROCESS``; ``benchmarks/http_client.py``) each send one test
sentence per request, the next as soon as the previous answer arrives, cycling through the test set.
After a warm-up the clients run a measured window; requests started in it are measured: throughput
(completed / window), latency percentiles, errors (any non-200 or transport error), the mean batch
size read from the service's ``/metrics``, and who used the CPU in the window: the service's HTTP
process, its engine process(es), the clients, and the machine's idle and steal time (100 = one
core). The clients share the machine with the service, as they would in a same-host deployment.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import multiprocessing
import statistics
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import httpx
import psutil
import uvloop
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from benchmarks.common import CpuTimes
from benchmarks.http_client import ClientKind, open_client

BATCH_METRIC = "mt_batch_size_sentences"
# Processes of at most this many clients keep one process's event loop from becoming the bottleneck.
CLIENTS_PER_PROCESS = 16
CPU_SPLIT = ("http", "engine", "clients", "idle", "steal")
# The clients start this long after every client process has said it is ready (imported, its
# bodies encoded), all of them and the parent at once: a barrier, not a guess at how long a spawn takes.
START_AFTER_READY_S = 0.05
READY_TIMEOUT_S = 60.0
_ready: threading.Barrier | None = None  # in a client process: where it waits for the others


@dataclass(frozen=True)
class Load:
    """What the clients do: requests from ``source_lang`` into ``target_lang`` at ``beam_size``,
    ``warmup`` s unmeasured, then ``duration`` s. A request names its source language, as the
    offline engine is told it, so that the service does not identify it."""

    source_lang: str
    target_lang: str
    beam_size: int
    warmup: float
    duration: float
    client: ClientKind


@dataclass
class Level:
    """What the clients saw at one concurrency."""

    concurrency: int
    latencies: list[float] = field(default_factory=list)  # seconds, successful requests
    errors: int = 0
    window_s: float = 0.0

    def add(self, other: Level) -> None:
        self.latencies += other.latencies
        self.errors += other.errors
        self.window_s = max(self.window_s, other.window_s)

    def summary(self) -> dict:
        lat = sorted(self.latencies)

        def pct(q: float) -> float | None:
            return lat[min(len(lat) - 1, int(q * len(lat)))] if lat else None

        return {
            "concurrency": self.concurrency,
            "requests": len(lat),
            "errors": self.errors,
            "throughput": len(lat) / self.window_s if self.window_s else 0.0,
            "p50_s": pct(0.50),
            "p95_s": pct(0.95),
            "p99_s": pct(0.99),
            "mean_s": statistics.fmean(lat) if lat else None,
        }


async def closed_loop(url: str, bodies: Iterator[bytes], level: Level, load: Load, start: float) -> None:
    """``level.concurrency`` clients, each sending its next request when the previous one returns,
    from ``start`` (``time.monotonic()``, which every client process takes as the barrier releases
    them all) for warmup + duration."""
    window_start, window_end = start + load.warmup, start + load.warmup + load.duration

    async def client_loop() -> None:
        connection = open_client(url, load.client)
        try:
            await asyncio.sleep(max(0.0, start - time.monotonic()))
            while (sent := time.monotonic()) < window_end:
                ok = await connection.post("/v1/translate", next(bodies)) == 200
                if sent >= window_start:
                    if ok:
                        level.latencies.append(time.monotonic() - sent)
                    else:
                        level.errors += 1
        finally:
            await connection.aclose()

    await asyncio.gather(*(client_loop() for _ in range(level.concurrency)))
    level.window_s = time.monotonic() - window_start  # until the last measured request returned


def _wait_at(barrier: threading.Barrier) -> None:
    """A client process's initializer: the barrier its clients start from."""
    global _ready
    _ready = barrier


def client_process(url: str, texts: list[str], offset: int, concurrency: int, load: Load) -> Level:
    """One process's share of the clients; each process starts at its own place in the test set.
    Bodies are encoded beforehand: every millisecond the clients spend is taken from the service.
    They start once every client process (and the parent) has reached the barrier."""
    level = Level(concurrency)
    encoded = [
        json.dumps(
            {"text": t, "source_lang": load.source_lang, "target_lang": load.target_lang, "beam_size": load.beam_size}
        ).encode()
        for t in texts
    ]
    bodies = itertools.islice(itertools.cycle(encoded), offset, None)
    assert _ready is not None, "client_process runs in run_level's processes"
    _ready.wait(READY_TIMEOUT_S)
    uvloop.run(closed_loop(url, bodies, level, load, time.monotonic() + START_AFTER_READY_S))
    return level


def metric_samples(url: str, family: str) -> list[Sample]:
    """The samples of one metric family of the service's ``/metrics`` (``mt_requests`` for the
    counter ``mt_requests_total``)."""
    families = text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=10).text)
    return [sample for found in families if found.name == family for sample in found.samples]


def batch_totals(url: str) -> tuple[float, float]:
    """(sum, count) of the service's batch-size histogram: sentences batched, batches run."""
    totals = {"sum": 0.0, "count": 0.0}
    for sample in metric_samples(url, BATCH_METRIC):
        for key in totals:
            if sample.name == f"{BATCH_METRIC}_{key}":
                totals[key] += sample.value
    return totals["sum"], totals["count"]


def cpu_seconds(service_pid: int) -> dict[str, float]:
    """CPU seconds used so far by the service's HTTP process, its engine processes (its children)
    and the client processes (this process's other children); the machine's idle and steal seconds
    (all cores); and when that was read."""

    def used(process: psutil.Process) -> float:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            return 0.0
        return times.user + times.system

    service = psutil.Process(service_pid)
    machine = CpuTimes.now()
    return {
        "http": used(service),
        "engine": sum(map(used, service.children(recursive=True))),
        "clients": sum(used(p) for p in psutil.Process().children() if p.pid != service_pid),
        "idle": machine.idle,
        "steal": machine.steal,
        "at": time.monotonic(),
    }


def cpu_percent_while(service_pid: int, start: float, load: Load) -> dict[str, float]:
    """Sleep through the warm-up, then say who used the CPU in the measured window (100 = one core)."""
    time.sleep(max(0.0, start + load.warmup - time.monotonic()))
    before = cpu_seconds(service_pid)
    time.sleep(load.duration)
    after = cpu_seconds(service_pid)
    seconds = after.pop("at") - before.pop("at")
    return {name: 100 * (after[name] - before[name]) / seconds for name in after}


def run_level(url: str, service_pid: int, texts: list[str], concurrency: int, load: Load) -> dict:
    """The clients at one concurrency against the service at ``url``: what they saw, the service's
    mean batch (warm-up included: same load, same regime) and the CPU split of the window."""
    shares = [min(CLIENTS_PER_PROCESS, concurrency - i) for i in range(0, concurrency, CLIENTS_PER_PROCESS)]
    level = Level(concurrency)
    batched_before = batch_totals(url)
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(len(shares) + 1)
    with ProcessPoolExecutor(len(shares), mp_context=context, initializer=_wait_at, initargs=(ready,)) as pool:
        futures = [
            pool.submit(client_process, url, texts, i * len(texts) // len(shares), n, load)
            for i, n in enumerate(shares)
        ]
        ready.wait(READY_TIMEOUT_S)
        cpu_percent = cpu_percent_while(service_pid, time.monotonic() + START_AFTER_READY_S, load)
        for future in futures:
            level.add(future.result())
    batched_after = batch_totals(url)
    batches = batched_after[1] - batched_before[1]
    mean_batch = (batched_after[0] - batched_before[0]) / batches if batches else None
    return {**level.summary(), "mean_batch_sentences": mean_batch, "cpu_percent": cpu_percent}
