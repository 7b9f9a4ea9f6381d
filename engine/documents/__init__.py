"""Documents for translation: read a file into the texts to translate, write it back translated.

Two phases, so that the caller decides how and when the texts are translated (the service sends
them through its batcher in bounded chunks)::

    doc = read_document(data, "report.docx")  # DocumentError if unsupported, unreadable or too large
    translations = translate(doc.texts, TranslationOptions(format=doc.format))
    translated = doc.write(translations)  # bytes of a .docx again

One module per format; none of them translates, or knows HTTP. What each keeps is in its docstring.
"""

from __future__ import annotations

from pathlib import PurePath
from types import ModuleType

from engine.documents import html, markdown, subtitles, text, word
from engine.documents.base import (
    MAX_DOCUMENT_BYTES,
    MAX_DOCUMENT_TEXTS,
    Document,
    DocumentError,
    DocumentTooLarge,
    Format,
    MalformedDocument,
    TooManyTexts,
    UnsupportedFormat,
)

# Extension -> the module of its format: its ``read(data, *, max_bytes, max_texts) -> Document`` and
# ``MEDIA_TYPE``.
FORMATS: dict[str, ModuleType] = {
    ".txt": text,
    ".md": markdown,
    ".markdown": markdown,
    ".html": html,
    ".htm": html,
    ".srt": subtitles,
    ".docx": word,
}
SUPPORTED_EXTENSIONS = tuple(FORMATS)
MEDIA_TYPES = tuple(dict.fromkeys(module.MEDIA_TYPE for module in FORMATS.values()))


def read_document(
    data: bytes, filename: str, *, max_bytes: int = MAX_DOCUMENT_BYTES, max_texts: int = MAX_DOCUMENT_TEXTS
) -> Document:
    """The document in ``data``, of the format its file name's extension names (in any case);
    DocumentTooLarge if its content, decompressed, is over ``max_bytes``, TooManyTexts if it holds
    more than ``max_texts`` texts to translate."""
    extension = PurePath(filename).suffix.lower()
    module = FORMATS.get(extension)
    if module is None:
        supported = ", ".join(SUPPORTED_EXTENSIONS)
        raise UnsupportedFormat(f"unsupported file type {extension or '(no extension)'!r}: supported are {supported}")
    document: Document = module.read(data, max_bytes=max_bytes, max_texts=max_texts)
    return document


__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_DOCUMENT_TEXTS",
    "MEDIA_TYPES",
    "SUPPORTED_EXTENSIONS",
    "Document",
    "DocumentError",
    "DocumentTooLarge",
    "Format",
    "MalformedDocument",
    "TooManyTexts",
    "UnsupportedFormat",
    "read_document",
]
