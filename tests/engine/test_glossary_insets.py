"""Glossary source terms that the translator copies instead of translating: emoji and other visible
symbols, URLs and e-mail addresses never reach the model (``engine.insets``, the segmenter's symbol
edges), and terms are found in what the model reads, so such a term is refused when the glossary is
made rather than accepted and never found."""

from __future__ import annotations

import pytest

from engine.glossary import Glossary, Term
from engine.insets import take_out


@pytest.mark.parametrize(
    "source", ["😀", "👍🏽 thumbs", "Brand™", "20°C", "https://example.org/a", "www.example.org", "team@example.org"]
)
def test_a_source_term_with_a_symbol_or_an_address_is_refused_naming_it(source: str) -> None:
    with pytest.raises(ValueError, match=r"term 1: .* holds a symbol or an address"):
        Glossary((Term("dog", "Hund"), Term(source, "Smiley")))


@pytest.mark.parametrize("source", ["C++", "e-mail", "U.S.", "3.14", "dog's", "A&B"])
def test_punctuation_and_numbers_are_words_a_term_may_hold(source: str) -> None:
    sentence = f"We like {source} a lot."
    assert take_out(sentence) is None  # the model reads the term as written
    assert [m.term for m in Glossary((Term(source, "X"),)).find(sentence)] == [0]


def test_a_symbol_term_would_never_be_found_in_what_the_model_reads() -> None:
    stripped = take_out("A 😀 dog runs.")
    assert stripped is not None and "😀" not in stripped.words
    # The target side is the translation's: a target term may be a symbol.
    assert Glossary((Term("smiley", "😀"),)).find("A smiley dog runs.")
