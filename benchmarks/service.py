"""The service under load against the offline engine: ``python -m benchmarks.service``.

    python -m benchmarks.service [--streams 1 2] [--concurrency 1 4 16 64] [--rounds 2] [--out FILE]

For each ``--streams`` setting, the service (``python -m service``, started by ``service.launcher``
on a free port: the bundle's default variant, translation cache off, engine in its own processes)
runs once with dynamic batching on (``MT_MAX_BATCH_SENTENCES=--batch-sentences``) and once off
(``MT_MAX_BATCH_SENTENCES=1``). At each concurrency, closed-loop clients send one test sentence per
request at beam 4, naming its source language as the offline engine is told it
(``benchmarks/loadgen.py``). Every such measurement is bracketed by two runs of
the offline engine (``engine.translator`` in this process, same bundle, threads, streams and batch
limit) over the test set, and its throughput is compared with their mean: on a VM whose speed
drifts (CPU steal), a reference measured once, minutes away, would compare two different machines.
``--rounds`` repeats every measurement; the tables give each figure's median over rounds, and the
range of the ratio. The result file is ``--out`` (default ``benchmarks/results/service.json``); the
service's logs go to ``--workdir``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import closing
from pathlib import Path
from typing import get_args

from benchmarks.common import (
    BUNDLE,
    RESULTS,
    RUNS,
    TEST_SRC,
    CpuTimes,
    markdown_table,
    read_lines,
    settings_record,
    start_run,
    streams_title,
    write_report,
)
from benchmarks.http_client import ClientKind
from benchmarks.loadgen import CPU_SPLIT, Load, run_level
from service.launcher import LiveService
from service.settings import Settings

DEFAULTS = Settings.model_fields  # the service's own defaults, so that the benchmark follows them


class OfflineEngine:
    """The engine alone, in this process, as the service would run it: the reference."""

    def __init__(self, args: argparse.Namespace, streams: int) -> None:
        # Imported here: the load generator's client processes re-import this module and need none of it.
        from engine import TranslationOptions, Translator, TranslatorConfig

        variant = None if args.variant == "auto" else args.variant
        config = TranslatorConfig(model_dir=args.bundle, provider=args.provider, threads=args.threads, streams=streams,
                                  variant=variant, max_batch_sentences=args.batch_sentences,
                                  pool=args.row_pool == "on", cuda_graphs=args.cuda_graphs == "on")  # fmt: skip
        self.translator = Translator(config)
        self.options = TranslationOptions(beam_size=args.beam_size)

    def measure(self, texts: list[str]) -> dict:
        """Sentences/s over ``texts`` in one call, and the machine's steal meanwhile (100 = one core)."""
        cpu_before, start = CpuTimes.now(), time.perf_counter()
        self.translator.translate_batch(texts, self.options)
        seconds = time.perf_counter() - start
        steal = 100 * (CpuTimes.now().steal - cpu_before.steal) / seconds
        return {"throughput": len(texts) / seconds, "seconds": seconds, "steal_percent": steal}

    def close(self) -> None:
        self.translator.close()


def service_settings(args: argparse.Namespace, streams: int, batching: bool) -> dict[str, str]:
    return {
        "MT_MODEL_DIR": str(args.bundle.resolve()),
        "MT_PROVIDER": args.provider,
        "MT_THREADS": str(args.threads),
        "MT_STREAMS": str(streams),
        "MT_VARIANT": args.variant,
        "MT_MAX_BATCH_SENTENCES": str(args.batch_sentences if batching else 1),
        "MT_MAX_WAIT_MS": str(args.max_wait_ms),
        "MT_CACHE_SIZE": "0",  # the clients cycle through the test set: a cache would answer repeats
        "MT_MAX_QUEUE_SENTENCES": str(max(1024, 4 * max(args.concurrency))),
        "MT_LOG_LEVEL": "warning",  # no access log line per request
        "MT_ROW_POOL": str(args.row_pool == "on").lower(),
        "MT_CUDA_GRAPHS": str(args.cuda_graphs == "on").lower(),
    }


def bracketed_levels(
    service: LiveService, offline: OfflineEngine, texts: list[str], args: argparse.Namespace
) -> Iterator[dict]:
    """Every concurrency ``--rounds`` times, each between two offline runs (shared with its neighbours)."""
    load = Load(
        source_lang=args.source_lang,
        target_lang=args.target_lang,
        beam_size=args.beam_size,
        warmup=args.warmup,
        duration=args.duration,
        client=args.client,
    )
    before = offline.measure(texts)
    for round_ in range(args.rounds):
        for concurrency in args.concurrency:
            level = run_level(service.url, service.process.pid, texts, concurrency, load)
            after = offline.measure(texts)
            reference = (before["throughput"] + after["throughput"]) / 2
            yield {"round": round_, **level, "offline_before": before, "offline_after": after,
                   "offline": reference, "ratio": level["throughput"] / reference}  # fmt: skip
            progress = f"round {round_} c={concurrency}: {level['throughput']:.1f} sent/s, offline {reference:.1f}"
            print(progress, file=sys.stderr)
            before = after


def median(values: Iterable[float | None]) -> float | None:
    """The median of the values that exist (a level with no successful request has no latency)."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarize(cells: list[dict]) -> list[dict]:
    """Per concurrency: each figure's median over rounds, errors summed, the ratio's range."""
    rows = []
    for concurrency in dict.fromkeys(cell["concurrency"] for cell in cells):
        rounds = [cell for cell in cells if cell["concurrency"] == concurrency]
        figures = ("throughput", "offline", "ratio", "p50_s", "p95_s", "p99_s", "mean_batch_sentences")
        rows.append({
            "concurrency": concurrency,
            "rounds": len(rounds),
            **{name: median(r[name] for r in rounds) for name in figures},
            "ratio_range": [min(r["ratio"] for r in rounds), max(r["ratio"] for r in rounds)],
            "errors": sum(r["errors"] for r in rounds),
            "cpu_percent": {name: median(r["cpu_percent"][name] for r in rounds) for name in CPU_SPLIT},
        })  # fmt: skip
    return rows


def measure_setup(
    streams: int, batching: bool, offline: OfflineEngine, texts: list[str], args: argparse.Namespace
) -> dict:
    mode = "on" if batching else "off"
    log = args.workdir / f"service-streams{streams}-batching-{mode}.log"
    with LiveService(service_settings(args, streams, batching), log) as service:
        cells = list(bracketed_levels(service, offline, texts, args))
    return {"streams": streams, "batching": mode, "levels": cells, "summary": summarize(cells)}


def ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.0f}"


def table(setups: list[dict]) -> str:
    header = ["batching", "clients", "sent/s", "offline sent/s", "× offline (range)", "p50 ms", "p95 ms", "p99 ms",
              "errors", "mean batch", "CPU % HTTP/engine/clients/idle/steal"]  # fmt: skip
    rows = []
    for setup in setups:
        for row in setup["summary"]:
            low, high = row["ratio_range"]
            batch = "n/a" if row["mean_batch_sentences"] is None else f"{row['mean_batch_sentences']:.1f}"
            cpu = "/".join(f"{row['cpu_percent'][name]:.0f}" for name in CPU_SPLIT)
            rows.append([setup["batching"], row["concurrency"], f"{row['throughput']:.1f}", f"{row['offline']:.1f}",
                         f"{row['ratio']:.2f} ({low:.2f}–{high:.2f})", ms(row["p50_s"]), ms(row["p95_s"]),
                         ms(row["p99_s"]), row["errors"], batch, cpu])  # fmt: skip
    return markdown_table(header, rows)


def markdown(setups: list[dict], threads: int) -> str:
    sections = []
    for streams in dict.fromkeys(setup["streams"] for setup in setups):
        title = streams_title(streams, threads)
        sections.append(f"### {title}\n\n{table([s for s in setups if s['streams'] == streams])}")
    return "\n\n".join(sections)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, default=BUNDLE)
    parser.add_argument("--src", type=Path, default=TEST_SRC)
    parser.add_argument("--source-lang", default="en", help="the language of --src, named in every request")
    parser.add_argument("--target-lang", default="de")
    parser.add_argument("--limit", type=int, default=0, help="only the first N sentences (0 = all)")
    parser.add_argument("--streams", nargs="+", type=int, default=[1, 2], help="MT_STREAMS settings, a table each")
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 4, 16, 64])
    parser.add_argument("--rounds", type=int, default=2, help="measurements of each concurrency")
    parser.add_argument("--duration", type=float, default=15.0, help="measured seconds per measurement")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds before each measurement")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--variant", default="auto", help="bundle variant (fp32, int8); auto = the manifest's default")
    parser.add_argument(
        "--provider", choices=("cpu", "cuda"), default="cpu", help="MT_PROVIDER (and the offline engine's)"
    )
    parser.add_argument("--threads", type=int, default=2, help="MT_THREADS (and the offline engine's threads)")
    parser.add_argument("--batch-sentences", type=int, default=DEFAULTS["max_batch_sentences"].default,
                        help="MT_MAX_BATCH_SENTENCES when batching")  # fmt: skip
    parser.add_argument("--max-wait-ms", type=float, default=DEFAULTS["max_wait_ms"].default, help="MT_MAX_WAIT_MS")
    parser.add_argument("--client", choices=get_args(ClientKind), default="raw", help="the clients' HTTP client")
    parser.add_argument(
        "--row-pool", choices=("on", "off"), default=_on_off("row_pool"), help="MT_ROW_POOL (and the offline engine's)"
    )
    parser.add_argument(
        "--cuda-graphs",
        choices=("on", "off"),
        default=_on_off("cuda_graphs"),
        help="MT_CUDA_GRAPHS (and the offline engine's); needs the pool",
    )
    parser.add_argument("--workdir", type=Path, default=RUNS / "service", help="the service's logs")
    parser.add_argument("--out", type=Path, default=RESULTS / "service.json", help="the result file")
    args = parser.parse_args(argv)
    if not args.bundle.is_dir():
        parser.error(f"bundle not found: {args.bundle}")
    if min(args.concurrency) < 1 or args.rounds < 1 or args.duration <= 0 or args.warmup < 0:
        parser.error("concurrency and rounds must be >= 1, duration > 0 and warmup >= 0")
    if args.cuda_graphs == "on" and args.row_pool == "off":
        parser.error("--cuda-graphs on captures the row pool's step: it needs --row-pool on")
    return args


def _on_off(setting: str) -> str:
    """A switch's default as the service has it."""
    return "on" if DEFAULTS[setting].default else "off"


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.service", argv)
    args = parse_args(start.argv)
    texts = read_lines(args.src, args.limit)
    setups = []
    for streams in args.streams:
        with closing(OfflineEngine(args, streams)) as offline:
            setups += [measure_setup(streams, batching, offline, texts, args) for batching in (True, False)]
    write_report(
        start,
        args.out,
        {"settings": settings_record(args), "setups": setups, "markdown": markdown(setups, args.threads)},
    )


if __name__ == "__main__":
    main()
