"""JSON bodies that Python's parser takes but no step after it can use, on the DeepL and
LibreTranslate routes (which parse JSON as Flask and DeepL do, not with /v1's pydantic): lone
surrogates anywhere in the body, and integers of thousands of digits. Each was a 500 (the
response or an error message could not encode the surrogate; the integer's conversion raised)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from live_server import API_KEYS, ServiceProcess

SURROGATE = b"\\ud800"  # as JSON escapes it: a code point that is no Unicode character
HUGE_INTEGER = b"9" * 5000  # past Python's 4,300-digit limit for converting a string to an int
KEY = API_KEYS[0].encode()


@pytest.fixture(scope="module")
def http(server: ServiceProcess) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"DeepL-Auth-Key {API_KEYS[0]}", "Content-Type": "application/json"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=60) as client:
        yield client


@pytest.mark.parametrize(
    "body",
    [
        b'{"text": ["A dog ' + SURROGATE + b'"], "target_lang": "DE"}',
        b'{"text": ["A dog."], "target_lang": "DE", "context": "' + SURROGATE + b'"}',
        b'{"text": ["A dog."], "target_lang": "DE", "' + SURROGATE + b'": 1}',
        b'{"text": ["A dog."], "target_lang": "DE", "split_sentences": ' + HUGE_INTEGER + b"}",
    ],
)
def test_deepl_refuses_json_no_step_can_use(http: httpx.Client, body: bytes) -> None:
    response = http.post("/v2/translate", content=body)
    assert response.status_code == 400, response.text
    assert response.json()["message"].startswith("malformed JSON: ")


def test_deepl_refuses_a_glossary_entry_with_a_lone_surrogate(http: httpx.Client) -> None:
    body = b'{"name": "g", "source_lang": "EN", "target_lang": "DE", "entries": "dog' + SURROGATE + b'\\tHund"}'
    response = http.post("/v2/glossaries", content=body)
    assert response.status_code == 400, response.text
    assert "lone surrogate" in response.json()["message"]


@pytest.mark.parametrize(
    "body",
    [
        b'{"q": "A dog.", "source": "en", "target": "de", "format": "' + SURROGATE + b'", "api_key": "' + KEY + b'"}',
        b'{"q": "A dog.", "source": "en", "target": "de", "api_key": "' + SURROGATE + b'"}',
        b'{"q": "A dog.", "source": "en", "target": "de", "alternatives": ' + HUGE_INTEGER + b"}",
    ],
)
def test_libretranslate_refuses_json_no_step_can_use(http: httpx.Client, body: bytes) -> None:
    response = http.post("/translate", content=body)
    assert response.status_code == 400, response.text
    assert response.json() == {"error": "Invalid JSON format"}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v2/translate", '{"text": ["A dog."], "target_lang": "DE"}'),
        ("/translate", '{"q": "A dog.", "source": "en", "target": "de", "api_key": "' + API_KEYS[0] + '"}'),
    ],
)
def test_surrogate_pairs_and_utf16_bodies_are_still_read(http: httpx.Client, path: str, body: str) -> None:
    # What the check must not refuse: a character outside the BMP escaped as a surrogate pair, and
    # a body in UTF-16, which Python's parser (and so Flask's and DeepL's) detects.
    paired = body.replace("A dog.", "A dog \\ud83d\\udc15.")
    assert http.post(path, content=paired.encode()).status_code == 200
    assert http.post(path, content=body.encode("utf-16")).status_code == 200
