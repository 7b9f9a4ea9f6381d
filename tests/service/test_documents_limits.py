"""A document's limits over HTTP against a real server: more texts than MT_MAX_DOCUMENT_TEXTS or
more characters than MT_MAX_DOCUMENT_CHARS is a 413 naming the setting, before any of it is
translated; LibreTranslate's route answers in its shape."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from live_server import ServiceProcess, StartService, assert_error, metric, scrape


@pytest.fixture(scope="module")
def limited(start_service: StartService) -> Iterator[httpx.Client]:
    server: ServiceProcess = start_service(max_document_texts=3, max_document_chars=40)
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def upload(client: httpx.Client, name: str, data: bytes) -> httpx.Response:
    return client.post(
        "/v1/translate_file", files={"file": (name, data)}, data={"source_lang": "en", "target_lang": "de"}
    )


def translated_tokens(client: httpx.Client) -> float:
    return metric(scrape(client), "mt_input_tokens_total", model="mt-en-de")


def test_more_texts_than_allowed_is_a_413_naming_the_setting(limited: httpx.Client) -> None:
    before = translated_tokens(limited)
    error = assert_error(upload(limited, "notes.txt", b"A dog.\n" * 4), 413, "payload_too_large")
    assert error["message"] == (
        "file: the file has more texts to translate (paragraphs, cells, cues or lines) than the limit, 3 "
        "(MT_MAX_DOCUMENT_TEXTS)"
    )
    assert (error["setting"], error["limit"], error["requested"]) == ("MT_MAX_DOCUMENT_TEXTS", 3, 4)
    assert translated_tokens(limited) == before
    assert upload(limited, "notes.txt", b"A dog.\n" * 3).status_code == 200


def test_more_characters_than_allowed_is_a_413_counting_them_without_tags(limited: httpx.Client) -> None:
    """Markdown's emphasis is sent as tags: they are not counted."""
    markdown = b"A *dog* runs in the big park.\n\nA cat sits on it.\n"  # 27 + 17 characters of text
    before = translated_tokens(limited)
    error = assert_error(upload(limited, "notes.md", markdown), 413, "payload_too_large")
    assert error["message"] == "file: the file has 44 characters to translate; the limit is 40 (MT_MAX_DOCUMENT_CHARS)"
    assert (error["setting"], error["limit"], error["requested"]) == ("MT_MAX_DOCUMENT_CHARS", 40, 44)
    assert translated_tokens(limited) == before
    assert upload(limited, "notes.md", b"A *dog* runs in the park.\n\nA cat sits.\n").status_code == 200


def test_libretranslate_answers_a_document_over_its_limit_in_its_shape(limited: httpx.Client) -> None:
    response = limited.post(
        "/translate_file", files={"file": ("notes.txt", b"A dog.\n" * 4)}, data={"source": "en", "target": "de"}
    )
    assert response.status_code == 413
    assert response.json() == {
        "error": "Invalid request: file: the file has more texts to translate (paragraphs, cells, cues or lines) "
        "than the limit, 3 (MT_MAX_DOCUMENT_TEXTS)"
    }
