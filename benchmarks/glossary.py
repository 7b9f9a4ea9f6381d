"""Glossaries enforced in decoding, measured: ``python -m benchmarks.glossary``.

    python -m benchmarks.glossary [--split val|test] [--bundle DIR] [--rounds 3] [--out FILE]

Two terminology sets over Multi30K en-de (choices made on val, reported on test):

1. **unusual**: common caption words, each mapped to a valid but unusual German word the model
   does not say by itself (``UNUSUAL``: dog -> Köter, man -> Herr, street -> Fahrbahn, ...). Its
   references have the unusual words swapped in for the usual ones where the source says the term.
2. **reference**: a dictionary of common word pairs learned from the training set (each frequent
   English word and the German word that co-occurs with it most, by Dice's coefficient), applied
   to a sentence only where its reference uses that German word: the references' own terms.

Reported per set: the term occurrences the sources say and the share the translations use (the
target term in the translation, ``TermUse.used``); cased sacreBLEU and chrF of the translation
without the glossary against the references (in brackets: against those the glossary's
translation is scored on), and with it against the references (unusual: with its words swapped
in); the median time per sentence with and without the glossary over
interleaved rounds, on every sentence and on those that say a term. Then the heaviest request the
service's limits allow a glossary (``heaviest_request``), timed with and without it, and through a
live service the latency of one-sentence requests by the size of the stored glossary they name
(``service_latency``).
"""

from __future__ import annotations

import argparse
import itertools
import re
import resource
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks.common import BUNDLE, DATA_DIR, RESULTS, markdown_table, read_lines, start_run, write_report
from engine import TranslationOptions, Translator, TranslatorConfig
from engine.cost import text_work
from engine.glossary import Glossary
from model.evaluate import score_translations
from service.glossaries import MAX_ENTRIES
from service.launcher import LiveService
from service.settings import Settings

# English term -> (its unusual German translation, the usual German forms the references use)
# English term -> (its unusual German translation, the usual German forms of the same number the
# references use); each unusual word has its usual one's gender, so that swapping it into a
# reference keeps the articles right.
UNUSUAL: dict[str, tuple[str, tuple[str, ...]]] = {
    "dog": ("Köter", ("Hund", "Hundes")),
    "man": ("Herr", ("Mann", "Mannes")),
    "woman": ("Dame", ("Frau",)),
    "boy": ("Knabe", ("Junge", "Jungen")),
    "girl": ("Mädel", ("Mädchen",)),
    "street": ("Fahrbahn", ("Straße",)),
    "shirt": ("Oberteil", ("Hemd", "Shirt", "T-Shirt")),
    "bike": ("Zweirad", ("Fahrrad", "Rad")),
    "car": ("Automobil", ("Auto",)),
    "children": ("Sprösslinge", ("Kinder", "Kindern")),
    "ball": ("Spielball", ("Ball",)),
    "beach": ("Badestrand", ("Strand", "Strandes")),
    "hat": ("Filzhut", ("Hut",)),
    "camera": ("Knipse", ("Kamera",)),
    "guitar": ("Klampfe", ("Gitarre",)),
    "jacket": ("Joppe", ("Jacke",)),
    "water": ("Gewässer", ("Wasser",)),
    "stage": ("Spielfläche", ("Bühne",)),
    "snow": ("Pulverschnee", ("Schnee",)),
    "crowd": ("Menschentraube", ("Menschenmenge", "Menge")),
}
DICTIONARY_WORDS = 300  # the most frequent English words of 4 letters or more the reference set draws on
_WORD = re.compile(r"\w+")


@dataclass
class SetResult:
    said: int = 0  # term occurrences in the sources
    used: int = 0
    sentences_with_terms: int = 0
    plain: list[str] | None = None
    glossed: list[str] | None = None
    references: list[str] | None = None  # those the glossary translation is scored against


def unusual_references(sources: list[str], references: list[str]) -> tuple[Glossary, list[str]]:
    """The unusual glossary, and the references with its words swapped in where the source says a term."""
    glossary = Glossary.of({source: target for source, (target, _) in UNUSUAL.items()})
    swapped = []
    for source, reference in zip(sources, references, strict=True):
        for match in glossary.find(source):
            term = glossary.terms[match.term]
            forms = "|".join(map(re.escape, UNUSUAL[term.source][1]))
            reference = re.sub(rf"\b(?:{forms})\b", term.target, reference)
        swapped.append(reference)
    return glossary, swapped


def learned_dictionary(train_src: list[str], train_ref: list[str]) -> dict[str, str]:
    """Each frequent English word -> the German word that co-occurs with it most (Dice)."""
    english, german, both = Counter(), Counter(), Counter()
    for s, r in zip(train_src, train_ref, strict=True):
        words_s = {w for w in _WORD.findall(s.lower()) if len(w) >= 4}
        words_r = set(_WORD.findall(r))
        english.update(words_s)
        german.update(words_r)
        both.update((a, b) for a in words_s for b in words_r)
    frequent = {w for w, _ in english.most_common(DICTIONARY_WORDS)}
    best: dict[str, tuple[float, str]] = {}
    for (a, b), n in both.items():
        if a in frequent:
            dice = 2 * n / (english[a] + german[b])
            if dice > best.get(a, (0.0, ""))[0]:
                best[a] = (dice, b)
    return {a: b for a, (_, b) in best.items()}


def reference_glossaries(
    dictionary: dict[str, str], sources: list[str], references: list[str]
) -> list[Glossary | None]:
    """Per sentence: the dictionary's pairs whose English word the source says and whose German
    word the reference uses."""
    glossaries = []
    for source, reference in zip(sources, references, strict=True):
        said = set(_WORD.findall(source.lower()))
        used = set(_WORD.findall(reference))
        pairs = {a: b for a, b in dictionary.items() if a in said and b in used}
        glossaries.append(Glossary.of(pairs) if pairs else None)
    return glossaries


def translate_groups(
    translator: Translator, sources: list[str], glossaries: list[Glossary | None], *, glossed: bool
) -> tuple[list, float]:
    """Every sentence, those with the same glossary in one call (all of them for one glossary),
    with their glossary or (``glossed`` False) without; the results in order and the seconds taken."""
    groups: dict[Glossary | None, list[int]] = {}
    for i, glossary in enumerate(glossaries):
        groups.setdefault(glossary, []).append(i)
    results: list = [None] * len(sources)
    start = time.perf_counter()
    for glossary, indices in groups.items():
        options = TranslationOptions(glossary=glossary if glossed else None)
        batch = translator.translate_batch([sources[i] for i in indices], options).results
        for i, result in zip(indices, batch, strict=True):
            results[i] = result
    return results, time.perf_counter() - start


def measure(
    translator: Translator,
    sources: list[str],
    references: list[str],
    glossaries: list[Glossary | None],
    glossed_references: list[str],
    rounds: int,
) -> dict:
    """Term usage, scores and time per sentence of one terminology set; plain and glossed runs
    alternate, ``rounds`` times each."""
    times: dict[str, list[float]] = {"plain": [], "glossary": []}
    for _ in range(rounds):
        plain, seconds = translate_groups(translator, sources, glossaries, glossed=False)
        times["plain"].append(seconds)
        glossed, seconds = translate_groups(translator, sources, glossaries, glossed=True)
        times["glossary"].append(seconds)
    uses = [u for r in glossed for u in r.terms]
    with_terms = [i for i, r in enumerate(glossed) if r.terms]
    plain_scores = score_translations([r.text for r in plain], references)
    glossed_scores = score_translations([r.text for r in glossed], glossed_references)
    # the translation without the glossary against the references the glossary's is scored on
    plain_on_terms = score_translations([r.text for r in plain], glossed_references)
    plain_s, glossed_s = statistics.median(times["plain"]), statistics.median(times["glossary"])
    return {
        "sentences": len(sources),
        "sentences_with_terms": len(with_terms),
        "terms_said": len(uses),
        "terms_used": sum(u.used for u in uses),
        "term_usage": sum(u.used for u in uses) / max(1, len(uses)),
        "plain_usage": _plain_usage(plain, glossed),
        "bleu": {"plain": plain_scores.bleu, "plain_on_terms": plain_on_terms.bleu, "glossary": glossed_scores.bleu},
        "chrf": {"plain": plain_scores.chrf, "plain_on_terms": plain_on_terms.chrf, "glossary": glossed_scores.chrf},
        "ms_per_sentence": {"plain": 1000 * plain_s / len(sources), "glossary": 1000 * glossed_s / len(sources)},
        "cost_ratio": glossed_s / plain_s,
        "unused_examples": [
            {
                "source": sources[i],
                "translation": glossed[i].text,
                "unused": [u.target for u in glossed[i].terms if not u.used],
            }
            for i in with_terms
            if not all(u.used for u in glossed[i].terms)
        ][:10],
    }


def _plain_usage(plain: list, glossed: list) -> float:
    """The share of term occurrences the translation without the glossary already uses."""
    said = used = 0
    for p, g in zip(plain, glossed, strict=True):
        counts: Counter[str] = Counter()
        for use in g.terms:
            said += 1
            counts[use.target] += 1
            used += p.text.count(use.target) >= counts[use.target]
    return used / max(1, said)


def heaviest_request(translator: Translator, rounds: int) -> dict:
    """The heaviest request the service's limits allow a glossary, against the same without it: a
    glossary of ``MAX_ENTRIES`` terms, beam 16 with 16 alternatives and alignments, and as many of
    64 texts of 300 characters that say a term every few words as the default
    ``MT_MAX_BEAM_TOKENS`` admits (``admitted``). Median seconds, and the process's peak resident
    memory after the plain runs and after the glossary's (a peak only grows)."""
    entries = {f"term{i}": f"Begriff{i}" for i in range(MAX_ENTRIES - len(UNUSUAL))}
    glossary = Glossary.of(entries | {source: target for source, (target, _) in UNUSUAL.items()})
    words = list(UNUSUAL)
    sentences = [f"The {words[i % len(words)]} and the {words[(i + 7) % len(words)]}." for i in range(len(words))]
    texts = [" ".join(sentences[(i + j) % len(sentences)] for j in range(8))[:300] for i in range(64)]
    options = {"beam_size": 16, "num_hypotheses": 16, "return_alignments": True}
    texts = admitted(translator, texts, options["beam_size"])
    seconds: dict[str, list[float]] = {"plain": [], "glossary": []}
    peak_mb = {}
    for name, extra in (("plain", {}), ("glossary", {"glossary": glossary})):
        for _ in range(rounds):
            start = time.perf_counter()
            results = translator.translate_batch(texts, TranslationOptions(**options, **extra)).results
            seconds[name].append(time.perf_counter() - start)
        peak_mb[name] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    uses = [u for r in results for u in r.terms]
    return {
        "texts": len(texts),
        "glossary_entries": len(glossary.terms),
        "terms_said": len(uses),
        "terms_used": sum(u.used for u in uses),
        "seconds": {name: statistics.median(values) for name, values in seconds.items()},
        "peak_rss_mb_after": peak_mb,
    }


def admitted(translator: Translator, texts: list[str], beam: int) -> list[str]:
    """The first of ``texts`` that the default ``MT_MAX_BEAM_TOKENS`` admits together with a
    glossary at ``beam``, by the service's estimate (``engine.cost.text_work``)."""
    limit = Settings.model_fields["max_beam_tokens"].default
    works = (text_work(len(translator.tokenizer.encode(text)), [beam], says_terms=True) for text in texts)
    costs = itertools.accumulate(works)
    return [text for text, cost in zip(texts, costs, strict=True) if cost <= limit]


def service_latency(bundle: Path, sources: list[str], glossary: Glossary, requests: int, workdir: Path) -> dict:
    """Through a live service (translation cache off): the median latency of one-sentence
    requests that say a term, naming no glossary, a stored glossary of ``glossary``'s terms, and
    one of ``MAX_ENTRIES`` (them and filler terms), in turns; the second request on a glossary
    finds it built."""
    said = [s for s in sources if glossary.find(s)][:requests]
    filler = {f"term{i}": f"Begriff{i}" for i in range(MAX_ENTRIES - len(glossary.terms))}
    settings = {"MT_MODEL_DIR": str(bundle.resolve()), "MT_DATA_DIR": str(workdir / "data"), "MT_CACHE_SIZE": "0"}
    with (
        LiveService(settings | {"MT_LOG_LEVEL": "warning"}, workdir / "service.log") as service,
        httpx.Client(base_url=service.url, timeout=120) as client,
    ):

        def stored(entries: dict[str, str]) -> str:
            pairs = [{"source": k, "target": v} for k, v in entries.items()]
            body = {"name": "benchmark", "source_lang": "en", "target_lang": "de", "entries": pairs}
            return client.post("/v1/glossaries", json=body).raise_for_status().json()["glossary_id"]

        terms = {t.source: t.target for t in glossary.terms}
        ids = {"none": None, f"{len(terms)} entries": stored(terms), f"{MAX_ENTRIES:,} entries": stored(terms | filler)}
        seconds: dict[str, list[float]] = {name: [] for name in ids}
        for text in said:
            for name, glossary_id in ids.items():
                body = {"text": text, "source_lang": "en", "target_lang": "de"}
                start = time.perf_counter()
                answer = client.post("/v1/translate", json=body | ({"glossary": glossary_id} if glossary_id else {}))
                seconds[name].append(time.perf_counter() - start)
                answer.raise_for_status()
    return {"requests": len(said), "median_ms": {name: 1000 * statistics.median(v) for name, v in seconds.items()}}


def heaviest_table(h: dict) -> str:
    rows = [
        [name, f"{h['seconds'][name]:.2f}", f"{h['peak_rss_mb_after'][name]:.0f}"] for name in ("plain", "glossary")
    ]
    title = (
        f"Heaviest request: {h['texts']} texts, a glossary of {h['glossary_entries']:,} entries, "
        f"{h['terms_used']} of {h['terms_said']} term occurrences used, beam 16, 16 alternatives, alignments"
    )
    return f"{title}\n\n" + markdown_table(["run", "seconds (median)", "peak RSS MB after"], rows)


def latency_table(latency: dict) -> str:
    title = f"One-sentence requests through the service, {latency['requests']} of each, by the glossary they name"
    rows = [[name, f"{ms:.1f}"] for name, ms in latency["median_ms"].items()]
    return f"{title}\n\n" + markdown_table(["glossary", "median ms"], rows)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.glossary", description=__doc__)
    parser.add_argument("--split", choices=["val", "test"], default="test", help="Multi30K split (select on val)")
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="the Multi30K directory")
    parser.add_argument("--bundle", type=Path, default=BUNDLE)
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds of each set, plain and glossed alternating")
    parser.add_argument("--out", type=Path, help="result file (default: benchmarks/results/glossary_<split>.json)")
    return parser


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.glossary", argv)
    args = build_parser().parse_args(argv)
    prefix = "test_2016_flickr" if args.split == "test" else "val"
    sources, references = read_lines(args.data / f"{prefix}.en"), read_lines(args.data / f"{prefix}.de")
    translator = Translator(TranslatorConfig(model_dir=args.bundle))
    unusual, swapped = unusual_references(sources, references)
    dictionary = learned_dictionary(read_lines(args.data / "train.en"), read_lines(args.data / "train.de"))
    sets = {
        "unusual": measure(translator, sources, references, [unusual] * len(sources), swapped, args.rounds),
        "reference": measure(
            translator,
            sources,
            references,
            reference_glossaries(dictionary, sources, references),
            references,
            args.rounds,
        ),
    }
    rows = [
        [
            name,
            f"{r['sentences_with_terms']} / {r['sentences']}",
            r["terms_said"],
            f"{100 * r['plain_usage']:.1f}%",
            f"**{100 * r['term_usage']:.1f}%**",
            f"{r['bleu']['plain']:.2f} ({r['bleu']['plain_on_terms']:.2f}) → {r['bleu']['glossary']:.2f}",
            f"{r['chrf']['plain']:.2f} ({r['chrf']['plain_on_terms']:.2f}) → {r['chrf']['glossary']:.2f}",
            f"{r['ms_per_sentence']['plain']:.2f} → {r['ms_per_sentence']['glossary']:.2f} ({r['cost_ratio']:.2f}×)",
        ]
        for name, r in sets.items()
    ]
    header = [
        "set",
        "sentences with a term",
        "term occurrences",
        "used without glossary",
        "used with glossary",
        "BLEU plain → glossary",
        "chrF plain → glossary",
        "ms/sentence plain → glossary",
    ]
    heaviest = heaviest_request(translator, args.rounds)
    with tempfile.TemporaryDirectory() as workdir:
        latency = service_latency(args.bundle, sources, unusual, 100, Path(workdir))
    report = {
        "split": args.split,
        "dictionary_size": len(dictionary),
        "sets": sets,
        "heaviest_request": heaviest,
        "service_latency": latency,
        "markdown": "\n\n".join([markdown_table(header, rows), heaviest_table(heaviest), latency_table(latency)]),
    }
    write_report(start, args.out or RESULTS / f"glossary_{args.split}.json", report)


if __name__ == "__main__":
    main()
