"""Alternatives (n-best) of the shipped en-de model: never an empty one for a sentence with words."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import TranslationOptions, Translator, TranslatorConfig

BUNDLE = Path(__file__).resolve().parents[2] / "models" / "en-de" / "bundle"
pytestmark = pytest.mark.skipif(not (BUNDLE / "manifest.json").is_file(), reason=f"no shipped model at {BUNDLE}")


def test_no_alternative_is_empty_and_the_best_is_the_search_s() -> None:
    translator = Translator(TranslatorConfig(model_dir=BUNDLE, threads=1))
    texts = ["Two dogs play in the snow.", "A dog.", "A man is playing a guitar on the street."]
    one = translator.translate_batch(texts, TranslationOptions(beam_size=5)).results
    five = translator.translate_batch(texts, TranslationOptions(beam_size=5, num_hypotheses=5)).results
    for single, many in zip(one, five, strict=True):
        assert many.text == single.text
        assert 1 <= len(many.hypotheses) <= 5
        assert all(h.text.strip() for h in many.hypotheses), [h.text for h in many.hypotheses]
    assert len(five[0].hypotheses) == 4, "the search's fifth ended at once: left out"
