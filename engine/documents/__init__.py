"""Documents for translation: read a file into the texts to translate, write it back translated.

Two phases, so that the caller decides how and when the texts are translated (the service sends
them through its batcher in bounded chunks)::

    doc = read_document(data, "report.docx")  # DocumentError if unsupported or unreadable
    translations = translate(doc.texts, TranslationOptions(format=doc.format))
    translated = doc.write(translations)  # bytes of a .docx again

One module per format; none of them translates, or knows HTTP. What each keeps is in its docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePath

from engine.documents import html, markdown, subtitles, text, word
from engine.documents.base import Document, DocumentError, Format, UnsupportedFormat

READERS: dict[str, Callable[[bytes], Document]] = {
    ".txt": text.read,
    ".md": markdown.read,
    ".markdown": markdown.read,
    ".html": html.read,
    ".htm": html.read,
    ".srt": subtitles.read,
    ".docx": word.read,
}
SUPPORTED_EXTENSIONS = tuple(READERS)


def read_document(data: bytes, filename: str) -> Document:
    """The document in ``data``, of the format its file name's extension names (in any case)."""
    extension = PurePath(filename).suffix.lower()
    reader = READERS.get(extension)
    if reader is None:
        supported = ", ".join(SUPPORTED_EXTENSIONS)
        raise UnsupportedFormat(f"unsupported file type {extension or '(no extension)'!r}: supported are {supported}")
    return reader(data)


__all__ = [
    "SUPPORTED_EXTENSIONS",
    "Document",
    "DocumentError",
    "Format",
    "UnsupportedFormat",
    "read_document",
]
