"""What translating HTML costs over plain text: ``python -m benchmarks.markup``.

    python -m benchmarks.markup [--model models/en-de/bundle] [--sentences 500] [--rounds 3]

The test_2016_flickr source sentences are translated by the engine (one stream, one thread, the
model's beam) three ways, in interleaved rounds so that drift in the machine's speed hits all alike:

- ``text``: as plain text;
- ``text+alignments``: plain text with alignments returned (the cross-attention traced and words
  aligned, which markup needs);
- ``html``: each sentence as ``<p>`` with a ``<b>`` around one word and an ``<a href>`` around two
  (``format="html"``): parsed, translated with alignments, tags placed, rendered.

Reported: the median time per sentence of each, the markup handling (``html`` minus ``text``),
parsing alone (``engine.markup.Document``, done once by the service to check the input and once by
the engine), parsing, placing and rendering without a model (each word aligned to itself), and
how often the html output with its tags removed is the plain-text translation exactly.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import DATA_DIR, REPO, RESULTS, markdown_table, read_lines, start_run, write_report
from engine import TranslationOptions, Translator, TranslatorConfig
from engine.markup import Document, Translation, WordAlignment

TAG = re.compile(r"<[^>]+>")


def as_html(sentence: str, rng: random.Random) -> str:
    """The sentence in a paragraph, one word bold and two words a link (where it has words enough)."""
    words = sentence.split()
    if len(words) < 4:
        return f"<p>{sentence}</p>"
    bold = rng.randrange(len(words) - 3)
    link = rng.randrange(bold + 1, len(words) - 1)
    words[bold] = f"<b>{words[bold]}</b>"
    words[link] = f'<a href="/x?id={link}">{words[link]}'
    words[link + 1] = f"{words[link + 1]}</a>"
    return "<p>" + " ".join(words) + "</p>"


def word_for_word(markup: str) -> str:
    """The markup handling without a model: parsed, each unit "translated" as itself with every
    word aligned to itself, tags placed, rendered."""
    document = Document(markup, "html")
    translations = []
    for unit in document.units:
        alignment = WordAlignment()
        alignment.add(unit, 0, unit, 0, None)
        translations.append(Translation(unit, alignment))
    return document.render(translations)


def seconds(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.markup", argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=REPO / "models" / "en-de" / "bundle", help="bundle directory")
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="Multi30K: test_2016_flickr")
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--batch", type=int, default=32, help="sentences per translate_batch call")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "markup.json")
    args = parser.parse_args(argv)

    translator = Translator(TranslatorConfig(model_dir=args.model, threads=1, streams=1))
    source = translator.info.languages.source[0].code
    sentences = read_lines(args.data / f"test_2016_flickr.{source}", args.sentences)
    rng = random.Random(0)
    markup = [as_html(s, rng) for s in sentences]
    batches = [slice(i, i + args.batch) for i in range(0, len(sentences), args.batch)]
    systems = {
        "text": (sentences, TranslationOptions()),
        "text+alignments": (sentences, TranslationOptions(return_alignments=True)),
        "html": (markup, TranslationOptions(format="html")),
    }
    outputs: dict[str, list[str]] = {}
    times: dict[str, list[float]] = {name: [] for name in [*systems, "parse", "alone"]}

    def run(texts: list[str], options: TranslationOptions, name: str) -> None:
        outputs[name] = [r.text for b in batches for r in translator.translate_batch(texts[b], options).results]

    for _ in range(args.rounds):
        for name, (texts, options) in systems.items():
            times[name].append(seconds(lambda t=texts, o=options, n=name: run(t, o, n)))
        times["parse"].append(seconds(lambda: [Document(m, "html") for m in markup]))
        times["alone"].append(seconds(lambda: [word_for_word(m) for m in markup]))

    per_sentence = {name: statistics.median(t) / len(sentences) * 1000 for name, t in times.items()}
    same = sum(TAG.sub("", h) == t for h, t in zip(outputs["html"], outputs["text"], strict=True))
    text = per_sentence["text"]
    rows = [[name, f"{per_sentence[name]:.2f}", f"{per_sentence[name] / text:.2f}×"] for name in systems]
    rows += [
        ["html − text (markup handling)", f"{per_sentence['html'] - text:.2f}", ""],
        ["parsing alone (engine.markup.Document)", f"{per_sentence['parse']:.3f}", ""],
        ["parse, place and render, no model", f"{per_sentence['alone']:.3f}", ""],
    ]
    markdown = (
        markdown_table(["", "ms per sentence (median of rounds)", "vs text"], rows)
        + f"\n\nhtml output with its tags removed = the plain-text translation: {same}/{len(sentences)}"
    )
    report = {
        "settings": {"model": str(args.model), "sentences": len(sentences), "batch": args.batch, "rounds": args.rounds},
        "ms_per_sentence": per_sentence,
        "seconds": times,
        "same_text_without_tags": same,
        "examples": [{"source": m, "translation": h} for m, h in zip(markup[:5], outputs["html"][:5], strict=True)],
        "markdown": markdown,
    }
    write_report(start, args.out, report)


if __name__ == "__main__":
    main()
