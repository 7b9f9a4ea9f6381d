"""The document process's memory limit (MT_DOCUMENT_MEMORY_MB) against a real server: a document
that needs more to be read is a 413 naming the setting, not a 500 or a pod killed for memory, and
the process that ran out is replaced by one that reads the next document."""

from __future__ import annotations

import resource
from collections.abc import Iterator

import httpx
import pytest
from live_server import ServiceProcess, StartService, assert_error
from test_app_engine_crash import document_pids

MEMORY_MB = 256  # the least allowed: the process's imports take some 150 MiB of it
# 9.6 MB of real paragraphs, within every other limit but the characters', which is checked after
# reading: reading it takes some 130 MiB more than MEMORY_MB allows.
PARAGRAPH = b"Some *important* text: the committee reviewed the annual report and approved the budget.\n\n"
LARGE = PARAGRAPH * (9_600_000 // len(PARAGRAPH))
HEAVY = PARAGRAPH * (100_000 // len(PARAGRAPH))  # read in the large files' process, as LARGE is


@pytest.fixture(scope="module")
def capped(start_service: StartService) -> ServiceProcess:
    return start_service(document_memory_mb=MEMORY_MB)


@pytest.fixture(scope="module")
def client(capped: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=capped.url, timeout=120) as c:
        yield c


def upload(client: httpx.Client, data: bytes) -> httpx.Response:
    return client.post(
        "/v1/translate_file", files={"file": ("notes.md", data)}, data={"source_lang": "en", "target_lang": "de"}
    )


def test_the_document_processes_allocate_no_more_than_the_setting(capped: ServiceProcess, client: httpx.Client) -> None:
    """Both: the small files' and the large files'."""
    assert upload(client, PARAGRAPH).status_code == 200 and upload(client, HEAVY).status_code == 200
    pids = document_pids(capped.process.pid)
    assert len(pids) == 2
    for pid in pids:
        assert resource.prlimit(pid, resource.RLIMIT_DATA)[0] == MEMORY_MB << 20


def test_a_document_that_needs_more_memory_is_a_413_and_its_process_replaced(
    capped: ServiceProcess, client: httpx.Client
) -> None:
    expected = upload(client, HEAVY)
    assert expected.status_code == 200
    before = set(document_pids(capped.process.pid))
    error = assert_error(upload(client, LARGE), 413, "payload_too_large")
    assert error["message"] == (
        f"file: reading or writing it needs more memory than the document process may use, {MEMORY_MB} MiB "
        "(MT_DOCUMENT_MEMORY_MB)"
    )
    assert (error["setting"], error["limit"]) == ("MT_DOCUMENT_MEMORY_MB", MEMORY_MB)
    again = upload(client, HEAVY)
    assert again.status_code == 200
    assert again.content == expected.content
    replaced = before - set(document_pids(capped.process.pid))
    assert len(replaced) == 1, "the process that ran out, and it alone, is replaced"
