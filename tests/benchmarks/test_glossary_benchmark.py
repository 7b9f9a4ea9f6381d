"""``python -m benchmarks.glossary`` on the tiny model: term usage, scores and cost of both sets."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import glossary


def test_the_unusual_words_are_swapped_into_the_references_where_the_source_says_them() -> None:
    terms, swapped = glossary.unusual_references(
        ["A dog and a man.", "Two dogs."], ["Ein Hund und ein Mann.", "Zwei Hunde."]
    )
    assert swapped == ["Ein Köter und ein Herr.", "Zwei Hunde."]  # "dogs" is not the term "dog"
    assert {t.source for t in terms.terms} == set(glossary.UNUSUAL)


def test_both_sets_are_measured(tiny_bundle: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "glossary.json"
    glossary.main(["--bundle", str(tiny_bundle), "--data", str(tiny_corpus), "--split", "val", "--rounds", "1",
                   "--out", str(out)])  # fmt: skip
    report = json.loads(out.read_text())
    assert report["dictionary_size"] > 10  # the tiny lexicon's words of 4 letters or more
    sets = report["sets"]
    assert set(sets) == {"unusual", "reference"}
    reference = sets["reference"]
    assert reference["terms_said"] > 0 and reference["terms_used"] <= reference["terms_said"]
    assert reference["term_usage"] >= reference["plain_usage"]
    for result in sets.values():
        assert result["sentences"] == 64 and result["cost_ratio"] > 0
        assert set(result["bleu"]) == {"plain", "plain_on_terms", "glossary"}
    assert "| reference |" in report["markdown"]
    heaviest = report["heaviest_request"]
    assert 1 <= heaviest["texts"] <= 64 and heaviest["glossary_entries"] == 10_000
    assert heaviest["terms_said"] >= heaviest["texts"] * 8 and heaviest["terms_used"] <= heaviest["terms_said"]
    assert heaviest["seconds"]["glossary"] > 0 and heaviest["peak_rss_mb_after"]["glossary"] > 0
    assert "Heaviest request" in report["markdown"]
    latency = report["service_latency"]
    assert latency["requests"] > 0 and set(latency["median_ms"]) == {"none", "20 entries", "10,000 entries"}
    assert all(ms > 0 for ms in latency["median_ms"].values())
