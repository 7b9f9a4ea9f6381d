"""What every document format shares: the ``Document`` a reader returns, its errors, UTF-8 text."""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from engine.picklable import Picklable

T = TypeVar("T")

# How a document's texts must be translated (``engine.api.TranslationOptions.format``): plain text,
# or HTML fragments whose tags the engine puts back around the translated words.
Format = Literal["text", "html"]

BOM = "\ufeff"
# Bytes of a document's content that are read, decompressed: a .docx's parts, a text file as it is.
# Their parsed form takes many times as much memory, a .docx's XML tree most of all.
MAX_DOCUMENT_BYTES = 20 << 20
# Texts (paragraphs, cells, cues, lines) a document may hold: a reader stops at the one past it, so
# that a file of millions of tiny ones costs no more to refuse than a document of this many to read.
MAX_DOCUMENT_TEXTS = 100_000


class DocumentError(ValueError):
    """The file cannot be read as a document of its format (corrupt, not UTF-8, ...)."""


class MalformedDocument(Picklable, DocumentError):
    """Markup in the file that cannot be translated with its tags in place, and where (1-based)."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


class UnsupportedFormat(DocumentError):
    """No reader for the file's extension."""


class DocumentTooLarge(DocumentError):
    """The document's content, decompressed, takes more bytes than its reader was allowed."""


class TooManyTexts(Picklable, DocumentTooLarge):
    """The document holds more texts to translate than its reader was allowed (``limit``)."""

    def __init__(self, limit: int, message: str | None = None) -> None:
        super().__init__(
            message
            or f"the file has more texts to translate (paragraphs, cells, cues or lines) than the limit, {limit}"
        )
        self.limit = limit


class TooManyBlocks(TooManyTexts):
    """More of what a parser builds (lines, blocks, elements) than a file of as many texts as allowed
    would have: refused before the parser has built them all."""

    def __init__(self, limit: int, what: str) -> None:
        super().__init__(limit, f"the file has more {what} than the {limit} texts it may have could take")


def limited(items: Iterable[T], limit: int) -> Iterator[T]:
    """``items``, TooManyTexts at the one past ``limit``: a reader's texts, counted as they are found."""
    for count, item in enumerate(items, start=1):
        if count > limit:
            raise TooManyTexts(limit)
        yield item


@dataclass(frozen=True)
class Document:
    """A file read for translation: ``texts`` to translate as ``format``, and how to write it back."""

    texts: list[str]
    format: Format
    extension: str  # with its dot, lower case: ".docx"
    media_type: str
    writer: Callable[[list[str]], bytes] = field(repr=False)

    def write(self, translations: Sequence[str]) -> bytes:
        """The file with each of ``texts`` replaced by its translation, in the same order."""
        if len(translations) != len(self.texts):
            raise ValueError(f"{len(translations)} translations for {len(self.texts)} texts")
        return self.writer(list(translations))


@dataclass(frozen=True)
class Utf8Text:
    """A text file's content, and whether it began with a byte order mark (written back as it was)."""

    text: str
    bom: bool

    @classmethod
    def decode(cls, data: bytes, *, max_bytes: int) -> Utf8Text:
        if len(data) > max_bytes:
            raise DocumentTooLarge(f"the file is {len(data)} bytes of text; the limit is {max_bytes}")
        start = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
        try:
            return cls(data[start:].decode("utf-8"), bom=start > 0)
        except UnicodeDecodeError as e:
            where = f"invalid byte at offset {start + e.start}"
            raise DocumentError(f"the file is not UTF-8 text ({where}): save it as UTF-8") from None

    def encode(self, text: str) -> bytes:
        """``text`` (the document written back) as this file was encoded."""
        return ((BOM if self.bom else "") + text).encode("utf-8")
