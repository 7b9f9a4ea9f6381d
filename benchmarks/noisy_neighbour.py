"""Noisy neighbours: what heavy clients do to a light client's latency. ``python -m benchmarks.noisy_neighbour``

    python -m benchmarks.noisy_neighbour [--heavy 2 4] [--duration 55] [--out FILE]

For each ``--heavy`` count H, a fresh service with its default settings (``python -m service``,
started by ``service.launcher``; ``--max-chars`` and ``--max-texts`` set its MT_MAX_CHARS and
MT_MAX_TEXTS, ``--setting MT_NAME=VALUE`` any other) serves H heavy clients and one probe at once,
for ``--duration`` seconds:

- each heavy client sends back to back, alternating, the two heaviest requests those limits admit:
  one text of ``--max-chars`` - 100 characters (a random prefix, then one letter repeated: a
  sentence the model cannot end early), and ``--max-texts`` texts of up to 300 characters
  (Multi30K test sentences joined, within ``--max-chars`` together);
- the probe sends one test sentence every ``--probe-interval`` seconds, on a schedule of its own (a
  slow answer does not delay the next request, so that slow answers are counted, not skipped).

Reported: the probe's latency (p50, p99, max) and failures, and the heavy clients' completed and
failed requests and characters translated per second. Then, on the idle service, how soon abandoned
work stops costing compute: a heavy 64-text request at beam ``ABANDONED_BEAM`` is timed to its
answer, and another like it is sent by a client that hangs up after ``--abandon-after`` seconds;
the engine processes' CPU time is read every 200 ms until it stops growing (under 5% of a core),
and the seconds from the hang-up to then are reported.

The result file is ``--out`` (default ``benchmarks/results/noisy_neighbour.json``); the services'
logs go to ``--workdir``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import random
import statistics
import string
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from benchmarks.common import (
    RESULTS,
    RUNS,
    TEST_SRC,
    markdown_table,
    read_lines,
    settings_record,
    start_run,
    write_report,
)
from service.launcher import LiveService
from service.settings import Settings

DEFAULTS = Settings.model_fields  # the service's own limits, unless the arguments say otherwise
HEAVY_TEXT_CHARS = 300
IDLE_WINDOW_S = 0.2
IDLE_CPU_SHARE = 0.05  # of one core, over IDLE_WINDOW_S
ABANDONED_BEAM = 12  # the widest beam the default MT_MAX_BEAM_TOKENS admits for 64 texts of 300 characters
CLIENT_TIMEOUT_S = 180.0  # beyond the service's own deadline: the service answers first


@dataclass
class Outcomes:
    """Latencies of the answered requests (seconds), and the status of every other one."""

    latencies: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    chars: int = 0

    def fail(self, status: str) -> None:
        self.failures[status] = self.failures.get(status, 0) + 1

    def summary(self, seconds: float) -> dict:
        ordered = sorted(self.latencies)
        return {
            "answered": len(ordered),
            "failed": self.failures,
            "p50_s": round(statistics.median(ordered), 3) if ordered else None,
            "p99_s": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 3) if ordered else None,
            "max_s": round(ordered[-1], 3) if ordered else None,
            "chars_per_s": round(self.chars / seconds, 1),
        }


def heavy_bodies(sentences: list[str], max_chars: int, max_texts: int, rng: random.Random) -> list[dict]:
    """The two heavy requests a heavy client alternates between, new ones each time (a random prefix,
    texts of sentences drawn at random), so that the translation cache never answers them."""
    prefix = "".join(rng.choice(string.ascii_lowercase + " ") for _ in range(60))
    long_text = (prefix + "a" * max_chars)[: max_chars - 100]
    size = min(HEAVY_TEXT_CHARS, max_chars // max_texts)
    texts = []
    while len(texts) < max_texts:
        text = rng.choice(sentences)[:size]
        while len(longer := f"{text} {rng.choice(sentences)}") <= size:
            text = longer
        texts.append(text)
    common = {"source_lang": "en", "target_lang": "de"}
    return [{**common, "text": long_text}, {**common, "text": texts}]


def body_chars(body: dict) -> int:
    text = body["text"]
    return len(text) if isinstance(text, str) else sum(map(len, text))


async def post(client: httpx.AsyncClient, body: dict, outcomes: Outcomes) -> None:
    started = time.monotonic()
    try:
        response = await client.post("/v1/translate", json=body)
    except httpx.HTTPError as e:
        outcomes.fail(type(e).__name__)
        return
    if response.status_code != 200:
        outcomes.fail(str(response.status_code))
        return
    outcomes.latencies.append(time.monotonic() - started)
    outcomes.chars += body_chars(body)


async def heavy_client(
    url: str, sentences: list[str], limits: tuple[int, int], rng: random.Random, until: float, outcomes: Outcomes
) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=CLIENT_TIMEOUT_S) as client:
        while time.monotonic() < until:
            for body in heavy_bodies(sentences, *limits, rng):
                await post(client, body, outcomes)


async def probe(url: str, sentences: list[str], interval_s: float, until: float, outcomes: Outcomes) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=CLIENT_TIMEOUT_S) as client:
        sent: list[asyncio.Task[None]] = []
        for sentence in itertools.cycle(sentences):
            if time.monotonic() >= until:
                break
            body = {"text": sentence, "source_lang": "en", "target_lang": "de"}
            sent.append(asyncio.create_task(post(client, body, outcomes)))
            await asyncio.sleep(interval_s)
        await asyncio.gather(*sent)


async def measure(url: str, heavy: int, sentences: list[str], args: argparse.Namespace) -> dict:
    rng = random.Random(0)
    until = time.monotonic() + args.duration
    heavy_outcomes, probe_outcomes = Outcomes(), Outcomes()
    started = time.monotonic()
    await asyncio.gather(
        probe(url, sentences, args.probe_interval, until, probe_outcomes),
        *(heavy_client(url, sentences, limits(args), rng, until, heavy_outcomes) for _ in range(heavy)),
    )
    seconds = time.monotonic() - started
    return {
        "heavy_clients": heavy,
        "seconds": round(seconds, 1),
        "probe": probe_outcomes.summary(seconds),
        "heavy": heavy_outcomes.summary(seconds),
    }


def engine_cpu_seconds(service_pid: int) -> float:
    """CPU time used so far by the service's engine processes."""
    children = psutil.Process(service_pid).children(recursive=True)
    engines = [c for c in children if "spawn_main" in " ".join(c.cmdline())]
    return sum(sum(c.cpu_times()[:2]) for c in engines)


async def abandoned_until_idle(url: str, service_pid: int, body: dict, after_s: float) -> float:
    """Seconds from a client's hang-up, ``after_s`` into a heavy request, until the engine is idle."""
    async with httpx.AsyncClient(base_url=url, timeout=after_s) as client:
        with contextlib.suppress(httpx.TimeoutException):
            await client.post("/v1/translate", json=body)
    left = time.monotonic()
    before = engine_cpu_seconds(service_pid)
    while True:
        await asyncio.sleep(IDLE_WINDOW_S)
        now = engine_cpu_seconds(service_pid)
        if now - before < IDLE_CPU_SHARE * IDLE_WINDOW_S:
            return round(time.monotonic() - left - IDLE_WINDOW_S, 2)
        before = now


async def abandoned(service: LiveService, sentences: list[str], args: argparse.Namespace) -> dict:
    """How long a heavy request takes when awaited, and how soon the engine is idle when its client
    hangs up after ``--abandon-after`` seconds (two requests alike, so that the cache answers neither)."""
    rng = random.Random(1)
    awaited, hung_up = ({**heavy_bodies(sentences, *limits(args), rng)[1], "beam_size": ABANDONED_BEAM} for _ in "ab")
    outcomes = Outcomes()
    async with httpx.AsyncClient(base_url=service.url, timeout=CLIENT_TIMEOUT_S) as client:
        await post(client, awaited, outcomes)
    idle = await abandoned_until_idle(service.url, service.process.pid, hung_up, args.abandon_after)
    return {"abandoned_request_s": outcomes.summary(1.0)["max_s"], "idle_after_abandon_s": idle}


def markdown(levels: list[dict]) -> str:
    rows = []
    for level in levels:
        p, h = level["probe"], level["heavy"]
        rows.append(
            [
                level["heavy_clients"],
                p["answered"],
                sum(p["failed"].values()),
                p["p50_s"],
                p["p99_s"],
                p["max_s"],
                h["answered"],
                sum(h["failed"].values()),
                h["chars_per_s"],
                level["abandoned_request_s"],
                level["idle_after_abandon_s"],
            ]
        )
    header = [
        "heavy clients",
        "probe answered",
        "probe failed",
        "probe p50 s",
        "probe p99 s",
        "probe max s",
        "heavy answered",
        "heavy failed",
        "heavy chars/s",
        "heavy request awaited s",
        "engine idle s after a hang-up",
    ]
    return markdown_table(header, rows)


def limits(args: argparse.Namespace) -> tuple[int, int]:
    return args.max_chars, args.max_texts


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heavy", type=int, nargs="+", default=[2, 4], help="heavy clients, one run each")
    parser.add_argument("--duration", type=float, default=55.0, help="seconds of traffic per run")
    parser.add_argument("--probe-interval", type=float, default=0.5)
    parser.add_argument("--abandon-after", type=float, default=0.5, help="seconds before the client hangs up")
    parser.add_argument("--max-chars", type=int, default=DEFAULTS["max_chars"].default, help="MT_MAX_CHARS")
    parser.add_argument("--max-texts", type=int, default=DEFAULTS["max_texts"].default, help="MT_MAX_TEXTS")
    parser.add_argument(
        "--setting", action="append", default=[], metavar="MT_NAME=VALUE", help="another setting of the service"
    )
    parser.add_argument("--src", type=Path, default=TEST_SRC)
    parser.add_argument("--out", type=Path, default=RESULTS / "noisy_neighbour.json")
    parser.add_argument("--workdir", type=Path, default=RUNS / "noisy_neighbour")
    args = parser.parse_args(argv)
    if min(args.heavy) < 0 or args.duration <= 0 or args.probe_interval <= 0:
        parser.error("--heavy must be >= 0, --duration and --probe-interval > 0")
    return args


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.noisy_neighbour", argv)
    args = parse_args(start.argv)
    sentences = read_lines(args.src)
    levels = []
    for heavy in args.heavy:
        settings = {"MT_MAX_CHARS": str(args.max_chars), "MT_MAX_TEXTS": str(args.max_texts)}
        settings |= dict(setting.split("=", 1) for setting in args.setting)
        with LiveService(settings, args.workdir / f"service-heavy{heavy}.log") as service:
            level = asyncio.run(measure(service.url, heavy, sentences, args))
            levels.append({**level, **asyncio.run(abandoned(service, sentences, args))})
        print(markdown(levels[-1:]))
    write_report(start, args.out, {"settings": settings_record(args), "levels": levels, "markdown": markdown(levels)})


if __name__ == "__main__":
    main()
