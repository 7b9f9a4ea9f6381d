"""The words a glossary term replaces (engine/replacement.py), on hand-made attention."""

from __future__ import annotations

import numpy as np

from engine.replacement import Replacement, WordAttention, replaced

SOURCE = ["▁A", "▁wo", "man", "▁runs", "."]  # words: A | woman | runs.
TARGET = ["▁Eine", "▁Frau", "▁rennt", "."]  # words: Eine | Frau | rennt.


def attention(rows: list[list[float]]) -> np.ndarray:
    """Target pieces x source pieces, with the EOS row and column the search records."""
    weights = np.array(rows, dtype=np.float32)
    return np.pad(weights, ((0, 1), (0, 1)), constant_values=0.01)


def test_the_noun_not_its_article_translates_the_word() -> None:
    """Both "Eine" and "Frau" attend most to "woman"; "Frau" attends to it more."""
    weights = attention(
        [
            [0.3, 0.3, 0.3, 0.1, 0.0],  # Eine: woman 0.6
            [0.0, 0.5, 0.5, 0.0, 0.0],  # Frau: woman 1.0
            [0.0, 0.1, 0.0, 0.8, 0.1],  # rennt
            [0.0, 0.0, 0.0, 0.2, 0.8],  # .
        ]
    )
    assert WordAttention(weights, SOURCE, TARGET).translated_by((1, 3)) == (1, 2)
    assert WordAttention(weights, SOURCE, TARGET).translated_by((2, 3)) == (1, 2)  # a piece of the word: the word


def test_closing_punctuation_stays() -> None:
    target = ["▁Eine", "▁Frau", "."]  # "Frau." is one word
    weights = attention([[0.5, 0.2, 0.2, 0.1, 0.0], [0.0, 0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.1, 0.1, 0.8]])
    assert WordAttention(weights, SOURCE, target).translated_by((1, 3)) == (1, 2)


def test_words_that_are_not_one_run_are_not_replaced() -> None:
    """The term "woman runs": "woman" peaks on "Frau", "runs" on "rennt", with "schnell" between."""
    target = ["▁Eine", "▁Frau", "▁schnell", "▁rennt", "."]
    weights = attention(
        [
            [0.6, 0.2, 0.2, 0.0, 0.0],
            [0.0, 0.5, 0.5, 0.0, 0.0],
            [0.4, 0.2, 0.2, 0.2, 0.0],
            [0.0, 0.0, 0.0, 0.9, 0.1],
            [0.0, 0.0, 0.0, 0.2, 0.8],
        ]
    )
    assert WordAttention(weights, SOURCE, target).translated_by((1, 4)) is None
    assert WordAttention(weights, SOURCE, target).translated_by((0, 3)) == (0, 2)  # "A woman": "Eine Frau"


def test_a_word_of_punctuation_alone_is_not_replaced() -> None:
    weights = attention([[0.0, 0.1, 0.1, 0.0, 0.8], [0.0, 0.1, 0.1, 0.0, 0.8]])
    assert WordAttention(weights, SOURCE, ["▁„", "!"]).translated_by((4, 5)) is None


def test_replacements_are_made_right_to_left_and_may_not_overlap() -> None:
    tokens = [10, 11, 12, 13, 14]
    changes = [Replacement(1, 2, (20, 21, 22)), Replacement(3, 5, (30,))]
    assert replaced(tokens, changes) == [10, 20, 21, 22, 12, 30]
    assert replaced(tokens, [Replacement(1, 3, (20,)), Replacement(2, 4, (30,))]) is None
