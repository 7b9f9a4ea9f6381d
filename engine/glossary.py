"""Glossaries: term pairs, and where a text says a source term.

A source term matches whole words only, case-insensitively unless the term says otherwise, and the
longest term wins where several start at the same word. Words are runs of letters and digits; every
other non-space character is a word of its own, so that "e-mail" matches "e-mail" but neither
"e-mails" nor "email". Matching looks terms up word by word in a dictionary, so it costs the text's
length times the longest term's words, whatever the number of terms.

The translator makes each match's target term appear in its sentence's translation: in place of
the words that translate the source term (``engine.replacement``), or as a constraint of the
sentence's search (``engine.constraints``).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from engine.insets import ADDRESS, is_visible_symbol
from engine.markup import Document, MarkupFormat

MAX_TERM_WORDS = 16  # a term of more words is more likely a sentence than a term
_WORD = re.compile(r"\w+|[^\w\s]")


def _kept_as_written(source: str) -> bool:
    """Whether a source term holds what the translator copies instead of translating: a visible
    symbol (an emoji, ©, °) or a URL or e-mail address (``engine.insets``, and the segmenter's symbol
    edges). Terms are found in what the model reads, so such a term would never be found."""
    return ADDRESS.search(source) is not None or any(map(is_visible_symbol, source))


@dataclass(frozen=True)
class Term:
    source: str
    target: str
    case_sensitive: bool = False

    @property
    def key(self) -> tuple[bool, tuple[str, ...]]:
        """What a source term is compared by: its words, case-folded unless case-sensitive."""
        words = _WORD.findall(self.source)
        return self.case_sensitive, tuple(words if self.case_sensitive else (w.casefold() for w in words))


@dataclass(frozen=True)
class Match:
    """A term said in a text: ``text[start:end]``."""

    term: int  # index into the glossary's terms
    start: int
    end: int


@dataclass(frozen=True)
class Glossary:
    """Terms to use; ValueError on an empty term, one of too many words, a source term with a symbol
    or an address in it, or a source term twice (compared as it would match: case-folded unless
    case-sensitive).

    ``placed``: instead of where a text says them, the terms to use at these places of every text,
    each a fraction of its length (the second model of a pivot, given the terms its first model's
    text said there); in markup, of its units' (``in_units``).
    """

    terms: tuple[Term, ...]
    placed: tuple[float, ...] | None = None
    _index: dict[str, list[tuple[tuple[str, ...], int]]] = field(init=False, repr=False, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, list[tuple[tuple[str, ...], int]]] = {}
        seen: dict[tuple[bool, tuple[str, ...]], int] = {}
        for i, term in enumerate(self.terms):
            if not term.source.strip() or not term.target.strip():
                raise ValueError(f"term {i}: empty source or target term")
            if _kept_as_written(term.source):
                raise ValueError(
                    f"term {i}: {term.source!r} holds a symbol or an address, which translations keep as written "
                    "(the model never reads it), so it cannot be a source term"
                )
            key = term.key
            _, words = key
            if len(words) > MAX_TERM_WORDS:
                raise ValueError(f"term {i}: {term.source!r} has more than {MAX_TERM_WORDS} words")
            if key in seen and self.placed is None:  # placed, a term may be used in several places
                raise ValueError(f"term {i}: duplicate source term {term.source!r} (as term {seen[key]})")
            seen[key] = i
            index.setdefault(words[0], []).append((words, i))
        for candidates in index.values():
            candidates.sort(key=lambda c: -len(c[0]))  # the longest first
        object.__setattr__(self, "_index", index)
        # Once: the cache and the batcher hash a request's options for every text, and a glossary's
        # thousands of terms would be hashed again each time.
        object.__setattr__(self, "_hash", hash((self.terms, self.placed)))
        if self.placed is not None and len(self.placed) != len(self.terms):
            raise ValueError(f"{len(self.placed)} places for {len(self.terms)} terms")

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[Callable[..., Glossary], tuple[object, ...]]:
        # Sent to an engine process with every batch that uses it, as flat strings (10,000 terms
        # unpickle in about a millisecond, as Terms in 16), and built there once (``_restored``):
        # its index, and its hash with that process's string hashing.
        return _restored, self._flat

    @cached_property
    def _flat(self) -> tuple[tuple[str, ...], tuple[str, ...], bytes, tuple[float, ...] | None]:
        terms = self.terms
        return (
            tuple(t.source for t in terms),
            tuple(t.target for t in terms),
            bytes(t.case_sensitive for t in terms),
            self.placed,
        )

    @classmethod
    def of(cls, pairs: dict[str, str] | list[tuple[str, str]], *, case_sensitive: bool = False) -> Glossary:
        items = pairs.items() if isinstance(pairs, dict) else pairs
        return cls(tuple(Term(s, t, case_sensitive) for s, t in items))

    def in_units(self, count: int) -> list[list[tuple[int, float]]]:
        """For each of a markup text's ``count`` units (its blocks and attribute values,
        ``engine.markup.Document``), the terms placed in it, by number, each at its place in it: a
        placed glossary's places are then a unit's number plus a fraction of its length."""
        assert self.placed is not None
        here: list[list[tuple[int, float]]] = [[] for _ in range(count)]
        if count == 0:
            return here
        for term, place in enumerate(self.placed):
            unit = min(int(place), count - 1)  # the pivot text may have lost a unit: its last one
            here[unit].append((term, place - unit))
        return here

    def said(self, text: str, kind: Literal["text"] | MarkupFormat = "text") -> list[tuple[Match, float]]:
        """The terms ``text`` says, each with its place: a fraction of the text's length; in markup,
        what its units say (not its tags), each at its unit's number plus a fraction of the unit's
        length, as a pivot text of it has the same units (``in_units``)."""
        if kind == "text":
            return [(m, m.start / len(text)) for m in self.find(text)]
        units = Document(text, kind).units
        return [(m, number + m.start / len(unit)) for number, unit in enumerate(units) for m in self.find(unit)]

    def placed_as_said(self, said: list[tuple[Match, float]]) -> Glossary | None:
        """The terms a text says (``said``), each at each place it says it: the glossary of the
        second model of a pivot, for that text's pivot text; None when it says none."""
        if not said:
            return None
        return Glossary(tuple(self.terms[m.term] for m, _ in said), placed=tuple(place for _, place in said))

    def find(self, text: str) -> list[Match]:
        """The terms ``text`` says, in order, none overlapping: at each word the longest term that
        starts there (case-sensitive and case-insensitive terms alike)."""
        spans = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(text)]
        exact = [w for _, _, w in spans]
        folded = [w.casefold() for w in exact]
        matches: list[Match] = []
        i = 0
        while i < len(spans):
            found = self._longest(exact, folded, i)
            if found is None:
                i += 1
                continue
            term, n = found
            matches.append(Match(term, spans[i][0], spans[i + n - 1][1]))
            i += n
        return matches

    def _longest(self, exact: list[str], folded: list[str], i: int) -> tuple[int, int] | None:
        """(term, words) of the longest term starting at word i."""
        best: tuple[int, int] | None = None
        # A case-sensitive term first: of two as long, it is the more specific.
        for words_of, key in ((exact, exact[i]), (folded, folded[i])):
            for words, term in self._index.get(key, ()):
                if self.terms[term].case_sensitive != (words_of is exact):
                    continue
                n = len(words)
                if (best is None or n > best[1]) and tuple(words_of[i : i + n]) == words:
                    best = (term, n)
                    break  # the rest under this key are no longer
        return best


class BuiltGlossaries:
    """Glossaries by a key, up to ``max_bytes`` of them as ``glossary_size`` counts; the least
    recently used go first. Building one of thousands of terms (checking and indexing them) takes
    tens of milliseconds, which every request or batch that uses it would otherwise pay."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()  # the service's worker threads, an engine process's reader
        self._entries: OrderedDict[Hashable, tuple[int, Glossary]] = OrderedDict()
        self._bytes = 0

    def get(self, key: Hashable) -> Glossary | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            return found[1]

    def put(self, key: Hashable, glossary: Glossary) -> None:
        size = glossary_size(glossary)
        with self._lock:
            if key in self._entries:
                self._bytes -= self._entries.pop(key)[0]
            self._entries[key] = (size, glossary)
            self._bytes += size
            while self._bytes > self.max_bytes:
                self._bytes -= self._entries.popitem(last=False)[1][0]


def glossary_size(glossary: Glossary) -> int:
    """Bytes a built glossary holds, about: its strings, and per term the objects around them and
    its index entry (measured: 5.6 MB for 10,000 short terms)."""
    return sum(len(t.source) + len(t.target) for t in glossary.terms) + 520 * len(glossary.terms)


# The glossaries this process has unpickled (an engine process: those of the batches it was sent).
_RESTORED = BuiltGlossaries(64 * 1024 * 1024)


def _restored(
    sources: tuple[str, ...], targets: tuple[str, ...], case_sensitive: bytes, placed: tuple[float, ...] | None
) -> Glossary:
    key = (sources, targets, case_sensitive, placed)
    glossary = _RESTORED.get(key)
    if glossary is None:
        terms = tuple(Term(s, t, bool(c)) for s, t, c in zip(sources, targets, case_sensitive, strict=True))
        glossary = Glossary(terms, placed)
        _RESTORED.put(key, glossary)
    return glossary
