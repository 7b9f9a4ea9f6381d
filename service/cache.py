"""An LRU cache of finished translations, keyed by model (name, version, variant), text and options.

Bounded twice: by entries (``MT_CACHE_SIZE``) and by memory (``MT_CACHE_MB``), each entry sized by
``entry_bytes``, an estimate of what it holds (the strings, the result's objects, the alignment
weights). An entry over a sixteenth of the memory budget is not kept: a few very long texts with
alignments would otherwise push out everything else. Alignment weights are kept as one float64 array
rather than lists of Python floats (8 bytes a weight instead of 32) and turned back into lists, the
same floats, on every hit.

A glossary is part of the key by a digest of its terms, never as the object: a key holding it would
keep every glossary ever used alive, uncounted (an inline glossary of 1,000 long terms is 1.5 MB;
500 requests each with a glossary of their own held 750 MB with ``MT_CACHE_MB=64``). An edited
glossary has other terms, hence another digest, so its old translations are never served.

Used only from the event loop, so it needs no lock. Results are shared between requests and must
be treated as immutable.
"""

from __future__ import annotations

import hashlib
import sys
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, replace

import numpy as np

from engine.alignment import Alignment
from engine.api import TranslationOptions, TranslationResult
from engine.glossary import Glossary

LARGEST_SHARE = 16  # an entry over max_bytes / LARGEST_SHARE is not kept

# CPython's sizes of what an entry is made of, beyond its strings: an object of a dataclass (its
# __dict__ included), a list's pointer to an item, a float, a (source, target) pair of ints, and the
# OrderedDict's slot with the key tuple.
_OBJECT = 200
_POINTER = 8
_FLOAT = 24
_PAIR = 120
_SLOT = 200


@dataclass(frozen=True)
class _Entry:
    result: TranslationResult  # with empty alignment weights, when it has an alignment
    weights: np.ndarray | None  # the alignment's weights, float64: exactly the floats it had
    size: int  # bytes, by entry_bytes


class TranslationCache:
    """At most ``max_entries`` entries taking at most ``max_bytes``; either 0 turns the cache off
    (every lookup misses)."""

    def __init__(self, max_entries: int, max_bytes: int = 64_000_000) -> None:
        if max_entries < 0 or max_bytes < 0:
            raise ValueError(f"cache limits must be >= 0, got {max_entries} entries and {max_bytes} bytes")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0  # what the entries take, by entry_bytes
        self._entries: OrderedDict[tuple[str, str, Hashable], _Entry] = OrderedDict()
        # Each glossary's digest, computed once per glossary object while it lives.
        self._digests: weakref.WeakKeyDictionary[Glossary, bytes] = weakref.WeakKeyDictionary()

    @property
    def enabled(self) -> bool:
        return self.max_entries > 0 and self.max_bytes > 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, model: str, text: str, options: Hashable) -> TranslationResult | None:
        if not self._entries:
            return None
        key = (model, text, self._options_key(options))
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        if entry.weights is None or entry.result.alignment is None:
            return entry.result
        return replace(entry.result, alignment=replace(entry.result.alignment, weights=entry.weights.tolist()))

    def put(self, model: str, text: str, options: Hashable, result: TranslationResult) -> None:
        if not self.enabled:
            return
        key = (model, text, self._options_key(options))
        self._drop(key)
        entry = _compact(text, result)
        if entry.size > self.max_bytes / LARGEST_SHARE:
            return
        self._entries[key] = entry
        self.bytes += entry.size
        while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
            self._drop(next(iter(self._entries)))

    def _options_key(self, options: Hashable) -> Hashable:
        """``options`` as the key holds them: with their glossary's digest in place of it."""
        if not isinstance(options, TranslationOptions) or options.glossary is None:
            return options
        glossary = options.glossary
        digest = self._digests.get(glossary)
        if digest is None:
            digest = self._digests[glossary] = glossary_digest(glossary)
        return replace(options, glossary=None), digest

    def _drop(self, key: tuple[str, str, Hashable]) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.bytes -= entry.size


def glossary_digest(glossary: Glossary) -> bytes:
    """A digest of everything of ``glossary`` that a translation depends on. Its terms are written
    by ``repr``, which quotes and escapes every string, so that no two glossaries write the same."""
    terms = tuple((t.source, t.target, t.case_sensitive) for t in glossary.terms)
    return hashlib.blake2b(repr((terms, glossary.placed)).encode(), digest_size=32).digest()


def _compact(text: str, result: TranslationResult) -> _Entry:
    if result.alignment is None:
        return _Entry(result, None, entry_bytes(text, result))
    weights = np.array(result.alignment.weights, dtype=np.float64)
    kept = replace(result, alignment=replace(result.alignment, weights=[]))
    return _Entry(kept, weights, entry_bytes(text, kept, weights))


def entry_bytes(text: str, result: TranslationResult, weights: np.ndarray | None = None) -> int:
    """Bytes an entry for ``text`` holds: its key's text, the result's strings and objects, and its
    alignment, whose weights are ``weights`` (the result's own are left empty)."""
    terms = result.terms
    strings = [
        text,
        result.text,
        *(h.text for h in result.hypotheses),
        *(s for t in terms for s in (t.source, t.target)),
    ]
    distinct = {id(s): s for s in strings}.values()  # each once
    size = _SLOT + sum(map(sys.getsizeof, distinct)) + (2 + len(result.hypotheses)) * _OBJECT
    size += len(result.hypotheses) * (_POINTER + 2 * _FLOAT)
    # A glossary's terms: one object and two spans for each time the text says one, which a text
    # of short words says thousands of times.
    size += len(terms) * (_POINTER + _OBJECT + 2 * _PAIR)
    if result.alignment is not None:
        size += alignment_bytes(result.alignment) + (0 if weights is None else weights.nbytes)
    return size


def alignment_bytes(alignment: Alignment) -> int:
    """An alignment's strings, lists and word pairs: all of it but the weights."""
    a = alignment
    strings = [*a.source_tokens, *a.target_tokens, *a.source_words, *a.target_words]
    lists = 6 * sys.getsizeof([]) + (len(strings) + len(a.word_alignment)) * _POINTER
    distinct = {id(s): s for s in strings}.values()
    return _OBJECT + sum(map(sys.getsizeof, distinct)) + lists + len(a.word_alignment) * _PAIR
