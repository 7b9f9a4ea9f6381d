"""DeepL's document jobs (``service.document_jobs``) without HTTP, on both backends of the state
database, with real file stores and translations given by the test: found only with their owner
and key, on any replica, downloaded once, retried when refused as overloaded, failed with the
error's message, bounded in number and per key across replicas; a stopped replica's jobs taken over
by another, translated or failed, never left translating."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from postgres_server import postgres  # noqa: F401 (the fixture)
from state_stores import Replicas, replicas  # noqa: F401 (the fixture)

from service.document_jobs import (
    DOCUMENT_WORKERS,
    KEY_SHARE_OF_PENDING,
    MAX_PENDING_DOCUMENTS,
    MAX_TAKEOVERS,
    Document,
    DocumentJobs,
)
from service.documents import LIGHT_FILE_BYTES, FileJob, ReadDocument, is_light
from service.errors import InvalidRequest, NotFound, Overloaded, PayloadTooLarge, Unavailable

T = TypeVar("T")
JOB = FileJob(b"A dog runs.", "note.txt", "de", "en")
READ = ReadDocument(["A dog runs."], "txt", "text/plain", 11)  # type: ignore[arg-type]
LEASE_S = 30.0


async def translated(job: FileJob) -> tuple[bytes, ReadDocument]:
    return b"Ein Hund rennt.", READ


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def replica(replicas: Replicas, clock: Callable[[], float] = time.time, **kwargs: Any) -> DocumentJobs:  # noqa: F811
    """The document jobs of one more replica on the test's database (``translated`` unless told)."""
    settings = {"translate": translated, "expiry_s": 60.0, "lease_s": LEASE_S, "clock": clock, **kwargs}
    return DocumentJobs(replicas.database(), replicas.files(clock=clock), **settings)


def run(replicas: Replicas, scenario: Callable[[DocumentJobs], Awaitable[T]]) -> T:  # noqa: F811
    async def main() -> T:
        return await scenario(replica(replicas))

    return asyncio.run(main())


async def settled(*jobs: DocumentJobs) -> None:
    for each in jobs:
        await asyncio.gather(*each.tasks)


async def status(jobs: DocumentJobs, document: Document) -> str:
    return (await jobs.find(document.document_id, owner=document.owner, document_key=document.key)).status


def test_a_document_is_found_only_with_its_owner_and_key_on_any_replica_and_downloaded_once(
    replicas: Replicas,  # noqa: F811
) -> None:
    async def scenario(jobs: DocumentJobs) -> None:
        other = replica(replicas)
        finished: list[str] = []
        jobs.finished = lambda: finished.append("x")
        go = asyncio.Event()

        async def when_told(job: FileJob) -> tuple[bytes, ReadDocument]:
            await go.wait()
            return await translated(job)

        jobs.translate = when_told
        document = await jobs.submit(JOB, owner="a", keys_required=True)
        assert document.status == "queued"
        with pytest.raises(Unavailable, match="not ready"):
            await other.take_result(await other.find(document.document_id, owner="a", document_key=document.key))
        go.set()
        await settled(jobs)
        found = await other.find(document.document_id, owner="a", document_key=f" {document.key.lower()} ")
        assert (found.status, found.characters, finished) == ("done", 11, ["x"])
        for owner, key in [("b", document.key), ("a", "0" * 64), ("a", "")]:
            with pytest.raises(NotFound):
                await other.find(document.document_id, owner=owner, document_key=key)
        stored = await other.take_result(found)
        assert stored.data == b"Ein Hund rennt." and stored.name == found.result
        with pytest.raises(NotFound):
            await jobs.find(document.document_id, owner="a", document_key=document.key)
        with pytest.raises(NotFound):  # the same poll's answer, downloaded at once through two replicas
            await jobs.take_result(found)
        assert await jobs.files.owned() == stored.disk_bytes, "the upload is gone, the result until downloaded"

    run(replicas, scenario)


def test_a_document_refused_as_overloaded_is_tried_again_then_fails_with_the_message(
    replicas: Replicas,  # noqa: F811
) -> None:
    async def scenario(jobs: DocumentJobs) -> tuple[str, Document, int]:
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

        jobs.translate = busy_twice
        retried = await jobs.submit(JOB, owner="", keys_required=False)
        await settled(jobs)
        jobs.translate = always_busy
        gave_up = await jobs.submit(JOB, owner="", keys_required=False)
        await settled(jobs)
        jobs.translate = too_large
        refused = await jobs.submit(JOB, owner="", keys_required=False)
        await settled(jobs)
        gave_up = await jobs.find(gave_up.document_id, owner="", document_key=gave_up.key)
        assert (gave_up.status, gave_up.error) == ("error", "the document process is busy")
        refused = await jobs.find(refused.document_id, owner="", document_key=refused.key)
        return await status(jobs, retried), refused, calls

    retried, refused, calls = run(replicas, scenario)
    assert retried == "done" and calls == 3
    assert (refused.status, refused.error) == ("error", "the file is too large")


def test_a_failed_document_says_why_when_its_result_is_asked_for(replicas: Replicas) -> None:  # noqa: F811
    async def failing(job: FileJob) -> tuple[bytes, ReadDocument]:
        raise RuntimeError("a bug")

    async def scenario(jobs: DocumentJobs) -> None:
        jobs.translate = failing
        document = await jobs.submit(JOB, owner="", keys_required=False)
        await settled(jobs)
        with pytest.raises(InvalidRequest, match="could not be translated: internal server error"):
            await jobs.take_result(await jobs.find(document.document_id, owner="", document_key=document.key))

    run(replicas, scenario)


@pytest.mark.parametrize("keys_required", [True, False])
def test_pending_documents_are_bounded_in_all_and_per_key_across_replicas(
    replicas: Replicas,  # noqa: F811
    keys_required: bool,
) -> None:
    async def scenario(jobs: DocumentJobs) -> None:
        never = asyncio.Event()

        async def waiting(job: FileJob) -> tuple[bytes, ReadDocument]:
            await never.wait()
            return await translated(job)

        other = replica(replicas, translate=waiting)
        jobs.translate = waiting
        both = [jobs, other]
        share = MAX_PENDING_DOCUMENTS // KEY_SHARE_OF_PENDING
        for i in range(share):
            await both[i % 2].submit(JOB, owner="a", keys_required=keys_required)
        if keys_required:
            with pytest.raises(Overloaded, match="a key's share"):
                await other.submit(JOB, owner="a", keys_required=True)
        for i in range(MAX_PENDING_DOCUMENTS - share):
            await both[i % 2].submit(JOB, owner="b" if keys_required else "a", keys_required=False)
        with pytest.raises(Overloaded, match=f"{MAX_PENDING_DOCUMENTS} documents are waiting"):
            await jobs.submit(JOB, owner="c", keys_required=keys_required)
        never.set()
        await settled(jobs, other)
        await other.submit(JOB, owner="c", keys_required=keys_required)  # room again once they are done
        await settled(other)

    run(replicas, scenario)


def test_a_light_file_is_not_held_by_a_keys_large_documents_in_every_worker(replicas: Replicas) -> None:  # noqa: F811
    large = FileJob(b"A dog runs.\n" * (LIGHT_FILE_BYTES // 12 + 1), "large.txt", "de", "en")

    async def scenario(jobs: DocumentJobs) -> tuple[list[str], str]:
        never = asyncio.Event()

        async def held_if_large(job: FileJob) -> tuple[bytes, ReadDocument]:
            if not is_light(job.data, job.filename):
                await never.wait()
            return await translated(job)

        jobs.translate = held_if_large
        held = [await jobs.submit(large, owner="a", keys_required=True) for _ in range(DOCUMENT_WORKERS + 1)]
        light = await jobs.submit(JOB, owner="b", keys_required=True)
        for _ in range(100):  # a few turns of the event loop: the light file is never held
            if await status(jobs, light) == "done":
                break
            await asyncio.sleep(0.01)
        statuses = [await status(jobs, d) for d in held], await status(jobs, light)
        never.set()
        await settled(jobs)
        return statuses

    held, light = run(replicas, scenario)
    assert held == ["translating"] * DOCUMENT_WORKERS + ["queued"]
    assert light == "done"


def test_a_stopped_replicas_job_is_taken_over_once_its_lease_runs_out_and_translated(
    replicas: Replicas,  # noqa: F811
) -> None:
    """The first replica never finishes (as if stopped): while it renews its lease the job is its
    own; once the lease runs out the second claims it, translates it from its upload, and the
    first's late result is not kept."""
    clock = Clock()

    async def scenario() -> None:
        stuck = asyncio.Event()

        async def stopped(job: FileJob) -> tuple[bytes, ReadDocument]:
            await stuck.wait()
            return b"late", READ

        first, second, third = (
            replica(replicas, clock, translate=stopped),
            replica(replicas, clock),
            replica(replicas, clock),
        )
        taken: list[str] = []
        second.started = third.started = lambda: taken.append("started")
        document = await first.submit(JOB, owner="", keys_required=False)
        await asyncio.sleep(0)
        clock.now += LEASE_S * 0.9
        await first.sweep()  # renewed
        clock.now += LEASE_S * 0.9
        await second.sweep()
        assert (await status(second, document), taken) == ("translating", [])
        clock.now += LEASE_S * 1.1
        await asyncio.gather(second.sweep(), third.sweep())  # one claim wins
        await settled(second, third)
        assert (await status(second, document), taken) == ("done", ["started"])
        stuck.set()
        await settled(first)
        found = await first.find(document.document_id, owner="", document_key=document.key)
        stored = await first.take_result(found)
        assert stored.data == b"Ein Hund rennt."
        assert await first.files.owned() == stored.disk_bytes, "neither the upload nor the late result is kept"

    asyncio.run(scenario())


@pytest.mark.parametrize("why", ["keyed", "stopped too often"])
def test_a_job_taken_over_that_cannot_be_translated_again_fails_with_the_reason(
    replicas: Replicas,  # noqa: F811
    why: str,
) -> None:
    """No replica keeps the key a document was sent with; and a document that stopped every replica
    that read it is not tried again: either ends in error, not translating."""
    clock = Clock()

    async def scenario() -> Document:
        stuck = asyncio.Event()

        async def stopped(job: FileJob) -> tuple[bytes, ReadDocument]:
            await stuck.wait()
            return await translated(job)

        stopping = [replica(replicas, clock, translate=stopped) for _ in range(MAX_TAKEOVERS + 1)]
        document = await stopping[0].submit(JOB, owner="a", keys_required=why == "keyed")
        if why != "keyed":
            for taker in stopping[1:]:  # each takes it over, then stops too
                clock.now += LEASE_S + 1
                await taker.sweep()
        clock.now += LEASE_S + 1
        last = replica(replicas, clock)
        await last.sweep()
        await settled(last)
        found = await last.find(document.document_id, owner="a", document_key=document.key)
        stuck.set()
        await settled(*stopping)
        return found

    found = asyncio.run(scenario())
    assert found.status == "error"
    assert ("upload it again" if why == "keyed" else f"stopped {MAX_TAKEOVERS + 1} times") in str(found.error)
