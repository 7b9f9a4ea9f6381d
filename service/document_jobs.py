"""DeepL's document jobs: files uploaded to be translated in the background, polled for their status
and downloaded once, as DeepL's ``/v2/document`` keeps them. ``service/routes/deepl.py`` only
translates between DeepL's shapes and this.

A job is a row of the state database's ``document_jobs`` (``service.database``), its upload and its
translation files of the ``FileStore``: on PostgreSQL (MT_DATABASE_URL) every replica polls and
downloads any replica's documents; with the embedded SQLite database they outlive a restart.

- A job is translated by the replica that took its upload, by one of its ``DOCUMENT_WORKERS``
  workers, keys in turn (``service.turns``), not in arrival order: one key's many documents do not
  hold another's. Light files (``documents.is_light``) have workers of their own, as they have a
  document process of their own: a key's large documents in every worker hold no light file.
- The replica holds a lease on each job it runs (its id, and an expiry that ``sweep`` renews every
  third of ``lease_s``). A job whose lease ran out (its replica stopped, or was killed) is taken by
  whichever replica's ``sweep`` claims it first (one UPDATE that only a run-out lease matches) and
  translated again from its upload; where the service has keys it is failed instead (``error``,
  "upload it again"), since no replica keeps the key it was sent with; and after
  ``MAX_TAKEOVERS`` takeovers it is failed: a document that stops every replica that reads it
  stops no more of them. No job stays ``translating`` for ever. A replica that cannot record the
  end of a job (the database away, or its lease lost to another) leaves the job, and its upload,
  to whichever replica holds it next.
- At most ``MAX_PENDING_DOCUMENTS`` wait or translate at once, and, where the service has keys, a
  key at most a ``KEY_SHARE_OF_PENDING``-th of them (429 past either), counted in the database
  under one lock: the bounds hold across replicas. The upload is in the file store from the start,
  within its owner's share of it, and kept as long as its job waits (``sweep``).
- A translation refused as overloaded is tried again, ``DOCUMENT_RETRIES`` times at most, after
  the wait it was told; any other error ends the job in ``error`` with the error's message.
- The translated file goes into the file store (its owner's share of it where the service has
  keys); the job, finished, is forgotten ``expiry_s`` later, or once its result is downloaded.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from service.database import Database, Params, Row, migrated
from service.documents import FileJob, ReadDocument, is_light
from service.errors import InvalidRequest, NotFound, Overloaded, ServiceError, Unavailable
from service.file_store import FileStore, StoredFile
from service.keys import digest
from service.translation import JobGlossary
from service.turns import Turns

log = logging.getLogger(__name__)

DOCUMENT_WORKERS = 2
MAX_PENDING_DOCUMENTS = 64
# Where the service has keys, one key's documents are at most this fraction of those pending.
KEY_SHARE_OF_PENDING = 4
# A document refused as overloaded (the document process's queue full) is tried again this often.
DOCUMENT_RETRIES = 5
# How long a replica's hold on a job lasts unrenewed: how long a stopped replica's jobs wait.
LEASE_S = 30.0
MAX_TAKEOVERS = 2
# Any number, the same in every replica: the lock the pending documents are counted under.
_PENDING_LOCK = 50_053
_PENDING = "status IN ('queued', 'translating')"
_COLUMNS = "id, owner, filename, status, characters, error, result"
_UPLOAD_TYPE = "application/octet-stream"

Translate = Callable[[FileJob], Awaitable[tuple[bytes, ReadDocument]]]
# A job's glossary by owner and id, as a replica that takes the job over reads it again; None if gone.
FindGlossary = Callable[[str, str], JobGlossary | None]
Status = Literal["queued", "translating", "done", "error"]


@dataclass
class Document:
    """A job as the database holds it."""

    document_id: str
    owner: str
    filename: str
    status: Status = "queued"
    characters: int = 0
    error: str | None = None
    result: str | None = None  # its name in the FileStore
    key: str = ""  # the document key DeepL's client sends back with each poll: known at upload only


def replica_id() -> str:
    """This process's name on jobs' leases: its host (the pod's name) and process, made unique."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class DocumentJobs:
    def __init__(
        self,
        db: Database,
        files: FileStore,
        *,
        translate: Translate,
        expiry_s: float,
        find_glossary: FindGlossary = lambda owner, glossary_id: None,
        lease_s: float = LEASE_S,
        started: Callable[[], None] = lambda: None,
        finished: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Jobs in ``db``, translated by ``translate``. ``started`` is called as this replica
        begins to run a job (it may refuse it, raising: a service draining takes none),
        ``finished`` once the job ends, however it ends."""
        self.db, self.files, self.translate = db, files, translate
        self.expiry_s, self.lease_s, self.clock = expiry_s, lease_s, clock
        self.find_glossary = find_glossary
        self.started, self.finished = started, finished
        self.replica = replica_id()
        self.workers = Turns(DOCUMENT_WORKERS)
        self.light_workers = Turns(DOCUMENT_WORKERS)
        self.tasks: set[asyncio.Task[None]] = set()

    async def submit(
        self, job: FileJob, *, owner: str, keys_required: bool, glossary_id: str | None = None
    ) -> Document:
        """Queue ``job`` for ``owner`` (with its glossary's id, for a replica that takes it over);
        Overloaded (429) past the pending documents or, with ``keys_required``, past the owner's
        share of them; InsufficientStorage (507) if the file store has no room for the upload."""
        self.started()
        try:
            upload = await self.files.put(
                job.data, filename=job.filename, media_type=_UPLOAD_TYPE, owner=owner if keys_required else None
            )
            try:
                document = await asyncio.to_thread(self._add, job, owner, keys_required, glossary_id, upload)
            except BaseException:
                await asyncio.shield(self.files.delete(upload))
                raise
        except BaseException:
            self.finished()
            raise
        self._start(document, job, keys_required=keys_required, upload=upload)
        return document

    async def find(self, document_id: str, *, owner: str, document_key: str) -> Document:
        """``owner``'s document of that id and key; NotFound (404) for any other."""
        rows = await self._statement(
            f"SELECT {_COLUMNS} FROM document_jobs WHERE id = :id AND owner = :owner AND key_digest = :key"
            " AND (expires IS NULL OR expires > :now)",
            {"id": document_id, "owner": owner, "key": digest(document_key.strip().upper()), "now": self.clock()},
        )
        if not rows:
            raise NotFound("Document not found.")
        return Document(*rows[0])

    async def take_result(self, document: Document) -> StoredFile:
        """The translated file; the job is forgotten (a result is downloaded once, as from DeepL,
        whichever replica is asked). InvalidRequest if it failed, Unavailable (503) until it is
        done, NotFound if its file has expired or another download took it."""
        if document.status == "error":
            raise InvalidRequest(f"The document could not be translated: {document.error}")
        if document.status != "done" or document.result is None:
            raise Unavailable("Document not ready.")
        taken = await self._statement(
            "DELETE FROM document_jobs WHERE id = :id RETURNING id", {"id": document.document_id}
        )
        stored = await self.files.get(document.result) if taken else None
        if stored is None:
            raise NotFound("Document not found.")
        return stored

    async def sweep(self) -> None:
        """Renew this replica's leases, take the jobs whose lease ran out, forget expired jobs."""
        now = self.clock()
        await self._statement(
            f"UPDATE document_jobs SET lease_expires = :until WHERE holder = :me AND {_PENDING}",
            {"until": now + self.lease_s, "me": self.replica},
        )
        # Uploads wait as long as their jobs do, whatever MT_FILE_EXPIRY_S: taken over, they are read again.
        uploads = await self._statement(f"SELECT upload FROM document_jobs WHERE {_PENDING}", {})
        await self.files.keep([upload for (upload,) in uploads if upload is not None])
        await self._statement("DELETE FROM document_jobs WHERE expires <= :now", {"now": now})
        for taken in await asyncio.to_thread(self._take_over):
            await self._resume(taken)

    async def sweep_periodically(self) -> None:
        """``sweep`` every third of the lease, until cancelled; a database away is tried again at
        the next (said once as it goes away, and once as it comes back)."""
        unswept = False
        while True:
            try:
                await self.sweep()
            except ServiceError as e:
                if not unswept:
                    log.warning("document jobs cannot be swept (leases renewed, jobs taken over): %s", e.message)
                unswept = True
            except Exception as e:  # a bug: logged, and the leases still renewed at the next sweep
                log.error("document jobs' sweep failed", exc_info=e)
            else:
                if unswept:
                    log.warning("document jobs are swept again")
                unswept = False
            await asyncio.sleep(self.lease_s / 3)

    async def _statement(self, sql: str, params: Params) -> list[Row]:
        return await asyncio.to_thread(lambda: migrated(self.db).statement(sql, params))

    # -- this replica's jobs ----------------------------------------------------------------------

    def _add(self, job: FileJob, owner: str, keyed: bool, glossary_id: str | None, upload: str) -> Document:
        key = secrets.token_hex(32).upper()
        document = Document(secrets.token_hex(16).upper(), owner, job.filename, key=key)
        with migrated(self.db).transaction() as tx:
            tx.lock(_PENDING_LOCK)  # replicas taking uploads at once must not all see the last room
            [(pending, owned)] = tx.execute(
                f"SELECT COUNT(*), COALESCE(SUM(CASE WHEN owner = :owner THEN 1 END), 0) FROM document_jobs"
                f" WHERE {_PENDING}",
                {"owner": owner},
            )
            _check_pending(pending, owned if keyed else 0)
            tx.execute(
                "INSERT INTO document_jobs (id, key_digest, owner, keyed, filename, target_lang, source_lang,"
                " glossary_id, upload, status, holder, lease_expires) VALUES (:id, :key, :owner, :keyed,"
                " :filename, :target, :source, :glossary, :upload, 'queued', :me, :until)",
                {
                    "id": document.document_id,
                    "key": digest(key),
                    "owner": owner,
                    "keyed": int(keyed),
                    "filename": job.filename,
                    "target": job.target_lang,
                    "source": job.source_lang,
                    "glossary": glossary_id,
                    "upload": upload,
                    "me": self.replica,
                    "until": self.clock() + self.lease_s,
                },
            )
        return document

    def _start(self, document: Document, job: FileJob, *, keys_required: bool, upload: str) -> None:
        task = asyncio.create_task(self._translate(document, job, keys_required, upload))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _translate(self, document: Document, job: FileJob, keys_required: bool, upload: str) -> None:
        result: str | None = None
        ended = False
        try:
            workers = self.light_workers if is_light(job.data, job.filename) else self.workers
            async with workers.turn(document.owner):
                await self._update(document, "status = 'translating'")
                data, read = await _retried(self.translate, job)
                owner = document.owner if keys_required else None
                result = await self.files.put(data, filename=job.filename, media_type=read.media_type, owner=owner)
                ended = await self._end(document, result=result, characters=read.chars)
        except ServiceError as e:
            ended = await self._end(document, error=e.message)
        except Exception as e:
            log.error("document translation failed", exc_info=e)
            ended = await self._end(document, error="internal server error")
        finally:
            # Not ended here, the job is another replica's (or will be, once its lease runs out): its
            # upload is kept for it, and its translation is the one kept.
            await self._delete(upload if ended else result)
            self.finished()

    async def _update(self, document: Document, assignments: str, **params: Any) -> bool:
        """Set ``assignments`` on the job while this replica holds it; whether it still did."""
        rows = await self._statement(
            f"UPDATE document_jobs SET {assignments} WHERE id = :id AND holder = :me RETURNING id",
            {"id": document.document_id, "me": self.replica, **params},
        )
        return bool(rows)

    async def _end(
        self, document: Document, *, result: str | None = None, characters: int = 0, error: str | None = None
    ) -> bool:
        """The job done with ``result``, or failed with ``error``; False if another replica holds it."""
        try:
            return await self._update(
                document,
                "status = :status, result = :result, characters = :characters, error = :error, expires = :expires,"
                " upload = NULL, holder = NULL",
                status="error" if error is not None else "done",
                result=result,
                characters=characters,
                error=error,
                expires=self.clock() + self.expiry_s,
            )
        except ServiceError as e:  # the database away: the lease runs out and another replica ends it
            log.warning("document %s could not be ended: %s", document.document_id, e.message)
            return False

    async def _delete(self, name: str | None) -> None:
        """Delete a file this job is done with; one the database cannot delete now is left to expire."""
        try:
            if name is not None:
                await self.files.delete(name)
        except ServiceError as e:
            log.warning("a document's file could not be deleted: %s", e.message)

    # -- jobs of stopped replicas -----------------------------------------------------------------

    def _take_over(self) -> list[Row]:
        """Claim the jobs whose lease ran out: each UPDATE matches only while the lease is out, so
        one replica alone claims a job, whichever sweeps first (PostgreSQL re-checks the condition
        on the row a concurrent claim changed)."""
        now = self.clock()
        candidates = migrated(self.db).statement(
            f"SELECT id FROM document_jobs WHERE {_PENDING} AND lease_expires < :now LIMIT :n",
            {"now": now, "n": MAX_PENDING_DOCUMENTS},
        )
        taken: list[Row] = []
        for (document_id,) in candidates:
            taken += migrated(self.db).statement(
                "UPDATE document_jobs SET holder = :me, lease_expires = :until, takeovers = takeovers + 1,"
                f" status = 'queued' WHERE id = :id AND {_PENDING} AND lease_expires < :now"
                f" RETURNING {_COLUMNS}, keyed, target_lang, source_lang, glossary_id, upload, takeovers",
                {"me": self.replica, "until": now + self.lease_s, "id": document_id, "now": now},
            )
        return taken

    async def _resume(self, row: Row) -> None:
        """Translate a job taken over from its upload, or fail it where that cannot be done."""
        *columns, keyed, target, source, glossary_id, upload, takeovers = row
        document = Document(*columns)
        log.warning("document %s taken over from a replica that stopped (%d)", document.document_id, takeovers)
        try:
            self.started()
        except ServiceError:  # draining: the lease is given up at once, for a replica that is not
            await self._update(document, "holder = NULL, lease_expires = 0")
            return
        job = None
        if takeovers > MAX_TAKEOVERS:
            why = f"the replicas translating it stopped {takeovers} times: it is not tried again"
        elif keyed:
            why = "the replica translating it stopped before it was done: upload it again"
        else:
            why = "the replica translating it stopped, and its upload or glossary is gone: upload it again"
            job = await self._job_again(document, target, source, glossary_id, upload)
        if job is None:
            await self._end(document, error=why)
            await self._delete(upload)
            self.finished()
        else:
            self._start(document, job, keys_required=False, upload=upload)

    async def _job_again(
        self, document: Document, target: str, source: str | None, glossary_id: str | None, upload: str
    ) -> FileJob | None:
        """The job of a document taken over, from its upload and glossary; None if either is gone."""
        stored = await self.files.get(upload)
        glossary = await asyncio.to_thread(self.find_glossary, document.owner, glossary_id) if glossary_id else None
        if stored is None or (glossary_id is not None and glossary is None):
            return None
        return FileJob(stored.data, document.filename, target, source, glossary=glossary)


def _check_pending(pending: int, owned: int) -> None:
    if pending >= MAX_PENDING_DOCUMENTS:
        message = f"{MAX_PENDING_DOCUMENTS} documents are waiting to be translated: try again later"
        raise Overloaded(message, retry_after_s=5)
    share = MAX_PENDING_DOCUMENTS // KEY_SHARE_OF_PENDING
    if owned >= share:
        message = f"{share} of this key's documents are waiting to be translated, a key's share: try again later"
        raise Overloaded(message, retry_after_s=5)


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
