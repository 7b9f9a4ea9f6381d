"""``python -m benchmarks.markup`` on the tiny model: every system timed, outputs compared."""

from __future__ import annotations

import json
import random
from pathlib import Path

from markup_checks import assert_same_elements

from benchmarks import markup


def test_the_html_inputs_are_the_sentences_with_a_bold_word_and_a_link() -> None:
    rng = random.Random(1)
    for sentence in ["A dog runs on the grass .", "Two men sit.", "One"]:
        html = markup.as_html(sentence, rng)
        assert markup.TAG.sub("", html) == sentence
        assert_same_elements(html, html)
        assert html.count("<b>") == html.count('<a href="') == (len(sentence.split()) >= 4)


def test_every_system_is_timed_and_the_outputs_compared(tiny_bundle: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "markup.json"
    argv = ["--model", str(tiny_bundle), "--data", str(tiny_corpus), "--sentences", "12", "--batch", "5"]
    markup.main([*argv, "--rounds", "2", "--out", str(out)])
    report = json.loads(out.read_text())
    assert set(report["ms_per_sentence"]) == {"text", "text+alignments", "html", "parse", "alone"}
    assert all(len(times) == 2 for times in report["seconds"].values())
    assert 0 <= report["same_text_without_tags"] <= 12
    for example in report["examples"]:
        assert_same_elements(example["source"], example["translation"])
