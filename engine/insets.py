"""Emoji, other symbols, URLs and e-mail addresses inside a sentence: taken out before the model
reads it, put back in its translation.

A model's vocabulary has few symbols. An emoji is an unknown piece to it, and one between the words
of a sentence can change all of its translation ("I ❤️ dogs." gave "Ichchwirwwinige Hunde.", "A dog
❤️ runs in the park." "Ein Hund schickt im Park."). An address is a string of pieces that the model
rewrites as words of its own ("A woman writes to anna.smith@example.org in the park." gave "Eine
Frau schreibt in einem Park eine Tomammamm."). The model reads the sentence without them, and each
goes back after the translation of the word before it, as an element without words of its own
goes back into markup (``engine.markup.projection``), with the spaces it had around it. Runs of
symbols at a sentence's edges are segments of their own (``engine.segmenter``). Markup takes the
same runs (``find``) out of the lines of its blocks (``engine.markup.document``).
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from engine.markup.projection import Positions, Span, WordAlignment, place
from engine.markup.tree import Text

# A URL or an e-mail address. Each part is taken whole (possessive): tried from every position of a
# long run, the match would be quadratic (an address's local part without "@": 0.65 s for 19,900
# letters; a URL's end found by looking ahead past punctuation: 2.9 s), in the HTTP process's
# event loop too, which reads markup and identifies languages.
ADDRESS = re.compile(r"(?:https?://|www\.)\S++|(?<![\w.+-])[\w.+-]++@[\w-]+(?:\.[\w-]+)+", re.IGNORECASE)
# What follows a URL without being part of it: the sentence's end ("See www.example.com."), a
# closing bracket or quote (a closing parenthesis is the URL's own where it opened one).
AFTER_URL = frozenset(".,;:!?)]'\"”’»")


def is_symbol(char: str) -> bool:
    # So: emoji, pictographs, ©; Sk: skin tones; Me: keycaps; Cf: joiners and flag tags; and the
    # variation selectors that pick an emoji's presentation.
    return unicodedata.category(char) in ("So", "Sk", "Me", "Cf") or char in "\ufe0e\ufe0f"


def is_visible_symbol(char: str) -> bool:
    """An emoji, pictograph or other symbol that shows (So): what makes a run of symbols an inset."""
    return unicodedata.category(char) == "So"


@dataclass(frozen=True)
class Inset:
    """A run of symbols or an address taken out of a sentence: ``at``, where it was in the words left."""

    text: str
    at: int
    spaced: tuple[bool, bool]  # whitespace before it, after it in the sentence


@dataclass(frozen=True)
class Stripped:
    """A sentence without its insets: ``words``, what the model reads."""

    words: str
    insets: tuple[Inset, ...]
    # (position in ``words``, how many characters of the sentence before it were taken out), at
    # every position from which that count grows
    shifts: tuple[tuple[int, int], ...]

    @cached_property
    def _starts(self) -> tuple[list[int], list[int]]:
        """Where each shift starts in ``words``, and in the sentence."""
        return [at for at, _ in self.shifts], [at + taken for at, taken in self.shifts]

    def origin(self, position: int) -> int:
        """Where a position of ``words`` is in the sentence."""
        k = bisect.bisect_right(self._starts[0], position) - 1
        return position + (self.shifts[k][1] if k >= 0 else 0)

    def position(self, origin: int) -> int:
        """Where a position of the sentence is in ``words``: one in what was taken out, where that was."""
        in_words, in_sentence = self._starts
        k = bisect.bisect_right(in_sentence, origin) - 1
        position = origin - (self.shifts[k][1] if k >= 0 else 0)
        return min(position, in_words[k + 1]) if k + 1 < len(in_words) else position

    def put_back(self, translation: str, alignment: WordAlignment) -> str:
        """``translation`` of ``words`` with each inset after the translation of the word before
        it (``alignment``: between ``words`` and ``translation``)."""
        root = Span(None, 0, len(self.words))
        root.children = [Span(None, inset.at, inset.at, atom=Text(inset.text, inset.text)) for inset in self.insets]
        ranges = place(root, alignment, Positions(alignment, []))
        targets = alignment.target_words
        out, cursor = "", 0
        for inset, span in zip(self.insets, root.children, strict=True):
            k = ranges[id(span)][0]
            at = max(cursor, after_word(translation, targets[k - 1], follows_a_word(self.words, inset.at)) if k else 0)
            out += translation[cursor:at]
            if inset.spaced[0] and out and not out[-1].isspace():
                out += " "
            out += inset.text
            if inset.spaced[1] and starts_a_word(translation[at : at + 1]):
                out += " "
            cursor = at
        return out + translation[cursor:]


def after_word(translation: str, word: tuple[int, int], glued: bool) -> int:
    """Where in ``translation`` an inset placed after ``word`` goes: before the punctuation that
    ends the word, unless the sentence had punctuation before the inset too (``glued``: it did not;
    "guitar 🎸 on the street" gives "Gitarre 🎸.", where "Gitarre." ends the translation)."""
    start, end = word
    if glued:
        while end > start + 1 and not translation[end - 1].isalnum():
            end -= 1
    return end


def follows_a_word(text: str, position: int) -> bool:
    """Whether the last character before ``position`` of ``text`` that is not a space is a letter or digit."""
    while position > 0 and text[position - 1].isspace():
        position -= 1
    return position > 0 and text[position - 1].isalnum()


def starts_a_word(char: str) -> bool:
    """Whether ``char`` is one a space goes before: not a space, nor punctuation that closes what is before it."""
    return bool(char) and not char.isspace() and unicodedata.category(char) not in ("Po", "Pe", "Pf")


def take_out(sentence: str, spans: Sequence[tuple[int, int]] | None = None) -> Stripped | None:
    """``sentence`` without its insets (``spans``, if not all that ``find`` gives); None if it has
    none, or nothing else to read. An inset goes with the space after it, or where punctuation or
    the sentence's end follows it, with the space before it; one glued to words on both sides
    ("I❤️you") leaves a space, so that the words stay apart."""
    spans = find(sentence) if spans is None else spans
    if not spans:
        return None
    words = ""
    insets: list[Inset] = []
    shifts: list[tuple[int, int]] = []
    cursor = 0
    for start, end in spans:
        spaced = (start > 0 and sentence[start - 1].isspace(), end < len(sentence) and sentence[end].isspace())
        glued = (start > 0 and not spaced[0], end < len(sentence) and not spaced[1])
        closes = end == len(sentence) or (glued[1] and unicodedata.category(sentence[end])[0] == "P")
        words += sentence[cursor:start].rstrip() if closes else sentence[cursor:start]
        insets.append(Inset(sentence[start:end], len(words), spaced))
        cursor = end + 1 if spaced[1] and (spaced[0] or not words) else end
        if all(glued):
            words += " "
        shifts.append((len(words), cursor - len(words)))
    words += sentence[cursor:]
    if not any(c.isalpha() for c in words):
        return None
    return Stripped(words, tuple(insets), tuple(shifts))


def find(sentence: str) -> list[tuple[int, int]]:
    """The [start, end) of the sentence's addresses, and of its runs of symbols that have a visible
    symbol in them and a word character somewhere before and after them, in order. Invisible
    symbols alone (a zero-width non-joiner inside a Persian word, a soft hyphen) and modifier
    letters alone (``^``, a backtick) are part of the words."""
    addresses = [_without_what_follows(sentence, *m.span()) for m in ADDRESS.finditer(sentence)]
    if sentence.isascii():  # no visible symbol is ASCII: most sentences end here, at C speed
        return addresses
    word = [_word_character(c) for c in sentence]
    if not any(word):
        return addresses
    first, last = word.index(True), len(word) - 1 - word[::-1].index(True)
    runs: list[tuple[int, int]] = []
    i = first
    while i < last:
        start = i
        while is_symbol(sentence[i]):
            i += 1
        if any(map(is_visible_symbol, sentence[start:i])):
            runs.append((start, i))
        i = max(i, start + 1)
    return sorted(addresses + _outside(runs, addresses))


def _outside(runs: list[tuple[int, int]], addresses: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The runs that start in no address, both in order: one pass, as a text can hold thousands of each."""
    kept, k = [], 0
    for run in runs:
        while k < len(addresses) and addresses[k][1] <= run[0]:
            k += 1
        if k == len(addresses) or run[0] < addresses[k][0]:
            kept.append(run)
    return kept


def _word_character(char: str) -> bool:
    return not (char.isspace() or is_symbol(char))


def _without_what_follows(sentence: str, start: int, end: int) -> tuple[int, int]:
    """An address's span without the punctuation after a URL (``AFTER_URL``)."""
    while end > start and sentence[end - 1] in AFTER_URL:
        if sentence[end - 1] == ")" and "(" in sentence[start : end - 1]:
            break
        end -= 1
    return start, end
