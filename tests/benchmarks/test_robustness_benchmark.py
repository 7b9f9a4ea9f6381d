"""``python -m benchmarks.robustness`` on the tiny model: each input, each way, timed and scored."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from benchmarks import robustness
from engine.casing import ordinary_case
from engine.insets import take_out


@pytest.mark.parametrize("kind", sorted(robustness.INSETS))
def test_each_sentence_gets_one_inset_between_two_words(kind: str) -> None:
    rng = random.Random(1)
    for sentence in ["A dog runs on the grass .", "Two men", "One"]:
        marked = robustness.changed(sentence, kind, rng)
        assert robustness.scored(marked, kind) == sentence
        added = sum(marked.count(s) for s in robustness.INSETS[kind])
        assert added == (len(sentence.split()) >= 2)
        if kind in ("symbol", "address"):  # between two words; the others in or around one
            assert marked.split()[0] == sentence.split()[0] and marked.split()[-1] == sentence.split()[-1]


def test_markup_capitals_are_a_paragraph_with_one_word_in_bold() -> None:
    marked = robustness.changed("A dog runs.", "markup capitals", random.Random(0))
    assert re.fullmatch(r"<p>[A-Z .]*<b>[A-Z.]+</b>[A-Z .]*</p>", marked)
    assert robustness.scored(marked, "markup capitals") == "A DOG RUNS."


def test_capitals_are_scored_in_capitals() -> None:
    assert robustness.changed("A dog runs.", "capitals", random.Random(0)) == "A DOG RUNS."
    assert robustness.scored("Ein Hund 😀 rennt.", "capitals") == "EIN HUND RENNT."
    assert robustness.keeps_its_form("A DOG.", "EIN HUND.", "capitals")
    assert not robustness.keeps_its_form("A DOG.", "Ein Hund.", "capitals")


def test_each_way_is_scored_and_the_engine_restored(tiny_bundle: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "robustness.json"
    argv = ["--model", str(tiny_bundle), "--data", str(tiny_corpus), "--sentences", "12", "--batch", "5"]
    robustness.main([*argv, "--rounds", "2", "--out", str(out)])
    report = json.loads(out.read_text())
    systems = report["systems"]
    ways = [f"{kind}, {way}" for kind in robustness.KINDS for way in ("handled", "read as written")]
    assert set(systems) == {"none, as it is", "none, as it is, scored in capitals", *ways}
    for kind in robustness.KINDS:
        assert systems[f"{kind}, handled"]["form_kept"] == 12
    for kind in robustness.INSETS:
        assert systems[f"{kind}, handled"]["bleu"] == systems["none, as it is"]["bleu"]
    assert all(len(times) == 2 for times in report["seconds"].values())
    assert robustness.translator_module.take_out is take_out
    assert robustness.translator_module.ordinary_case is ordinary_case
