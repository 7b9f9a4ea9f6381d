"""File translation over HTTP against real servers: /v1/translate_file, LibreTranslate's
/translate_file and /download_file, their limits, errors, expiry and temporary files. The test
model's translations are nonsense: these tests check structure, not wording."""

from __future__ import annotations

import io
import json
import random
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin

import docx
import httpx
import pytest
import srt
from live_server import (
    API_KEYS,
    ServiceProcess,
    StartService,
    assert_error,
    assert_libretranslate_error,
    wait_for_metric,
)

from service.app import FILES_DIRECTORY
from service.documents import chunks
from tests.conftest import EN

TEXT_FILE = "A dog runs in the park.\r\n\r\n  A cat sits on the red car.  \nThe man walks.\n"
SUBTITLES = (
    "7\n00:00:01,000 --> 00:00:02,500\nA big dog runs\nin the park.\n\n"
    "8\n00:00:03,000 --> 00:00:04,000\n<i>The girl plays.</i>\n\n"
)


def native(client: httpx.Client, texts: list[str], **options: object) -> list[str]:
    body = client.post("/v1/translate", json={"text": texts, "source_lang": "en", "target_lang": "de", **options})
    return [t["text"] for t in body.json()["translations"]]


def upload(client: httpx.Client, name: str, data: bytes, **fields: str) -> httpx.Response:
    return client.post("/v1/translate_file", files={"file": (name, data)}, data={"target_lang": "de", **fields})


def sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` different sentences in the test model's vocabulary."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(EN) for _ in range(rng.randint(3, 8))).capitalize() + "." for _ in range(n)]


# -- /v1/translate_file -------------------------------------------------------------------------


def test_a_text_file_comes_back_translated_line_by_line(client: httpx.Client) -> None:
    response = upload(client, "notes.txt", TEXT_FILE.encode(), source_lang="en")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.headers["content-disposition"] == 'attachment; filename="notes.txt"'
    dog, cat, man = native(client, ["A dog runs in the park.", "A cat sits on the red car.", "The man walks."])
    assert response.text == f"{dog}\r\n\r\n  {cat}  \n{man}\n"


@pytest.mark.parametrize("sent", ["C:\\Users\\me\\notes.txt", "../../notes.txt"])
def test_a_path_sent_as_the_file_name_comes_back_as_the_name(client: httpx.Client, sent: str) -> None:
    response = upload(client, sent, TEXT_FILE.encode(), source_lang="en")
    assert response.headers["content-disposition"] == 'attachment; filename="notes.txt"'


def test_the_source_language_is_identified_once_for_the_file(client: httpx.Client) -> None:
    identified = upload(client, "notes.txt", TEXT_FILE.encode())  # source_lang omitted: "auto"
    assert identified.status_code == 200, identified.text
    assert identified.text == upload(client, "notes.txt", TEXT_FILE.encode(), source_lang="en").text


def test_subtitles_keep_their_cues_and_timings(client: httpx.Client) -> None:
    response = upload(client, "film.srt", SUBTITLES.encode(), source_lang="en")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/x-subrip; charset=utf-8"
    before, after = list(srt.parse(SUBTITLES)), list(srt.parse(response.text))
    assert [(c.index, c.start, c.end) for c in after] == [(c.index, c.start, c.end) for c in before]
    assert after[0].content != before[0].content and 1 <= len(after[0].content.split("\n")) <= 2
    assert after[1].content.startswith("<i>") and after[1].content.endswith("</i>")


def word_file() -> bytes:
    document = docx.Document()
    paragraph = document.add_paragraph("A dog runs ")
    paragraph.add_run("in the park").bold = True
    paragraph.add_run(".")
    document.add_table(rows=1, cols=1).cell(0, 0).text = "The cat sits."
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_a_word_document_keeps_its_runs_formatting(client: httpx.Client) -> None:
    response = upload(client, "Bericht über Hunde.docx", word_file(), source_lang="en")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].endswith("wordprocessingml.document")
    assert response.headers["content-disposition"] == (
        "attachment; filename=\"Bericht _ber Hunde.docx\"; filename*=UTF-8''Bericht%20%C3%BCber%20Hunde.docx"
    )
    document = docx.Document(io.BytesIO(response.content))
    runs = document.paragraphs[0].runs
    assert [r.bold for r in runs] == [None, True, None]
    assert "".join(r.text for r in runs) not in ("", "A dog runs in the park.")
    assert document.tables[0].cell(0, 0).text not in ("", "The cat sits.")


def test_markdown_and_html_keep_their_markup(client: httpx.Client) -> None:
    markdown = "# The dog\n\nA *red* car and a [ball](https://example.com/ball).\n\n```\ncode stays\n```\n"
    response = upload(client, "readme.md", markdown.encode(), source_lang="en")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/markdown; charset=utf-8"
    heading, blank, paragraph, *rest = response.text.split("\n")
    assert heading.startswith("# ") and heading != "# The dog" and blank == ""
    assert "](https://example.com/ball)" in paragraph  # (the emphasis may have landed on no word)
    assert rest == ["", "```", "code stays", "```", ""]

    page = "<html><head><title>The house</title></head><body><p>A <b>big</b> tree.</p><pre>x</pre></body></html>"
    response = upload(client, "page.html", page.encode(), source_lang="en")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.text.startswith("<html><head><title>") and "The house" not in response.text
    assert "<b>" in response.text and response.text.endswith("</p><pre>x</pre></body></html>")


def test_a_document_larger_than_a_request_is_translated_in_chunks(client: httpx.Client) -> None:
    lines = sentences(150)  # the server takes 16 texts and 3000 characters per request
    assert len("".join(lines)) > 3000
    response = upload(client, "long.txt", "\n".join(lines).encode(), source_lang="en")
    assert response.status_code == 200, response.text
    assert response.text.split("\n") == [t for i in range(0, len(lines), 16) for t in native(client, lines[i : i + 16])]


def test_chunks_stay_within_both_limits_in_order() -> None:
    texts = ["a" * 5, "b" * 5, "c" * 11, "d", "e", "f"]
    assert list(chunks(texts, max_texts=2, max_chars=10)) == [["a" * 5, "b" * 5], ["c" * 11], ["d", "e"], ["f"]]
    assert list(chunks([], max_texts=2, max_chars=10)) == []


def test_other_requests_are_served_while_a_large_document_is_translated(
    start_service: StartService,
) -> None:
    server = start_service(max_texts=8, cache_size=0, max_wait_ms=1)
    document = "\n".join(sentences(400, seed=1)).encode()
    finished: dict[str, float] = {}

    def translate_document() -> None:
        with httpx.Client(base_url=server.url, timeout=300) as c:
            assert upload(c, "big.txt", document, source_lang="en").status_code == 200
        finished["document"] = time.monotonic()

    worker = threading.Thread(target=translate_document)
    worker.start()
    with httpx.Client(base_url=server.url, timeout=60) as c:
        wait_for_metric(c, "mt_requests_in_flight", 1)  # the document's 50 chunks are being translated
        assert native(c, ["A dog runs."]) and "document" not in finished
    finished["text"] = time.monotonic()
    worker.join()
    assert finished["text"] < finished["document"]


# -- LibreTranslate -----------------------------------------------------------------------------


def test_libretranslate_translate_file_then_download(server: ServiceProcess, client: httpx.Client) -> None:
    """As LibreTranslate's web page does: a multipart POST, then a GET of the URL it answers with
    (libretranslatepy has no file translation)."""
    with httpx.Client(timeout=60) as browser:
        form = {"source": "en", "target": "de", "api_key": API_KEYS[1]}
        response = browser.post(f"{server.url}/translate_file", files={"file": ("notes.txt", TEXT_FILE)}, data=form)
        assert response.status_code == 200, response.text
        [url] = response.json().values()
        assert url.startswith("/download_file/") and url.endswith(".notes.txt")
        download = browser.get(urljoin(f"{server.url}/translate_file", url))  # no key: the name is the key
    assert download.status_code == 200, download.text
    assert download.headers["content-disposition"] == 'attachment; filename="notes.txt"'
    assert download.headers["content-type"] == "text/plain; charset=utf-8"
    assert download.text == upload(client, "notes.txt", TEXT_FILE.encode(), source_lang="en").text


def test_libretranslate_frontend_lists_the_file_formats(client: httpx.Client) -> None:
    settings = client.get("/frontend/settings").json()
    assert settings["filesTranslation"] is True
    assert settings["supportedFilesFormat"] == [".txt", ".md", ".markdown", ".html", ".htm", ".srt", ".docx"]


def test_unknown_files_are_not_found(client: httpx.Client) -> None:
    assert_libretranslate_error(client.get("/download_file/nothing.txt"), 404)
    assert_error(client.get("/download_file/..%2F..%2Fetc%2Fpasswd"), 404, "not_found")


def test_files_expire_and_temporary_files_are_removed(
    start_service: StartService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where the server spools uploads
    server = start_service(file_expiry_s=1, data_dir=str(tmp_path / "data"))
    store = tmp_path / "data" / FILES_DIRECTORY  # where the file store keeps files, without MT_DATABASE_URL

    def spooled() -> list[Path]:  # Python's temporary files ("tmp...")
        return sorted(p for p in tmp_path.iterdir() if p.name.startswith("tmp"))

    # Over a MiB: spooled to a temporary file, and over MT_MAX_REQUEST_BYTES, which uploads are not held to.
    big = ("A dog runs." + "\n" * (1536 << 10)).encode()
    with httpx.Client(base_url=server.url, timeout=60) as c:
        assert upload(c, "big.txt", big, source_lang="en").status_code == 200
        assert spooled() == []
        url = c.post("/translate_file", files={"file": ("big.txt", big)}, data={"target": "de"}).json()
        assert c.get(url["translatedFileUrl"]).content.endswith(b"\n" * 1000)
        assert spooled() == [] and len(list(store.iterdir())) == 1  # the translated file is kept
        time.sleep(2.5)  # expired after 1 s, and looked for every second: deleted with no request
        assert list(store.iterdir()) == []
        assert_libretranslate_error(c.get(url["translatedFileUrl"]), 404)
    assert server.stop() == 0
    assert spooled() == []


# -- limits and errors --------------------------------------------------------------------------


def test_files_over_the_limits_give_413(start_service: StartService) -> None:
    server = start_service(max_file_bytes=4096, max_chars=100)
    with httpx.Client(base_url=server.url, timeout=60) as c:
        error = assert_error(upload(c, "a.txt", b"A dog runs.\n" * 400), 413, "payload_too_large")
        assert "4800 bytes; the limit is 4096 (MT_MAX_FILE_BYTES)" in error["message"]
        # Far over: refused by its Content-Length, before it is read.
        assert_error(upload(c, "a.txt", b"x" * (1 << 20)), 413, "payload_too_large")
        # Without a Content-Length: refused while it streams in.
        boundary = "x" * 16
        form = f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\n'
        body = [form.encode(), b"A dog runs.\n" * (100 << 10), f"\r\n--{boundary}--\r\n".encode()]
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
        assert_error(c.post("/v1/translate_file", content=iter(body), headers=headers), 413, "payload_too_large")
        error = assert_error(upload(c, "a.txt", b"A dog runs." * 10), 413, "payload_too_large")
        assert "text 1 of the file" in error["message"] and "110 characters" in error["message"]


@pytest.mark.parametrize(
    ("name", "data", "status", "error_type", "message"),
    [
        ("program.exe", b"MZ\x90\x00", 415, "unsupported_media_type", "unsupported file type '.exe'"),
        ("no_extension", b"text", 415, "unsupported_media_type", "(no extension)"),
        ("old.txt", "Café".encode("latin-1"), 422, "invalid_request", "file: the file is not UTF-8"),
        ("broken.docx", b"PK\x03\x04 not really", 422, "invalid_request", "file: not"),
        ("broken.srt", b"not subtitles", 422, "invalid_request", "file: not a SubRip"),
        ("bad.html", b"<p>a <b>b <i>c</b></i></p>", 422, "malformed_markup", "file: malformed HTML"),
    ],
)
def test_unsupported_and_corrupt_files_are_refused(
    client: httpx.Client, name: str, data: bytes, status: int, error_type: str, message: str
) -> None:
    error = assert_error(upload(client, name, data, source_lang="en"), status, error_type)
    assert message in error["message"]


@pytest.mark.parametrize(
    "request_kwargs",
    [
        {"data": {"target_lang": "de"}},  # no file
        {"files": {"file": (None, b"A dog.")}, "data": {"target_lang": "de"}},  # a field, not a file
        {"files": {"file": ("a.txt", b"A dog.")}},  # no target
        {"files": {"file": ("a.txt", b"A dog.")}, "data": {"target_lang": "de", "beam_size": "2"}},  # unknown
        {"json": {"file": "A dog.", "target_lang": "de"}},  # not a form
        {"files": [("file", ("a.txt", b"A dog.")), ("file", ("b.txt", b"A cat."))], "data": {"target_lang": "de"}},
    ],
)
def test_malformed_forms_give_422(client: httpx.Client, request_kwargs: dict) -> None:
    assert_error(client.post("/v1/translate_file", **request_kwargs), 422, "invalid_request")


def test_api_keys_and_languages_are_checked(server: ServiceProcess, client: httpx.Client) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as anonymous:
        assert_error(upload(anonymous, "a.txt", b"A dog."), 401, "unauthorized")
        libre = anonymous.post("/translate_file", files={"file": ("a.txt", b"A dog.")}, data={"target": "de"})
        assert_libretranslate_error(libre, 401)
    error = assert_error(upload(client, "a.txt", b"A dog.", target_lang="fr"), 400, "unsupported_language")
    assert error["supported_pairs"] == ["en-de"]


# -- the API key is checked before the upload is read ---------------------------------------------

BOUNDARY = "mt-test-boundary"
FILE_PART = (
    f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\n'
    "Content-Type: text/plain\r\n\r\n"
).encode()
DECLARED_BYTES = 10 << 20  # a 10 MiB upload, within MT_MAX_FILE_BYTES


def upload_head(path: str, *headers: str) -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        "Host: localhost",
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}",
        f"Content-Length: {DECLARED_BYTES}",
        *headers,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def answer_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a timeout fails the test)."""
    sock.settimeout(10)
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    return answer


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/v1/translate_file", ["Authorization: Bearer wrong-key"]),
        ("/translate_file", ["Authorization: Bearer wrong-key"]),
        ("/translate_file", []),  # LibreTranslate's key would be a form field: none came before the file
    ],
    ids=["v1-wrong-key", "libretranslate-wrong-key", "libretranslate-no-key"],
)
def test_a_refused_upload_is_answered_and_closed_before_its_body_is_read(
    server: ServiceProcess, path: str, headers: list[str]
) -> None:
    """The client sends the head and the first 60 kB of a 10 MiB upload, then waits: the 401 comes,
    and the server closes the connection rather than read (and throw away) the rest."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(upload_head(path, *headers) + FILE_PART + b"A dog runs.\n" * 5000)
        answer = answer_until_closed(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 401 "), answer[:300]
    assert b"connection: close" in head.lower()
    error = json.loads(body)["error"]
    if path.startswith("/v1/"):
        assert error["type"] == "unauthorized"
    else:  # LibreTranslate's shape
        assert isinstance(error, str) and error


def test_a_client_expecting_100_continue_sends_no_body_to_be_refused(server: ServiceProcess) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(upload_head("/v1/translate_file", "Expect: 100-continue"))
        answer = answer_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:300]  # and no "100 Continue" before it


def libretranslate_form(*parts: tuple[str, str, bytes]) -> tuple[bytes, dict[str, str]]:
    """A multipart body with the parts in this order: (name, file name or "", content)."""
    body = b""
    for name, filename, content in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        body += f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + content + b"\r\n"
    return body + f"--{BOUNDARY}--\r\n".encode(), {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}


def test_libretranslate_takes_its_key_field_before_the_file(anonymous: httpx.Client) -> None:
    key = ("api_key", "", API_KEYS[0].encode())
    file = ("file", "a.txt", b"A dog runs.")
    target = ("target", "", b"de")
    content, headers = libretranslate_form(key, target, file)
    assert anonymous.post("/translate_file", content=content, headers=headers).status_code == 200
    # LibreTranslate's own web page sends the key after the file: the upload would be read first.
    content, headers = libretranslate_form(file, target, key)
    error = assert_libretranslate_error(anonymous.post("/translate_file", content=content, headers=headers), 401)
    assert "the api_key field before the file" in error


# -- download links ----------------------------------------------------------------------------

SPOOFED = {"Host": "evil.example", "X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https"}


def libretranslate_file_url(client: httpx.Client, path: str = "/translate_file", **headers: str) -> str:
    form = {"source": "en", "target": "de"}
    response = client.post(path, files={"file": ("notes.txt", b"A dog runs.")}, data=form, headers=headers)
    assert response.status_code == 200, response.text
    url: str = response.json()["translatedFileUrl"]
    return url


def test_download_links_never_come_from_the_host_header(client: httpx.Client) -> None:
    """Without MT_PUBLIC_URL, a path the client resolves against the URL it sent the file to."""
    url = libretranslate_file_url(client, **SPOOFED)
    assert url.startswith("/download_file/") and "evil" not in url
    assert client.get(url).text == upload(client, "notes.txt", b"A dog runs.", source_lang="en").text


def test_download_links_start_with_the_public_url_or_the_root_path(start_service: StartService) -> None:
    public = start_service(public_url="https://mt.example.com/mt/", root_path="/mt")
    relative = start_service(root_path="/mt")
    for server, start in [(public, "https://mt.example.com/mt/download_file/"), (relative, "/mt/download_file/")]:
        with httpx.Client(base_url=server.url, timeout=60) as c:
            # whether the proxy passes the prefix on or strips it
            for path in ("/mt/translate_file", "/translate_file"):
                url = libretranslate_file_url(c, path, **SPOOFED)
                assert url.startswith(start) and url.endswith(".notes.txt"), url
                name = url.rsplit("/", 1)[1]
                assert c.get(f"/mt/download_file/{name}").status_code == 200
                assert c.get(f"/download_file/{name}").status_code == 200


# -- a full disk -------------------------------------------------------------------------------


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs, as a full temporary directory; mounting needs root."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k,mode=1777", "tmpfs", str(mount)], check=False)
    if mounted.returncode != 0:
        pytest.skip("mounting a tmpfs needs root (the file store's own test fails its writes instead)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=True)


def test_a_full_disk_is_a_507_and_leaves_nothing_behind(
    tiny_bundle: Path, tmp_path: Path, small_tmpfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(small_tmpfs))  # where the server spools uploads
    store = small_tmpfs / "files"  # and keeps files: its MT_DATA_DIR's files/ on the small disk too
    store.mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / FILES_DIRECTORY).symlink_to(store)
    server = ServiceProcess(tiny_bundle, tmp_path / "service.log", data_dir=str(tmp_path / "data"))
    used_at_start = shutil.disk_usage(small_tmpfs).used
    try:
        with httpx.Client(base_url=server.url, timeout=60) as c:
            # Over 1 MiB: the upload is spooled to the disk, which has 512 KiB.
            spooled = upload(c, "big.txt", ("A dog runs." + "\n" * (1536 << 10)).encode(), source_lang="en")
            error = assert_error(spooled, 507, "insufficient_storage")
            assert "no space left" in error["message"]
            # Read in memory, but its translation is kept for download: the store cannot write it whole.
            kept = ("A dog runs." + "\n" * (800 << 10)).encode()
            form = {"source": "en", "target": "de"}
            libre = c.post("/translate_file", files={"file": ("big.txt", kept)}, data=form)
            assert_libretranslate_error(libre, 507)
            assert list(store.iterdir()) == []  # no partial file is left
            # nor an open spooled upload, deleted but holding its space
            assert shutil.disk_usage(small_tmpfs).used == used_at_start
            # The space is free again: a file that fits is kept and served.
            url = libretranslate_file_url(c)
            assert c.get(url).status_code == 200
    finally:
        assert server.stop() == 0
    assert "temporary storage full" in server.log()
