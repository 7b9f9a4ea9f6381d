"""The LRU translation cache."""

from __future__ import annotations

import pytest

from service.cache import TranslationCache


def test_least_recently_used_entry_is_evicted() -> None:
    cache: TranslationCache[str] = TranslationCache(2, model_id="m")
    cache.put("a", "opts", "A")
    cache.put("b", "opts", "B")
    assert cache.get("a", "opts") == "A"  # now "b" is the least recently used
    cache.put("c", "opts", "C")
    assert (cache.get("a", "opts"), cache.get("b", "opts"), cache.get("c", "opts")) == ("A", None, "C")
    assert len(cache) == 2


def test_options_and_model_are_part_of_the_key() -> None:
    cache: TranslationCache[str] = TranslationCache(4, model_id="m")
    cache.put("a", ("beam", 4), "A4")
    assert cache.get("a", ("beam", 1)) is None
    other_model: TranslationCache[str] = TranslationCache(4, model_id="n")
    assert other_model.get("a", ("beam", 4)) is None


def test_size_zero_turns_it_off() -> None:
    cache: TranslationCache[str] = TranslationCache(0, model_id="m")
    cache.put("a", "opts", "A")
    assert not cache.enabled and cache.get("a", "opts") is None and len(cache) == 0
    with pytest.raises(ValueError):
        TranslationCache(-1, model_id="m")
