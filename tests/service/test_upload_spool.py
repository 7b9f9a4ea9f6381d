"""MT_MAX_UPLOADS against a real server: file uploads being received at once are bounded, since each
spools up to MT_MAX_FILE_BYTES to the temporary directory while it arrives. One more is refused
before its body is read, in each API's error shape, and a slot is free again however an upload
ends: translated, refused while it streamed (413, a malformed form) or left by its client."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from live_server import ServiceProcess, StartService, assert_error, assert_libretranslate_error

BOUNDARY = "spool-test-boundary"
FILE = b"A dog runs in the park.\n"
# Uploads of up to 64 KiB (and the form's 64 KiB on top): a chunked body past that is a cheap 413.
MAX_FILE_BYTES = 64 << 10
# How many times a test asks whether a client's hang-up has freed its slot (a state, not a duration).
POLLS = 200


@pytest.fixture(scope="module")
def one_slot(start_service: StartService) -> ServiceProcess:
    return start_service(max_uploads=1, max_file_bytes=MAX_FILE_BYTES)


@pytest.fixture(scope="module")
def client(one_slot: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=one_slot.url, timeout=60) as c:
        yield c


def form(target_field: str) -> bytes:
    """A multipart body: the target language, then the file."""
    return (
        (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{target_field}"\r\n\r\nde\r\n'
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\n'
        ).encode()
        + FILE
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )


def start_upload(server: ServiceProcess) -> tuple[socket.socket, bytes]:
    """An upload to /v1/translate_file that holds the server's one slot, and the rest of its body.
    It asks ``Expect: 100-continue``: the server answers 100 only once the route reads the body,
    which is after it took the slot; then half of the body is sent."""
    body = form("target_lang")
    head = (
        "POST /v1/translate_file HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nExpect: 100-continue\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock = socket.create_connection((server.url.removeprefix("http://").split(":")[0], server.port), timeout=30)
    sock.sendall(head.encode())
    interim = sock.recv(4096)
    assert interim.startswith(b"HTTP/1.1 100 "), interim
    half = len(body) // 2
    sock.sendall(body[:half])
    return sock, body[half:]


def finish_upload(sock: socket.socket, rest: bytes) -> bytes:
    """Send the rest of the body and read the answer, until the server closes the connection."""
    sock.sendall(rest)
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    sock.close()
    return answer


def upload(client: httpx.Client, path: str = "/v1/translate_file", target_field: str = "target_lang") -> httpx.Response:
    headers = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    return client.post(path, content=form(target_field), headers=headers)


def test_an_upload_while_the_only_slot_is_taken_is_refused(client: httpx.Client, one_slot: ServiceProcess) -> None:
    sock, rest = start_upload(one_slot)
    try:
        error = assert_error(upload(client), 429, "overloaded")
        assert "MT_MAX_UPLOADS" in error["message"]
        refused = upload(client)
        assert refused.headers["retry-after"].isdigit()
        assert refused.headers["connection"] == "close"  # its body is not read
    finally:
        answer = finish_upload(sock, rest)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
    assert upload(client).status_code == 200  # the slot is free once the first upload is received


def test_libretranslate_and_deepl_refuse_in_their_own_shapes(client: httpx.Client, one_slot: ServiceProcess) -> None:
    sock, rest = start_upload(one_slot)
    try:
        libre = upload(client, "/translate_file", "target")
        assert assert_libretranslate_error(libre, 429).startswith("Slowdown: ")
        deepl = upload(client, "/v2/document", "target_lang")
        assert deepl.status_code == 429 and set(deepl.json()) == {"message"}, deepl.text
        assert deepl.headers["retry-after"].isdigit()
    finally:
        finish_upload(sock, rest)
    assert upload(client, "/translate_file", "target").status_code == 200
    assert upload(client, "/v2/document", "target_lang").status_code == 200


def test_a_client_that_hangs_up_mid_upload_frees_its_slot(client: httpx.Client, one_slot: ServiceProcess) -> None:
    sock, _ = start_upload(one_slot)
    sock.close()
    # The server learns of the hang-up when it next reads the connection: ask until it has.
    for _ in range(POLLS):
        response = upload(client)
        if response.status_code != 429:
            break
        time.sleep(0.05)
    assert response.status_code == 200, response.text


def test_an_upload_refused_while_it_streams_frees_its_slot(client: httpx.Client) -> None:
    """A chunked body past the limit (413, found while it streams) and a malformed form (422): each
    was refused after its slot was taken, and the next upload is accepted."""

    def oversized() -> Iterator[bytes]:
        yield form("target_lang")[:-50]
        yield b"x" * (4 * MAX_FILE_BYTES)

    headers = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    assert_error(client.post("/v1/translate_file", content=oversized(), headers=headers), 413, "payload_too_large")
    assert upload(client).status_code == 200
    malformed = client.post("/v1/translate_file", content=b"no parts", headers={"Content-Type": "multipart/form-data"})
    assert_error(malformed, 422, "invalid_request")
    assert upload(client).status_code == 200


@pytest.fixture(scope="module")
def keyed_slot(start_service: StartService) -> ServiceProcess:
    """One upload slot, keys required, uploads given 2 s to arrive."""
    return start_service(max_uploads=1, max_file_bytes=MAX_FILE_BYTES, api_keys="slot-key", upload_timeout_s=2)


def held_upload(server: ServiceProcess, path: str, body: bytes, sent: int, headers: str = "") -> socket.socket:
    """An upload whose first ``sent`` bytes of ``body`` are sent once the route reads it, and no more."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nExpect: 100-continue\r\n{headers}"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock = socket.create_connection((server.url.removeprefix("http://").split(":")[0], server.port), timeout=30)
    sock.sendall(head.encode())
    assert sock.recv(4096).startswith(b"HTTP/1.1 100 ")
    sock.sendall(body[:sent])
    return sock


def keyed_upload(server: ServiceProcess) -> httpx.Response:
    headers = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}", "Authorization": "Bearer slot-key"}
    return httpx.post(f"{server.url}/v1/translate_file", content=form("target_lang"), headers=headers, timeout=60)


def test_a_keyless_libretranslate_upload_takes_no_slot_before_its_file(keyed_slot: ServiceProcess) -> None:
    """Its key may be a form field: its slot is taken once that is checked, as the file part begins.
    One that sends its text fields and stops (16 of them held every slot for every key) holds none."""
    body = form("target")
    fields_only = body.index(b'name="file"') - 60  # the target field, not the file part's headers
    sock = held_upload(keyed_slot, "/translate_file", body, fields_only)
    try:
        assert keyed_upload(keyed_slot).status_code == 200
    finally:
        sock.close()


def test_an_upload_past_its_deadline_is_a_408_and_frees_its_slot(keyed_slot: ServiceProcess) -> None:
    """Half of a body, then nothing: 408 after MT_UPLOAD_TIMEOUT_S, where it held its slot for as
    long as its client dripped."""
    body = form("target_lang")
    sock = held_upload(keyed_slot, "/v1/translate_file", body, len(body) // 2, "Authorization: Bearer slot-key\r\n")
    try:
        assert keyed_upload(keyed_slot).status_code == 429  # the slot is the stalled upload's
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 408 ") and b"MT_UPLOAD_TIMEOUT_S" in answer, answer[:300]
    assert keyed_upload(keyed_slot).status_code == 200


def test_a_key_holds_at_most_its_share_of_the_slots(start_service: StartService) -> None:
    """Four slots, two keys: one key's slow upload takes its share (one), its next is refused
    naming the share, and the other key's is received."""
    server = start_service(max_uploads=4, max_file_bytes=MAX_FILE_BYTES, api_keys="key-a,key-b")
    body = form("target_lang")
    sock = held_upload(server, "/v1/translate_file", body, len(body) // 2, "Authorization: Bearer key-a\r\n")
    headers = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    try:
        for key, status in (("key-a", 429), ("key-b", 200)):
            response = httpx.post(
                f"{server.url}/v1/translate_file",
                content=body,
                headers={**headers, "Authorization": f"Bearer {key}"},
                timeout=60,
            )
            assert response.status_code == status, response.text
            if status == 429:
                assert "a key's share of MT_MAX_UPLOADS" in response.json()["error"]["message"]
    finally:
        sock.close()
