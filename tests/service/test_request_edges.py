"""Edges of the DeepL, LibreTranslate, /v1 and file routes on a real server: glossary
languages (variants), methods a path does not answer, DeepL's booleans, JSON bodies with a byte
order mark, uploaded file names, and no-break spaces in HTML."""

from __future__ import annotations

import re
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from live_server import ServiceProcess, StartService

from tests.conftest import both_ways

BOM = b"\xef\xbb\xbf"
TEXT = "A dog runs in the park."


@pytest.fixture(scope="module")
def edges_server(
    start_service: StartService, tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory
) -> ServiceProcess:
    root = tmp_path_factory.mktemp("edges_repository")
    both_ways(tiny_bundle, root)
    return start_service(model_dir="", models_dir=root, max_wait_ms=2)


@pytest.fixture(scope="module")
def http(edges_server: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=edges_server.url, timeout=60) as client:
        yield client


def deepl_glossary(
    http: httpx.Client, source: str, target: str, entries: str, entries_format: str = "tsv"
) -> httpx.Response:
    fields = {"name": "g", "source_lang": source, "target_lang": target, "entries": entries}
    return http.post("/v2/glossaries", data={**fields, "entries_format": entries_format})


# -- glossary languages ---------------------------------------------------------------------------


@pytest.mark.parametrize(("source", "target"), [("EN-GB", "DE"), ("DE", "EN-US"), ("de", "en-gb")])
def test_a_deepl_glossary_is_for_languages_not_their_variants(http: httpx.Client, source: str, target: str) -> None:
    # DeepL refuses a variant in a glossary's languages: a glossary for EN serves EN-GB and EN-US.
    response = deepl_glossary(http, source, target, "dog\tHund")
    assert response.status_code == 400, response.text
    assert set(response.json()) == {"message"}
    assert "not one of its variants" in response.json()["message"]


def test_a_glossary_for_a_language_is_used_by_a_translation_into_its_variant(http: httpx.Client) -> None:
    created = deepl_glossary(http, "DE", "EN", "hund\tdog")
    assert created.status_code == 201, created.text
    fields = {"text": "hund", "source_lang": "DE", "target_lang": "EN-GB", "glossary_id": created.json()["glossary_id"]}
    assert http.post("/v2/translate", data=fields).status_code == 200


def test_a_csv_row_naming_an_unknown_variant_is_not_for_the_glossary(http: httpx.Client) -> None:
    # EN-XX is no language, as the translation routes say: not English's row.
    refused = deepl_glossary(http, "EN", "DE", "dog,Hund,EN-XX,DE", "csv")
    assert refused.status_code == 400, refused.text
    assert "'EN-XX'" in refused.json()["message"]
    assert (
        http.post("/v2/translate", data={"text": TEXT, "source_lang": "EN-XX", "target_lang": "DE"}).status_code == 400
    )
    kept = deepl_glossary(http, "EN", "DE", "dog,Hund,EN-GB,DE\ncat,Katze,EN-XX,DE", "csv")
    assert kept.status_code == 201, kept.text
    assert kept.json()["entry_count"] == 1


# -- methods --------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["PATCH", "PUT", "POST"])
def test_a_glossarys_path_answers_other_methods_405(http: httpx.Client, method: str) -> None:
    response = http.request(method, "/v2/glossaries/some-id")
    assert response.status_code == 405, response.text
    assert response.headers["allow"] == "DELETE, GET"
    assert set(response.json()) == {"message"}


def test_other_deepl_paths_keep_their_405_and_404(http: httpx.Client) -> None:
    translate = http.put("/v2/translate")
    assert (translate.status_code, translate.headers.get("allow")) == (405, "POST")
    assert http.delete("/v2/glossaries").headers.get("allow") == "GET, POST"
    unknown = http.patch("/v2/nothing-here")
    assert unknown.status_code == 404 and set(unknown.json()) == {"message"}


# -- DeepL's booleans -----------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "1", "true", "false"])
def test_deepl_booleans_in_a_form(http: httpx.Client, value: str) -> None:
    fields = {"text": TEXT, "target_lang": "DE", "preserve_formatting": value, "show_billed_characters": value}
    response = http.post("/v2/translate", data=fields)
    assert response.status_code == 200, response.text
    assert ("billed_characters" in response.json()["translations"][0]) == (value in ("1", "true"))


@pytest.mark.parametrize("value", [True, False])
def test_deepl_booleans_in_json(http: httpx.Client, value: bool) -> None:
    body = {"text": [TEXT], "target_lang": "DE", "preserve_formatting": value, "outline_detection": value}
    assert http.post("/v2/translate", json=body).status_code == 200


@pytest.mark.parametrize("field", ["preserve_formatting", "show_billed_characters", "outline_detection"])
@pytest.mark.parametrize("value", ["yes", "on", "2", "True", ""])
def test_other_values_of_a_deepl_boolean_are_refused(http: httpx.Client, field: str, value: str) -> None:
    response = http.post("/v2/translate", data={"text": TEXT, "target_lang": "DE", field: value})
    assert response.status_code == 400, response.text
    assert field in response.json()["message"]


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_other_json_values_of_a_deepl_boolean_are_refused(http: httpx.Client, value: object) -> None:
    response = http.post("/v2/translate", json={"text": [TEXT], "target_lang": "DE", "preserve_formatting": value})
    assert response.status_code == 400, response.text


# -- a byte order mark ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v2/translate", b'{"text": ["A dog."], "target_lang": "DE"}'),
        ("/translate", b'{"q": "A dog.", "source": "en", "target": "de"}'),
        ("/v1/translate", b'{"text": "A dog.", "source_lang": "en", "target_lang": "de"}'),
    ],
)
def test_a_json_body_may_start_with_a_byte_order_mark(http: httpx.Client, path: str, body: bytes) -> None:
    # RFC 8259 lets a parser ignore it, and FastAPI's and Flask's (LibreTranslate's) parsers do.
    headers = {"Content-Type": "application/json"}
    with_mark = http.post(path, content=BOM + body, headers=headers)
    assert with_mark.status_code == 200, with_mark.text
    assert with_mark.json() == http.post(path, content=body, headers=headers).json()


# -- uploaded file names --------------------------------------------------------------------------

NAMES = ['say "hi".txt', "Straße über.txt", "狗.txt", "a;b=c.txt"]


def downloaded_name(response: httpx.Response) -> str:
    """The file name a browser saves ``response`` as: Content-Disposition's ``filename*`` over
    its ``filename`` (RFC 6266, section 4.3), each parameter read as RFC 8187 and RFC 9110 write them."""
    disposition, *parameters = (p.strip() for p in response.headers["content-disposition"].split(";"))
    assert disposition == "attachment"
    named = dict(p.split("=", 1) for p in parameters)
    if "filename*" in named:
        charset, _, quoted = named["filename*"].partition("''")
        assert charset.upper() == "UTF-8"
        return urllib.parse.unquote(quoted, errors="strict")
    value = named["filename"]
    assert value.startswith('"') and value.endswith('"')
    return re.sub(r"\\(.)", r"\1", value[1:-1])


def assert_ascii_fallback(response: httpx.Response) -> None:
    """An ASCII ``filename`` for the clients that read only that one, before ``filename*``."""
    header = response.headers["content-disposition"]
    header.encode("ascii")
    assert header.startswith('attachment; filename="')


@pytest.mark.parametrize("name", NAMES)
def test_a_translated_file_keeps_its_uploads_name(http: httpx.Client, name: str) -> None:
    # httpx, as browsers and curl, writes a name's '"' as %22 in the form: the name is the one meant.
    files = {"file": (name, TEXT.encode())}
    response = http.post("/v1/translate_file", files=files, data={"source_lang": "en", "target_lang": "de"})
    assert response.status_code == 200, response.text
    assert downloaded_name(response) == name
    assert_ascii_fallback(response)


@pytest.mark.parametrize("name", NAMES)
def test_a_libretranslate_download_keeps_its_uploads_name(http: httpx.Client, name: str) -> None:
    response = http.post(
        "/translate_file", files={"file": (name, TEXT.encode())}, data={"source": "en", "target": "de"}
    )
    assert response.status_code == 200, response.text
    download = http.get(response.json()["translatedFileUrl"])
    assert download.status_code == 200
    assert downloaded_name(download) == name


@pytest.mark.parametrize("name", NAMES)
def test_a_deepl_document_keeps_its_uploads_name(http: httpx.Client, name: str) -> None:
    uploaded = http.post("/v2/document", files={"file": (name, TEXT.encode())}, data={"target_lang": "DE"})
    assert uploaded.status_code == 200, uploaded.text
    document = uploaded.json()
    key = {"document_key": document["document_key"]}
    for _ in range(600):  # polled as DeepL's clients poll: until done, a bounded number of times
        status = http.post(f"/v2/document/{document['document_id']}", data=key).json()["status"]
        if status not in ("queued", "translating"):
            break
        time.sleep(0.05)
    assert status == "done"
    result = http.post(f"/v2/document/{document['document_id']}/result", data=key)
    assert result.status_code == 200, result.text
    assert downloaded_name(result) == name


# -- no-break spaces ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "markup",
    ["<p>&nbsp;</p><p>A dog runs.</p>", "<table><tr><td>&#160;</td><td>A dog runs.</td></tr></table>"],
)
def test_a_block_of_no_break_spaces_is_kept(http: httpx.Client, markup: str) -> None:
    # A spacer paragraph or an empty cell: no text, kept as written, as the whitespace of others is.
    body = {"text": markup, "source_lang": "en", "target_lang": "de", "format": "html"}
    response = http.post("/v1/translate", json=body)
    assert response.status_code == 200, response.text
    spacer = markup.split("A dog")[0]
    assert response.json()["translations"][0]["text"].startswith(spacer)
