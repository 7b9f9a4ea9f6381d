"""LibreTranslate's own API test suite (``libretranslate/tests/test_api/`` of LibreTranslate/LibreTranslate),
every case of it, against a live service: its Flask test client is an httpx client here, and its
target language "es" is "de", which the test models translate into. Its app loads "en,es" and asks
for no API key: so does the server of these tests."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from live_server import ServiceProcess, StartService

TARGET = "de"  # LibreTranslate's suite: "es"


@pytest.fixture(scope="module")
def libretranslate_server(start_service: StartService) -> ServiceProcess:
    return start_service(max_wait_ms=2)


@pytest.fixture(scope="module")
def client(libretranslate_server: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=libretranslate_server.url, timeout=60) as c:
        yield c


# test_api_detect_language.py


def test_api_detect_language(client: httpx.Client) -> None:
    response = client.post("/detect", data={"q": "Hello"})
    response_json = response.json()

    assert "confidence" in response_json[0] and "language" in response_json[0]
    assert len(response_json) >= 1
    assert response.status_code == 200


def test_api_detect_language_must_fail_without_parameters(client: httpx.Client) -> None:
    response = client.post("/detect")
    response_json = response.json()

    assert "error" in response_json
    assert response.status_code == 400


def test_api_detect_language_must_fail_bad_request_type(client: httpx.Client) -> None:
    response = client.get("/detect")

    assert response.status_code == 405


# test_api_frontend_settings.py


def test_api_get_frontend_settings(client: httpx.Client) -> None:
    response = client.get("/frontend/settings")

    assert response.status_code == 200


# test_api_get_languages.py


def test_api_get_languages(client: httpx.Client) -> None:
    response = client.get("/languages")
    response_json = response.json()

    assert "code" in response_json[0] and "name" in response_json[0]
    assert len(response_json) >= 1
    assert response.status_code == 200


def test_api_get_languages_must_fail_bad_request_type(client: httpx.Client) -> None:
    response = client.post("/languages")

    assert response.status_code == 405


# test_api_health.py


def test_api_get_health(client: httpx.Client) -> None:
    response = client.get("/health")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_api_health_must_fail_bad_request_type(client: httpx.Client) -> None:
    response = client.post("/health")

    assert response.status_code == 405


# test_api_spec.py


def test_api_get_spec(client: httpx.Client) -> None:
    response = client.get("/spec")

    assert response.status_code == 200


def test_api_get_spec_must_fail_bad_request_type(client: httpx.Client) -> None:
    response = client.post("/spec")

    assert response.status_code == 405


# test_api_translate.py


def test_api_translate(client: httpx.Client) -> None:
    response = client.post("/translate", data={"q": "Hello", "source": "en", "target": TARGET, "format": "text"})
    response_json = response.json()

    assert "translatedText" in response_json
    assert response.status_code == 200


def test_api_translate_batch(client: httpx.Client) -> None:
    response = client.post(
        "/translate", json={"q": ["Hello", "World"], "source": "en", "target": TARGET, "format": "text"}
    )
    response_json = response.json()

    assert "translatedText" in response_json
    assert isinstance(response_json["translatedText"], list)
    assert len(response_json["translatedText"]) == 2
    assert response.status_code == 200


def test_api_translate_unsupported_language(client: httpx.Client) -> None:
    response = client.post("/translate", data={"q": "Hello", "source": "en", "target": "zz", "format": "text"})
    response_json = response.json()

    assert "error" in response_json
    assert response_json["error"] == "zz is not supported"
    assert response.status_code == 400


def test_api_translate_missing_parameter(client: httpx.Client) -> None:
    response = client.post("/translate", data={"source": "en", "target": TARGET, "format": "text"})
    response_json = response.json()

    assert "error" in response_json
    assert response_json["error"] == "Invalid request: missing q parameter"
    assert response.status_code == 400
