"""Translating a document (``engine.documents``) through the runtime, for the file routes.

A document's texts go through ``Runtime.translate`` like any request's, in chunks of at most
MT_MAX_TEXTS texts and MT_MAX_CHARS characters, one chunk after another: a large document holds no
more of the queue at a time than one full-size request does, so other requests are served between
its chunks, and each chunk gets the whole request deadline. The source language, when not given,
is identified once for the whole document. A glossary applies to every text of it.

Reading and writing the file run in a process of their own (``DocumentProcess``): parsing a large
document holds the interpreter for seconds (2 s for a 5.8 MB .docx), which in a thread of the HTTP
process stalls its event loop and every request it serves, and its parsed tree takes memory there
long after.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from engine.api import TranslationOptions
from engine.documents import (
    DocumentError,
    DocumentTooLarge,
    MalformedDocument,
    UnsupportedFormat,
    read_document,
)
from engine.documents.base import Format
from engine.heap import release_memory
from engine.markup import plain_text
from service.errors import InvalidRequest, MalformedMarkup, PayloadTooLarge, UnsupportedMediaType
from service.runtime import JobGlossary, Runtime, TranslationJob, prefer_served

T = TypeVar("T")
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


@dataclass(frozen=True)
class ReadDocument:
    """What the HTTP process holds of a document read in the document process."""

    texts: list[str]
    format: Format
    media_type: str


@dataclass(frozen=True)
class _Unreadable:
    """Why the document process could not read a file, as a ``DocumentError`` of ``kind`` says it."""

    kind: type[DocumentError]
    message: str
    line: int = 0
    column: int = 0


class DocumentProcess:
    """Reads and writes documents in a child process, one at a time, started on first use. Writing
    reads the file again there: the parsed document stays in the child no longer than a call."""

    def __init__(self, max_document_bytes: int) -> None:
        self.max_document_bytes = max_document_bytes
        self._pool: ProcessPoolExecutor | None = None

    async def read(self, data: bytes, filename: str) -> ReadDocument:
        return _checked(await self._run(_read_in_child, data, filename, self.max_document_bytes))

    async def write(self, data: bytes, filename: str, translations: list[str]) -> bytes:
        return await self._run(_write_in_child, data, filename, self.max_document_bytes, translations)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    async def _run(self, function: Callable[..., T], *args: object) -> T:
        if self._pool is None:
            # spawn: a fork of the HTTP process would copy its threads' locks mid-use
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        return await asyncio.get_running_loop().run_in_executor(self._pool, function, *args)


async def translate_document(runtime: Runtime, documents: DocumentProcess, job: FileJob) -> tuple[bytes, ReadDocument]:
    """The translated file, and the document it was read as; every check first, as for texts."""
    runtime.authorize(job.api_key)
    limit = runtime.settings.max_file_bytes
    if len(job.data) > limit:
        raise PayloadTooLarge(f"the file is {len(job.data)} bytes; the limit is {limit} (MT_MAX_FILE_BYTES)")
    document = await documents.read(job.data, job.filename)
    _check_texts(document.texts, runtime.settings.max_chars)
    source = _source_language(runtime, document, job.source_lang)
    options = TranslationOptions(format=document.format)
    translations: list[str] = []
    for chunk in chunks(document.texts, max_texts=runtime.settings.max_texts, max_chars=runtime.settings.max_chars):
        request = TranslationJob(chunk, job.target_lang, source, options, api_key=job.api_key, glossary=job.glossary)
        done = await runtime.translate(request)
        translations += [result.text for result in done.results]
    return await documents.write(job.data, job.filename, translations), document


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


def plain_texts(document: ReadDocument) -> Iterator[str]:
    """What each of the document's texts says, without the tags a format built it with (a Word
    run's ``<span>``): what is identified, and billed."""
    for text in document.texts:
        yield plain_text(text, document.format) if document.format != "text" else text


def _read_in_child(data: bytes, filename: str, max_bytes: int) -> ReadDocument | _Unreadable:
    try:
        document = read_document(data, filename, max_bytes=max_bytes)
    except MalformedDocument as e:
        return _Unreadable(MalformedDocument, str(e), e.line, e.column)
    except DocumentError as e:
        return _Unreadable(type(e), str(e))
    read = ReadDocument(document.texts, document.format, document.media_type)
    del document
    release_memory()  # the parsed tree's: the process stays for the next document
    return read


def _write_in_child(data: bytes, filename: str, max_bytes: int, translations: list[str]) -> bytes:
    written = read_document(data, filename, max_bytes=max_bytes).write(translations)
    release_memory()
    return written


def _checked(read: ReadDocument | _Unreadable) -> ReadDocument:
    """The document read, or the service's error for why it could not be."""
    if isinstance(read, ReadDocument):
        return read
    if issubclass(read.kind, UnsupportedFormat):
        raise UnsupportedMediaType(read.message)
    if issubclass(read.kind, DocumentTooLarge):
        raise PayloadTooLarge(f"file: {read.message} (MT_MAX_DOCUMENT_BYTES)")
    if issubclass(read.kind, MalformedDocument):
        raise MalformedMarkup(f"file: {read.message}", details={"line": read.line, "column": read.column})
    raise InvalidRequest(f"file: {read.message}")


def _check_texts(texts: Sequence[str], max_chars: int) -> None:
    """Refuse a document with a text (a paragraph, a cue) that no request could hold, before any
    of it is translated."""
    for i, text in enumerate(texts):
        if len(text) > max_chars:
            raise PayloadTooLarge(
                f"text {i + 1} of the file (a paragraph or cell) has {len(text)} characters; "
                f"the limit is {max_chars} (MT_MAX_CHARS)"
            )


def _source_language(runtime: Runtime, document: ReadDocument, asked: str | None) -> str | None:
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
