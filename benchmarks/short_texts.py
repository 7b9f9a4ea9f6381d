"""The service's choice of source language on short everyday texts and Multi30K: ``python -m benchmarks.short_texts``.

    python -m benchmarks.short_texts [--data DIR] [--served en de] [--splits val test_2016_flickr] [--out FILE]

For a service whose models translate between the ``--served`` languages (default en de: the shipped
en→de and de→en), with the source language omitted, into each served language in turn, each text
goes through what ``service.identification`` does with it: ``engine.language_id.LanguageIdentifier`` built
as the service builds it (``default_languages`` of the served ones, short texts ranked among the
served ones), then ``engine.language_choice.choose``. Counted per text language, per target:

- **from own**: translated from its own language (right, for a served language not the target);
- **kept**: returned unchanged as already in the target (right, for a text in the target);
- **refused**; **from other**: translated from another language than its own; **guessed**: of those
  translated, the share that ``choose`` marked as guessed.

Inputs: ``benchmarks/data/short_texts.txt`` (780 greetings, user-interface strings and one- to
three-word queries in the 25 languages a service of English and German identifies, written for this
project), and Multi30K's full captions of ``--splits`` in en, de, fr and cs (``--data``). Cost: the
median µs of identifying and choosing for one text (each timed alone), on the short texts and on the
captions. The result file is ``--out`` (default ``benchmarks/results/short_texts.json``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from pathlib import Path

from benchmarks.common import (
    DATA_DIR,
    REPO,
    RESULTS,
    markdown_table,
    read_lines,
    settings_record,
    start_run,
    write_report,
)
from engine.language_choice import Choice, choose
from engine.language_id import LanguageIdentifier, default_languages

SHORT_TEXTS = REPO / "benchmarks" / "data" / "short_texts.txt"
CAPTION_LANGUAGES = ("en", "de", "fr", "cs")
OUTCOMES = ("from own", "kept", "refused", "from other")


def read_short_texts(path: Path = SHORT_TEXTS) -> list[tuple[str, str, str]]:
    """(language, kind, text) for every text of ``path``, in order."""
    texts, heading = [], ("", "")
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("["):
            language, kind = line.strip("[]").split()
            heading = (language, kind)
        else:
            texts.append((*heading, line))
    return texts


def outcome(choice: Choice, language: str) -> str:
    if choice.outcome == "translate":
        return "from own" if choice.detection.language == language else "from other"
    return "kept" if choice.outcome == "keep" else "refused"


def measure(texts: dict[str, list[str]], served: list[str]) -> dict:
    """For each target of ``served`` and each language of ``texts``: outcome counts and shares,
    and the median µs per text of identifying and choosing."""
    identifier = LanguageIdentifier(default_languages(served), short_languages=served)
    micros: list[float] = []
    by_target: dict[str, dict] = {}
    for target in served:
        sources = [s for s in served if s != target]
        by_target[target] = {}
        for language, lines in texts.items():
            counts: Counter[str] = Counter()
            for text in lines:
                start = time.perf_counter_ns()
                choice = choose(identifier.detect(text), sources, target)
                micros.append((time.perf_counter_ns() - start) / 1000)
                counts[outcome(choice, language)] += 1
                counts["guessed"] += choice.detection.guessed
            n = max(len(lines), 1)
            shares = {name: counts[name] / n for name in OUTCOMES}
            translated = counts["from own"] + counts["from other"]
            shares["guessed"] = counts["guessed"] / max(translated, 1)
            by_target[target][language] = {"texts": len(lines), "counts": dict(counts), "shares": shares}
    return {"outcomes": by_target, "us_per_text": statistics.median(micros) if micros else 0.0}


def table(result: dict, served: list[str]) -> str:
    rows = []
    for target, languages in result["outcomes"].items():
        for language, row in languages.items():
            shares = row["shares"]
            mark = " (the target)" if language == target else "" if language in served else " (not served)"
            cells = [f"{shares[name]:.1%}" for name in OUTCOMES]
            rows.append([target, f"{language}{mark}", row["texts"], *cells, f"{shares['guessed']:.1%}"])
    return markdown_table(["into", "text in", "texts", *OUTCOMES, "guessed"], rows)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="the Multi30K directory")
    parser.add_argument("--splits", nargs="+", default=["val", "test_2016_flickr"], help="Multi30K's captions")
    parser.add_argument("--short-texts", type=Path, default=SHORT_TEXTS)
    parser.add_argument("--served", nargs="+", default=["en", "de"], help="each translated into the others")
    parser.add_argument("--out", type=Path, default=RESULTS / "short_texts.json")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.short_texts", argv)
    args = parse_args(start.argv)
    short: dict[str, list[str]] = {}
    for language, _, text in read_short_texts(args.short_texts):
        short.setdefault(language, []).append(text)
    captions = {
        language: [line for split in args.splits for line in read_lines(args.data / f"{split}.{language}")]
        for language in CAPTION_LANGUAGES
    }
    report = {"served": args.served, "short_texts": measure(short, args.served)}
    report["captions"] = measure(captions, args.served)
    markdown = "\n\n".join(
        [
            f"#### Short everyday texts ({sum(map(len, short.values()))} texts, "
            f"{report['short_texts']['us_per_text']:.0f} µs per text)\n\n{table(report['short_texts'], args.served)}",
            f"#### Multi30K captions, {' and '.join(args.splits)} "
            f"({report['captions']['us_per_text']:.0f} µs per text)\n\n{table(report['captions'], args.served)}",
        ]
    )
    write_report(start, args.out, {"settings": settings_record(args), **report, "markdown": markdown})


if __name__ == "__main__":
    main()
