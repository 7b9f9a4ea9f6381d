"""Text handling around the model: split a text into sentences, put the translations back in place.

Rules (pure string work; nothing here raises on any ``str``):

- Lines are split at ``\\r\\n``, ``\\n`` and ``\\r``; every line break, leading/trailing space and the
  whitespace between sentences is kept verbatim, so N input lines give N output lines.
- A line is split into sentences after ``.``, ``!``, ``?``, ``…`` (and their CJK forms), with any
  closing quotes or brackets, when whitespace and then a character that is not a lower-case letter
  follow, and the word before a period is not a common abbreviation or initials (``J.``, ``E.S.E.``);
  after ``。``, ``！`` and ``？`` without whitespace too, as Chinese and Japanese write them.
- A sentence longer than ``max_tokens`` pieces (the model's limit) is split at clause punctuation
  (``,;:``), then at whitespace, then inside a word, into chunks that fit; its chunks are translated
  separately and flagged ``truncated``. Nothing is ever dropped.
- Text that is empty or whitespace only has no segments: its translation is empty.

``split_units`` is all but the third rule: the sentences of a text, with the emoji and other
symbols at their edges split off, which the service's streaming route translates one by one (each
as a text of its own, so the third rule applies to it), as ``segment`` gives them to the model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from engine.insets import is_symbol

LINE_BREAK = re.compile(r"(\r\n|\r|\n)")
# Group 1: the whitespace between; none after the full-width forms, as Chinese and Japanese write
# no space between sentences.
# The closing marks are taken whole (possessive): backtracking into them split "。』" at a text's end
# after "。", so that a sentence split again on its own (the stream translates each) split in two.
SENTENCE_END = re.compile(r"""[.!?…。！？]["'”’»)\]」』]*+(\s+|(?<=[。！？」』]))(?=\S)""")
CLAUSE_END = re.compile(r"(?<=[,;:])\s+")
# Longer than any abbreviation or run of initials that a period after it leaves inside a sentence.
WORD_WINDOW = 32
WHITESPACE = re.compile(r"\s+")
# Words after which a period rarely ends a sentence (English and German, lower-cased, final period removed).
ABBREVIATION_LIST = "mr mrs ms dr prof st jr sr vs etc no nr ca approx fig inc ltd co bzw usw vgl ggf"
ABBREVIATIONS = frozenset(ABBREVIATION_LIST.split())
# Single letters each followed by a period: initials ("J.") and initialisms ("E.S.E.", "e.g.", "z.B.").
# Far more of these sit inside a sentence than end one, and a wrong split breaks up a name.
INITIALS = re.compile(r"(?:[^\W\d_]\.)+")


@dataclass
class Segment:
    text: str
    truncated: bool = False  # a chunk of a sentence too long for the model


@dataclass
class SegmentedText:
    """``separators[0] + out[0] + separators[1] + ... + out[n-1] + separators[n]`` rebuilds a text."""

    segments: list[Segment] = field(default_factory=list)
    separators: list[str] = field(default_factory=lambda: [""])

    def join(self, translations: Sequence[str], word_separator: str = " ") -> str:
        """The translations in the places of their segments. Segments that touched in the source (a
        sentence cut into chunks, or one ending where the next begins) are joined by ``word_separator``
        (a space; none for languages written without them), so that "Axt." and "Eine" do not run together."""
        return self.join_spans(translations, word_separator)[0]

    def join_spans(self, translations: Sequence[str], word_separator: str = " ") -> tuple[str, list[int]]:
        """``join``, and where each translation starts in the result."""
        if not self.segments:
            return "", []
        parts = [self.separators[0]]
        length = len(self.separators[0])
        starts = []
        tail = self.separators[0][-1:]  # the last character so far
        kept = False  # the previous translation is its segment as it was (passed through)
        for segment, translation, separator in zip(self.segments, translations, self.separators[1:], strict=True):
            touching = tail and not tail.isspace() and translation[:1] and not translation[0].isspace()
            # Two segments passed through as they were stay as they touched ("狗跑。猫睡。").
            if touching and not (kept and translation == segment.text):
                parts.append(word_separator)
                length += len(word_separator)
            kept = translation == segment.text and not separator
            starts.append(length)
            parts += [translation, separator]
            length += len(translation) + len(separator)
            tail = (translation + separator)[-1:] or tail
        return "".join(parts), starts

    def starts(self) -> list[int]:
        """Where each segment starts in the text it came from."""
        starts, position = [], len(self.separators[0])
        for segment, separator in zip(self.segments, self.separators[1:], strict=True):
            starts.append(position)
            position += len(segment.text) + len(separator)
        return starts

    def add(self, text: str, truncated: bool = False) -> None:
        self.segments.append(Segment(text, truncated))
        self.separators.append("")

    def add_space(self, space: str) -> None:
        self.separators[-1] += space


def segment(text: str, *, count_tokens: Callable[[str], int], max_tokens: int) -> SegmentedText:
    """Split ``text`` into sentences that each fit ``max_tokens`` pieces (as counted by ``count_tokens``)."""
    units = split_units(text)
    result = SegmentedText(separators=units.separators[:1])
    for unit, space in zip(units.segments, units.separators[1:], strict=True):
        if count_tokens(unit.text) <= max_tokens:
            result.add(unit.text)
        else:
            for chunk, chunk_space in _fit(unit.text, count_tokens, max_tokens):
                result.add(chunk, truncated=True)
                result.add_space(chunk_space)
        result.add_space(space)
    return result


def split_units(text: str) -> SegmentedText:
    """``text``'s sentences (``split_sentences``), the runs of symbols at their edges split off
    (``_symbol_edges``): what is translated apart, whatever its length. Each unit, split on its
    own, is that one unit."""
    sentences = split_sentences(text)
    result = SegmentedText(separators=sentences.separators[:1])
    for sentence, space in zip(sentences.segments, sentences.separators[1:], strict=True):
        lead, words, trail = _symbol_edges(sentence.text)
        if lead:
            symbols = lead.rstrip()
            result.add(symbols)
            result.add_space(lead[len(symbols) :])
        result.add(words)
        if trail:
            symbols = trail.lstrip()
            result.add_space(trail[: len(trail) - len(symbols)])
            result.add(symbols)
        result.add_space(space)
    return result


def _symbol_edges(sentence: str) -> tuple[str, str, str]:
    """The runs of emoji and other symbols at the start and end of ``sentence`` (with the whitespace
    between them and its words), and the words between: "😀 A dog runs. ✅" -> "😀 ", "A dog runs.",
    " ✅". A model's vocabulary has few of them, and an unknown piece at a sentence's edge can change
    all of its translation ("😀 A dog runs.": "Ein Fallschirmspringer rennt."), so they are
    segments of their own, passed through. A sentence of nothing but symbols stays whole."""
    start, end = 0, len(sentence)  # a sentence has no whitespace at its ends
    while start < end and (is_symbol(sentence[start]) or sentence[start].isspace()):
        start += 1
    while end > start and (is_symbol(sentence[end - 1]) or sentence[end - 1].isspace()):
        end -= 1
    if start == end:
        return "", sentence, ""
    return sentence[:start], sentence[start:end], sentence[end:]


def split_sentences(text: str) -> SegmentedText:
    """``text`` split into lines and sentences, whatever their length; its separators hold every
    other character, so that they and the sentences rebuild it (all of a whitespace-only text is
    its first separator)."""
    result = SegmentedText()
    for part in LINE_BREAK.split(text):
        if LINE_BREAK.fullmatch(part) or not part.strip():
            result.add_space(part)
            continue
        content = part.strip()
        start = part.index(content)
        result.add_space(part[:start])
        for sentence, space in _cut(content, sentence_boundaries(content)):
            result.add(sentence)
            result.add_space(space)
        result.add_space(part[start + len(content) :])
    return result


def sentence_boundaries(line: str) -> list[tuple[int, int]]:
    """Spans of the whitespace runs that end a sentence, abbreviations and initials excepted."""
    boundaries = []
    for match in SENTENCE_END.finditer(line):
        start, end = match.span(1)
        if line[end].islower():
            continue
        word = _word_before(line, start).rstrip("\"'”’»)]")
        if word.endswith(".") and (word.rstrip(".").lower() in ABBREVIATIONS or INITIALS.fullmatch(word)):
            continue
        boundaries.append((start, end))
    return boundaries


def _word_before(line: str, end: int) -> str:
    """The word of ``line`` that ends at ``end``, or its last ``WORD_WINDOW`` characters: read back
    no further, so that finding a line's sentences stays linear (read back to the line's start,
    20,000 characters of "A. " took 0.4 s, and Chinese, with no space between words, longer)."""
    start = end
    while start > max(0, end - WORD_WINDOW) and not line[start - 1].isspace():
        start -= 1
    return line[start:end]


def _spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text)]


def _cut(text: str, spans: Sequence[tuple[int, int]]) -> list[tuple[str, str]]:
    """text cut at the given whitespace spans -> [(piece, the whitespace after it), ...]."""
    pieces, position = [], 0
    for start, end in spans:
        pieces.append((text[position:start], text[start:end]))
        position = end
    pieces.append((text[position:], ""))
    return [(piece, space) for piece, space in pieces if piece]


def _fit(text: str, count_tokens: Callable[[str], int], max_tokens: int) -> list[tuple[str, str]]:
    """Chunks of at most ``max_tokens`` pieces with the whitespace after each: clauses, words, then halves.

    Pieces never span whitespace in sentencepiece, so whitespace-separated units' counts add up.
    """
    if count_tokens(text) <= max_tokens:
        return [(text, "")]
    for pattern in (CLAUSE_END, WHITESPACE):
        units = _cut(text, _spans(pattern, text))
        if len(units) > 1:
            return _pack(units, count_tokens, max_tokens)
    if len(text) <= 1:
        return [(text, "")]
    half = len(text) // 2
    return [
        *_fit(text[:half], count_tokens, max_tokens),
        *_fit(text[half:], count_tokens, max_tokens),
    ]


def _pack(units: list[tuple[str, str]], count_tokens: Callable[[str], int], max_tokens: int) -> list[tuple[str, str]]:
    """Greedily join consecutive units into chunks that fit; a unit too long alone is split further."""
    chunks: list[tuple[str, str]] = []
    current, current_space, current_count = "", "", 0
    for unit, space in units:
        n = count_tokens(unit)
        if current and current_count + n <= max_tokens:
            current, current_space, current_count = current + current_space + unit, space, current_count + n
            continue
        if current:
            chunks.append((current, current_space))
        if n <= max_tokens:
            current, current_space, current_count = unit, space, n
        else:
            parts = _fit(unit, count_tokens, max_tokens)
            parts[-1] = (parts[-1][0], space)
            chunks += parts
            current, current_space, current_count = "", "", 0
    if current:
        chunks.append((current, current_space))
    return chunks
