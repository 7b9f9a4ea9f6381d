"""Guards against runaway output, measured: ``python -m benchmarks.repetition``.

    python -m benchmarks.repetition [--models models/en-de/bundle models/de-en/bundle] [--guards ...]

For each model and each guard (``GUARDS``: an n-gram ban on generated pieces, a limit on how many
times in a row a span of pieces may occur, a length cap of a * source pieces + b), the engine
translates:

1. test_2016_flickr (beam 5, cased sacreBLEU): what the guard costs on the text the model is for;
2. a stress set of odd inputs built from the model's source side of val (``stress_set``): shouted,
   unpunctuated, elongated, repeated and scrambled sentences, sentences in other languages,
   keyboard mash, lists and code. An output *loops* when a unit of 1 to 20 characters repeats 4 or
   more times in a row where its source has no such run ("Allemmmmmmmmer", "T-T-T-T",
   "mit einem langen Hund mit einem langen Hund ..."), and *runs away* when it is over 3 times
   as long as its source (in characters, plus 20).

Reported per guard: BLEU, looping and runaway shares, and the translation time of both sets.
"""

from __future__ import annotations

import argparse
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import DATA_DIR, REPO, RESULTS, markdown_table, read_lines, start_run, write_report
from engine import TranslationOptions, Translator, TranslatorConfig
from engine.bundle import load_bundle
from model.evaluate import score_translations

LOOP = re.compile(r"(.{1,20}?)\1{3,}", re.DOTALL)
MODELS = [REPO / "models" / "en-de" / "bundle", REPO / "models" / "de-en" / "bundle"]
ODD = [
    "Hello world", "Hello.", "Thanks!", "OK", "lol", "asdfghjkl", "qwertzuiop asdf", "xkcd qwerty zxcvb",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.",
    "Buy now!!! Limited offer $$$ click here", "def main(): return 0", "SELECT * FROM users WHERE id = 1;",
    "1, 2, 3, 4, 5, 6, 7, 8, 9, 10", "Item 1; Item 2; Item 3; Item 4", "ha ha ha ha ha", "no no no no no no",
    "Heeeeeeeeeeeeeeeey", "Noooooooooooooo!", "Wow wow wow!!!", "???", "...", "@user #hashtag :-)",
    "The quick brown fox jumps over the lazy dog.", "To be or not to be, that is the question.",
]  # fmt: skip


@dataclass(frozen=True)
class Guard:
    no_repeat_ngram_size: int = 0
    max_consecutive_repeats: int = 0
    max_length_a: float | None = None  # None: the model's own length rule
    max_length_b: int | None = None


GUARDS = {
    "none": Guard(),
    "ngram3": Guard(no_repeat_ngram_size=3),
    "ngram4": Guard(no_repeat_ngram_size=4),
    "repeats2": Guard(max_consecutive_repeats=2),
    "repeats3": Guard(max_consecutive_repeats=3),
    "cap1.2+5": Guard(max_length_a=1.2, max_length_b=5),
    "repeats2+cap1.2+5": Guard(max_consecutive_repeats=2, max_length_a=1.2, max_length_b=5),
}


def stress_set(lines: list[str], other_language: list[str], n: int = 400, seed: int = 0) -> list[str]:
    """Odd inputs, deterministic for a seed: the fixed ``ODD`` list and ``n`` made from sentences."""
    rng = random.Random(seed)

    def elongate(s: str) -> str:
        words = s.split()
        i = rng.randrange(len(words))
        word = words[i]
        j = rng.randrange(len(word))
        words[i] = word[: j + 1] + word[j] * rng.randint(6, 20) + word[j + 1 :]
        return " ".join(words)

    def repeat_word(s: str) -> str:
        return " ".join([rng.choice(s.split())] * rng.randint(4, 9))

    def scramble(s: str) -> str:
        return " ".join("".join(rng.sample(w, len(w))) for w in s.split())

    makers = [
        str.upper,
        lambda s: re.sub(r"[^\w\s]", "", s).lower(),
        elongate,
        repeat_word,
        scramble,
        lambda s: " ".join(s.split()[:2]),
        lambda s: rng.choice(other_language),
        lambda s: " ".join([s] * 3),
    ]
    made = [makers[i % len(makers)](rng.choice(lines)) for i in range(n)]
    return ODD + made


def loops(source: str, output: str) -> bool:
    """A run of one unit repeated 4+ times that its source does not have."""
    return any(m.group(0).lower() not in source.lower() for m in LOOP.finditer(output))


def runs_away(source: str, output: str) -> bool:
    return len(output) > 3 * len(source) + 20


def translate(translator: Translator, texts: list[str], options: TranslationOptions) -> tuple[list[str], float]:
    start = time.perf_counter()
    results = translator.translate_batch(texts, options).results
    return [r.text for r in results], time.perf_counter() - start


def measure(bundle: Path, name: str, data: Path, args: argparse.Namespace) -> dict:
    guard = GUARDS[name]
    manifest = load_bundle(bundle, check_graphs=False).manifest
    source, target = manifest.languages.source[0].code, manifest.languages.target[0].code
    other = "fr" if source != "fr" else "cs"
    config = TranslatorConfig(model_dir=bundle, provider="cpu", variant=args.variant, threads=args.threads)
    translator = Translator(config)
    if guard.max_length_a is not None:  # the length rule is the manifest's: try another in its place
        caps = {"max_length_a": guard.max_length_a, "max_length_b": guard.max_length_b}
        translator.manifest = manifest.model_copy(update={"decoding": manifest.decoding.model_copy(update=caps)})
    options = TranslationOptions(
        beam_size=args.beam_size,
        no_repeat_ngram_size=guard.no_repeat_ngram_size,
        max_consecutive_repeats=guard.max_consecutive_repeats,
    )
    test_src = read_lines(data / f"test_2016_flickr.{source}", args.limit)
    refs = read_lines(data / f"test_2016_flickr.{target}", args.limit)
    stress = stress_set(read_lines(data / f"val.{source}"), read_lines(data / f"val.{other}"))
    hyps, test_seconds = translate(translator, test_src, options)
    outputs, stress_seconds = translate(translator, stress, options)
    translator.close()
    looping = [loops(s, o) for s, o in zip(stress, outputs, strict=True)]
    return {
        "model": manifest.name,
        "variant": translator.info.variant,
        "guard": name,
        "bleu": round(score_translations(hyps, refs).bleu, 2),
        "looping": sum(looping) / len(stress),
        "runaway": sum(runs_away(s, o) for s, o in zip(stress, outputs, strict=True)) / len(stress),
        "test_seconds": round(test_seconds, 2),
        "stress_seconds": round(stress_seconds, 2),
        "stress_inputs": len(stress),
        "examples": [(s, o) for s, o, loop in zip(stress, outputs, looping, strict=True) if loop][:5],
    }


def table(results: list[dict]) -> str:
    header = ["model", "variant", "guard", "BLEU test_2016_flickr", "looping", "runaway", "test s", "stress s"]
    rows = [
        [r["model"], r["variant"], r["guard"], f"{r['bleu']:.2f}", f"{r['looping']:.1%}", f"{r['runaway']:.1%}",
         f"{r['test_seconds']:.1f}", f"{r['stress_seconds']:.1f}"]
        for r in results
    ]  # fmt: skip
    return markdown_table(header, rows)


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.repetition", argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", type=Path, default=MODELS, help="bundle directories")
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="Multi30K: test_2016_flickr and val")
    parser.add_argument("--guards", nargs="+", choices=list(GUARDS), default=list(GUARDS))
    parser.add_argument("--variant", help="the bundles' variant (default: their CPU default)")
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--limit", type=int, default=0, help="only the first N test sentences (0 = all)")
    parser.add_argument("--out", type=Path, default=RESULTS / "repetition.json")
    args = parser.parse_args(start.argv)
    results = [measure(bundle, name, args.data, args) for bundle in args.models for name in args.guards]
    markdown = table(results)
    print(markdown)
    write_report(start, args.out, {"results": results, "markdown": markdown})


if __name__ == "__main__":
    main()
