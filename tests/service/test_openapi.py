"""The OpenAPI document says what the service does: schemathesis runs every check against a live
server, and the document follows the service's models and settings. /docs needs no internet."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from live_server import API_KEYS, ServiceProcess, StartService, scrape

from engine.repository import Router, discover
from service.app import create_app
from service.settings import Settings
from tests.conftest import both_ways

HERE = Path(__file__).parent
MAX_CHARS = 400  # small, so that no generated request is slow to translate
MAX_EXAMPLES = 100  # per operation and phase: over 1,000 requests in all
MIN_REQUESTS = 1000


@pytest.fixture(scope="module")
def en_de_repository(tmp_path_factory: pytest.TempPathFactory, tiny_bundle: Path) -> Path:
    """What a fresh install serves, with tiny models: en->de and de->en."""
    root = tmp_path_factory.mktemp("en_de_repository")
    both_ways(tiny_bundle, root)
    return root


@pytest.fixture(scope="module")
def fuzzed(start_service: StartService, en_de_repository: Path) -> ServiceProcess:
    return start_service(
        model_dir="",
        models_dir=en_de_repository,
        api_keys=",".join(API_KEYS),
        max_wait_ms=1,
        max_texts=4,
        max_chars=MAX_CHARS,
    )


def schemathesis(url: str, report: Path) -> subprocess.CompletedProcess[str]:
    """``schemathesis run`` with every check, ours in place of ``positive_data_acceptance``
    (schemathesis_hooks.py says why), the API key, and a fixed seed."""
    command = [sys.executable, "-m", "schemathesis.cli", f"--config-file={HERE / 'schemathesis.toml'}", "run"]
    command += [f"{url}/openapi.json", "--checks=all", "--exclude-checks=positive_data_acceptance"]
    command += [f"--max-examples={MAX_EXAMPLES}", "--seed=1", "--workers=1", "--continue-on-failure"]
    command += [f"--header=Authorization: Bearer {API_KEYS[0]}", "--generation-database=none", "--no-color"]
    command += ["--report=json", f"--report-json-path={report}"]
    hooks = {"SCHEMATHESIS_HOOKS": str(HERE / "schemathesis_hooks.py"), "MT_MAX_CHARS": str(MAX_CHARS)}
    return subprocess.run(command, capture_output=True, text=True, cwd=report.parent, env={**os.environ, **hooks})


def test_schemathesis_finds_nothing(fuzzed: ServiceProcess, tmp_path: Path) -> None:
    with httpx.Client(base_url=fuzzed.url) as client:
        before = scrape(client)
        run = schemathesis(fuzzed.url, tmp_path / "report.json")
        after = scrape(client)
    report = json.loads((tmp_path / "report.json").read_text())
    assert (run.returncode, report["failures"], report["errors"]) == (0, [], []), run.stdout[-20000:]
    assert report["operations"]["tested"] == report["operations"]["total"] >= 10
    # Counted by the service itself: every request schemathesis made, and none answered 5xx.
    answered = {key: value - before.get(key, 0.0) for key, value in after.items() if key[0] == "mt_requests_total"}
    assert sum(answered.values()) >= MIN_REQUESTS
    server_errors = {key: n for key, n in answered.items() if n and dict(key[1])["status"].startswith("5")}
    assert server_errors == {}


def document(repository: Path, **settings: object) -> dict:
    """The OpenAPI document of a service of ``repository`` with ``settings``, once its models are known."""
    app = create_app(Settings(models_dir=repository, **settings))
    app.state.runtime.router = Router(discover(repository))
    return app.openapi()


def test_the_languages_are_filled_in_once_the_repository_is_read(en_de_repository: Path) -> None:
    app = create_app(Settings(models_dir=en_de_repository))
    early = request_schema(app.openapi(), "/v1/translate")["properties"]["target_lang"]
    assert "enum" not in early and early["maxLength"] == 35
    app.state.runtime.router = Router(discover(en_de_repository))
    assert request_schema(app.openapi(), "/v1/translate")["properties"]["target_lang"]["enum"] == ["de", "en"]
    assert app.openapi() is app.openapi()  # built once


def request_schema(doc: dict, path: str, media_type: str = "application/json") -> dict:
    return doc["paths"][path]["post"]["requestBody"]["content"][media_type]["schema"]


def test_the_document_names_the_served_languages_and_pairs(en_de_repository: Path) -> None:
    doc = document(en_de_repository)
    native = request_schema(doc, "/v1/translate")
    [source, _] = native["properties"]["source_lang"]["anyOf"]
    assert source["enum"] == ["auto", "de", "en"]
    assert native["properties"]["target_lang"]["enum"] == ["de", "en"]
    # Only served pairs: German is not translated into German, nor English into English.
    [pairs] = [part["anyOf"] for part in native["allOf"]]
    assert pairs == [
        {"properties": {"target_lang": {"const": "de"}, "source_lang": {"not": {"enum": ["de"]}}}},
        {"properties": {"target_lang": {"const": "en"}, "source_lang": {"not": {"enum": ["en"]}}}},
    ]
    assert native["examples"] == [{"text": "A dog runs on the grass.", "source_lang": "en", "target_lang": "de"}]
    libre = request_schema(doc, "/translate", "application/x-www-form-urlencoded")
    assert libre["properties"]["source"]["enum"] == ["auto", "de", "en"]
    assert libre["examples"] == [{"q": "A dog runs on the grass.", "source": "en", "target": "de"}]
    # LibreTranslate answers a language into itself (unchanged, 200): its schema allows it.
    [libre_pairs] = [part["anyOf"] for part in libre["allOf"]]
    assert libre_pairs == [{"properties": {"target": {"const": "de"}}}, {"properties": {"target": {"const": "en"}}}]


def test_the_document_states_the_limits(en_de_repository: Path) -> None:
    doc = document(en_de_repository, max_texts=7, max_chars=99)
    one, many = request_schema(doc, "/v1/translate")["properties"]["text"]["anyOf"]
    assert one == {"type": "string", "maxLength": 99}
    assert many == {"type": "array", "items": {"type": "string", "maxLength": 99}, "minItems": 1, "maxItems": 7}
    assert request_schema(doc, "/v1/translate")["properties"]["timeout_s"]["anyOf"][0]["minimum"] == 1.0
    # A form cannot send null: the form schema of the same body has no null.
    assert "anyOf" not in request_schema(doc, "/translate", "multipart/form-data")["properties"]["api_key"]
    assert '"x-' not in json.dumps(doc)  # every placeholder is filled in


@pytest.mark.parametrize("keys", ["", "secret"])
def test_security_is_declared_only_when_keys_are_configured(en_de_repository: Path, keys: str) -> None:
    doc = document(en_de_repository, api_keys=keys)
    secured = {
        (path, method)
        for path, operations in doc["paths"].items()
        for method, operation in operations.items()
        if "security" in operation
    }
    answers_401 = {
        (path, method)
        for path, operations in doc["paths"].items()
        for method, operation in operations.items()
        if "401" in operation["responses"]
    }
    if keys:
        translating = {
            "/v1/translate",
            "/v1/translate/stream",
            "/translate",
            "/detect",
            "/v1/detect",
            "/v1/translate_file",
            "/translate_file",
        }
        glossaries = {
            ("/v1/glossaries", "get"),
            ("/v1/glossaries", "post"),
            ("/v1/glossaries/{glossary_id}", "get"),
            ("/v1/glossaries/{glossary_id}", "patch"),
            ("/v1/glossaries/{glossary_id}", "delete"),
            ("/v1/glossaries/{glossary_id}/entries", "put"),
        }
        assert secured == answers_401 == {(path, "post") for path in translating} | glossaries
        assert doc["components"]["securitySchemes"]["APIKey"]["scheme"] == "bearer"
    else:
        assert secured == answers_401 == set()
        assert "securitySchemes" not in doc["components"]


def test_the_stream_is_documented_as_its_events_and_its_errors_as_json(en_de_repository: Path) -> None:
    doc = document(en_de_repository, max_chars=99)
    text = request_schema(doc, "/v1/translate/stream")["properties"]["text"]
    assert (text["type"], text["maxLength"]) == ("string", 99), "one text"
    responses = doc["paths"]["/v1/translate/stream"]["post"]["responses"]
    [stream] = responses.pop("200")["content"].values()
    events = {event["properties"]["event"]["const"]: event for event in stream["itemSchema"]["oneOf"]}
    assert list(events) == ["sentence", "done", "error"]
    data = {name: event["properties"]["data"]["contentSchema"]["properties"] for name, event in events.items()}
    assert {"index", "source", "separator", "text"} <= set(data["sentence"])
    assert {"text", "separator", "sentences"} <= set(data["done"]) and set(data["error"]) == {"error"}
    # FastAPI would file an error's model under the route's own media type, text/event-stream.
    assert {media_type for response in responses.values() for media_type in response["content"]} == {"application/json"}


def test_metrics_are_documented_as_text(en_de_repository: Path) -> None:
    assert set(document(en_de_repository)["paths"]["/metrics"]["get"]["responses"]["200"]["content"]) == {"text/plain"}


def test_docs_load_nothing_from_elsewhere(fuzzed: ServiceProcess) -> None:
    with httpx.Client(base_url=fuzzed.url) as client:
        for page in ("/docs", "/redoc"):
            html = client.get(page).text
            urls = re.findall(r"""(?:src|href|spec-url)=["']([^"']+)["']|url: '([^']+)'""", html)
            urls = [url for pair in urls for url in pair if url]
            assert len(urls) >= 3 and not [url for url in urls if "//" in url], (page, urls)
            for url in urls:
                assert client.get(url).status_code == 200, url
        assert '"validatorUrl": null' in client.get("/docs").text
