"""Sentences in capitals: read in ordinary case, each word in the form the tokenizer finds likelier."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from engine.bundle import load_bundle
from engine.casing import ordinary_case
from engine.tokenizer import Tokenizer

# A tokenizer's scores: the forms it knows are one likely piece, the others a piece per letter.
KNOWN = {"Zwei", "Männer", "spielen", "Boston", "Terrier", "a", "man", "is"}


def score(word: str) -> float:
    return -1.0 if word in KNOWN else -2.0 * len(word)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ZWEI MÄNNER SPIELEN.", "Zwei Männer spielen."),
        ("A MAN IS PLAYING.", "A man is playing."),  # unknown either way: lower case
        ("A BOSTON TERRIER!", "A Boston Terrier!"),
        ("«TWO DOGS» 2 RUN", "«Two dogs» 2 run"),
        ("STOP", "Stop"),
    ],
)
def test_a_sentence_in_capitals_is_read_in_ordinary_case(text: str, expected: str) -> None:
    assert ordinary_case(text, score) == expected


@pytest.mark.parametrize("text", ["A man is playing.", "A sign says STOP.", "I", "A.", "123 !", "", "NASA's rocket"])
def test_other_text_is_read_as_written(text: str) -> None:
    assert ordinary_case(text, score) is None


def test_a_text_whose_length_would_change_is_read_as_written() -> None:
    assert ordinary_case("İSTANBUL", score) is None  # "i̇stanbul": one character more
    assert ordinary_case("A ẞ TEST", score) == "A ß test"  # a capital would be two letters: lower case


def test_a_tokenizer_scores_the_forms_it_learnt_higher(tiny_bundle: Path) -> None:
    tokenizer = Tokenizer.from_bundle(load_bundle(tiny_bundle, check_graphs=False))
    assert tokenizer.score("dog") > tokenizer.score("gdoo") > -math.inf
    assert tokenizer.score("狗") == -math.inf, "an unknown piece, which sentencepiece scores 0"
