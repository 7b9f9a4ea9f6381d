"""The LRU translation cache: bounded by entries and by an estimate of their memory."""

from __future__ import annotations

import gc
import pickle
import random
import tracemalloc
import weakref
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from engine.alignment import Alignment
from engine.api import Hypothesis, TranslationOptions, TranslationResult, term_uses
from engine.glossary import Glossary, Term
from service.cache import LARGEST_SHARE, TranslationCache


def result(text: str, *, hypotheses: int = 1) -> TranslationResult:
    return TranslationResult(text, [Hypothesis(f"{text} {i}", -1.0 - i, -0.5 - i) for i in range(hypotheses)])


def with_terms(source: str, translation: str, glossary: Glossary) -> TranslationResult:
    """A result that reports where ``translation`` uses each term of ``glossary`` that ``source`` says."""
    said = [(glossary.terms[m.term], (m.start, m.end)) for m in glossary.find(source)]
    return TranslationResult(translation, [Hypothesis(translation, -1.0, -0.5)], terms=term_uses(said, translation))


def aligned(text: str, source: int, target: int, seed: int = 0) -> TranslationResult:
    """A result whose alignment has ``target`` x ``source`` weights, rows summing to 1."""
    rng = random.Random(seed)
    rows = [[rng.random() for _ in range(source)] for _ in range(target)]
    weights = [[w / sum(row) for w in row] for row in rows]
    sources, targets = [f"▁s{i}" for i in range(source)], [f"▁t{i}" for i in range(target)]
    alignment = Alignment(sources, targets, weights, sources[:], targets[:], [(i % source, i) for i in range(target)])
    return TranslationResult(text, [Hypothesis(text, -1.0, -0.5)], alignment=alignment)


def test_least_recently_used_entry_is_evicted() -> None:
    cache = TranslationCache(2)
    cache.put("m", "a", "opts", result("A"))
    cache.put("m", "b", "opts", result("B"))
    assert cache.get("m", "a", "opts") == result("A")  # now "b" is the least recently used
    cache.put("m", "c", "opts", result("C"))
    assert [cache.get("m", t, "opts") for t in "abc"] == [result("A"), None, result("C")]
    assert len(cache) == 2


def test_options_and_model_are_part_of_the_key() -> None:
    cache = TranslationCache(4)
    cache.put("m", "a", ("beam", 4), result("A4"))
    assert cache.get("m", "a", ("beam", 4)) == result("A4")
    assert cache.get("m", "a", ("beam", 1)) is None
    assert cache.get("n", "a", ("beam", 4)) is None


def test_either_limit_zero_turns_it_off() -> None:
    for cache in (TranslationCache(0), TranslationCache(8, max_bytes=0)):
        cache.put("m", "a", "opts", result("A"))
        assert not cache.enabled and cache.get("m", "a", "opts") is None and len(cache) == 0
    for entries, max_bytes in [(-1, 1000), (1, -1)]:
        with pytest.raises(ValueError):
            TranslationCache(entries, max_bytes)


def test_memory_bounds_it_least_recently_used_first() -> None:
    cache = TranslationCache(1000, max_bytes=200_000)
    texts = [f"{i:04d} " + "a dog runs " * 100 for i in range(100)]  # about 1 kB each, three times
    for text in texts:
        cache.put("m", text, "opts", result(text.upper()))
        assert cache.bytes <= cache.max_bytes
    assert 0 < len(cache) < len(texts)
    kept = [text for text in texts if cache.get("m", text, "opts") is not None]
    assert kept == texts[-len(kept) :], "the most recent entries stay"
    cache.put("m", texts[-1], "opts", result("again"))  # replacing an entry counts it once
    assert cache.get("m", texts[-1], "opts") == result("again") and len(cache) == len(kept)


def test_an_entry_over_a_sixteenth_of_the_budget_is_not_kept() -> None:
    cache = TranslationCache(100, max_bytes=1_000_000)
    small, big = aligned("small", 40, 40), aligned("big", 120, 120)  # 12.8 kB and 115 kB of weights
    cache.put("m", "small", "opts", small)
    cache.put("m", "big", "opts", big)
    assert cache.get("m", "big", "opts") is None and cache.get("m", "small", "opts") == small
    assert cache.bytes < cache.max_bytes / LARGEST_SHARE


def test_alignment_weights_are_kept_as_an_array_and_come_back_as_the_same_floats() -> None:
    cache = TranslationCache(4)
    original = aligned("text", 30, 20)
    cache.put("m", "text", "opts", original)
    [entry] = cache._entries.values()
    assert isinstance(entry.weights, np.ndarray) and entry.weights.dtype == np.float64
    assert entry.result.alignment is not None and entry.result.alignment.weights == []
    again = cache.get("m", "text", "opts")
    assert again == original and again is not original, "equal, float for float, and a copy of its own"
    assert again.alignment is not None and again.alignment.weights is not original.alignment.weights


PETS = Glossary.of({"dog": "Köter", "cat": "Mieze"})


@pytest.mark.parametrize(
    "make",
    [
        lambda i: result(f"{i} a man rides a bike down the street " * 3),
        lambda i: result(f"{i} two dogs play in the snow", hypotheses=5),
        lambda i: result(f"{i} " + "a long text of many sentences. " * 200),
        lambda i: aligned(f"{i} aligned", 30, 32, seed=i),
        lambda i: aligned(f"{i} aligned long", 300, 320, seed=i),
        lambda i: with_terms(f"{i} " + "a dog and a cat. " * 100, f"{i} " + "Ein Köter und eine Mieze. " * 100, PETS),
    ],
    ids=["sentence", "n-best", "long text", "alignment", "long alignment", "glossary terms"],
)
def test_the_size_estimate_is_within_a_fifth_of_what_the_entries_hold(make: Callable[[int], TranslationResult]) -> None:
    cache = TranslationCache(10_000, max_bytes=10**12)
    # Results as the service gets them: unpickled from an engine process's pipe.
    piped = [pickle.dumps(make(i)) for i in range(20)]
    gc.collect()
    tracemalloc.start()
    try:
        for i, data in enumerate(piped):
            made = pickle.loads(data)
            cache.put("model:1:fp32", f"source text {i} " * 10, "opts", made)
            del made  # as a request's result once answered: the cache alone holds it
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert 0.8 < cache.bytes / held < 1.2


def glossary_options(terms: int, tag: str, *, placed: tuple[float, ...] | None = None) -> TranslationOptions:
    """Options with a glossary of ``terms`` long terms of its own (``tag``), as an inline glossary makes."""
    entries = tuple(Term(f"{tag} term {j}", f"{tag} Begriff {j} " + "x" * 500) for j in range(terms))
    return TranslationOptions(source_language="en", target_language="de", glossary=Glossary(entries, placed))


def test_a_glossary_is_keyed_by_its_terms_and_not_kept_alive_by_the_key() -> None:
    cache = TranslationCache(100)
    options = glossary_options(3, "a")
    cache.put("m", "text", options, result("A"))
    alive = weakref.ref(options.glossary)
    again = glossary_options(3, "a")  # the same terms, another request's object
    assert cache.get("m", "text", again) == result("A")
    edited = replace(again, glossary=Glossary((*again.glossary.terms[:2], Term("a term 2", "anders"))))
    case_sensitive = replace(
        again, glossary=Glossary((*again.glossary.terms[:2], replace(again.glossary.terms[2], case_sensitive=True)))
    )
    placed = glossary_options(3, "a", placed=(0.0, 0.5, 1.0))
    for other in (edited, case_sensitive, placed, replace(again, glossary=None)):
        assert cache.get("m", "text", other) is None
    del options, again
    gc.collect()
    assert alive() is None, "a cached translation keeps no glossary alive"


def test_what_glossaries_in_the_keys_hold_stays_within_the_estimate() -> None:
    cache = TranslationCache(10_000, max_bytes=10**12)
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(20):
            options = glossary_options(200, f"g{i}")  # each request's glossary of its own: 120 kB
            cache.put("model:1:fp32", f"source text {i} " * 10, options, result(f"{i} a dog runs"))
            del options
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 1.2 * cache.bytes
