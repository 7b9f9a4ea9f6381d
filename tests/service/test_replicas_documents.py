"""DeepL documents and /translate_file downloads across replicas: real services on one PostgreSQL
database, as replicas behind a load balancer that sends each request anywhere. A document uploaded
on one is polled and downloaded on another (DeepL's own client); a download link made on one works
on another; a replica stopped mid-job (SIGSTOP, as a frozen or cut-off pod) loses the job to
another once its lease runs out, and the job ends done, never translating for ever."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import deepl
import httpx
import pytest
from live_server import ServiceProcess, StartService
from postgres_server import PostgresServer, fresh_database, postgres  # noqa: F401 (the fixture)

TEXT = b"A dog runs in the park.\nThe cat sleeps.\n"
LEASE_S = 1


@pytest.fixture(scope="module")
def database(postgres: PostgresServer) -> str:  # noqa: F811
    return fresh_database(postgres)


@pytest.fixture(scope="module")
def replicas(start_service: StartService, database: str) -> tuple[ServiceProcess, ServiceProcess]:
    settings = {"database_url": database, "max_wait_ms": 2, "document_lease_s": LEASE_S}
    return start_service(**settings), start_service(**settings)


def test_a_document_uploaded_on_one_replica_is_polled_and_downloaded_on_the_other(
    replicas: tuple[ServiceProcess, ServiceProcess], tmp_path: Path
) -> None:
    on_a = deepl.Translator("any", server_url=replicas[0].url)
    on_b = deepl.Translator("any", server_url=replicas[1].url)
    (tmp_path / "in.txt").write_bytes(TEXT)
    with (tmp_path / "in.txt").open("rb") as upload:
        handle = on_a.translate_document_upload(upload, target_lang="DE", source_lang="EN", filename="in.txt")
    status = on_b.translate_document_wait_until_done(handle)
    assert status.ok and status.billed_characters == len(TEXT.decode().replace("\n", "")), status
    with (tmp_path / "out.txt").open("wb") as out:
        on_b.translate_document_download(handle, out)
    translated = (tmp_path / "out.txt").read_text()
    assert translated.count("\n") == 2 and translated != TEXT.decode()
    # Downloaded once, whichever replica is asked.
    with pytest.raises(deepl.DeepLException), (tmp_path / "again.txt").open("wb") as out:
        on_a.translate_document_download(handle, out)


def test_a_download_link_made_on_one_replica_works_on_the_other(
    replicas: tuple[ServiceProcess, ServiceProcess],
) -> None:
    made = httpx.post(
        f"{replicas[0].url}/translate_file",
        files={"file": ("note.txt", TEXT)},
        data={"source": "en", "target": "de"},
        timeout=60,
    )
    assert made.status_code == 200, made.text
    link = made.json()["translatedFileUrl"]
    on_b, on_a = httpx.get(f"{replicas[1].url}{link}", timeout=60), httpx.get(f"{replicas[0].url}{link}", timeout=60)
    assert on_b.status_code == 200 and on_b.content == on_a.content and on_b.content.count(b"\n") == 2
    assert "note.txt" in on_b.headers["content-disposition"]


@pytest.fixture
def frozen(start_service: StartService, database: str) -> Iterator[ServiceProcess]:
    """A third replica whose batches wait for 64 texts (its documents stay translating), stopped by
    the test with SIGSTOP and let go at the end, to shut down as any other."""
    server = start_service(
        database_url=database, document_lease_s=LEASE_S, max_batch_sentences=64, max_wait_ms=600_000, drain_timeout_s=1
    )
    try:
        yield server
    finally:
        os.kill(server.process.pid, signal.SIGCONT)


def poll(client: httpx.Client, ids: dict[str, str]) -> str:
    answer = client.post(f"/v2/document/{ids['document_id']}", data={"document_key": ids["document_key"]})
    assert answer.status_code == 200, answer.text
    status: str = answer.json()["status"]
    return status


def test_a_replica_stopped_mid_job_loses_the_job_to_another_that_finishes_it(
    replicas: tuple[ServiceProcess, ServiceProcess], frozen: ServiceProcess
) -> None:
    with (
        httpx.Client(base_url=frozen.url, timeout=60) as on_frozen,
        httpx.Client(base_url=replicas[1].url, timeout=60) as on_b,
    ):
        uploaded = on_frozen.post("/v2/document", files={"file": ("a.txt", TEXT)}, data={"target_lang": "DE"})
        assert uploaded.status_code == 200, uploaded.text
        ids = uploaded.json()
        for _ in range(200):  # a state, polled a bounded number of times
            if poll(on_b, ids) == "translating":
                break
            time.sleep(0.05)
        os.kill(frozen.process.pid, signal.SIGSTOP)
        assert poll(on_b, ids) == "translating"
        statuses = []
        for _ in range(400):
            statuses.append(poll(on_b, ids))
            if statuses[-1] in ("done", "error"):
                break
            time.sleep(0.05)
        assert statuses[-1] == "done", statuses[-5:]
        result = on_b.post(f"/v2/document/{ids['document_id']}/result", data={"document_key": ids["document_key"]})
        assert result.status_code == 200 and result.content.count(b"\n") == 2
