"""The LRU translation cache."""

from __future__ import annotations

import pytest

from service.cache import TranslationCache


def test_least_recently_used_entry_is_evicted() -> None:
    cache: TranslationCache[str] = TranslationCache(2)
    cache.put("m", "a", "opts", "A")
    cache.put("m", "b", "opts", "B")
    assert cache.get("m", "a", "opts") == "A"  # now "b" is the least recently used
    cache.put("m", "c", "opts", "C")
    assert (cache.get("m", "a", "opts"), cache.get("m", "b", "opts"), cache.get("m", "c", "opts")) == ("A", None, "C")
    assert len(cache) == 2


def test_options_and_model_are_part_of_the_key() -> None:
    cache: TranslationCache[str] = TranslationCache(4)
    cache.put("m", "a", ("beam", 4), "A4")
    assert cache.get("m", "a", ("beam", 4)) == "A4"
    assert cache.get("m", "a", ("beam", 1)) is None
    assert cache.get("n", "a", ("beam", 4)) is None


def test_size_zero_turns_it_off() -> None:
    cache: TranslationCache[str] = TranslationCache(0)
    cache.put("m", "a", "opts", "A")
    assert not cache.enabled and cache.get("m", "a", "opts") is None and len(cache) == 0
    with pytest.raises(ValueError):
        TranslationCache(-1)
