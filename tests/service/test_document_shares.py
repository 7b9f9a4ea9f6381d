"""Every key its share of the documents waiting to be translated (DeepL's /v2/document): one key's
64 pending uploads held every other key's off (429) for as long as they took to translate."""

from __future__ import annotations

import httpx
from live_server import ServiceProcess, StartService

from service.document_jobs import KEY_SHARE_OF_PENDING, MAX_PENDING_DOCUMENTS

KEYS = ("share-a", "share-b")


def upload(server: ServiceProcess, key: str, n: int) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v2/document",
        files={"file": (f"doc{n}.txt", b"A dog runs in the park.\n")},
        data={"target_lang": "DE"},
        headers={"Authorization": f"DeepL-Auth-Key {key}"},
        timeout=60,
    )


def test_one_key_waits_for_its_share_while_another_uploads(start_service: StartService) -> None:
    """Batches that start only when full (64 texts): the documents stay waiting, deterministically."""
    server = start_service(
        api_keys=",".join(KEYS), max_batch_sentences=64, max_wait_ms=600_000, drain_timeout_s=1, cache_size=0
    )
    share = MAX_PENDING_DOCUMENTS // KEY_SHARE_OF_PENDING
    answers = [upload(server, KEYS[0], n) for n in range(share)]
    assert [a.status_code for a in answers] == [200] * share, answers[-1].text
    refused = upload(server, KEYS[0], share)
    assert refused.status_code == 429 and "a key's share" in refused.json()["message"], refused.text
    assert refused.headers["retry-after"].isdigit()
    assert upload(server, KEYS[1], 0).status_code == 200
