"""LibreTranslate compatibility: the real ``libretranslatepy`` client, JSON and form bodies."""

from __future__ import annotations

import urllib.error

import httpx
import pytest
from libretranslatepy import LibreTranslateAPI
from live_server import API_KEYS, ServiceProcess, assert_error

TEXT = "A dog runs in the park."


def native(client: httpx.Client, text: str | list[str], **options: object) -> list[str]:
    body = client.post("/v1/translate", json={"text": text, "target_lang": "de", **options}).json()
    return [t["text"] for t in body["translations"]]


def test_the_libretranslate_client_works_unchanged(server: ServiceProcess, client: httpx.Client) -> None:
    api = LibreTranslateAPI(server.url, api_key=API_KEYS[1])  # sends a form body with api_key
    assert api.translate(TEXT, "en", "de") == native(client, TEXT)[0]
    assert api.translate(TEXT, "auto", "de") == native(client, TEXT)[0]
    languages = api.languages()
    assert {"code": "en", "name": "English", "targets": ["de"]} in languages
    assert {lang["code"] for lang in languages} == {"en", "de"}


def test_the_client_gets_401_without_a_key_and_400_for_other_languages(server: ServiceProcess) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        LibreTranslateAPI(server.url).translate(TEXT, "en", "de")
    assert refused.value.code == 401
    with pytest.raises(urllib.error.HTTPError) as unsupported:
        LibreTranslateAPI(server.url, api_key=API_KEYS[0]).translate(TEXT, "en", "fr")
    assert unsupported.value.code == 400


def test_json_body_with_a_list_alternatives_and_auto_source(anonymous: httpx.Client, client: httpx.Client) -> None:
    texts = [TEXT, "A cat sits."]
    body = {"q": texts, "source": "auto", "target": "de", "alternatives": 2, "format": "text", "api_key": API_KEYS[0]}
    response = anonymous.post("/translate", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["translatedText"] == native(client, texts, beam_size=4, num_hypotheses=3)
    assert [len(a) for a in result["alternatives"]] == [2, 2]
    assert [d["language"] for d in result["detectedLanguage"]] == ["en", "en"]
    assert all(0 < d["confidence"] <= 100 for d in result["detectedLanguage"])


def test_form_body_with_repeated_q_and_bearer_key(client: httpx.Client) -> None:
    response = client.post("/translate", data={"q": [TEXT, "A cat sits."], "source": "en", "target": "de"})
    assert response.status_code == 200, response.text
    assert response.json() == {"translatedText": native(client, [TEXT, "A cat sits."])}


def test_single_text_with_alternatives_has_flat_lists(client: httpx.Client) -> None:
    result = client.post("/translate", json={"q": TEXT, "source": "en", "target": "de", "alternatives": 1}).json()
    assert isinstance(result["translatedText"], str)
    assert len(result["alternatives"]) == 1 and isinstance(result["alternatives"][0], str)
    assert "detectedLanguage" not in result


@pytest.mark.parametrize(
    ("kwargs", "status", "error_type"),
    [
        ({"json": {"q": TEXT, "target": "de", "format": "pdf"}}, 422, "invalid_request"),
        ({"json": {"q": TEXT}}, 422, "invalid_request"),
        ({"json": {"q": 7, "target": "de"}}, 422, "invalid_request"),
        ({"json": {"q": TEXT, "target": "de", "alternatives": -1}}, 422, "invalid_request"),
        ({"json": ["q"]}, 422, "invalid_request"),
        ({"content": b'{"q": "a", "target"', "headers": {"Content-Type": "application/json"}}, 422, "invalid_request"),
        ({"content": b"\xff", "headers": {"Content-Type": "application/json"}}, 422, "invalid_request"),
        ({"content": b"q=a", "headers": {"Content-Type": "text/plain"}}, 422, "invalid_request"),
        ({"content": b"--x\r\nbroken", "headers": {"Content-Type": "multipart/form-data"}}, 422, "invalid_request"),
        ({"files": {"q": ("a.txt", b"file upload")}, "data": {"target": "de"}}, 422, "invalid_request"),
        ({"json": {"q": ["a"] * 17, "target": "de"}}, 413, "payload_too_large"),
        ({"json": {"q": TEXT, "source": "de", "target": "de"}}, 400, "unsupported_language"),
    ],
)
def test_errors(client: httpx.Client, kwargs: dict, status: int, error_type: str) -> None:
    assert_error(client.post("/translate", **kwargs), status, error_type)


def test_wrong_api_key_field_is_refused(anonymous: httpx.Client) -> None:
    response = anonymous.post("/translate", json={"q": TEXT, "target": "de", "api_key": "nope"})
    assert_error(response, 401, "unauthorized")
