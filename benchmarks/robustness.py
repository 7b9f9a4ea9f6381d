"""What inputs unlike the training text do to translations: ``python -m benchmarks.robustness``.

    python -m benchmarks.robustness [--model models/en-de/bundle] [--sentences 1000] [--rounds 3]

The test_2016_flickr source sentences, changed these ways, each a copy of the set:

- ``symbol``: an emoji or other symbol (™) between two of the words, at a random place;
- ``address``: a URL or e-mail address there instead;
- ``control``: a control character (NUL, BEL, DEL, a C1 one) glued to the end of a word there;
- ``escape``: one word coloured or made bold by a terminal's escape sequences (``\x1b[31m``,
  reset by ``\x1b[0m``);
- ``invisible``: an invisible character (zero-width space or joiner, word joiner, soft hyphen,
  BOM) between two letters of a word;
- ``capitals``: the whole sentence in capitals;
- ``markup capitals``: the sentence in capitals as HTML, a paragraph with one word in ``<b>``.

Each copy is translated by the engine (one stream, one thread, the model's beam) two ways, in
interleaved rounds: as it is (``handled``: ``engine.insets`` takes symbols, addresses, escape
sequences and characters that do not show out of what the model reads and puts them back after the
translation of the word before them;
``engine.casing`` has the model read a sentence in capitals in ordinary case and writes its
translation in capitals), and with both turned off (``read as written``). The sentences as they are
(``none``) are the reference point. Reported: BLEU and chrF against the references (symbols and
addresses removed from the translations, where the model rewrote an address its words stay; for
capitals, translation and reference both in capitals, ``none`` too, tags left out), how many
translations keep the input's form (each inset as often as in the input; in capitals, with the
input's tags), and the median time per sentence.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path

from benchmarks.common import DATA_DIR, REPO, RESULTS, markdown_table, read_lines, start_run, write_report
from engine import TranslationOptions, Translator, TranslatorConfig
from engine import translator as translator_module
from model.evaluate import score_translations

INSETS = {
    "symbol": ("❤️", "😀", "🎸", "👍🏽", "🐕", "🌳", "™"),
    "address": ("https://example.com/photos/4821", "www.example.org", "anna.smith@example.org"),
    "control": ("\x00", "\x07", "\x7f", "\x90"),
    "escape": ("\x1b[31m", "\x1b[1m", "\x1b[4;32m"),
    "invisible": ("\u200b", "\u200d", "\u2060", "\u00ad", "\ufeff"),
}
RESET = "\x1b[0m"
CAPITALS = ("capitals", "markup capitals")
KINDS = (*INSETS, *CAPITALS)
ALL_INSETS = (*(inset for kind in INSETS.values() for inset in kind), RESET)
ANY_INSET = re.compile("|".join(map(re.escape, ALL_INSETS)))
TAGS = re.compile(r"</?[pb]>")
SPACES = re.compile(r"\s+")


def changed(sentence: str, kind: str, rng: random.Random) -> str:
    """``sentence`` in capitals, or with an inset of ``kind`` between two of its words, in a word or
    around one (a sentence of one word: unchanged)."""
    if kind == "capitals":
        return sentence.upper()
    words = sentence.split()
    if kind == "markup capitals":
        at, words = rng.randrange(len(words)), sentence.upper().split()
        return "<p>" + " ".join([*words[:at], f"<b>{words[at]}</b>", *words[at + 1 :]]) + "</p>"
    if len(words) < 2:
        return sentence
    at, inset = rng.randrange(1, len(words)), rng.choice(INSETS[kind])
    if kind == "control":
        words[at - 1] += inset
    elif kind == "escape":
        words[at] = inset + words[at] + RESET
    elif kind == "invisible":  # between two letters of a word
        cuts = [(w, i) for w, word in enumerate(words) for i in range(1, len(word)) if word[i - 1 : i + 1].isalpha()]
        w, i = rng.choice(cuts)
        words[w] = words[w][:i] + inset + words[w][i:]
    else:
        words.insert(at, inset)
    return " ".join(words)


def scored(translation: str, kind: str) -> str:
    """What of ``translation`` is compared with its reference."""
    text = SPACES.sub(" ", ANY_INSET.sub("", TAGS.sub("", translation))).strip()
    return text.upper() if kind in CAPITALS else text


def keeps_its_form(source: str, translation: str, kind: str) -> bool:
    """In capitals (with the tags of the source), or every inset as often as in the source."""
    if kind in CAPITALS:
        words = TAGS.sub("", translation)
        return words == words.upper() and TAGS.findall(translation) == TAGS.findall(source)
    return all(translation.count(s) == source.count(s) for s in ALL_INSETS)


@contextmanager
def read_as_written() -> Iterator[None]:
    """The engine with neither insets taken out nor capitals read in ordinary case."""
    take_out, ordinary_case = translator_module.take_out, translator_module.ordinary_case
    translator_module.take_out = translator_module.ordinary_case = lambda *_: None
    try:
        yield
    finally:
        translator_module.take_out, translator_module.ordinary_case = take_out, ordinary_case


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.robustness", argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=REPO / "models" / "en-de" / "bundle", help="bundle directory")
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="Multi30K: test_2016_flickr")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=32, help="sentences per translate_batch call")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "robustness.json")
    args = parser.parse_args(argv)

    translator = Translator(TranslatorConfig(model_dir=args.model, threads=1, streams=1))
    source, target = translator.info.languages.source[0].code, translator.info.languages.target[0].code
    sentences = read_lines(args.data / f"test_2016_flickr.{source}", args.sentences)
    references = read_lines(args.data / f"test_2016_flickr.{target}", args.sentences)
    rng = random.Random(0)
    copies = {kind: [changed(s, kind, rng) for s in sentences] for kind in KINDS}
    plain = TranslationOptions(source_language=source, target_language=target)
    markup = replace(plain, format="html")
    batches = [slice(i, i + args.batch) for i in range(0, len(sentences), args.batch)]

    def translate(texts: list[str], kind: str) -> list[str]:
        options = markup if kind == "markup capitals" else plain
        return [r.text for b in batches for r in translator.translate_batch(texts[b], options).results]

    systems = {("none", "as it is"): (sentences, False)}
    for kind, texts in copies.items():
        systems |= {(kind, "handled"): (texts, False), (kind, "read as written"): (texts, True)}
    outputs: dict[tuple[str, str], list[str]] = {}
    times: dict[tuple[str, str], list[float]] = {name: [] for name in systems}
    for _ in range(args.rounds):
        for name, (texts, as_written) in systems.items():
            began = time.perf_counter()
            with read_as_written() if as_written else nullcontext():
                outputs[name] = translate(texts, name[0])
            times[name].append(time.perf_counter() - began)

    # (input, translated, which outputs, scored as): the sentences as they are, scored in capitals
    # too, are the reference point for capitals.
    scorings = [(kind, way, (kind, way), kind) for kind, way in systems]
    scorings.append(("none", "as it is, scored in capitals", ("none", "as it is"), "capitals"))
    rows, results = [], {}
    for kind, way, key, as_scored in scorings:
        texts, produced = systems[key][0], outputs[key]
        scores = score_translations(
            [scored(t, as_scored) for t in produced], [scored(r, as_scored) for r in references]
        )
        kept = sum(keeps_its_form(s, t, as_scored) for s, t in zip(texts, produced, strict=True))
        ms = statistics.median(times[key]) / len(sentences) * 1000
        results[f"{kind}, {way}"] = {"bleu": scores.bleu, "chrf": scores.chrf, "form_kept": kept, "ms_per_sentence": ms}
        rows.append([kind, way, f"{scores.bleu:.2f}", f"{scores.chrf:.2f}", f"{kept}/{len(sentences)}", f"{ms:.2f}"])
    markdown = markdown_table(["input", "translated", "BLEU", "chrF", "form kept", "ms per sentence (median)"], rows)
    report = {
        "settings": {"model": str(args.model), "sentences": len(sentences), "batch": args.batch, "rounds": args.rounds},
        "systems": results,
        "bleu_signature": scores.bleu_signature,
        "seconds": {f"{kind}, {way}": t for (kind, way), t in times.items()},
        "examples": [
            {"source": m, **{way: outputs[(kind, way)][i] for way in ("handled", "read as written")}}
            for kind, texts in copies.items()
            for i, m in enumerate(texts[:3])
        ],
        "markdown": markdown,
    }
    write_report(start, args.out, report)


if __name__ == "__main__":
    main()
