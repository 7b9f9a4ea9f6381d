"""LibreTranslate compatibility: the real ``libretranslatepy`` client and deep-translator's LibreTranslate
backend, JSON, form and query bodies, LibreTranslate's error shape and statuses."""

from __future__ import annotations

import json
import urllib.error

import httpx
import pytest
from deep_translator import LibreTranslator
from deep_translator.exceptions import AuthorizationException, ServerException
from libretranslatepy import LibreTranslateAPI
from live_server import API_KEYS, ServiceProcess, assert_error, assert_libretranslate_error

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


def test_the_client_gets_libretranslates_errors(server: ServiceProcess) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        LibreTranslateAPI(server.url).translate(TEXT, "en", "de")
    assert refused.value.code == 401
    assert json.loads(refused.value.read()) == {"error": "Please contact the server operator to get an API key"}
    with pytest.raises(urllib.error.HTTPError) as wrong_key:
        LibreTranslateAPI(server.url, api_key="nope").translate(TEXT, "en", "de")
    assert (wrong_key.value.code, json.loads(wrong_key.value.read())) == (403, {"error": "Invalid API key"})
    with pytest.raises(urllib.error.HTTPError) as unsupported:
        LibreTranslateAPI(server.url, api_key=API_KEYS[0]).translate(TEXT, "en", "fr")
    assert (unsupported.value.code, json.loads(unsupported.value.read())) == (400, {"error": "fr is not supported"})


def test_the_client_detects(server: ServiceProcess) -> None:
    [best, *_] = LibreTranslateAPI(server.url, api_key=API_KEYS[0]).detect(TEXT)
    assert best["language"] == "en" and 0 < best["confidence"] <= 100


def test_deep_translator_works_unchanged(server: ServiceProcess, client: httpx.Client) -> None:
    """deep-translator's LibreTranslate backend sends its fields in the query string, no body."""
    translator = LibreTranslator(source="en", target="de", api_key=API_KEYS[0], custom_url=f"{server.url}/")
    assert translator.translate(TEXT) == native(client, TEXT)[0]
    assert translator.translate_batch([TEXT, "A cat sits."]) == native(client, [TEXT, "A cat sits."])
    assert (
        LibreTranslator(source="auto", target="de", api_key=API_KEYS[0], custom_url=f"{server.url}/").translate(TEXT)
        == native(client, TEXT)[0]
    )


def test_deep_translator_gets_errors(server: ServiceProcess) -> None:
    with pytest.raises(AuthorizationException):  # its exception for a 403
        LibreTranslator(source="en", target="de", api_key="nope", custom_url=f"{server.url}/").translate(TEXT)
    with pytest.raises(ServerException) as unsupported:
        LibreTranslator(source="en", target="fr", api_key=API_KEYS[0], custom_url=f"{server.url}/").translate(TEXT)
    assert str(unsupported.value) == "ERR_BAD_REQUEST"  # its name for a 400


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


# Passed through unchanged (symbols, a URL): the text comes back as the service read it.
UNICODE_TEXT = "🐕 → ½ © https://de.wikipedia.org/wiki/Straße"


def test_a_form_body_with_utf8_sent_as_it_is_reads_as_utf8(client: httpx.Client) -> None:
    """``curl -d 'q=Straße…'`` sends its bytes unescaped: read as UTF-8, as Flask reads them, not
    as Latin-1 (which made 'StraÃ' and a control character of 'ß'); a %-escaped form alike."""
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    raw = client.post("/translate", content=f"q={UNICODE_TEXT}&source=en&target=de".encode(), headers=form)
    assert raw.status_code == 200, raw.text
    assert raw.json() == {"translatedText": UNICODE_TEXT}
    escaped = client.post("/translate", data={"q": UNICODE_TEXT, "source": "en", "target": "de"})
    assert escaped.json() == {"translatedText": UNICODE_TEXT}
    invalid = client.post("/translate", content=b"q=\xff%FE&source=en&target=de", headers=form)
    assert invalid.json() == {"translatedText": "\ufffd\ufffd"}


def test_single_text_with_alternatives_has_flat_lists(client: httpx.Client) -> None:
    result = client.post("/translate", json={"q": TEXT, "source": "en", "target": "de", "alternatives": 1}).json()
    assert isinstance(result["translatedText"], str)
    assert len(result["alternatives"]) == 1 and isinstance(result["alternatives"][0], str)
    assert "detectedLanguage" not in result


PAIR = {"source": "en", "target": "de"}
INVALID = "Invalid request:"
JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("kwargs", "status", "message"),
    [
        # LibreTranslate's own words
        ({"json": {"source": "en", "target": "de"}}, 400, "Invalid request: missing q parameter"),
        ({"json": {"q": None, **PAIR}}, 400, "Invalid request: missing q parameter"),
        ({"json": {"q": [], **PAIR}}, 400, "Invalid request: missing q parameter"),
        ({"data": {"q": TEXT, "target": "de"}}, 400, "Invalid request: missing source parameter"),
        ({"json": {"q": TEXT, "source": "en"}}, 400, "Invalid request: missing target parameter"),
        ({"json": {"q": TEXT, "source": "xx", "target": "zz"}}, 400, "xx is not supported"),
        ({"json": {"q": TEXT, "source": "en", "target": "zz"}}, 400, "zz is not supported"),
        ({"json": {"q": TEXT, "source": "auto", "target": "zz"}}, 400, "zz is not supported"),
        ({"json": {"q": TEXT, "source": "de", "target": "de"}}, 400, "de is not supported"),
        ({"json": {"q": TEXT, **PAIR, "format": "pdf"}}, 400, "pdf format is not supported"),
        (
            {"json": {"q": TEXT, **PAIR, "alternatives": "x"}},
            400,
            "Invalid request: alternatives parameter is not a number",
        ),
        (
            {"json": {"q": TEXT, **PAIR, "alternatives": 16}},
            400,
            "Invalid request: alternatives parameter must be <= 15",
        ),
        ({"json": {"q": ["a"] * 17, **PAIR}}, 400, "Invalid request: request (17) exceeds text limit (16)"),
        ({"json": {"q": "a" * 3001, **PAIR}}, 400, "Invalid request: request (3001) exceeds text limit (3000)"),
        ({"json": ["q"]}, 400, "Invalid JSON format"),
        (
            {"content": b'{"q": "a", "target"', "headers": JSON},
            400,
            "Invalid JSON format",
        ),
        ({"content": b"\xff", "headers": JSON}, 400, "Invalid JSON format"),
        ({"content": b'{"q": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "headers": JSON}, 400, "Invalid JSON format"),
        # the service's words, in LibreTranslate's shape
        ({"json": {"q": 7, **PAIR}}, 400, None),
        ({"json": {"q": TEXT, **PAIR, "alternatives": -1}}, 400, None),
        ({"json": {"q": "<b>A dog</i>", **PAIR, "format": "html"}}, 400, None),
        ({"content": b"q=a", "headers": {"Content-Type": "text/plain"}}, 400, None),
        ({"content": b"--x\r\nbroken", "headers": {"Content-Type": "multipart/form-data"}}, 400, None),
        ({"files": {"q": ("a.txt", b"file upload")}, "data": PAIR}, 400, None),
    ],
)
def test_errors(client: httpx.Client, kwargs: dict, status: int, message: str | None) -> None:
    error = assert_libretranslate_error(client.post("/translate", **kwargs), status, message)
    assert message is not None or error.startswith("Invalid request: ")


def test_the_key_is_checked_first_and_a_wrong_one_refused_with_403(anonymous: httpx.Client) -> None:
    response = anonymous.post("/translate", json={"q": TEXT, **PAIR, "api_key": "nope"})
    assert "WWW-Authenticate" not in response.headers
    assert_libretranslate_error(response, 403, "Invalid API key")
    # Before the body's other fields are looked at, as LibreTranslate's access check is.
    missing = "Please contact the server operator to get an API key"
    assert_libretranslate_error(anonymous.post("/translate", json={"target": "zz"}), 401, missing)
    assert_libretranslate_error(anonymous.post("/detect", data={"q": TEXT, "api_key": "nope"}), 403, "Invalid API key")


def test_detect_errors(client: httpx.Client) -> None:
    assert_libretranslate_error(client.post("/detect"), 400, "Invalid request: missing q parameter")
    assert_libretranslate_error(client.post("/detect", json={"q": ""}), 400, "Invalid request: missing q parameter")
    assert_libretranslate_error(client.post("/detect", json=[]), 400, "Invalid JSON format")


def test_query_fields_are_read_as_libretranslate_reads_them(client: httpx.Client) -> None:
    """Flask's ``request.values``: the query's fields and the form's."""
    response = client.post("/translate", params={"q": TEXT, "source": "en"}, data={"target": "de"})
    assert response.status_code == 200, response.text
    assert response.json() == {"translatedText": native(client, TEXT)[0]}
    assert client.post("/detect", params={"q": TEXT}).json()[0]["language"] == "en"


def test_suggestions_are_refused_as_libretranslate_refuses_them_when_off(anonymous: httpx.Client) -> None:
    assert anonymous.get("/frontend/settings").json()["suggestions"] is False
    body = {"q": "Hello", "s": "Hallo", **PAIR}
    assert_libretranslate_error(anonymous.post("/suggest", json=body), 403, "Suggestions are disabled on this server.")
    assert anonymous.get("/suggest").status_code == 405


def test_health_spec_and_methods(anonymous: httpx.Client) -> None:
    assert anonymous.get("/health").json() == {"status": "ok"}
    spec = anonymous.get("/spec").json()
    assert {"/translate", "/detect", "/languages", "/frontend/settings", "/translate_file", "/health"} <= set(
        spec["paths"]
    )
    assert not [path for path in spec["paths"] if path.startswith("/v1/")]
    error = spec["paths"]["/translate"]["post"]["responses"]["400"]["content"]["application/json"]["schema"]
    assert spec["components"]["schemas"][error["$ref"].rsplit("/", 1)[1]]["properties"] == {
        "error": {"type": "string", "description": "What was wrong, in words"}
    }
    for method, path in [("GET", "/translate"), ("PUT", "/languages"), ("POST", "/frontend/settings")]:
        assert_libretranslate_error(anonymous.request(method, path), 405, "Method Not Allowed")


def test_file_routes_answer_libretranslates_errors_too(client: httpx.Client, anonymous: httpx.Client) -> None:
    files = {"file": ("a.txt", b"A dog runs.")}
    assert_libretranslate_error(client.post("/translate_file", files=files, data={"source": "en", "target": "zz"}), 400)
    error = assert_libretranslate_error(
        client.post("/translate_file", files={"file": ("a.pdf", b"%PDF")}, data=PAIR), 400
    )
    assert error.startswith("Invalid request: ")
    form = {"api_key": "nope", **PAIR}
    assert_libretranslate_error(anonymous.post("/translate_file", files=files, data=form), 401)
    assert_libretranslate_error(client.get("/download_file/nothing-here"), 404)


def test_v1_keeps_its_own_error_shape(client: httpx.Client) -> None:
    response = client.post("/v1/translate", json={"text": TEXT, "target_lang": "zz"})
    assert_error(response, 400, "unsupported_language")
