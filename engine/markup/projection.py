"""Inline elements carried from a source text to its translation through the word alignment.

An inline element covers some source words; in the translation it wraps the span from the first to
the last target word aligned to any of them (words in between included, so that it stays one
element). An element or item with no words of its own (a ``<code>`` kept as it is, an empty
``<span>``, a comment) is anchored after the target words of the source word before it. Then the
tree is made consistent top down: a child stays inside its parent, and siblings, ordered by where
they landed, do not overlap (a later one starts where an earlier one ends). Every element is placed
exactly once, so the output has the same elements, nested the same way, as the input.

Positions are word boundaries: boundary k lies before target word k, and a range (a, b) covers
target words a..b-1; (k, k) is empty.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.markup.tree import Element, Node

WORD = re.compile(r"\S+")


@dataclass
class Span:
    """An inline element over the characters [start, end) of a block's text, or (``element`` None)
    the block itself; ``atom``: a node with no text of its own, placed at ``start``."""

    element: Element | None
    start: int
    end: int
    children: list[Span] = field(default_factory=list)
    atom: Node | None = None
    spaced: tuple[bool, bool] = (False, False)  # an atom: whitespace before it, after it in the source


@dataclass
class WordAlignment:
    """Words of a text and of its translation as character spans, and which align."""

    source_words: list[tuple[int, int]] = field(default_factory=list)
    target_words: list[tuple[int, int]] = field(default_factory=list)
    pairs: list[tuple[int, int]] = field(default_factory=list)  # (source word, target word)

    def add(
        self,
        source: str,
        source_at: int,
        target: str,
        target_at: int,
        pairs: Sequence[tuple[int, int]] | None,
        groups: tuple[int, int] | None = None,
    ) -> None:
        """Append a sentence: its text found at ``source_at`` of the whole source, its translation
        at ``target_at``. ``pairs`` index the model's words (``groups``: how many on each side);
        they are the text's whitespace-separated words unless the tokenizer normalized spaces,
        in which case indices are scaled. None: the sentence was copied, word for word."""
        source_words = [(m.start() + source_at, m.end() + source_at) for m in WORD.finditer(source)]
        target_words = [(m.start() + target_at, m.end() + target_at) for m in WORD.finditer(target)]
        if pairs is None:
            pairs = [(i, i) for i in range(min(len(source_words), len(target_words)))]
        elif groups is not None and groups != (len(source_words), len(target_words)):
            scale = (len(source_words), len(target_words))
            pairs = [(_scale(s, groups[0], scale[0]), _scale(t, groups[1], scale[1])) for s, t in pairs]
        first_source, first_target = len(self.source_words), len(self.target_words)
        self.pairs += [(s + first_source, t + first_target) for s, t in pairs if s < len(source_words)]
        self.source_words += source_words
        self.target_words += target_words


def _scale(index: int, count: int, to: int) -> int:
    return min(to - 1, index * to // max(count, 1)) if to else 0


def place(root: Span, alignment: WordAlignment) -> dict[int, tuple[int, int]]:
    """Target word range of every span below ``root`` (by ``id``), nested and non-overlapping."""
    placer = _Placer(alignment)
    ranges: dict[int, tuple[int, int]] = {}
    placer.visit(root, 0, len(alignment.target_words), ranges)
    return ranges


class _Placer:
    def __init__(self, alignment: WordAlignment) -> None:
        self.words = alignment.source_words
        self.n_target = len(alignment.target_words)
        self.targets: list[list[int]] = [[] for _ in self.words]  # target words of each source word
        for s, t in alignment.pairs:
            self.targets[s].append(t)

    def visit(self, span: Span, low: int, high: int, ranges: dict[int, tuple[int, int]]) -> None:
        wanted = [(*self._clip(self._wanted(child), low, high), i) for i, child in enumerate(span.children)]
        cursor = low
        for a, b, i in sorted(wanted):
            a = min(max(a, cursor), high)
            b = min(max(b, a), high)
            child = span.children[i]
            ranges[id(child)] = (a, b)
            cursor = b
            self.visit(child, a, b, ranges)

    def _wanted(self, span: Span) -> tuple[int, int]:
        if span.atom is None:
            words = [w for w, (s, e) in enumerate(self.words) if s < span.end and e > span.start]
            covered = [t for w in words for t in self.targets[w]]
            if covered:
                return min(covered), max(covered) + 1
        k = self._anchor(span.start)
        return k, k

    def _anchor(self, position: int) -> int:
        """The boundary after the translation of the source word before ``position`` (or before
        that of the word after it)."""
        before = [w for w, (s, _) in enumerate(self.words) if s < position]
        if before and self.targets[before[-1]]:
            return max(self.targets[before[-1]]) + 1
        after = [w for w, (s, _) in enumerate(self.words) if s >= position]
        if after and self.targets[after[0]]:
            return min(self.targets[after[0]])
        if not before:
            return 0
        return self.n_target if not after else round(len(before) / len(self.words) * self.n_target)

    @staticmethod
    def _clip(wanted: tuple[int, int], low: int, high: int) -> tuple[int, int]:
        a, b = wanted
        a = min(max(a, low), high)
        return a, min(max(b, a), high)
