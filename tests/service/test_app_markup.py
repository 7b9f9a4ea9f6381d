"""HTML and XML through the HTTP APIs (``format``): tags kept, malformed markup refused with a 422."""

from __future__ import annotations

import httpx
import pytest
from live_server import API_KEYS, assert_error
from markup_checks import assert_same_elements

MARKUP = '<p title="A tip">A <b>dog</b> runs <a href="/x?a=1&amp;b=2">home</a>.</p><pre>keep  this</pre>'


def translate(client: httpx.Client, text: str | list[str], format: str, **fields: object) -> httpx.Response:
    body = {"text": text, "source_lang": "en", "target_lang": "de", "format": format, **fields}
    return client.post("/v1/translate", json=body)


def test_html_comes_back_with_its_elements_and_kept_parts(client: httpx.Client) -> None:
    response = translate(client, [MARKUP, "<br>"], "html")
    assert response.status_code == 200, response.text
    out, nothing = (t["text"] for t in response.json()["translations"])
    assert_same_elements(MARKUP, out)
    assert '<a href="/x?a=1&amp;b=2">' in out and "<pre>keep  this</pre>" in out
    assert nothing == "<br>"  # no text: passed through as it is


def test_xml_comes_back_with_its_elements(client: httpx.Client) -> None:
    markup = "<doc><title>A dog</title><para>It <b>runs</b> &amp; jumps.</para></doc>"
    response = translate(client, markup, "xml")
    assert response.status_code == 200, response.text
    assert_same_elements(markup, response.json()["translations"][0]["text"], "xml")


@pytest.mark.parametrize(
    ("markup", "format", "message"),
    [
        ("<p>A <b>dog</p>", "html", "text 1: malformed HTML: </p> at line 1, column 12 closes <p> while <b>"),
        ("<p>A dog", "xml", "malformed XML at line 1, column"),
        ("<p>A <b", "html", "unterminated tag at line 1, column 6"),
        ("<p>A dog.</p><![<![x", "html", "unreadable markup at line 1, column 17"),
    ],
)
def test_malformed_markup_is_a_422_that_says_what_and_where(
    client: httpx.Client, markup: str, format: str, message: str
) -> None:
    error = assert_error(translate(client, ["A cat sits.", markup], format), 422, "malformed_markup")
    assert message in error["message"] and error["text_index"] == 1
    assert f"line {error['line']}, column {error['column']}" in error["message"]


def test_plain_text_is_not_read_as_markup(client: httpx.Client) -> None:
    response = translate(client, "a <b and </p>", "text")
    assert response.status_code == 200, response.text


def test_an_unknown_format_is_a_422(client: httpx.Client) -> None:
    assert_error(translate(client, "x", "pdf"), 422, "invalid_request")


def test_unreadable_html_is_a_4xx_on_libretranslate_and_as_a_file(client: httpx.Client) -> None:
    """21 bytes that html.parser refuses with an AssertionError: a 4xx in each API's shape, never a 500."""
    markup = "<p>A dog.</p><![<![x"
    body = {"q": markup, "source": "en", "target": "de", "format": "html", "api_key": API_KEYS[0]}
    libre = client.post("/translate", json=body)
    assert libre.status_code == 400 and "unreadable markup" in libre.json()["error"], libre.text
    upload = client.post(
        "/v1/translate_file", files={"file": ("page.html", markup.encode())}, data={"target_lang": "de"}
    )
    assert 400 <= upload.status_code < 500 and "unreadable markup" in upload.text, upload.text


def test_libretranslate_format_html_keeps_tags_as_json_and_as_a_form(client: httpx.Client) -> None:
    body = {"q": MARKUP, "source": "en", "target": "de", "format": "html", "api_key": API_KEYS[0]}
    as_json = client.post("/translate", json=body)
    as_form = client.post("/translate", data=body)
    assert as_json.status_code == as_form.status_code == 200, as_json.text
    assert as_json.json() == as_form.json()
    assert_same_elements(MARKUP, as_json.json()["translatedText"])
    assert as_json.json()["translatedText"] == translate(client, MARKUP, "html").json()["translations"][0]["text"]
