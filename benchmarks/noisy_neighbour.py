"""Noisy neighbours: what heavy clients do to a light client's latency. ``python -m benchmarks.noisy_neighbour``

    python -m benchmarks.noisy_neighbour [--heavy KIND ...] [--clients 2 4] [--duration 55] [--out FILE]

For each ``--heavy`` kind (default: text) and each ``--clients`` count H, a fresh service with its
default settings (``python -m service``, started by ``service.launcher``; ``--max-chars`` and
``--max-texts`` set its MT_MAX_CHARS and MT_MAX_TEXTS, ``--setting MT_NAME=VALUE`` any other; its
data, a stored glossary included, under ``--workdir``) serves H heavy clients and one probe at
once, for ``--duration`` seconds:

- each heavy client sends back to back the heaviest requests of its kind that the limits admit
  (``benchmarks.heavy_requests``: ``text``, ``document``, ``html``, ``stream``, ``glossary``,
  ``alignments``), new ones each time; when the time is up, it hangs up on the request it waits for;
- the probe sends one test sentence every ``--probe-interval`` seconds, on a schedule of its own (a
  slow answer does not delay the next request, so that slow answers are counted, not skipped), from
  a process of its own, so that the heavy clients' work in this one never delays it.

The probe's sentences are ``--src``'s (Multi30K's test set), the heavy requests' ``--heavy-src``'s
(its training set, none of them the probe's: the cache answers a stream's sentences one by one).

Reported per kind and count: the probe's latency (p50, p99, max) and failures, and whether it met
the targets (p50 <= 0.5 s, p99 <= 2 s with up to 2 heavy clients, 3 s with more, no failure); the
heavy clients' answered, failed and unfinished requests (hung up at the end), the characters of
their answered requests per second and their median latency; the source tokens the service
translated per second (its ``mt_input_tokens``, the probe's included: what a long document has
done so far counts too); how soon after the heavy clients hung up the engine processes were idle
(their CPU time read every 200 ms until it grows by under 5% of a core); and the machine
meanwhile: CPU steal, the 1-minute load average at the end, and the share of all CPU time that
processes other than the service's and this benchmark's took.

The result file is ``--out`` (default ``benchmarks/results/noisy_neighbour.json``); the services'
logs go to ``--workdir``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import multiprocessing
import os
import random
import statistics
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from benchmarks.common import (
    DATA_DIR,
    RESULTS,
    RUNS,
    TEST_SRC,
    CpuTimes,
    add_setting_argument,
    given_settings,
    markdown_table,
    read_lines,
    settings_record,
    start_run,
    steal_percent,
    write_report,
)
from benchmarks.heavy_requests import KINDS, PAIR, Limits, Request, Setup, glossary_entries, requests
from service.launcher import LiveService
from service.settings import Settings

DEFAULTS = Settings.model_fields  # the service's own limits, unless the arguments say otherwise
IDLE_WINDOW_S = 0.2
IDLE_CPU_SHARE = 0.05  # of one core, over IDLE_WINDOW_S
CLIENT_TIMEOUT_S = 600.0  # beyond the service's own deadlines, a document's chunks' included
TARGET_P50_S = 0.5
TARGET_P99_S = 2.0  # with up to TARGET_FEW_CLIENTS heavy clients
TARGET_P99_MANY_S = 3.0  # with more
TARGET_FEW_CLIENTS = 2


@dataclass
class Outcomes:
    """Latencies of the answered requests (seconds), why the others failed, how many were still
    unanswered when their client hung up, and what each of the requests sent held."""

    latencies: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    unfinished: int = 0
    chars: int = 0
    sent: dict[str, str] = field(default_factory=dict)  # request name -> the note of its first

    def fail(self, status: str) -> None:
        self.failures[status] = self.failures.get(status, 0) + 1

    def summary(self, seconds: float) -> dict:
        ordered = sorted(self.latencies)
        return {
            "answered": len(ordered),
            "failed": self.failures,
            "unfinished": self.unfinished,
            "p50_s": round(statistics.median(ordered), 3) if ordered else None,
            "p99_s": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 3) if ordered else None,
            "max_s": round(ordered[-1], 3) if ordered else None,
            "chars_per_s": round(self.chars / seconds, 1),
            "requests": self.sent,
        }


# -- sending -----------------------------------------------------------------------------------


async def send(client: httpx.AsyncClient, request: Request) -> str | None:
    """None when ``request`` was answered in full; else what came instead (a status, an error event)."""
    if request.path.endswith("/stream"):
        return await streamed(client, request)
    if request.file is not None:
        response = await client.post(request.path, files={"file": request.file}, data=request.form)
    else:
        response = await client.post(request.path, json=request.json)
    return None if response.status_code == 200 else str(response.status_code)


async def streamed(client: httpx.AsyncClient, request: Request) -> str | None:
    """A stream read to its end: None after its ``done`` event."""
    async with client.stream("POST", request.path, json=request.json) as response:
        if response.status_code != 200:
            return str(response.status_code)
        event = None
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                event = line.removeprefix("event:").strip()
            elif event == "error" and line.startswith("data:"):
                return "stream " + json.loads(line.removeprefix("data:"))["error"]["type"]
    return None if event == "done" else f"stream ended after {event}"


async def timed(client: httpx.AsyncClient, request: Request, outcomes: Outcomes) -> None:
    started = time.monotonic()
    outcomes.sent.setdefault(request.name, request.note)
    try:
        failure = await send(client, request)
    except httpx.HTTPError as e:
        failure = type(e).__name__
    except asyncio.CancelledError:
        outcomes.unfinished += 1
        raise
    if failure is not None:
        outcomes.fail(failure)
        return
    outcomes.latencies.append(time.monotonic() - started)
    outcomes.chars += request.chars


async def heavy_client(url: str, sent: Iterator[Request], outcomes: Outcomes) -> None:
    """Back to back until cancelled; each request made in a thread (a document takes a while)."""
    async with httpx.AsyncClient(base_url=url, timeout=CLIENT_TIMEOUT_S) as client:
        while True:
            await timed(client, await asyncio.to_thread(next, sent), outcomes)


async def probe(url: str, sentences: list[str], interval_s: float, until: float) -> Outcomes:
    outcomes = Outcomes()
    async with httpx.AsyncClient(base_url=url, timeout=CLIENT_TIMEOUT_S) as client:
        sent: list[asyncio.Task[None]] = []
        for sentence in itertools.cycle(sentences):
            if time.monotonic() >= until:
                break
            request = Request("sentence", "/v1/translate", len(sentence), "1 test sentence", {**PAIR, "text": sentence})
            sent.append(asyncio.create_task(timed(client, request, outcomes)))
            await asyncio.sleep(interval_s)
        await asyncio.gather(*sent)
    return outcomes


def run_probe(url: str, sentences: list[str], interval_s: float, until: float) -> Outcomes:
    """``probe`` in the probe's process (``until`` on the monotonic clock, which processes share)."""
    return asyncio.run(probe(url, sentences, interval_s, until))


@dataclass(frozen=True)
class Prober:
    """The probe's process, and what it sends."""

    pool: Executor
    sentences: list[str]
    interval_s: float

    def start(self, url: str, until: float) -> asyncio.Future[Outcomes]:
        return asyncio.get_running_loop().run_in_executor(
            self.pool, run_probe, url, self.sentences, self.interval_s, until
        )


@contextlib.contextmanager
def probe_process(sentences: list[str], interval_s: float) -> Iterator[Prober]:
    """A process for the probe, started (with this module imported) by a probe that ends at once, so
    that its start is not timed."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(run_probe, "http://127.0.0.1", [], 1.0, 0.0).result()
        yield Prober(pool, sentences, interval_s)


# -- what the service and the machine did ----------------------------------------------------------


def cpu_seconds(processes: list[psutil.Process]) -> float:
    """User and system CPU time used so far by those of ``processes`` still alive."""
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += sum(process.cpu_times()[:2])
    return total


def engine_cpu_seconds(service_pid: int) -> float:
    """CPU time used so far by the service's engine processes."""
    children = psutil.Process(service_pid).children(recursive=True)
    return cpu_seconds([c for c in children if _is_spawned(c)])


def _is_spawned(process: psutil.Process) -> bool:
    """Whether ``process`` runs multiprocessing's spawn entry point; not if it has exited since
    (a zombie has no command line)."""
    with contextlib.suppress(psutil.NoSuchProcess):
        return "spawn_main" in " ".join(process.cmdline())
    return False


def tree_cpu_seconds(pid: int) -> float:
    """CPU time used so far by a process and its living descendants."""
    root = psutil.Process(pid)
    return cpu_seconds([root, *root.children(recursive=True)])


@dataclass(frozen=True)
class MachineReading:
    """The machine's CPU time so far, and the service's and this benchmark's (its probe's too)."""

    cpu: CpuTimes
    service_s: float
    own_s: float

    @classmethod
    def now(cls, service_pid: int) -> MachineReading:
        return cls(CpuTimes.now(), tree_cpu_seconds(service_pid), tree_cpu_seconds(os.getpid()))


def machine_share(before: MachineReading, after: MachineReading) -> dict:
    """Steal, load, and the CPU time others took between two readings: what says whether another
    job shared the cores."""
    total = after.cpu.total - before.cpu.total
    steal = after.cpu.steal - before.cpu.steal
    busy = total - (after.cpu.idle - before.cpu.idle) - steal
    others = busy - (after.service_s - before.service_s) - (after.own_s - before.own_s)
    return {
        "steal_percent": round(steal_percent(before.cpu, after.cpu), 1),
        "load_1m": round(os.getloadavg()[0], 2),
        "others_cpu_percent": round(100 * max(0.0, others) / total, 1) if total > 0 else 0.0,
    }


async def input_tokens(client: httpx.AsyncClient) -> float:
    """The service's ``mt_input_tokens`` so far, all models together."""
    metrics = (await client.get("/metrics")).raise_for_status().text
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines() if line.startswith("mt_input_tokens_total")
    )


async def idle_after_hang_up(service_pid: int) -> float:
    """Seconds from now, when the heavy clients have hung up, until the engine processes are idle."""
    left = time.monotonic()
    before = engine_cpu_seconds(service_pid)
    while True:
        await asyncio.sleep(IDLE_WINDOW_S)
        now = engine_cpu_seconds(service_pid)
        if now - before < IDLE_CPU_SHARE * IDLE_WINDOW_S:
            return round(time.monotonic() - left - IDLE_WINDOW_S, 2)
        before = now


# -- a run ---------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def stored_glossary(client: httpx.AsyncClient, kind: str, sentences: Sequence[str]) -> AsyncIterator[str | None]:
    """The glossary the ``glossary`` kind names, stored for the run; None for the other kinds."""
    if kind != "glossary":
        yield None
        return
    body = {"name": "noisy neighbour", **PAIR, "entries": glossary_entries(sentences)}
    glossary_id = (await client.post("/v1/glossaries", json=body)).raise_for_status().json()["glossary_id"]
    yield glossary_id
    (await client.delete(f"/v1/glossaries/{glossary_id}")).raise_for_status()


async def heavy_until(until: float, clients: list[Iterator[Request]], url: str, outcomes: Outcomes) -> None:
    """The heavy clients, until ``until`` (monotonic), when they hang up."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(until - time.monotonic()):
            await asyncio.gather(*(heavy_client(url, sent, outcomes) for sent in clients))


async def measure(service: LiveService, kind: str, heavy: int, setup: Setup, prober: Prober, duration: float) -> dict:
    pid, heavy_outcomes = service.process.pid, Outcomes()
    clients = [requests(kind, setup, random.Random(i), start=i) for i in range(heavy)]
    async with httpx.AsyncClient(base_url=service.url, timeout=CLIENT_TIMEOUT_S) as client:
        tokens_before, machine_before = await input_tokens(client), MachineReading.now(pid)
        until = time.monotonic() + duration
        probed = prober.start(service.url, until)
        await heavy_until(until, clients, service.url, heavy_outcomes)
        tokens, machine_after = await input_tokens(client) - tokens_before, MachineReading.now(pid)
        idle = await idle_after_hang_up(pid)
        probe_outcomes = await probed
    return {
        "kind": kind,
        "heavy_clients": heavy,
        "seconds": duration,
        "probe": probe_outcomes.summary(duration),
        "heavy": heavy_outcomes.summary(duration),
        "service_tokens_per_s": round(tokens / duration, 1),
        "idle_after_hang_up_s": idle,
        "machine": machine_share(machine_before, machine_after),
    }


async def level(service: LiveService, kind: str, heavy: int, setup: Setup, prober: Prober, duration: float) -> dict:
    """One kind at one count of heavy clients, with the glossary it names stored meanwhile."""
    async with (
        httpx.AsyncClient(base_url=service.url, timeout=CLIENT_TIMEOUT_S) as client,
        stored_glossary(client, kind, setup.sentences) as glossary_id,
    ):
        setup = Setup(setup.limits, setup.sentences, glossary_id)
        return await measure(service, kind, heavy, setup, prober, duration)


# -- the report ----------------------------------------------------------------------------------


def missed_targets(level: dict) -> list[str]:
    """The probe's targets this level missed."""
    probe = level["probe"]
    p99_target = TARGET_P99_S if level["heavy_clients"] <= TARGET_FEW_CLIENTS else TARGET_P99_MANY_S
    missed = [] if probe["p50_s"] is not None and probe["p50_s"] <= TARGET_P50_S else ["p50"]
    missed += [] if probe["p99_s"] is not None and probe["p99_s"] <= p99_target else ["p99"]
    return missed + (["failures"] if probe["failed"] else [])


def counted(outcomes: dict) -> str:
    """Failures in all, and by what came instead: "3 (504: 2, ReadTimeout: 1)"."""
    failed = outcomes["failed"]
    if not failed:
        return "0"
    return f"{sum(failed.values())} ({', '.join(f'{why}: {n}' for why, n in sorted(failed.items()))})"


HEADER = [
    "heavy kind",
    "heavy clients",
    "probe answered",
    "probe failed",
    "probe p50 s",
    "probe p99 s",
    "probe max s",
    "probe targets",
    "heavy answered",
    "heavy failed",
    "heavy unfinished",
    "heavy chars/s",
    "heavy p50 s",
    "service source tokens/s",
    "engine idle s after the hang-up",
    "steal %",
    "load 1 min",
    "others' CPU %",
]


def row(level: dict) -> list[object]:
    p, h, m = level["probe"], level["heavy"], level["machine"]
    missed = missed_targets(level)
    return [
        level["kind"],
        level["heavy_clients"],
        p["answered"],
        counted(p),
        p["p50_s"],
        p["p99_s"],
        p["max_s"],
        f"missed: {', '.join(missed)}" if missed else "met",
        h["answered"],
        counted(h),
        h["unfinished"],
        h["chars_per_s"],
        h["p50_s"],
        level["service_tokens_per_s"],
        level["idle_after_hang_up_s"],
        m["steal_percent"],
        m["load_1m"],
        m["others_cpu_percent"],
    ]


def markdown(levels: list[dict]) -> str:
    sent = {name: note for level in levels for name, note in level["heavy"]["requests"].items()}
    notes = "\n".join(f"- {name}: {note}" for name, note in sent.items())
    return (
        markdown_table(HEADER, [row(level) for level in levels]) + f"\n\nHeavy requests (the first of each):\n{notes}"
    )


# -- the command -----------------------------------------------------------------------------------


def service_settings(args: argparse.Namespace) -> dict[str, str]:
    settings = {
        "MT_MAX_CHARS": str(args.max_chars),
        "MT_MAX_TEXTS": str(args.max_texts),
        "MT_DATA_DIR": str(args.workdir / "data"),
    }
    return settings | given_settings(args)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heavy", nargs="+", choices=KINDS, default=["text"], metavar="KIND", help=f"one of {KINDS}")
    parser.add_argument("--clients", type=int, nargs="+", default=[2, 4], help="heavy clients, one run each")
    parser.add_argument("--duration", type=float, default=55.0, help="seconds of traffic per run")
    parser.add_argument("--probe-interval", type=float, default=0.5)
    parser.add_argument("--max-chars", type=int, default=DEFAULTS["max_chars"].default, help="MT_MAX_CHARS")
    parser.add_argument("--max-texts", type=int, default=DEFAULTS["max_texts"].default, help="MT_MAX_TEXTS")
    add_setting_argument(parser)
    parser.add_argument("--src", type=Path, default=TEST_SRC, help="the probe's sentences")
    parser.add_argument(
        "--heavy-src", type=Path, default=DATA_DIR / "train.en", help="the sentences heavy requests are made of"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "noisy_neighbour.json")
    parser.add_argument("--workdir", type=Path, default=RUNS / "noisy_neighbour")
    args = parser.parse_args(argv)
    if min(args.clients) < 0 or args.duration <= 0 or args.probe_interval <= 0:
        parser.error("--clients must be >= 0, --duration and --probe-interval > 0")
    return args


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.noisy_neighbour", argv)
    args = parse_args(start.argv)
    settings = service_settings(args)
    setup = Setup(Limits.of(settings), read_lines(args.heavy_src))
    levels = []
    with probe_process(read_lines(args.src), args.probe_interval) as prober:
        for kind, heavy in itertools.product(args.heavy, args.clients):
            with LiveService(settings, args.workdir / f"service-{kind}-{heavy}.log") as service:
                levels.append(asyncio.run(level(service, kind, heavy, setup, prober, args.duration)))
            print(markdown(levels[-1:]), flush=True)
    write_report(start, args.out, {"settings": settings_record(args), "levels": levels, "markdown": markdown(levels)})


if __name__ == "__main__":
    main()
