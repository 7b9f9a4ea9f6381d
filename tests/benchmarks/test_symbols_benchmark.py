"""``python -m benchmarks.symbols`` on the tiny model: both ways timed and scored."""

from __future__ import annotations

import json
import random
from pathlib import Path

from benchmarks import symbols
from engine.symbols import take_out


def test_each_sentence_gets_one_symbol_between_two_words() -> None:
    rng = random.Random(1)
    for sentence in ["A dog runs on the grass .", "Two men", "One"]:
        marked = symbols.with_symbol(sentence, rng)
        assert symbols.without_symbols(marked) == sentence
        added = sum(marked.count(s) for s in symbols.SYMBOLS)
        assert added == (len(sentence.split()) >= 2)
        assert marked.split()[0] == sentence.split()[0] and marked.split()[-1] == sentence.split()[-1]


def test_both_ways_are_scored_and_the_engine_restored(tiny_bundle: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "symbols.json"
    argv = ["--model", str(tiny_bundle), "--data", str(tiny_corpus), "--sentences", "12", "--batch", "5"]
    symbols.main([*argv, "--rounds", "2", "--out", str(out)])
    report = json.loads(out.read_text())
    systems = report["systems"]
    assert set(systems) == {"no symbols", "taken out", "read by the model"}
    assert systems["taken out"]["symbols_kept"] == 12
    assert systems["taken out"]["bleu"] == systems["no symbols"]["bleu"]
    assert all(len(times) == 2 for times in report["seconds"].values())
    assert symbols.translator_module.take_out is take_out
