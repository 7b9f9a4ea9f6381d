"""What emoji and addresses between a sentence's words do to its translation:
``python -m benchmarks.insets``.

    python -m benchmarks.insets [--model models/en-de/bundle] [--sentences 1000] [--rounds 3]

Each test_2016_flickr source sentence gets one inset between two of its words, at a random place:
a symbol (an emoji, ™) in one copy of the set, a URL or e-mail address in another. Both are
translated by the engine (one stream, one thread, the model's beam) two ways, in interleaved rounds:

- ``taken out``: the engine as it is (``engine.insets``: the model reads the sentence without the
  inset, which goes back after the translation of the word before it);
- ``read by the model``: the engine with ``engine.insets.take_out`` turned off, so that the model
  reads the symbol as the unknown piece it is, the address as the pieces it spells.

The sentences as they are (``none``) are the reference point. Reported: BLEU and chrF against the
references with the insets removed from the translations (an address the model rewrote stays, as
words it made up), how many translations hold their inset exactly once, and the median time per
sentence.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from benchmarks.common import DATA_DIR, REPO, RESULTS, markdown_table, read_lines, start_run, write_report
from engine import TranslationOptions, Translator, TranslatorConfig
from engine import translator as translator_module
from model.evaluate import score_translations

INSETS = {
    "symbol": ("❤️", "😀", "🎸", "👍🏽", "🐕", "🌳", "™"),
    "address": ("https://example.com/photos/4821", "www.example.org", "anna.smith@example.org"),
}
ALL_INSETS = tuple(inset for kind in INSETS.values() for inset in kind)
ANY_INSET = re.compile("|".join(map(re.escape, ALL_INSETS)))
SPACES = re.compile(r"\s+")


def with_inset(sentence: str, kind: str, rng: random.Random) -> str:
    """``sentence`` with an inset of ``kind`` between two of its words (a sentence of one word:
    unchanged)."""
    words = sentence.split()
    if len(words) < 2:
        return sentence
    at = rng.randrange(1, len(words))
    return " ".join([*words[:at], rng.choice(INSETS[kind]), *words[at:]])


def without_insets(translation: str) -> str:
    return SPACES.sub(" ", ANY_INSET.sub("", translation)).strip()


def keeps_its_insets(source: str, translation: str) -> bool:
    return all(translation.count(s) == source.count(s) for s in ALL_INSETS)


@contextmanager
def read_by_the_model() -> Iterator[None]:
    """The engine as it was before insets were taken out."""
    take_out = translator_module.take_out
    translator_module.take_out = lambda sentence: None
    try:
        yield
    finally:
        translator_module.take_out = take_out


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.insets", argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=REPO / "models" / "en-de" / "bundle", help="bundle directory")
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="Multi30K: test_2016_flickr")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=32, help="sentences per translate_batch call")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "insets.json")
    args = parser.parse_args(argv)

    translator = Translator(TranslatorConfig(model_dir=args.model, threads=1, streams=1))
    source, target = translator.info.languages.source[0].code, translator.info.languages.target[0].code
    sentences = read_lines(args.data / f"test_2016_flickr.{source}", args.sentences)
    references = read_lines(args.data / f"test_2016_flickr.{target}", args.sentences)
    rng = random.Random(0)
    marked = {kind: [with_inset(s, kind, rng) for s in sentences] for kind in INSETS}
    options = TranslationOptions(source_language=source, target_language=target)
    batches = [slice(i, i + args.batch) for i in range(0, len(sentences), args.batch)]

    def translate(texts: list[str]) -> list[str]:
        return [r.text for b in batches for r in translator.translate_batch(texts[b], options).results]

    systems = {"none": (sentences, False)}
    for kind, texts in marked.items():
        systems |= {f"{kind}, taken out": (texts, False), f"{kind}, read by the model": (texts, True)}
    outputs: dict[str, list[str]] = {}
    times: dict[str, list[float]] = {name: [] for name in systems}
    for _ in range(args.rounds):
        for name, (texts, read) in systems.items():
            began = time.perf_counter()
            with read_by_the_model() if read else nullcontext():
                outputs[name] = translate(texts)
            times[name].append(time.perf_counter() - began)

    rows, results = [], {}
    for name, (texts, _) in systems.items():
        scores = score_translations([without_insets(t) for t in outputs[name]], references)
        kept = sum(keeps_its_insets(s, t) for s, t in zip(texts, outputs[name], strict=True))
        ms = statistics.median(times[name]) / len(sentences) * 1000
        results[name] = {"bleu": scores.bleu, "chrf": scores.chrf, "insets_kept": kept, "ms_per_sentence": ms}
        rows.append([name, f"{scores.bleu:.2f}", f"{scores.chrf:.2f}", f"{kept}/{len(sentences)}", f"{ms:.2f}"])
    markdown = markdown_table(
        ["inset", "BLEU (insets removed)", "chrF", "inset kept once", "ms per sentence (median)"], rows
    )
    report = {
        "settings": {"model": str(args.model), "sentences": len(sentences), "batch": args.batch, "rounds": args.rounds},
        "systems": results,
        "bleu_signature": scores.bleu_signature,
        "seconds": times,
        "examples": [
            {"source": m, **{way: outputs[f"{kind}, {way}"][i] for way in ("taken out", "read by the model")}}
            for kind, texts in marked.items()
            for i, m in enumerate(texts[:4])
        ],
        "markdown": markdown,
    }
    write_report(start, args.out, report)


if __name__ == "__main__":
    main()
