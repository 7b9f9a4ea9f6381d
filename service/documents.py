"""Translating a document (``engine.documents``) through the runtime, for the file routes.

A document's texts go through ``Runtime.translate`` like any request's, in chunks of at most
MT_MAX_TEXTS texts and MT_MAX_CHARS characters, one chunk after another: a large document holds no
more of the queue at a time than one full-size request does, so other requests are served between
its chunks, and each chunk gets the whole request deadline. The source language, when not given,
is identified once for the whole document. A glossary applies to every text of it. Reading and
writing the file run in a thread, off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from engine.api import TranslationOptions
from engine.documents import (
    Document,
    DocumentError,
    DocumentTooLarge,
    MalformedDocument,
    UnsupportedFormat,
    read_document,
)
from engine.markup import plain_text
from service.errors import InvalidRequest, MalformedMarkup, PayloadTooLarge, UnsupportedMediaType
from service.runtime import JobGlossary, Runtime, TranslationJob, prefer_served

# Characters of a document that language identification reads: more tell it nothing new.
IDENTIFICATION_SAMPLE_CHARS = 2000


@dataclass(frozen=True)
class FileJob:
    """One file to translate, as the file routes describe it."""

    data: bytes
    filename: str
    target_lang: str
    source_lang: str | None = None  # None or "auto": identified from the document
    api_key: str | None = None
    glossary: JobGlossary | None = None


async def translate_document(runtime: Runtime, job: FileJob) -> tuple[bytes, Document]:
    """The translated file, and the document it was read as; every check first, as for texts."""
    runtime.authorize(job.api_key)
    limit = runtime.settings.max_file_bytes
    if len(job.data) > limit:
        raise PayloadTooLarge(f"the file is {len(job.data)} bytes; the limit is {limit} (MT_MAX_FILE_BYTES)")
    document = await asyncio.to_thread(_read, job.data, job.filename, runtime.settings.max_document_bytes)
    _check_texts(document.texts, runtime.settings.max_chars)
    source = _source_language(runtime, document, job.source_lang)
    options = TranslationOptions(format=document.format)
    translations: list[str] = []
    for chunk in chunks(document.texts, max_texts=runtime.settings.max_texts, max_chars=runtime.settings.max_chars):
        request = TranslationJob(chunk, job.target_lang, source, options, api_key=job.api_key, glossary=job.glossary)
        done = await runtime.translate(request)
        translations += [result.text for result in done.results]
    return await asyncio.to_thread(document.write, translations), document


def chunks(texts: Sequence[str], *, max_texts: int, max_chars: int) -> Iterator[list[str]]:
    """``texts`` in order, in the fewest consecutive chunks within both limits (a text longer
    than ``max_chars`` alone in its chunk)."""
    chunk: list[str] = []
    chars = 0
    for text in texts:
        if chunk and (len(chunk) == max_texts or chars + len(text) > max_chars):
            yield chunk
            chunk, chars = [], 0
        chunk.append(text)
        chars += len(text)
    if chunk:
        yield chunk


def plain_texts(document: Document) -> Iterator[str]:
    """What each of the document's texts says, without the tags a format built it with (a Word
    run's ``<span>``): what is identified, and billed."""
    for text in document.texts:
        yield plain_text(text, document.format) if document.format != "text" else text


def _read(data: bytes, filename: str, max_bytes: int) -> Document:
    try:
        return read_document(data, filename, max_bytes=max_bytes)
    except UnsupportedFormat as e:
        raise UnsupportedMediaType(str(e)) from None
    except DocumentTooLarge as e:
        raise PayloadTooLarge(f"file: {e} (MT_MAX_DOCUMENT_BYTES)") from None
    except MalformedDocument as e:
        raise MalformedMarkup(f"file: {e}", details={"line": e.line, "column": e.column}) from None
    except DocumentError as e:
        raise InvalidRequest(f"file: {e}") from None


def _check_texts(texts: Sequence[str], max_chars: int) -> None:
    """Refuse a document with a text (a paragraph, a cue) that no request could hold, before any
    of it is translated."""
    for i, text in enumerate(texts):
        if len(text) > max_chars:
            raise PayloadTooLarge(
                f"text {i + 1} of the file (a paragraph or cell) has {len(text)} characters; "
                f"the limit is {max_chars} (MT_MAX_CHARS)"
            )


def _source_language(runtime: Runtime, document: Document, asked: str | None) -> str | None:
    """The language to translate the whole document from. Identified from its beginning when not
    asked for: one short text at a time would be identified far less reliably. When that fails, or
    names a language no model translates from, None: each text is identified on its own, as in any
    request, and one in a language no model translates from is kept as written."""
    if (asked is not None and asked.lower() != "auto") or not document.texts:
        return asked
    sample = ""
    for text in plain_texts(document):
        sample += "\n" + text
        if len(sample) >= IDENTIFICATION_SAMPLE_CHARS:
            break
    _, router = runtime.serving()
    detection = prefer_served(runtime.detect(sample), router.sources())
    return detection.language if detection.language in router.sources() else None
