"""Sentences in capitals: read in sentence case, translated into capitals."""

from __future__ import annotations

import pytest

from engine.casing import sentence_case


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A MAN IS PLAYING A GUITAR.", "A man is playing a guitar."),
        ("«TWO DOGS» 2 RUN!", "«Two dogs» 2 run!"),
        ("STOP", "Stop"),
        ("ÜBER DIE STRASSE", "Über die strasse"),
    ],
)
def test_a_sentence_in_capitals_is_read_in_sentence_case(text: str, expected: str) -> None:
    assert sentence_case(text) == expected


@pytest.mark.parametrize("text", ["A man is playing.", "A sign says STOP.", "I", "A.", "123 !", "", "NASA's rocket"])
def test_other_text_is_read_as_written(text: str) -> None:
    assert sentence_case(text) is None


def test_a_text_whose_length_would_change_is_read_as_written() -> None:
    assert sentence_case("İSTANBUL") is None  # "i̇stanbul": one character more
