"""A glossary's name has at most ``MAX_NAME_CHARS`` characters on both APIs that create one: DeepL's
took a name of any length, up to the request's megabyte, and every listing of the key's
glossaries carries every name (1,000 such glossaries: a gigabyte a listing)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from live_server import API_KEYS, ServiceProcess, assert_error

from service.glossaries import MAX_NAME_CHARS


@pytest.fixture(scope="module")
def http(server: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


def deepl_create(http: httpx.Client, name: str) -> httpx.Response:
    fields = {"name": name, "source_lang": "EN", "target_lang": "DE", "entries": "dog\tHund"}
    return http.post("/v2/glossaries", data=fields, headers={"Authorization": f"DeepL-Auth-Key {API_KEYS[0]}"})


def v1_create(http: httpx.Client, name: str) -> httpx.Response:
    body = {"name": name, "source_lang": "en", "target_lang": "de", "entries": [{"source": "dog", "target": "Hund"}]}
    return http.post("/v1/glossaries", json=body, headers={"Authorization": f"Bearer {API_KEYS[0]}"})


def test_deepl_refuses_a_name_over_the_limit(http: httpx.Client) -> None:
    response = deepl_create(http, "n" * (MAX_NAME_CHARS + 1))
    assert response.status_code == 400, response.text
    assert response.json()["message"].startswith("name: ")


def test_v1_refuses_a_name_over_the_same_limit(http: httpx.Client) -> None:
    assert_error(v1_create(http, "n" * (MAX_NAME_CHARS + 1)), 422, "invalid_request")


def test_a_name_of_the_limit_is_kept_whole(http: httpx.Client) -> None:
    name = "n" * MAX_NAME_CHARS
    created = deepl_create(http, name)
    assert created.status_code == 201, created.text
    glossary_id = created.json()["glossary_id"]
    headers = {"Authorization": f"Bearer {API_KEYS[0]}"}
    try:
        assert http.get(f"/v1/glossaries/{glossary_id}", headers=headers).json()["name"] == name
    finally:
        http.delete(f"/v1/glossaries/{glossary_id}", headers=headers)
