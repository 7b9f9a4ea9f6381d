"""What the service's batches cost the engine: length-sorted batches against batches in arrival order.

    python -m benchmarks.composition [--bundle DIR] [--batch 20 32] [--streams 2] [--rounds 5] [--out FILE]

The offline engine sorts the whole test set by length before cutting it into batches; the service
can only batch the requests that are waiting, in the order they came (at 64 clients with 2 streams,
~20 sentences per batch). This measures what that costs, on the same sentences with the same engine:

- ``sorted B``: the test set sorted by source length, cut into batches of B;
- ``arrival B``: the test set shuffled (fixed seed), cut into batches of B, each translated as is.

``--streams`` single-thread translators take the batches in turn, each the next one when it is free
(as the service's engine processes do). Policies alternate within each round. Reported: sentences/s
(median over rounds), and per sentence the CPU time of this process, the decoder steps (a batch runs
as many as its longest translation needs), the decoder rows (one row: one beam of one sentence at
one step, the work that grows with the batch), and the source padding (padded source tokens over
real ones). Steps, rows and padding do not depend on the machine; times do. The result file is
``--out`` (default ``benchmarks/results/composition.json``).
"""

from __future__ import annotations

import argparse
import queue
import random
import statistics
import threading
import time
from pathlib import Path

import psutil

from benchmarks.common import (
    BUNDLE,
    RESULTS,
    TEST_SRC,
    markdown_table,
    read_lines,
    settings_record,
    start_run,
    write_report,
)
from benchmarks.metered import Meter, MeteredRunner
from engine import TranslationOptions, Translator, TranslatorConfig


def batches(texts: list[str], policy: str, size: int, translator: Translator) -> list[list[str]]:
    """``texts`` cut into batches of ``size``: sorted by source length, or in a shuffled (seeded)
    order standing for the service's arrivals."""
    if policy == "sorted":
        order = sorted(texts, key=translator.count_tokens)
    else:
        order = texts[:]
        random.Random(0).shuffle(order)
    return [order[i : i + size] for i in range(0, len(order), size)]


def decode_all(work: list[list[str]], translators: list[Translator], options: TranslationOptions) -> None:
    """Each translator, in a thread of its own, takes the next batch whenever it is free."""
    todo: queue.SimpleQueue[list[str]] = queue.SimpleQueue()
    for batch in work:
        todo.put(batch)

    def serve(translator: Translator) -> None:
        while True:
            try:
                batch = todo.get_nowait()
            except queue.Empty:
                return
            translator.translate_batch(batch, options)

    threads = [threading.Thread(target=serve, args=(t,)) for t in translators]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def measure(
    work: list[list[str]], translators: list[Translator], runners: list[MeteredRunner], options: TranslationOptions
) -> dict:
    """Decode ``work`` once; ``runners`` are the translators' metered runners."""
    for runner in runners:
        runner.meter = Meter()
    process = psutil.Process()
    cpu_before, start = sum(process.cpu_times()[:2]), time.perf_counter()
    decode_all(work, translators, options)
    seconds = time.perf_counter() - start
    cpu = sum(process.cpu_times()[:2]) - cpu_before
    total = Meter()
    for runner in runners:
        total.add(runner.meter)
    n = sum(len(batch) for batch in work)
    return {
        "sentences_per_s": n / seconds,
        "cpu_ms_per_sentence": 1000 * cpu / n,
        "steps_per_sentence": total.steps / n,
        "rows_per_sentence": total.rows / n,
        "rows_per_step": total.rows / max(total.steps, 1),
        "source_padding": total.padded_source_tokens / max(total.source_tokens, 1),
    }


def run_rounds(
    texts: list[str],
    translators: list[Translator],
    runners: list[MeteredRunner],
    sizes: list[int],
    rounds: int,
    options: TranslationOptions,
) -> list[dict]:
    """Every policy once per round, in an order rotated each round; the median of each figure."""
    policies = [(policy, size) for size in sizes for policy in ("sorted", "arrival")]
    work = {p: batches(texts, *p, translators[0]) for p in policies}
    runs: dict[tuple[str, int], list[dict]] = {p: [] for p in policies}
    for round_ in range(rounds):
        for p in policies[round_ % len(policies) :] + policies[: round_ % len(policies)]:
            runs[p].append(measure(work[p], translators, runners, options))
            print(f"round {round_} {p[0]} {p[1]}: {runs[p][-1]['sentences_per_s']:.1f} sentences/s", flush=True)
    return [summary(f"{policy} {size}", runs[policy, size]) for policy, size in policies]


def summary(policy: str, rounds: list[dict]) -> dict:
    """Each figure's median over rounds, and the rounds themselves."""
    return {"policy": policy, **{key: statistics.median(r[key] for r in rounds) for key in rounds[0]}, "rounds": rounds}


def results_table(results: list[dict]) -> str:
    best = max(r["sentences_per_s"] for r in results)
    header = ["batches", "sent/s", "× best", "CPU ms/sent", "steps/sent", "rows/sent", "rows/step", "source padding"]
    rows = [
        [r["policy"], f"{r['sentences_per_s']:.1f}", f"{r['sentences_per_s'] / best:.2f}",
         f"{r['cpu_ms_per_sentence']:.2f}", f"{r['steps_per_sentence']:.2f}", f"{r['rows_per_sentence']:.1f}",
         f"{r['rows_per_step']:.1f}", f"{r['source_padding']:.2f}×"]
        for r in results
    ]  # fmt: skip
    return markdown_table(header, rows)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, default=BUNDLE)
    parser.add_argument("--src", type=Path, default=TEST_SRC)
    parser.add_argument("--limit", type=int, default=0, help="only the first N sentences (0 = all)")
    parser.add_argument("--variant", default=None, help="bundle variant (fp32, int8); default: the manifest's")
    parser.add_argument("--batch", nargs="+", type=int, default=[20, 32], help="batch sizes (each sorted and not)")
    parser.add_argument("--streams", type=int, default=2, help="single-thread translators decoding at once")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS / "composition.json", help="the result file")
    return parser.parse_args(argv)


def metered_translators(args: argparse.Namespace) -> tuple[list[Translator], list[MeteredRunner]]:
    """``--streams`` single-thread translators, each running through a metered runner."""
    config = TranslatorConfig(model_dir=args.bundle, provider="cpu", threads=1, streams=1, variant=args.variant)
    translators = [Translator(config) for _ in range(args.streams)]
    runners = [MeteredRunner(t.runner, t.manifest.special_tokens.pad) for t in translators]
    for translator, runner in zip(translators, runners, strict=True):
        translator.runner = runner
    return translators, runners


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.composition", argv)
    args = parse_args(start.argv)
    texts = read_lines(args.src, args.limit)
    translators, runners = metered_translators(args)
    try:
        results = run_rounds(
            texts, translators, runners, args.batch, args.rounds, TranslationOptions(beam_size=args.beam_size)
        )
    finally:
        for translator in translators:
            translator.close()
    write_report(
        start, args.out, {"settings": settings_record(args), "results": results, "markdown": results_table(results)}
    )


if __name__ == "__main__":
    main()
