"""Hostile documents and markup over HTTP against real servers: each is refused with a 4xx in the
service's error shape (or, nested Markdown, translated), never a 500, a hang or text that a browser
hides coming back translated. The files are built here, the .docx ones with python-docx."""

from __future__ import annotations

import io
import time
import zipfile

import docx
import httpx
import pytest
from live_server import ServiceProcess, StartService, assert_error, metric, scrape
from word_bombs import word_bomb

from engine.documents.markdown import MAX_NESTING
from service.settings import Settings

DEFAULT_MAX_DOCUMENT_BYTES = Settings.model_fields["max_document_bytes"].default


def upload(client: httpx.Client, name: str, data: bytes) -> httpx.Response:
    return client.post(
        "/v1/translate_file", files={"file": (name, data)}, data={"source_lang": "en", "target_lang": "de"}
    )


def translate(client: httpx.Client, texts: list[str], format: str) -> httpx.Response:
    body = {"text": texts, "source_lang": "en", "target_lang": "de", "format": format}
    return client.post("/v1/translate", json=body)


def word_file() -> bytes:
    document = docx.Document()
    document.add_paragraph("A dog runs in the park.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


# -- .srt -----------------------------------------------------------------------------------------


def test_subtitles_with_a_timing_out_of_range_are_a_422(client: httpx.Client) -> None:
    cues = (
        "1\n00:00:01,000 --> 00:00:02,000\nA dog runs.\n\n"
        "2\n99999999999999999999:00:00,000 --> 99999999999999999999:00:01,000\nA cat sits.\n\n"
    )
    error = assert_error(upload(client, "film.srt", cues.encode()), 422, "invalid_request")
    assert error["message"] == "file: the timing of cue 2 (counted from the top) is out of range"


# -- comments and CDATA left open -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("markup", "format", "message"),
    [
        ("<p>A dog <!-- runs in the park.</p>", "html", "unterminated comment at line 1, column 10"),
        ("<p>A dog</p>\n<![CDATA[ runs in the park.", "html", "unterminated CDATA section at line 2, column 1"),
        ("<p>A dog <!-- runs in the park.</p>", "xml", "malformed XML at line 1, column 10"),
        ("<p>A dog <![CDATA[ runs in the park.</p>", "xml", "malformed XML at line 1, column"),
    ],
)
def test_markup_left_open_in_a_comment_or_cdata_is_a_422(
    client: httpx.Client, markup: str, format: str, message: str
) -> None:
    error = assert_error(translate(client, ["A cat sits.", markup], format), 422, "malformed_markup")
    assert message in error["message"] and error["text_index"] == 1
    assert f"line {error['line']}, column {error['column']}" in error["message"]


def test_an_html_file_left_open_in_a_comment_is_a_422(client: httpx.Client) -> None:
    page = b"<html><body>\n<p>A dog runs.</p>\n<p>A cat <!-- sits on the red car.</p>\n</body></html>\n"
    error = assert_error(upload(client, "page.html", page), 422, "malformed_markup")
    assert error["message"].startswith("file: malformed HTML: unterminated comment at line 3, column 10")
    assert (error["line"], error["column"]) == (3, 10)


# -- .docx damaged inside ------------------------------------------------------------------------


def test_a_docx_whose_parts_are_other_xml_elements_is_a_422_not_a_500(client: httpx.Client) -> None:
    """Well-formed XML where python-docx expects its own elements: it fails with AttributeError."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(word_file())) as source, zipfile.ZipFile(out, "w") as z:
        for info in source.infolist():
            z.writestr(info, b"<Types/>" if info.filename == "[Content_Types].xml" else source.read(info))
    error = assert_error(upload(client, "damaged.docx", out.getvalue()), 422, "invalid_request")
    assert error["message"].startswith("file: not a valid .docx file")
    assert upload(client, "report.docx", word_file()).status_code == 200


# -- Markdown nested deep -------------------------------------------------------------------------

ITEMS = [
    "A dog runs.",
    "A cat sits.",
    "The man walks.",
    "The girl plays.",
    "A big dog runs.",
    "The red car.",
    "A man sits.",
    "The cat runs.",
    "A girl walks.",
    "The dog plays in the park.",
]


def test_markdown_lists_ten_deep_are_translated_at_every_depth(client: httpx.Client) -> None:
    markdown = "".join("  " * depth + f"- {item}\n" for depth, item in enumerate(ITEMS))
    response = upload(client, "outline.md", markdown.encode())
    assert response.status_code == 200, response.text
    expected = [t["text"] for t in translate(client, ITEMS, "html").json()["translations"]]
    assert response.text == "".join("  " * depth + f"- {text}\n" for depth, text in enumerate(expected))


def test_markdown_nested_past_the_limit_is_a_422_naming_it(client: httpx.Client) -> None:
    markdown = "A dog runs.\n\n" + "> " * (MAX_NESTING + 1) + "A cat sits.\n"
    error = assert_error(upload(client, "deep.md", markdown.encode()), 422, "invalid_request")
    assert error["message"].startswith(f"file: line 3: lists and block quotes nest deeper than {MAX_NESTING} levels")


# -- decompressed size ----------------------------------------------------------------------------


def test_a_docx_expanding_to_250_mb_is_a_prompt_413_that_costs_no_memory(client: httpx.Client) -> None:
    bomb = word_bomb(word_file(), 250 << 20)
    assert len(bomb) < 1 << 20
    resident = metric(scrape(client), "process_resident_memory_bytes")
    started = time.monotonic()
    error = assert_error(upload(client, "bomb.docx", bomb), 413, "payload_too_large")
    assert time.monotonic() - started < 30  # read whole, it was not answered in 120 s
    declared = sum(info.file_size for info in zipfile.ZipFile(io.BytesIO(bomb)).infolist())
    assert error["message"] == (
        f"file: the .docx file expands to {declared} bytes; "
        f"the limit is {DEFAULT_MAX_DOCUMENT_BYTES} (MT_MAX_DOCUMENT_BYTES)"
    )
    assert metric(scrape(client), "process_resident_memory_bytes") - resident < 100 << 20
    assert upload(client, "report.docx", word_file()).status_code == 200


def test_the_document_limit_is_a_setting_for_every_format(start_service: StartService) -> None:
    server: ServiceProcess = start_service(max_document_bytes=2048)
    with httpx.Client(base_url=server.url, timeout=60) as c:
        error = assert_error(upload(c, "report.docx", word_file()), 413, "payload_too_large")
        assert error["message"].endswith("; the limit is 2048 (MT_MAX_DOCUMENT_BYTES)")
        error = assert_error(upload(c, "notes.txt", b"A dog runs.\n" * 200), 413, "payload_too_large")
        assert error["message"] == "file: the file is 2400 bytes of text; the limit is 2048 (MT_MAX_DOCUMENT_BYTES)"
        assert upload(c, "notes.txt", b"A dog runs.\n").status_code == 200


def test_markdown_emphasis_past_the_nesting_limit_is_a_4xx_and_the_next_file_is_translated(
    client: httpx.Client,
) -> None:
    """1 KB of Markdown whose emphasis nests past the markup limit: the error raised in the
    document process came back as a 500 (it could not be unpickled) and broke the process."""
    hostile = upload(client, "stars.md", ("*" * 514 + "a" + "*" * 514).encode())
    assert 400 <= hostile.status_code < 500, hostile.text
    assert hostile.json()["error"]["type"] != "internal_error"
    after = upload(client, "plain.md", b"A dog runs in the park.\n")
    assert after.status_code == 200, after.text


def test_markdown_references_written_out_past_the_file_are_a_413(client: httpx.Client) -> None:
    """`[r]: http://e.com/` + 100,000 characters, then 10 paragraphs of 200 `![][r]`: a 200 MB
    answer (and, never downloaded from /v2/document, a full file store for every key)."""
    body = "\n\n".join("Dog " + "![][r]" * 200 for _ in range(10))
    bomb = f"[r]: http://e.com/{'a' * 100_000}\n\n{body}\n".encode()
    error = assert_error(upload(client, "bomb.md", bomb), 413, "payload_too_large")
    assert "by reference" in error["message"]
