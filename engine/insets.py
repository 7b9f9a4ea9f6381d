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

What does not show is taken out too: a terminal's escape sequences ("\x1b[31mred\x1b[0m"), other
control characters, and invisible format characters (zero-width spaces and joiners, soft hyphens,
BOMs, bidirectional marks) outside emoji. The tokenizer reads each as a space and the rest of an
escape sequence as words ("A \x1b[31mred\x1b[0m car drives down the street." gave "Ein Rennfahrer
mit der Nummer 633, fährt auf der Straße die Straße entlang."; a soft hyphen in "pa\u00adrk" gave
"Rägger"), and they were lost. They go back as the other insets do, but for the words they touch:
one inside a word leaves no space, one that opens the word after it goes before that word's
translation, and those at a sentence's start or end stay there, so that formatting wraps the same
words of the translation.
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
ADDRESS = re.compile(
    r"(?:https?://|www\.)[^\s\x00-\x1f\x7f-\x9f]++|(?<![\w.+-])[\w.+-]++@[\w-]+(?:\.[\w-]+)+", re.IGNORECASE
)
# What follows a URL without being part of it: the sentence's end ("See www.example.com."), a
# closing bracket or quote (a closing parenthesis is the URL's own where it opened one).
AFTER_URL = frozenset(".,;:!?)]'\"”’»")


# ECMA-48 escape sequences: CSI ("\x1b[31m", "\x9b" its one-byte form), OSC up to BEL or ST
# ("\x1b]8;;https://x.org\x1b\\", a link), DCS, SOS, PM and APC up to ST, and the short ones
# ("\x1b(B"). An unterminated string is its introducer alone; the text after it is text.
ESCAPE = (
    r"(?:\x1b\[|\x9b)[0-?]*+[ -/]*+[@-~]|\x1b\][^\x07\x1b]*+(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*+\x1b\\|\x1b[ -/]*+[0-~]"
)
# Control characters but tabs and line breaks (the segmenter's; the separators and NEL that Python
# counts as whitespace too, which the tokenizer would read as spaces and drop), and the
# format characters that do not show: soft hyphen, Arabic letter mark, zero-width space, joiners and
# direction marks, embeddings and overrides, word joiner and invisible operators, isolates and the
# deprecated controls, BOM, tags.
UNSEEN_CHARACTERS = (
    "\x00-\x08\x0e-\x1f\x7f-\x9f"
    "\u00ad\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\U000e0001\U000e0020-\U000e007f"
)
UNSEEN = re.compile(rf"(?:{ESCAPE}|[{UNSEEN_CHARACTERS}])++")
# Between two letters of these scripts (Arabic, Indic, ...: past U+058F), a zero-width joiner or
# non-joiner is spelling (Persian "mi\u200ckhaham"), read by the model as the tokenizer reads it.
JOINERS = "\u200c\u200d"
SPELLING_FROM = "\u0590"
EMOJI_PARTS = "\u200d\ufe0e\ufe0f"  # the joiner and the variation selectors that pick an emoji's presentation


def is_symbol(char: str) -> bool:
    # So: emoji, pictographs, ©; Sk: skin tones; Me: keycaps; and the joiners, variation selectors
    # and flag tags inside emoji. Other invisible characters are not: a BOM before a sentence is
    # taken out of it (``UNSEEN``), not a segment of its own that a space would join.
    return (
        unicodedata.category(char) in ("So", "Sk", "Me") or char in EMOJI_PARTS or "\U000e0020" <= char <= "\U000e007f"
    )


def is_unseen(text: str) -> bool:
    """Whether ``text`` is escape sequences and characters that do not show, and nothing else."""
    return UNSEEN.fullmatch(text) is not None


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
        out, cursor, previous = "", 0, 0
        for inset, span in zip(self.insets, root.children, strict=True):
            at = max(cursor, self._where(inset, ranges[id(span)][0], translation, alignment))
            if at == cursor and is_unseen(inset.text) and self.words[previous : inset.at].strip():
                at = _end_of_word_after(translation, alignment.target_words, cursor)  # what it closed: a word at least
            at = glued_to_what_follows(translation, at, inset.spaced)
            out += translation[cursor:at]
            if inset.spaced[0] and out and not out[-1].isspace():
                out += " "
            out += inset.text
            if inset.spaced[1] and starts_a_word(translation[at : at + 1]):
                out += " "
            cursor, previous = at, inset.at
        return out + translation[cursor:]

    def _where(self, inset: Inset, k: int, translation: str, alignment: WordAlignment) -> int:
        """Where ``inset`` goes, placed at target word boundary ``k``: after the translation of
        the word before it. An escape sequence or invisible character at the sentence's start or
        end stays there, and one that opens a word ("\x1b[31mred") goes before that word's
        translation, so that formatting wraps the same words."""
        after = after_word(translation, alignment.target_words[k - 1], follows_a_word(self.words, inset.at)) if k else 0
        if not is_unseen(inset.text):
            return after
        if inset.at in (0, len(self.words)):
            return 0 if inset.at == 0 else len(translation)
        if not inset.spaced[0] or inset.spaced[1]:
            return after
        opened = bisect.bisect_left([start for start, _ in alignment.source_words], inset.at)
        targets = [t for s, t in alignment.pairs if s == opened]
        return alignment.target_words[min(targets)][0] if targets else after


def after_word(translation: str, word: tuple[int, int], glued: bool) -> int:
    """Where in ``translation`` an inset placed after ``word`` goes: before the punctuation that
    ends the word, unless the sentence had punctuation before the inset too (``glued``: it did not;
    "guitar 🎸 on the street" gives "Gitarre 🎸.", where "Gitarre." ends the translation)."""
    start, end = word
    if glued:
        while end > start + 1 and not translation[end - 1].isalnum():
            end -= 1
    return end


def glued_to_what_follows(translation: str, at: int, spaced: tuple[bool, bool]) -> int:
    """``at``, past the whitespace there if the inset had whitespace before it and none after: it
    stays glued to the word after it ("A \x1b[31mred" gives "Ein \x1b[31mrotes")."""
    if spaced[0] and not spaced[1]:
        return at + len(translation[at:]) - len(translation[at:].lstrip())
    return at


def _end_of_word_after(translation: str, words: list[tuple[int, int]], position: int) -> int:
    """The end of the first word of ``translation`` that ends after ``position``, before its punctuation."""
    return next((after_word(translation, word, True) for word in words if word[1] > position), len(translation))


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
        if all(glued) and not is_unseen(sentence[start:end]):  # one inside a word leaves it whole
            words += " "
        shifts.append((len(words), cursor - len(words)))
    words += sentence[cursor:]
    if not any(c.isalpha() for c in words):
        return None
    return Stripped(words, tuple(insets), tuple(shifts))


def find(sentence: str) -> list[tuple[int, int]]:
    """The [start, end) of the sentence's addresses, of its runs of symbols that have a visible
    symbol in them and a word character somewhere before and after them, and of its escape
    sequences and characters that do not show (``UNSEEN``, wherever they are), in order; those that
    touch or overlap are one. Modifier letters alone (``^``, a backtick) are part of the words, and
    so are the joiners that spell words (``JOINERS``)."""
    addresses = [_without_what_follows(sentence, *m.span()) for m in ADDRESS.finditer(sentence)]
    unseen = [] if sentence.isprintable() else [m.span() for m in UNSEEN.finditer(sentence)]
    spans = addresses + [span for span in unseen if not _spells(sentence, *span)]
    if sentence.isascii():  # no visible symbol is ASCII: most sentences end here, at C speed
        return _joined(spans)
    word = [_word_character(c) for c in sentence]
    if not any(word):
        return _joined(spans)
    first, last = word.index(True), len(word) - 1 - word[::-1].index(True)
    i = first
    while i < last:
        start = i
        while is_symbol(sentence[i]):
            i += 1
        if any(map(is_visible_symbol, sentence[start:i])):
            spans.append((start, i))
        i = max(i, start + 1)
    return _joined(spans)


def visible(text: str) -> str:
    """``text`` without its escape sequences and characters that do not show."""
    return text if text.isprintable() else UNSEEN.sub("", text)


def _joined(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` in order, those that touch or overlap made one (a run of symbols in a URL is the URL's)."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return out


def _spells(sentence: str, start: int, end: int) -> bool:
    """Whether [start, end) is a joiner between two letters of a script that spells with it."""
    if end - start != 1 or sentence[start] not in JOINERS or start == 0 or end == len(sentence):
        return False
    before, after = sentence[start - 1], sentence[end]
    return before >= SPELLING_FROM and all(unicodedata.category(c)[0] in "LM" for c in (before, after))


def _word_character(char: str) -> bool:
    return not (char.isspace() or is_symbol(char))


def _without_what_follows(sentence: str, start: int, end: int) -> tuple[int, int]:
    """An address's span without the punctuation after a URL (``AFTER_URL``)."""
    while end > start and sentence[end - 1] in AFTER_URL:
        if sentence[end - 1] == ")" and "(" in sentence[start : end - 1]:
            break
        end -= 1
    return start, end
