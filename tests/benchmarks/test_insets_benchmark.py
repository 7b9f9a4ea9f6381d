"""``python -m benchmarks.insets`` on the tiny model: each way timed and scored."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from benchmarks import insets
from engine.insets import take_out


@pytest.mark.parametrize("kind", sorted(insets.INSETS))
def test_each_sentence_gets_one_inset_between_two_words(kind: str) -> None:
    rng = random.Random(1)
    for sentence in ["A dog runs on the grass .", "Two men", "One"]:
        marked = insets.with_inset(sentence, kind, rng)
        assert insets.without_insets(marked) == sentence
        added = sum(marked.count(s) for s in insets.INSETS[kind])
        assert added == (len(sentence.split()) >= 2)
        assert marked.split()[0] == sentence.split()[0] and marked.split()[-1] == sentence.split()[-1]


def test_each_way_is_scored_and_the_engine_restored(tiny_bundle: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "insets.json"
    argv = ["--model", str(tiny_bundle), "--data", str(tiny_corpus), "--sentences", "12", "--batch", "5"]
    insets.main([*argv, "--rounds", "2", "--out", str(out)])
    report = json.loads(out.read_text())
    systems = report["systems"]
    ways = [f"{kind}, {way}" for kind in insets.INSETS for way in ("taken out", "read by the model")]
    assert set(systems) == {"none", *ways}
    for kind in insets.INSETS:
        assert systems[f"{kind}, taken out"]["insets_kept"] == 12
        assert systems[f"{kind}, taken out"]["bleu"] == systems["none"]["bleu"]
    assert all(len(times) == 2 for times in report["seconds"].values())
    assert insets.translator_module.take_out is take_out
