"""DeepL's document jobs: files uploaded to be translated in the background, polled for their status
and downloaded once, as DeepL's ``/v2/document`` keeps them. ``service/routes/deepl.py`` only
translates between DeepL's shapes and this.

- A job is queued at once and translated by one of ``DOCUMENT_WORKERS`` workers, keys in turn
  (``service.turns``), not in arrival order: one key's many documents do not hold another's.
- At most ``MAX_PENDING_DOCUMENTS`` wait or translate at once, and, where the service has keys, a
  key at most a ``KEY_SHARE_OF_PENDING``-th of them (429 past either).
- A translation refused as overloaded is tried again, ``DOCUMENT_RETRIES`` times at most, after
  the wait it was told; any other error ends the job in ``error`` with the error's message.
- The translated file goes into the file store (its owner's share of it where the service has
  keys); the job, finished, is forgotten ``expiry_s`` later, or once its result is downloaded.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from service.documents import FileJob, ReadDocument
from service.errors import InvalidRequest, NotFound, Overloaded, ServiceError, Unavailable
from service.file_store import FileStore, StoredFile
from service.turns import Turns

log = logging.getLogger(__name__)

DOCUMENT_WORKERS = 2
MAX_PENDING_DOCUMENTS = 64
# Where the service has keys, one key's documents are at most this fraction of those pending.
KEY_SHARE_OF_PENDING = 4
# A document refused as overloaded (the document process's queue full) is tried again this often.
DOCUMENT_RETRIES = 5

Translate = Callable[[FileJob], Awaitable[tuple[bytes, ReadDocument]]]


@dataclass
class Document:
    document_id: str
    key: str  # the document key DeepL's client sends back with each poll
    owner: str
    filename: str
    status: Literal["queued", "translating", "done", "error"] = "queued"
    characters: int = 0
    error: str | None = None
    result: str | None = None  # its name in the FileStore
    expires: float | None = None  # on the monotonic clock, once finished


@dataclass
class DocumentJobs:
    files: FileStore
    expiry_s: float
    documents: dict[str, Document] = field(default_factory=dict)
    workers: Turns = field(default_factory=lambda: Turns(DOCUMENT_WORKERS))
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def submit(
        self,
        job: FileJob,
        translate: Translate,
        *,
        owner: str,
        keys_required: bool,
        finished: Callable[[], None] = lambda: None,
    ) -> Document:
        """Queue ``job`` for ``owner``, translated by ``translate``; Overloaded (429) past the
        pending documents or, with ``keys_required``, past the owner's share of them.
        ``finished`` is called once the job ends, however it ends."""
        self._expire()
        self._check_pending(owner, shared=keys_required)
        document = Document(secrets.token_hex(16).upper(), secrets.token_hex(32).upper(), owner, job.filename)
        self.documents[document.document_id] = document
        task = asyncio.create_task(self._translate(document, job, translate, keys_required, finished))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return document

    def find(self, document_id: str, *, owner: str, document_key: str) -> Document:
        """``owner``'s document of that id and key; NotFound (404) for any other."""
        self._expire()
        document = self.documents.get(document_id)
        if (
            document is None
            or document.owner != owner
            or not secrets.compare_digest(document.key.encode(), document_key.strip().upper().encode())
        ):
            raise NotFound("Document not found.")
        return document

    def take_result(self, document: Document) -> tuple[str, StoredFile]:
        """The translated file's name in the file store and the file; the job is forgotten (a
        result is downloaded once, as from DeepL). InvalidRequest if it failed, Unavailable (503)
        until it is done, NotFound if its file has expired."""
        if document.status == "error":
            raise InvalidRequest(f"The document could not be translated: {document.error}")
        if document.status != "done" or document.result is None:
            raise Unavailable("Document not ready.")
        stored = self.files.get(document.result)
        del self.documents[document.document_id]
        if stored is None:
            raise NotFound("Document not found.")
        return document.result, stored

    def _check_pending(self, owner: str, *, shared: bool) -> None:
        pending = [d for d in self.documents.values() if d.status in ("queued", "translating")]
        if len(pending) >= MAX_PENDING_DOCUMENTS:
            message = f"{MAX_PENDING_DOCUMENTS} documents are waiting to be translated: try again later"
            raise Overloaded(message, retry_after_s=5)
        share = MAX_PENDING_DOCUMENTS // KEY_SHARE_OF_PENDING
        if shared and sum(d.owner == owner for d in pending) >= share:
            message = f"{share} of this key's documents are waiting to be translated, a key's share: try again later"
            raise Overloaded(message, retry_after_s=5)

    async def _translate(
        self,
        document: Document,
        job: FileJob,
        translate: Translate,
        keys_required: bool,
        finished: Callable[[], None],
    ) -> None:
        try:
            async with self.workers.turn(document.owner):
                document.status = "translating"
                data, read = await _retried(translate, job)
                owner = document.owner if keys_required else None
                document.result = await self.files.put(
                    data, filename=document.filename, media_type=read.media_type, owner=owner
                )
                document.characters = read.chars
                document.status = "done"
        except ServiceError as e:
            document.status, document.error = "error", e.message
        except Exception as e:
            log.error("document translation failed", exc_info=e)
            document.status, document.error = "error", "internal server error"
        finally:
            document.expires = time.monotonic() + self.expiry_s
            finished()

    def _expire(self) -> None:
        now = time.monotonic()
        for document_id, document in list(self.documents.items()):
            if document.expires is not None and document.expires <= now:
                del self.documents[document_id]


async def _retried(translate: Translate, job: FileJob) -> tuple[bytes, ReadDocument]:
    retries = 0
    while True:
        try:
            return await translate(job)
        except Overloaded as e:
            retries += 1
            if retries > DOCUMENT_RETRIES:
                raise
            await asyncio.sleep(e.retry_after_s)
