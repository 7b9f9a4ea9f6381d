"""Two service instances on one PostgreSQL database, as two replicas behind a load balancer that
sends each request anywhere: what a client stores through one is there through the other (the
instances and keys of ``test_managed_keys``). A glossary made on one is used, changed and deleted on
the other; a DeepL document uploaded on one is polled and downloaded on the other (DeepL's own
client), a /translate_file link made on one works on the other; a replica stopped mid-job (SIGSTOP,
as a frozen or cut-off pod) loses its document to another once its lease runs out, and the
document ends (in error: no replica keeps the key it was sent with), never translating for ever."""

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
from postgres_server import postgres  # noqa: F401 (the fixture)
from test_managed_keys import Keys, clients, database, keys, replicas  # noqa: F401 (the fixtures)

TEXT = "A dog runs in the park."
DOCUMENT = b"A dog runs in the park.\nThe cat sleeps.\n"


def translate(client: httpx.Client, key: str, glossary: str) -> httpx.Response:
    body = {"text": TEXT, "source_lang": "en", "target_lang": "de", "glossary": glossary}
    return client.post("/v1/translate", json=body, headers={"Authorization": f"Bearer {key}"})


def test_a_glossary_made_on_one_replica_is_used_changed_and_deleted_on_the_other(
    clients: tuple[httpx.Client, httpx.Client],  # noqa: F811
    replicas: tuple[ServiceProcess, ServiceProcess],  # noqa: F811
    keys: Keys,  # noqa: F811
) -> None:
    a, b = clients
    secret = keys.create()
    auth = {"Authorization": f"Bearer {secret}"}
    on_a = deepl.Translator(secret, server_url=replicas[0].url)
    on_b = deepl.Translator(secret, server_url=replicas[1].url)
    made = on_a.create_glossary("pets", "EN", "DE", {"dog": "katze"})

    used = translate(b, secret, made.glossary_id)
    assert used.status_code == 200, used.text
    assert "katze" in used.json()["translations"][0]["text"]
    assert (
        on_b.translate_text(TEXT, source_lang="EN", target_lang="DE", glossary=made).text
        == (used.json()["translations"][0]["text"])
    )

    # Changed through one, the other uses the change at its next request.
    assert (
        b.put(
            f"/v1/glossaries/{made.glossary_id}/entries",
            json={"entries": [{"source": "dog", "target": "maus"}]},
            headers=auth,
        ).status_code
        == 200
    )
    assert on_a.get_glossary_entries(made) == {"dog": "maus"}
    assert "maus" in translate(a, secret, made.glossary_id).json()["translations"][0]["text"]

    on_b.delete_glossary(made)
    assert translate(a, secret, made.glossary_id).status_code == 404
    assert made.glossary_id not in [g.glossary_id for g in on_a.list_glossaries()]


def test_a_keys_glossaries_are_its_own_on_every_replica(
    clients: tuple[httpx.Client, httpx.Client],  # noqa: F811
    keys: Keys,  # noqa: F811
) -> None:
    a, b = clients
    mine, theirs = keys.create(), keys.create()
    body = {"name": "mine", "source_lang": "en", "target_lang": "de", "entries": [{"source": "dog", "target": "katze"}]}
    made = a.post("/v1/glossaries", json=body, headers={"Authorization": f"Bearer {mine}"}).json()
    assert translate(b, theirs, made["glossary_id"]).status_code == 404
    assert translate(b, mine, made["glossary_id"]).status_code == 200


@pytest.fixture(scope="module")
def secret(keys: Keys) -> str:  # noqa: F811
    """A managed key for the documents' tests."""
    return keys.create()


def test_a_document_uploaded_on_one_replica_is_polled_and_downloaded_on_the_other(
    replicas: tuple[ServiceProcess, ServiceProcess],  # noqa: F811
    secret: str,
    tmp_path: Path,
) -> None:
    on_a = deepl.Translator(secret, server_url=replicas[0].url)
    on_b = deepl.Translator(secret, server_url=replicas[1].url)
    handle = on_a.translate_document_upload(DOCUMENT, target_lang="DE", source_lang="EN", filename="in.txt")
    for _ in range(200):  # polled by hand: the client's own wait sleeps a second or more between polls
        status = on_b.translate_document_get_status(handle)
        if status.done:
            break
        time.sleep(0.05)
    assert status.ok and status.billed_characters == len(DOCUMENT.decode().replace("\n", "")), status
    with (tmp_path / "out.txt").open("wb") as out:
        on_b.translate_document_download(handle, out)
    translated = (tmp_path / "out.txt").read_text()
    assert translated.count("\n") == 2 and translated != DOCUMENT.decode()
    # Downloaded once, whichever replica is asked.
    with pytest.raises(deepl.DeepLException), (tmp_path / "again.txt").open("wb") as out:
        on_a.translate_document_download(handle, out)


def test_a_download_link_made_on_one_replica_works_on_the_other(
    replicas: tuple[ServiceProcess, ServiceProcess],  # noqa: F811
    secret: str,
) -> None:
    made = httpx.post(
        f"{replicas[0].url}/translate_file",
        files={"file": ("note.txt", DOCUMENT)},
        data={"source": "en", "target": "de", "api_key": secret},
        timeout=60,
    )
    assert made.status_code == 200, made.text
    link = made.json()["translatedFileUrl"]
    on_b, on_a = httpx.get(f"{replicas[1].url}{link}", timeout=60), httpx.get(f"{replicas[0].url}{link}", timeout=60)
    assert on_b.status_code == 200 and on_b.content == on_a.content and on_b.content.count(b"\n") == 2
    assert "note.txt" in on_b.headers["content-disposition"]


@pytest.fixture
def frozen(start_service: StartService, database: str) -> Iterator[ServiceProcess]:  # noqa: F811
    """A third replica whose batches wait for 64 texts (its documents stay translating), stopped by
    the test with SIGSTOP and let go at the end, to shut down as any other."""
    server = start_service(
        database_url=database,
        require_keys="true",
        document_lease_s=1,
        max_batch_sentences=64,
        max_wait_ms=600_000,
        drain_timeout_s=1,
    )
    try:
        yield server
    finally:
        os.kill(server.process.pid, signal.SIGCONT)


def poll(client: httpx.Client, ids: dict[str, str]) -> dict[str, str]:
    answer = client.post(f"/v2/document/{ids['document_id']}", data={"document_key": ids["document_key"]})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_a_replica_stopped_mid_job_loses_the_document_to_another_and_it_ends(
    replicas: tuple[ServiceProcess, ServiceProcess],  # noqa: F811
    frozen: ServiceProcess,
    secret: str,
) -> None:
    auth = {"Authorization": f"DeepL-Auth-Key {secret}"}
    with (
        httpx.Client(base_url=frozen.url, timeout=60, headers=auth) as on_frozen,
        httpx.Client(base_url=replicas[1].url, timeout=60, headers=auth) as on_b,
    ):
        uploaded = on_frozen.post("/v2/document", files={"file": ("a.txt", DOCUMENT)}, data={"target_lang": "DE"})
        assert uploaded.status_code == 200, uploaded.text
        ids = uploaded.json()
        for _ in range(200):  # a state, polled a bounded number of times
            if poll(on_b, ids)["status"] == "translating":
                break
            time.sleep(0.05)
        os.kill(frozen.process.pid, signal.SIGSTOP)
        assert poll(on_b, ids)["status"] == "translating"
        statuses = []
        for _ in range(400):
            statuses.append(poll(on_b, ids))
            if statuses[-1]["status"] not in ("queued", "translating"):
                break
            time.sleep(0.05)
        assert statuses[-1]["status"] == "error", statuses[-3:]
        assert "stopped before it was done: upload it again" in statuses[-1]["error_message"]
