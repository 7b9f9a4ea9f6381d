"""Translating a document (``engine.documents``) through the runtime, for the file routes.

A document's texts go through ``Runtime.translate`` like any request's, in chunks of at most
MT_MAX_TEXTS texts and MT_MAX_CHARS characters, one chunk after another: a large document holds no
more of the queue at a time than one full-size request does, so other requests are served between
its chunks, and each chunk gets the whole request deadline. The source language, when not given,
is identified once for the whole document. A glossary applies to every text of it. A document
holds at most MT_MAX_DOCUMENT_TEXTS texts (its reader stops at the one past them) and
MT_MAX_DOCUMENT_CHARS characters: one over either is refused before any of it is translated.

Reading and writing the file run in a process of their own (``DocumentProcess``; small files in a
second one, so that they never wait behind a large one): parsing a large document holds the
interpreter for seconds (2 s for a 5.8 MB .docx), which in a thread of the HTTP process stalls its
event loop and every request it serves, and its parsed tree takes memory there long after. Its
heap is capped (MT_DOCUMENT_MEMORY_MB, as RLIMIT_DATA): a document that needs more
fails its call with a 413, and the process is replaced, rather than the pod being killed for memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import resource
import signal
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from engine.api import TranslationOptions
from engine.documents import (
    DocumentError,
    DocumentTooLarge,
    MalformedDocument,
    TooManyTexts,
    UnsupportedFormat,
    read_document,
)
from engine.documents.base import Format
from engine.heap import release_memory
from engine.markup import MarkupError, plain_text
from service.errors import (
    DeadlineExceeded,
    InternalError,
    InvalidRequest,
    MalformedMarkup,
    PayloadTooLarge,
    UnsupportedMediaType,
)
from service.identification import prefer_served
from service.runtime import Runtime
from service.translation import JobGlossary, TranslationJob
from service.turns import Turns

T = TypeVar("T")
log = logging.getLogger(__name__)
# The document process's name (``/proc/<pid>/comm``, what ``ps`` and ``top`` show).
DOCUMENT_PROCESS_NAME = "mt-documents"
# Characters of a document that language identification reads: more tell it nothing new.
IDENTIFICATION_SAMPLE_CHARS = 2000
MEMORY_SETTING = "MT_DOCUMENT_MEMORY_MB"
# A file this small, not a .docx, is read and written in the light lane's process: 0.3 s at most (of
# markup with a tag or emphasis every few bytes, the slowest to read per byte: RESULTS 27).
LIGHT_FILE_BYTES = 64 << 10
# The heavy lane's process runs at this niceness, as the engines do by default (MT_ENGINE_NICE): on a
# full machine, reading one key's large files takes CPU time after the HTTP process and the light lane
# (another key's one-line file), not before (benchmarks.key_shares, RESULTS 27).
HEAVY_LANE_NICENESS = 10
STOPPED_POLL_S = 0.5  # how often a document process that has not answered yet is checked for a stop
STOPPED_RETRIES = 1  # times a call whose process was found stopped is run again in its replacement


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
    chars: int  # what its texts say, without the tags of their formatting: what is billed


@dataclass(frozen=True)
class _Unreadable:
    """Why the document process could not read a file, as a ``DocumentError`` of ``kind`` says it."""

    kind: type[DocumentError]
    message: str
    line: int = 0
    column: int = 0
    limit: int = 0  # a TooManyTexts's


@dataclass(frozen=True)
class _OutOfMemory:
    """A call that needed more memory than the document process may allocate."""


class DocumentProcess:
    """Reads and writes documents in child processes, in two lanes as the batcher has them: a light
    file (at most ``LIGHT_FILE_BYTES``, and not a .docx, whose parts may expand to
    MT_MAX_DOCUMENT_BYTES) goes to a process of its own, so that it never waits behind a large one.
    Reading is linear but not cheap: 10 MB of HTML dense with tags takes the process ~35 s, and with
    one process another key's one-line .txt waited for every such file ahead of it
    (``benchmarks.key_shares``).
    Each lane is a ``_Lane``, started on first use."""

    def __init__(self, max_document_bytes: int, *, max_texts: int, memory_mb: int, timeout_s: float = 60.0) -> None:
        self.max_document_bytes = max_document_bytes
        self.max_texts = max_texts
        self._light = _Lane(memory_mb=memory_mb, timeout_s=timeout_s)
        self._heavy = _Lane(memory_mb=memory_mb, timeout_s=timeout_s, niceness=HEAVY_LANE_NICENESS)

    async def read(self, data: bytes, filename: str, *, owner: str | None = None) -> ReadDocument:
        """``owner``: the key the file is read for (None: the service has no keys): each key waiting
        takes its turn at the lane's process (``service.turns``)."""
        lane = self._lane(data, filename)
        limits = (self.max_document_bytes, self.max_texts)
        return _checked(await lane.run(owner, _read_in_child, data, filename, *limits))

    async def write(self, data: bytes, filename: str, translations: list[str], *, owner: str | None = None) -> bytes:
        lane = self._lane(data, filename)
        limits = (self.max_document_bytes, self.max_texts)
        return await lane.run(owner, _write_in_child, data, filename, *limits, translations)

    def close(self) -> None:
        self._light.stop()
        self._heavy.stop()

    def _lane(self, data: bytes, filename: str) -> _Lane:
        return self._light if is_light(data, filename) else self._heavy


def is_light(data: bytes, filename: str) -> bool:
    """Whether a file is light: at most ``LIGHT_FILE_BYTES``, and not a .docx (whose parts may expand
    to MT_MAX_DOCUMENT_BYTES). Light files are read, written and translated in lanes of their own."""
    return len(data) <= LIGHT_FILE_BYTES and not filename.lower().endswith(".docx")


class _Lane:
    """One child process reading and writing documents, one at a time, started on first use.
    Writing reads the file again there: the parsed document stays in the child no longer than a call.

    A call whose caller leaves (its client hung up) kills the child: a parser cannot be interrupted,
    and would hold the child, and the documents waiting for it, for the seconds a large file takes.
    A child that dies (killed, out of memory) fails its call with a 500; the next call starts another.
    One that reaches its memory limit (``memory_mb``) fails its call with a 413 and is replaced: an
    allocation that failed may have left any object half-built. One that has not answered a call
    within ``timeout_s`` (stuck) is killed and replaced, the call failed with a 504. One found stopped
    by a signal while it has not (within a second) is too, and the call run again in the replacement
    (``STOPPED_RETRIES`` times: a 504 past them).
    """

    def __init__(self, *, memory_mb: int, timeout_s: float, niceness: int = 0) -> None:
        self.memory_mb = memory_mb
        self.timeout_s = timeout_s
        self.niceness = niceness
        self._child: _Child | None = None
        # Calls wait here rather than in the pool's queue, so that killing the child fails only the
        # call it was running: a pool whose worker died fails every call queued in it. Each key in turn.
        self._turns = Turns()

    async def run(self, owner: str | None, function: Callable[..., T], *args: object) -> T:
        async with self._turns.turn(owner):
            for tries_left in reversed(range(STOPPED_RETRIES + 1)):
                future = await self._submit(_within_memory, function, *args)
                try:
                    result = await self._answer(future)
                    break
                except _Stopped:
                    # Reading and writing a file depend on nothing but it: its replacement does the same.
                    self.stop(kill=True)
                    log.error("the document process was stopped (SIGSTOP): replaced")
                    if not tries_left:
                        raise DeadlineExceeded(
                            "the document process was stopped (SIGSTOP) while it read or wrote the file, "
                            "and its replacement too; it was replaced: try again"
                        ) from None
                except asyncio.CancelledError:
                    self.stop(kill=True)
                    raise
                except TimeoutError:
                    self.stop(kill=True)
                    log.error("the document process did not answer within %g s: replaced", self.timeout_s)
                    raise DeadlineExceeded(
                        f"the document process did not answer within {self.timeout_s:g} s (MT_DOCUMENT_TIMEOUT_S); "
                        "it was replaced: try again"
                    ) from None
                except BrokenProcessPool:
                    self.stop(kill=False)
                    log.error("the document process died (killed, or out of memory) while it read or wrote a file")
                    raise InternalError(
                        "the document process stopped while it read or wrote the file (killed, or out of memory): "
                        "try again, or send a smaller file"
                    ) from None
            if isinstance(result, _OutOfMemory):
                self.stop()
                raise PayloadTooLarge(
                    f"file: reading or writing it needs more memory than the document process may use, "
                    f"{self.memory_mb} MiB ({MEMORY_SETTING})",
                    details={"setting": MEMORY_SETTING, "limit": self.memory_mb},
                )
            return result

    async def _answer(self, future: Future[T]) -> T:
        """The child's answer: TimeoutError past ``timeout_s``; _Stopped once the child is seen stopped
        by a signal twice, ``STOPPED_POLL_S`` apart: it would answer only once resumed, and every file
        waiting for the lane would wait until then, or until ``timeout_s`` (a minute by default)."""
        pid = self._child.pid if self._child is not None else None
        answer = asyncio.wrap_future(future)
        was_stopped = False
        async with asyncio.timeout(self.timeout_s):
            while not (await asyncio.wait({answer}, timeout=STOPPED_POLL_S))[0]:
                stopped = pid is not None and _stopped(pid)
                if stopped and was_stopped:
                    raise _Stopped
                was_stopped = stopped
        return answer.result()

    async def _submit(self, function: Callable[..., T | _OutOfMemory], *args: object) -> Future[T | _OutOfMemory]:
        # A child that died between calls (killed, say) costs this call nothing: it goes to a new one,
        # whether the pool has noticed the death yet (BrokenProcessPool) or not (the child is a zombie,
        # and the pool would fail this call as if it had died under it).
        if self._child is not None and _exited(self._child.pid):
            self.stop(kill=False)
        child = self._child or await self._start()
        try:
            return child.pool.submit(function, *args)
        except BrokenProcessPool:
            self.stop(kill=False)
            return (await self._start()).pool.submit(function, *args)

    async def _start(self) -> _Child:
        # spawn: a fork of the HTTP process would copy its threads' locks mid-use
        pool = ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_child,
            initargs=(self.memory_mb << 20, self.niceness),
        )
        try:
            pid = await asyncio.wrap_future(pool.submit(os.getpid))
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        self._child = _Child(pool, pid)
        return self._child

    def stop(self, *, kill: bool = True) -> None:
        """Forget the child, killing it (whatever it is doing) unless it is known dead: the next
        call starts another."""
        child, self._child = self._child, None
        if child is None:
            return
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
        child.pool.shutdown(wait=False, cancel_futures=True)


class _Stopped(Exception):
    """The document process is stopped by a signal (SIGSTOP, or a terminal's SIGTSTP)."""


def _state(pid: int) -> str | None:
    """The process's state in /proc/PID/stat (R, S, T, Z...); None if it cannot be read."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal: state T, not t (a debugger's or a profiler's
    stop, as py-spy's while it samples)."""
    return _state(pid) == "T"


def _exited(pid: int) -> bool:
    """Whether the process has exited and is not yet reaped (a zombie)."""
    return _state(pid) in ("Z", "X")


@dataclass(frozen=True)
class _Child:
    pool: ProcessPoolExecutor  # of one worker process
    pid: int  # that process's


def _start_child(memory_bytes: int, niceness: int) -> None:
    """Name the document process, so that ``ps``, ``top`` and the tests tell it from the engine
    processes (both are started by multiprocessing's spawn, with the same command line), lower its
    priority by ``niceness`` and cap its heap. Linux only.

    RLIMIT_DATA, not RLIMIT_AS: it counts what allocations take (the heap, anonymous mappings; Linux
    4.7 and later), not the address space that onnxruntime's libraries and thread stacks reserve.
    """
    with contextlib.suppress(OSError):
        Path("/proc/self/comm").write_text(DOCUMENT_PROCESS_NAME)
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    soft = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
    os.nice(niceness)


def _within_memory(function: Callable[..., T], *args: object) -> T | _OutOfMemory:
    """``function(*args)``, or _OutOfMemory if it ran out of the process's memory limit."""
    try:
        return function(*args)
    except Exception as e:
        if not _exhausted(e):
            raise
    # Past the handler, the traceback, and the parsed document its frames hold, are freed.
    release_memory()
    return _OutOfMemory()


def _exhausted(error: BaseException | None) -> bool:
    """Whether ``error`` is a MemoryError or was raised while one was handled: zipfile's cleanup
    turns it into a ValueError, a reader's own error may wrap it."""
    while error is not None:
        if isinstance(error, MemoryError):
            return True
        error = error.__cause__ or error.__context__
    return False


async def translate_document(runtime: Runtime, documents: DocumentProcess, job: FileJob) -> tuple[bytes, ReadDocument]:
    """The translated file, and the document it was read as; every check first, as for texts."""
    caller = runtime.access.check(job.api_key)
    limit = runtime.settings.max_file_bytes
    if len(job.data) > limit:
        raise PayloadTooLarge(f"the file is {len(job.data)} bytes; the limit is {limit} (MT_MAX_FILE_BYTES)")
    owner = job.api_key if runtime.settings.keys_required else None
    document = await documents.read(job.data, job.filename, owner=owner)
    _check_document_chars(document.chars, runtime.settings.max_document_chars)
    _check_texts(document.texts, runtime.settings.max_chars)
    source = _source_language(runtime, document, job.source_lang)
    options = TranslationOptions(format=document.format)
    translations: list[str] = []
    async with runtime.access.metered(caller, document.chars):  # the whole document's, or none of it
        for chunk in chunks(document.texts, max_texts=runtime.settings.max_texts, max_chars=runtime.settings.max_chars):
            request = TranslationJob(
                chunk, job.target_lang, source, options, api_key=job.api_key, glossary=job.glossary
            )
            done = await runtime.translate(request)
            translations += [result.text for result in done.results]
    return await documents.write(job.data, job.filename, translations, owner=owner), document


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


def plain_texts(texts: Sequence[str], format: Format) -> Iterator[str]:
    """What each of a document's texts says, without the tags a format built it with (a Word run's
    ``<span>``): what is identified, and billed."""
    for text in texts:
        yield plain_text(text, format) if format != "text" else text


def _read_in_child(data: bytes, filename: str, max_bytes: int, max_texts: int) -> ReadDocument | _Unreadable:
    try:
        document = read_document(data, filename, max_bytes=max_bytes, max_texts=max_texts)
        chars = sum(map(len, plain_texts(document.texts, document.format)))
    except DocumentError as e:
        if _exhausted(e):
            raise
        return _unreadable(e)
    except MarkupError as e:  # a text the reader built that markup cannot hold (emphasis nested past its limit)
        return _unreadable(MalformedDocument(f"a text of the file: {e}", e.line, e.column))
    read = ReadDocument(document.texts, document.format, document.media_type, chars)
    del document
    release_memory()  # the parsed tree's: the process stays for the next document
    return read


def _unreadable(error: DocumentError) -> _Unreadable:
    if isinstance(error, MalformedDocument):
        return _Unreadable(MalformedDocument, str(error), error.line, error.column)
    if isinstance(error, TooManyTexts):
        return _Unreadable(TooManyTexts, str(error), limit=error.limit)
    return _Unreadable(type(error), str(error))


def _write_in_child(data: bytes, filename: str, max_bytes: int, max_texts: int, translations: list[str]) -> bytes:
    written = read_document(data, filename, max_bytes=max_bytes, max_texts=max_texts).write(translations)
    release_memory()
    return written


def _checked(read: ReadDocument | _Unreadable) -> ReadDocument:
    """The document read, or the service's error for why it could not be."""
    if isinstance(read, ReadDocument):
        return read
    if issubclass(read.kind, UnsupportedFormat):
        raise UnsupportedMediaType(read.message)
    if issubclass(read.kind, TooManyTexts):
        # Reading stopped at the text past the limit: how many more there are is not known.
        raise PayloadTooLarge.over(f"file: {read.message}", "MT_MAX_DOCUMENT_TEXTS", read.limit, read.limit + 1)
    if issubclass(read.kind, DocumentTooLarge):
        raise PayloadTooLarge(f"file: {read.message} (MT_MAX_DOCUMENT_BYTES)")
    if issubclass(read.kind, MalformedDocument):
        raise MalformedMarkup(f"file: {read.message}", details={"line": read.line, "column": read.column})
    raise InvalidRequest(f"file: {read.message}")


def _check_document_chars(chars: int, limit: int) -> None:
    if chars > limit:
        message = f"file: the file has {chars} characters to translate; the limit is {limit}"
        raise PayloadTooLarge.over(message, "MT_MAX_DOCUMENT_CHARS", limit, chars)


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
    for text in plain_texts(document.texts, document.format):
        sample += "\n" + text
        if len(sample) >= IDENTIFICATION_SAMPLE_CHARS:
            break
    _, router = runtime.serving()
    detection = prefer_served(runtime.detect(sample), router.sources())
    return detection.language if detection.language in router.sources() else None
