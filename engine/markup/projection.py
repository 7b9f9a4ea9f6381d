"""Inline elements carried from a source text to its translation through the word alignment.

An inline element covers some source words; in the translation it wraps the span from the first to
the last target word aligned to any of them (words in between included, so that it stays one
element), of those that lie together: a target word aligned far from the others is left out. An
element or item with no words of its own (a ``<code>`` kept as it is, an empty ``<span>``, a
comment) is anchored after the target words of the source word before it. Then the
tree is made consistent top down: a child stays inside its parent, and siblings, ordered by where
they landed, do not overlap (a later one starts where an earlier one ends). Every element is placed
exactly once, so the output has the same elements, nested the same way, as the input.

Positions are word boundaries: boundary k lies before target word k, and a range (a, b) covers
target words a..b-1; (k, k) is empty.

A block may be translated line by line, its lines ending at ``<br>``s inside inline elements
(``LineBreak``): each ``<br>`` then sits exactly where one line's translation ends and the next
begins, an element stays within the translation of the lines it covers, and one that holds a
``<br>`` reaches it, so that the ``<br>`` stays inside.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.markup.tree import Element, Node

WORD = re.compile(r"\S+")
# Target words an element's aligned words may lie apart and still be wrapped together: one word
# between them (an article, a preposition the source has none of) belongs with them.
RUN_GAP = 2


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
    line_break: bool = False  # an atom that ends a line: placed where its ``LineBreak`` says


@dataclass(frozen=True)
class LineBreak:
    """Where one line of a block ends: ``source``, the position of the separator after it in the
    block's text; ``word`` and ``char``, the target word boundary and character where its
    translation ends in the joined translation."""

    source: int
    word: int
    char: int


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

    def extend(self, other: WordAlignment, source_at: int, target_at: int) -> None:
        """Append ``other``, its text found at ``source_at`` of the whole source and its
        translation at ``target_at``."""
        first_source, first_target = len(self.source_words), len(self.target_words)
        self.pairs += [(s + first_source, t + first_target) for s, t in other.pairs]
        self.source_words += [(s + source_at, e + source_at) for s, e in other.source_words]
        self.target_words += [(s + target_at, e + target_at) for s, e in other.target_words]


def _scale(index: int, count: int, to: int) -> int:
    return min(to - 1, index * to // max(count, 1)) if to else 0


class Positions:
    """A block's source words and line ends found by position, by bisection: a block of thousands
    of lines (a page in one ``<font>`` with a ``<br>`` per line) has as many spans to place."""

    def __init__(self, alignment: WordAlignment, breaks: Sequence[LineBreak]) -> None:
        self.starts = [s for s, _ in alignment.source_words]
        self.ends = [e for _, e in alignment.source_words]
        self.breaks = breaks
        self.break_sources = [line_end.source for line_end in breaks]
        self.break_at = {line_end.source: line_end for line_end in breaks}

    def words(self, span: Span) -> range:
        """The source words that ``span`` covers part of."""
        return range(bisect.bisect_right(self.ends, span.start), bisect.bisect_left(self.starts, span.end))

    def words_before(self, position: int) -> int:
        return bisect.bisect_left(self.starts, position)

    def lines(self, span: Span) -> tuple[int, int]:
        """The lines ``span`` starts and ends on; the line ends it holds lie between them."""
        sources = self.break_sources
        return bisect.bisect_left(sources, span.start), bisect.bisect_left(sources, span.end)


def place(root: Span, alignment: WordAlignment, positions: Positions) -> dict[int, tuple[int, int]]:
    """Target word range of every span below ``root`` (by ``id``), nested and non-overlapping;
    ``positions``: the alignment's source words and where the block's lines end."""
    placer = _Placer(alignment, positions)
    ranges: dict[int, tuple[int, int]] = {}
    placer.visit(root, 0, len(alignment.target_words), ranges)
    return ranges


class _Placer:
    def __init__(self, alignment: WordAlignment, positions: Positions) -> None:
        self.n_words = len(alignment.source_words)
        self.n_target = len(alignment.target_words)
        self.positions = positions
        self.targets: list[list[int]] = [[] for _ in range(self.n_words)]  # target words of each source word
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
        breaks = self.positions.breaks
        if span.line_break:
            k = self.positions.break_at[span.start].word
            return k, k
        first, last = self.positions.lines(span)
        # Within the translation of its lines: a word aligned to another line's would pull the
        # element, and the text between, across a <br>.
        low = breaks[first - 1].word if first else 0
        high = breaks[last].word if last < len(breaks) else self.n_target
        # One that holds <br>s wraps all of its words: they lie apart on several lines.
        a, b = self._clip(self._aligned(span, whole=first != last), low, high)
        if first == last:
            return a, b
        return min(a, breaks[first].word), max(b, breaks[last - 1].word)  # reaching the <br>s it holds

    def _aligned(self, span: Span, *, whole: bool = False) -> tuple[int, int]:
        if span.atom is None:
            covered = sorted({t for w in self.positions.words(span) for t in self.targets[w]})
            if covered:
                run = covered if whole else self._main_run(covered, self._anchor(span.start))
                return run[0], run[-1] + 1
        k = self._anchor(span.start)
        return k, k

    @staticmethod
    def _main_run(covered: list[int], anchor: int) -> list[int]:
        """The run of ``covered`` (sorted target words) that the element wraps: words at most
        ``RUN_GAP`` apart hold together; of the runs, the one with most words, then the one nearest
        ``anchor``. A word aligned apart from the rest (the attention looking elsewhere) would
        otherwise pull every word between into the element: a link over one word took the whole
        translated sentence."""
        runs = [[covered[0]]]
        for t in covered[1:]:
            if t - runs[-1][-1] > RUN_GAP:
                runs.append([])
            runs[-1].append(t)
        return max(runs, key=lambda run: (len(run), -min(abs(run[0] - anchor), abs(run[-1] + 1 - anchor))))

    def _anchor(self, position: int) -> int:
        """The boundary after the translation of the source word before ``position`` (or before
        that of the word after it)."""
        before = self.positions.words_before(position)
        if before and self.targets[before - 1]:
            return max(self.targets[before - 1]) + 1
        after = before < self.n_words
        if after and self.targets[before]:
            return min(self.targets[before])
        if not before:
            return 0
        return self.n_target if not after else round(before / self.n_words * self.n_target)

    @staticmethod
    def _clip(wanted: tuple[int, int], low: int, high: int) -> tuple[int, int]:
        a, b = wanted
        a = min(max(a, low), high)
        return a, min(max(b, a), high)
