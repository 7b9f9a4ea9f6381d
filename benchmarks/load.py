"""Load test of the HTTP service: closed-loop clients, dynamic batching on and off.

    python -m benchmarks.load [--bundle DIR] [--concurrency 1 4 16 64] [--duration 20] [--json OUT]

1. The offline engine (``engine.translator``, same bundle, threads and batch limit) translates the
   test sentences in one call: the throughput the service is held against.
2. The script starts the service itself (``python -m service``) on a free port, once with dynamic
   batching on (``MT_MAX_BATCH_SENTENCES`` = the batch limit, ``MT_MAX_WAIT_MS`` as configured) and
   once off (``MT_MAX_BATCH_SENTENCES=1``), the translation cache off so that every request is
   translated, and waits for ``/readyz``.
3. At each concurrency C, C clients (each with one connection of its own, on uvloop; spread over
   processes of at most ``CLIENTS_PER_PROCESS``; ``--client``: a minimal HTTP/1.1 client or httpx,
   see ``benchmarks/http_client.py``) each send one test sentence per request, the next as soon as
   the previous answer arrives (closed loop), cycling through the test set.
   After ``--warmup`` seconds the clients run ``--duration`` seconds more; requests started in that
   window are measured: throughput (completed / window), latency percentiles, errors (any non-200
   or transport error), the mean batch size read from the service's ``/metrics``, and the CPU used
   in the window by the HTTP process, the engine process(es) and the clients, with the machine's idle
   and steal time (100% = one core; on a VM, steal says when a run measured the host's neighbours).
The clients share the 2-core machine with the service, as they would in a same-host deployment.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import multiprocessing
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import uvloop
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.common import TEST_SRC, child_env, machine, markdown_table, read_lines, write_json
from benchmarks.http_client import ClientKind, open_client

BATCH_METRIC = "mt_batch_size_sentences"
READY_TIMEOUT_S = 180.0


@dataclass
class Level:
    """What the clients saw at one concurrency."""

    concurrency: int
    latencies: list[float] = field(default_factory=list)  # seconds, successful requests
    errors: int = 0
    window_s: float = 0.0
    mean_batch_sentences: float | None = None
    cpu_percent: dict[str, float] | None = None  # over the measured window; 100 = one core

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
            "mean_batch_sentences": self.mean_batch_sentences,
            "cpu_percent": self.cpu_percent,
        }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """``python -m service`` in a subprocess, configured by ``MT_*`` variables, stopped by SIGTERM."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        cmd = [sys.executable, "-m", "service", "--host", "127.0.0.1", "--port", str(self.port)]
        with log_path.open("w") as log:
            self.proc = subprocess.Popen(cmd, env=child_env(env), stdout=log, stderr=subprocess.STDOUT)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"service exited with {self.proc.returncode}:\n{self.log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        raise RuntimeError(f"service not ready after {READY_TIMEOUT_S:.0f} s; see {self.log_path}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def batch_totals(url: str) -> tuple[float, float]:
    """(sum, count) of the service's batch-size histogram: sentences batched, batches run."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    totals = {"sum": 0.0, "count": 0.0}
    for family in text_string_to_metric_families(text):
        if family.name == BATCH_METRIC:
            for sample in family.samples:
                for key in totals:
                    if sample.name == f"{BATCH_METRIC}_{key}":
                        totals[key] += sample.value
    return totals["sum"], totals["count"]


# Each client has one connection of its own (as separate users would have), on a uvloop event loop,
# and sends pre-encoded bodies: the clients share the 2 cores with the service, so every millisecond
# they spend is taken from it (see benchmarks/http_client.py). Processes of at most this many clients
# keep one process's event loop from becoming the bottleneck.
CLIENTS_PER_PROCESS = 16


async def closed_loop(
    url: str,
    bodies: Iterator[bytes],
    level: Level,
    *,
    client: ClientKind,
    start: float,
    warmup: float,
    duration: float,
) -> None:
    """``level.concurrency`` clients, each sending its next request when the previous one returns,
    from ``start`` (``time.monotonic()``, shared by all client processes) for warmup + duration."""
    window_start, window_end = start + warmup, start + warmup + duration

    async def client_loop() -> None:
        connection = open_client(url, client)
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


def client_process(url: str, texts: list[str], offset: int, concurrency: int, options: dict) -> Level:
    """One process's share of the clients; each process starts at its own place in the test set."""
    level = Level(concurrency)
    beam_size = options.pop("beam_size")
    encoded = [json.dumps({"text": t, "target_lang": "de", "beam_size": beam_size}).encode() for t in texts]
    bodies = itertools.islice(itertools.cycle(encoded), offset, None)
    uvloop.run(closed_loop(url, bodies, level, **options))
    return level


def cpu_seconds(service_pid: int) -> dict[str, float]:
    """CPU seconds used so far by the service's HTTP process, its engine processes (its children)
    and the client processes (this process's other children); the machine's idle and steal
    seconds (all cores; steal is time the VM's host gave to others); and when that was read."""

    def used(process: psutil.Process) -> float:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            return 0.0
        return times.user + times.system

    service = psutil.Process(service_pid)
    machine = psutil.cpu_times()
    return {
        "http": used(service),
        "engine": sum(map(used, service.children(recursive=True))),
        "clients": sum(used(p) for p in psutil.Process().children() if p.pid != service_pid),
        "idle": machine.idle,
        "steal": steal_seconds(),
        "at": time.monotonic(),
    }


def steal_seconds() -> float:
    """CPU time, all cores, that the VM's host gave to others so far (Linux; 0 elsewhere)."""
    return getattr(psutil.cpu_times(), "steal", 0.0)


def run_level(service: Service, texts: list[str], concurrency: int, args: argparse.Namespace) -> dict:
    shares = [min(CLIENTS_PER_PROCESS, concurrency - i) for i in range(0, concurrency, CLIENTS_PER_PROCESS)]
    options = {"beam_size": args.beam_size, "client": args.client, "warmup": args.warmup, "duration": args.duration}
    level = Level(concurrency)
    url = service.url
    batched_before = batch_totals(url)
    with ProcessPoolExecutor(len(shares), mp_context=multiprocessing.get_context("spawn")) as pool:
        start = time.monotonic() + 3.0  # every process has started and imported httpx by then
        futures = [
            pool.submit(client_process, url, texts, i * len(texts) // len(shares), n, {**options, "start": start})
            for i, n in enumerate(shares)
        ]
        # Who used the 2 cores during the measured window: the clients run on them too.
        time.sleep(max(0.0, start + args.warmup - time.monotonic()))
        before = cpu_seconds(service.proc.pid)
        time.sleep(args.duration)
        after = cpu_seconds(service.proc.pid)
        seconds = after.pop("at") - before.pop("at")
        level.cpu_percent = {name: 100 * (after[name] - before[name]) / seconds for name in after}
        for part in (f.result() for f in futures):
            level.latencies += part.latencies
            level.errors += part.errors
            level.window_s = max(level.window_s, part.window_s)
    batched_after = batch_totals(url)
    batches = batched_after[1] - batched_before[1]
    level.mean_batch_sentences = (batched_after[0] - batched_before[0]) / batches if batches else None
    return level.summary()  # (warm-up batches included in the mean batch size: same load, same regime)


def offline_throughput(texts: list[str], args: argparse.Namespace) -> dict:
    """The engine alone on the same sentences, one call: sentences/s, and the machine's steal time
    meanwhile (% of one core), which tells whether the reference itself was measured slowed."""
    from engine import TranslationOptions, Translator, TranslatorConfig

    variant = None if args.variant == "auto" else args.variant
    config = TranslatorConfig(model_dir=args.bundle, provider="cpu", threads=args.threads, streams=args.streams,
                              variant=variant, max_batch_sentences=args.batch_sentences)  # fmt: skip
    translator = Translator(config)
    try:
        options = TranslationOptions(beam_size=args.beam_size)
        steal_before, start = steal_seconds(), time.perf_counter()
        translator.translate_batch(texts, options)
        seconds = time.perf_counter() - start
        steal_percent = 100 * (steal_seconds() - steal_before) / seconds
    finally:
        translator.close()
    return {
        "sentences": len(texts),
        "seconds": seconds,
        "throughput": len(texts) / seconds,
        "steal_percent": steal_percent,
    }


def service_env(args: argparse.Namespace, batching: bool) -> dict[str, str]:
    return {
        "MT_MODEL_DIR": str(args.bundle.resolve()),
        "MT_PROVIDER": "cpu",
        "MT_THREADS": str(args.threads),
        "MT_STREAMS": str(args.streams),
        "MT_VARIANT": args.variant,
        "MT_MAX_BATCH_SENTENCES": str(args.batch_sentences if batching else 1),
        "MT_MAX_WAIT_MS": str(args.max_wait_ms),
        "MT_CACHE_SIZE": "0",  # the clients cycle through the test set: a cache would answer repeats
        "MT_MAX_QUEUE_SENTENCES": str(max(1024, 4 * max(args.concurrency))),
        "MT_LOG_LEVEL": "warning",  # no access log line per request
        "MT_ENGINE_PROCESS": "false" if args.in_process else "true",
        "MT_ENGINE_NICE": str(args.engine_nice),
    }


def run_mode(texts: list[str], args: argparse.Namespace, batching: bool) -> list[dict]:
    name = "on" if batching else "off"
    service = Service(service_env(args, batching), args.workdir / f"service-batching-{name}.log")
    try:
        service.wait_ready()
        levels = []
        for concurrency in args.concurrency:
            levels.append({"batching": name, **run_level(service, texts, concurrency, args)})
            print(f"batching {name} c={concurrency}: {levels[-1]['throughput']:.1f} req/s", file=sys.stderr)
        return levels
    finally:
        service.stop()


def ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.0f}"


CPU_SPLIT = ("http", "engine", "clients", "idle", "steal")


def cpu_split(level: dict) -> str:
    """One level's CPU percentages in ``CPU_SPLIT`` order, e.g. ``12/119/17/48/0``."""
    return "/".join(f"{level['cpu_percent'][name]:.0f}" for name in CPU_SPLIT)


def table(levels: list[dict], offline: dict) -> str:
    header = ["batching", "clients", "sent/s", "× offline", "p50 ms", "p95 ms", "p99 ms", "errors", "mean batch",
              "CPU % HTTP/engine/clients/idle/steal"]  # fmt: skip
    rows = []
    for lv in levels:
        ratio = lv["throughput"] / offline["throughput"]
        batch = "n/a" if lv["mean_batch_sentences"] is None else f"{lv['mean_batch_sentences']:.1f}"
        latencies = [ms(lv["p50_s"]), ms(lv["p95_s"]), ms(lv["p99_s"])]
        rows.append([lv["batching"], lv["concurrency"], f"{lv['throughput']:.1f}", f"{ratio:.2f}", *latencies,
                     lv["errors"], batch, cpu_split(lv)])  # fmt: skip
    return markdown_table(header, rows)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, default=Path("models/en-de/bundle"))
    parser.add_argument("--src", type=Path, default=TEST_SRC)
    parser.add_argument("--limit", type=int, default=0, help="only the first N sentences (0 = all)")
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 4, 16, 64])
    parser.add_argument("--duration", type=float, default=20.0, help="measured seconds per concurrency")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds before each measurement")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--variant", default="auto", help="bundle variant (fp32, int8); auto = the manifest's default")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--streams", type=int, default=1, help="MT_STREAMS (and the offline engine's streams)")
    parser.add_argument("--batch-sentences", type=int, default=32, help="MT_MAX_BATCH_SENTENCES when batching")
    parser.add_argument("--max-wait-ms", type=float, default=5.0)
    parser.add_argument("--in-process", action="store_true", help="MT_ENGINE_PROCESS=false: engine in the HTTP process")
    parser.add_argument("--engine-nice", type=int, default=10, help="MT_ENGINE_NICE")
    parser.add_argument("--client", choices=["raw", "httpx"], default="raw", help="HTTP client of the load generator")
    parser.add_argument("--workdir", type=Path, default=Path("runs/benchmarks/load"))
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    if not args.bundle.is_dir():
        parser.error(f"bundle not found: {args.bundle}")
    if min(args.concurrency) < 1 or args.duration <= 0 or args.warmup < 0:
        parser.error("concurrency must be >= 1, duration > 0 and warmup >= 0")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    texts = read_lines(args.src, args.limit)
    offline = offline_throughput(texts, args)
    levels = run_mode(texts, args, batching=True) + run_mode(texts, args, batching=False)
    report = {
        "machine": machine(),
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "json"},
        "offline": offline,
        "levels": levels,
        "table": table(levels, offline),
    }
    write_json(args.json, report)
    print(
        f"offline engine: {offline['throughput']:.1f} sentences/s on {offline['sentences']} sentences"
        f" (steal {offline['steal_percent']:.0f}%)"
    )
    print(report["table"])


if __name__ == "__main__":
    main()
