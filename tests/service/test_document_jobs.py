"""DeepL's document jobs (``service.document_jobs``) without HTTP: a real file store, translations
given by the test: found only with their owner and key, downloaded once, retried when refused as
overloaded, failed with the error's message, bounded in number and per key."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from service.document_jobs import (
    KEY_SHARE_OF_PENDING,
    MAX_PENDING_DOCUMENTS,
    Document,
    DocumentJobs,
)
from service.documents import FileJob, ReadDocument
from service.errors import InvalidRequest, NotFound, Overloaded, PayloadTooLarge, Unavailable
from service.file_store import FileStore

T = TypeVar("T")
JOB = FileJob(b"A dog runs.", "note.txt", "de", "en")
READ = ReadDocument(["A dog runs."], "txt", "text/plain", 11)  # type: ignore[arg-type]


def run(scenario: Callable[[DocumentJobs], Awaitable[T]]) -> T:
    async def main() -> T:
        return await scenario(DocumentJobs(FileStore(60.0), expiry_s=60.0))

    return asyncio.run(main())


async def settled(jobs: DocumentJobs) -> None:
    await asyncio.gather(*jobs.tasks)


async def translated(job: FileJob) -> tuple[bytes, ReadDocument]:
    return b"Ein Hund rennt.", READ


def test_a_document_is_found_only_with_its_owner_and_key_and_downloaded_once() -> None:
    async def scenario(jobs: DocumentJobs) -> None:
        finished: list[str] = []
        document = jobs.submit(JOB, translated, owner="a", keys_required=True, finished=lambda: finished.append("x"))
        assert document.status == "queued"
        with pytest.raises(Unavailable, match="not ready"):
            jobs.take_result(jobs.find(document.document_id, owner="a", document_key=document.key))
        await settled(jobs)
        assert (document.status, document.characters, finished) == ("done", 11, ["x"])
        for owner, key in [("b", document.key), ("a", "0" * 64), ("a", "")]:
            with pytest.raises(NotFound):
                jobs.find(document.document_id, owner=owner, document_key=key)
        found = jobs.find(document.document_id, owner="a", document_key=f" {document.key.lower()} ")
        name, stored = jobs.take_result(found)
        assert stored.path.read_bytes() == b"Ein Hund rennt." and name == document.result
        with pytest.raises(NotFound):
            jobs.find(document.document_id, owner="a", document_key=document.key)

    run(scenario)


def test_a_document_refused_as_overloaded_is_tried_again_then_fails_with_the_message() -> None:
    async def scenario(jobs: DocumentJobs) -> tuple[Document, Document, int]:
        calls = 0

        async def busy_twice(job: FileJob) -> tuple[bytes, ReadDocument]:
            nonlocal calls
            calls += 1
            if calls <= 2:
                raise Overloaded("the document process is busy", retry_after_s=0)
            return await translated(job)

        async def always_busy(job: FileJob) -> tuple[bytes, ReadDocument]:
            raise Overloaded("the document process is busy", retry_after_s=0)

        async def too_large(job: FileJob) -> tuple[bytes, ReadDocument]:
            raise PayloadTooLarge("the file is too large")

        retried = jobs.submit(JOB, busy_twice, owner="", keys_required=False)
        await settled(jobs)
        gave_up = jobs.submit(JOB, always_busy, owner="", keys_required=False)
        refused = jobs.submit(JOB, too_large, owner="", keys_required=False)
        await settled(jobs)
        assert (gave_up.status, gave_up.error) == ("error", "the document process is busy")
        return retried, refused, calls

    retried, refused, calls = run(scenario)
    assert retried.status == "done" and calls == 3
    assert (refused.status, refused.error) == ("error", "the file is too large")


def test_a_failed_document_says_why_when_its_result_is_asked_for() -> None:
    async def failing(job: FileJob) -> tuple[bytes, ReadDocument]:
        raise RuntimeError("a bug")

    async def scenario(jobs: DocumentJobs) -> None:
        document = jobs.submit(JOB, failing, owner="", keys_required=False)
        await settled(jobs)
        with pytest.raises(InvalidRequest, match="could not be translated: internal server error"):
            jobs.take_result(document)

    run(scenario)


@pytest.mark.parametrize("keys_required", [True, False])
def test_pending_documents_are_bounded_in_all_and_per_key_where_there_are_keys(keys_required: bool) -> None:
    async def scenario(jobs: DocumentJobs) -> None:
        never = asyncio.Event()

        async def waiting(job: FileJob) -> tuple[bytes, ReadDocument]:
            await never.wait()
            return await translated(job)

        share = MAX_PENDING_DOCUMENTS // KEY_SHARE_OF_PENDING
        for _ in range(share):
            jobs.submit(JOB, waiting, owner="a", keys_required=keys_required)
        if keys_required:
            with pytest.raises(Overloaded, match="a key's share"):
                jobs.submit(JOB, waiting, owner="a", keys_required=True)
        for _ in range(MAX_PENDING_DOCUMENTS - share):
            jobs.submit(JOB, waiting, owner="b" if keys_required else "a", keys_required=False)
        with pytest.raises(Overloaded, match=f"{MAX_PENDING_DOCUMENTS} documents are waiting"):
            jobs.submit(JOB, waiting, owner="c", keys_required=keys_required)
        never.set()
        await settled(jobs)
        jobs.submit(JOB, translated, owner="c", keys_required=keys_required)  # room again once they are done
        await settled(jobs)

    run(scenario)
