"""Emoji and other symbols inside a sentence: taken out before the model reads it, put back in its
translation.

A model's vocabulary has few symbols. An emoji is an unknown piece to it, and one between the words
of a sentence can change all of its translation ("I ❤️ dogs." gave "Ichchwirwwinige Hunde.", "A dog
❤️ runs in the park." "Ein Hund schickt im Park."). The model reads the sentence without them, and
each run of symbols goes back after the translation of the word before it, as an element without
words of its own goes back into markup (``engine.markup.projection``), with the spaces it had
around it. Runs at a sentence's edges are segments of their own (``engine.segmenter``).
"""

from __future__ import annotations

import bisect
import unicodedata
from dataclasses import dataclass

from engine.markup.projection import Positions, Span, WordAlignment, place
from engine.markup.tree import Text


def is_symbol(char: str) -> bool:
    # So: emoji, pictographs, ©; Sk: skin tones; Me: keycaps; Cf: joiners and flag tags; and the
    # variation selectors that pick an emoji's presentation.
    return unicodedata.category(char) in ("So", "Sk", "Me", "Cf") or char in "\ufe0e\ufe0f"


@dataclass(frozen=True)
class Inset:
    """A run of symbols taken out of a sentence: ``at``, where it was in the words left."""

    symbols: str
    at: int
    spaced: tuple[bool, bool]  # whitespace before it, after it in the sentence


@dataclass(frozen=True)
class Stripped:
    """A sentence without the runs of symbols between its words: ``words``, what the model reads."""

    words: str
    insets: tuple[Inset, ...]
    # (position in ``words``, how many characters of the sentence before it were taken out), at
    # every position from which that count grows
    shifts: tuple[tuple[int, int], ...]

    def origin(self, position: int) -> int:
        """Where a position of ``words`` is in the sentence."""
        k = bisect.bisect_right([at for at, _ in self.shifts], position) - 1
        return position + (self.shifts[k][1] if k >= 0 else 0)

    def put_back(self, translation: str, alignment: WordAlignment) -> str:
        """``translation`` of ``words`` with each run of symbols after the translation of the word
        before it (``alignment``: between ``words`` and ``translation``)."""
        root = Span(None, 0, len(self.words))
        root.children = [
            Span(None, inset.at, inset.at, atom=Text(inset.symbols, inset.symbols)) for inset in self.insets
        ]
        ranges = place(root, alignment, Positions(alignment, []))
        targets = alignment.target_words
        out, cursor = "", 0
        for inset, span in zip(self.insets, root.children, strict=True):
            k = ranges[id(span)][0]
            at = max(cursor, self._after(targets[k - 1], translation, inset) if k else 0)
            out += translation[cursor:at]
            if inset.spaced[0] and out and not out[-1].isspace():
                out += " "
            out += inset.symbols
            if inset.spaced[1] and _starts_a_word(translation[at : at + 1]):
                out += " "
            cursor = at
        return out + translation[cursor:]

    def _after(self, word: tuple[int, int], translation: str, inset: Inset) -> int:
        """Where in ``translation`` an inset placed after ``word`` goes: before the punctuation that
        ends the word, unless the sentence had punctuation before the inset too ("guitar 🎸 on the
        street" gives "Gitarre 🎸.", where "Gitarre." ends the translation)."""
        start, end = word
        if self.words[: inset.at].rstrip()[-1:].isalnum():
            while end > start + 1 and not translation[end - 1].isalnum():
                end -= 1
        return end


def _starts_a_word(char: str) -> bool:
    """Whether ``char`` is one a space goes before: not a space, nor punctuation that closes what is before it."""
    return bool(char) and not char.isspace() and unicodedata.category(char) not in ("Po", "Pe", "Pf")


def take_out(sentence: str) -> Stripped | None:
    """``sentence`` without its runs of symbols that have words on both sides; None if it has none.
    A run between spaces goes with the space after it, one glued to words on both sides ("I❤️you")
    leaves a space, so that the words stay apart."""
    runs = _runs(sentence)
    if not runs:
        return None
    words: list[str] = []
    insets: list[Inset] = []
    shifts: list[tuple[int, int]] = []
    length, cursor = 0, 0
    for start, end in runs:
        spaced = (sentence[start - 1].isspace(), sentence[end].isspace())
        words.append(sentence[cursor:start])
        length += start - cursor
        insets.append(Inset(sentence[start:end], length, spaced))
        cursor = end + 1 if all(spaced) else end
        if not any(spaced):
            words.append(" ")
            length += 1
        shifts.append((length, cursor - length))
    words.append(sentence[cursor:])
    return Stripped("".join(words), tuple(insets), tuple(shifts))


def _runs(sentence: str) -> list[tuple[int, int]]:
    """The [start, end) of each run of symbols with a word character somewhere before and after it
    and a visible symbol in it. Invisible ones alone (a zero-width non-joiner inside a Persian word,
    a soft hyphen) and modifier letters alone (``^``, a backtick) are part of the words."""
    word = [not (c.isspace() or is_symbol(c)) for c in sentence]
    if not any(word):
        return []
    first, last = word.index(True), len(word) - 1 - word[::-1].index(True)
    runs: list[tuple[int, int]] = []
    i = first
    while i < last:
        start = i
        while is_symbol(sentence[i]):
            i += 1
        if any(unicodedata.category(c) == "So" for c in sentence[start:i]):
            runs.append((start, i))
        i = max(i, start + 1)
    return runs
