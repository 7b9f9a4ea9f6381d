"""Browsers calling the API from other sites' pages (MT_CORS_ORIGINS), against a real server."""

from __future__ import annotations

import httpx
import pytest
from fastapi.testclient import TestClient
from live_server import ServiceProcess, StartService

from service.app import create_app
from service.settings import Settings

APP = "https://app.example.com"


@pytest.fixture(scope="module")
def cors_server(start_service: StartService) -> ServiceProcess:
    return start_service(cors_origins=f"{APP}, http://localhost:5173")


def preflight(client: httpx.Client | TestClient, origin: str, path: str = "/translate") -> httpx.Response:
    headers = {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    }
    return client.options(path, headers=headers)


def test_a_named_origin_may_call_and_read_the_answers(cors_server: ServiceProcess) -> None:
    with httpx.Client(base_url=cors_server.url, timeout=60) as c:
        for path in ("/translate", "/v1/translate", "/v2/translate"):
            answer = preflight(c, APP, path)
            assert answer.status_code == 200, (path, answer.text)
            assert answer.headers["access-control-allow-origin"] == APP
            assert "POST" in answer.headers["access-control-allow-methods"]
            assert {"authorization", "content-type"} <= set(
                answer.headers["access-control-allow-headers"].lower().split(", ")
            )
        translated = c.post("/translate", json={"q": "a dog", "source": "en", "target": "de"}, headers={"Origin": APP})
        assert translated.status_code == 200 and translated.json()["translatedText"]
        assert translated.headers["access-control-allow-origin"] == APP
        # the page must be able to read why a request failed, too
        refused = c.post("/translate", json={"q": "a dog", "source": "en", "target": "zz"}, headers={"Origin": APP})
        assert refused.status_code == 400 and refused.json()["error"]
        assert refused.headers["access-control-allow-origin"] == APP


def test_other_origins_get_no_permission(cors_server: ServiceProcess) -> None:
    with httpx.Client(base_url=cors_server.url, timeout=60) as c:
        assert preflight(c, "https://evil.example").status_code == 400
        answer = c.post(
            "/translate",
            json={"q": "a dog", "source": "en", "target": "de"},
            headers={"Origin": "https://evil.example"},
        )
        assert answer.status_code == 200  # the browser, not the server, withholds the answer
        assert "access-control-allow-origin" not in answer.headers


def test_by_default_no_page_of_another_site_may_read_the_answers(anonymous: httpx.Client) -> None:
    answer = anonymous.get("/languages", headers={"Origin": APP})
    assert answer.status_code == 200 and "access-control-allow-origin" not in answer.headers
    assert preflight(anonymous, APP).status_code == 405


def test_any_origin_as_libretranslate_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MT_CORS_ORIGINS", "*")
    # The preflight is answered before any route: the app need not have loaded a model.
    with TestClient(create_app(Settings())) as c:
        answer = preflight(c, "https://anywhere.example")
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == "*"


@pytest.mark.parametrize("value", ["app.example.com", "https://app.example.com/path", "ftp://app.example.com"])
def test_a_value_that_is_not_an_origin_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("MT_CORS_ORIGINS", value)
    with pytest.raises(ValueError, match="is not an origin"):
        Settings()
