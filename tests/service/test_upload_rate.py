"""MT_MIN_BODY_RATE against a real server and raw sockets: an upload dripping a byte now and then is
answered 408 in its API's shape once a window of MT_BODY_RATE_WINDOW_S brings less than the rate,
long before MT_UPLOAD_TIMEOUT_S, and its slot is free again; an upload at a steady, slow rate above
the minimum is translated."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import pytest
from live_server import ServiceProcess, StartService

BOUNDARY = "rate-test-boundary"
KEY = "rate-key"
MIN_RATE = 1024
WINDOW_S = 1.0
UPLOAD_TIMEOUT_S = 60
# The client sent a byte every 25 s under a 30 s idle timeout; here every 0.3 s under 30 s.
DRIP_EVERY_S = 0.3
# Each route: its path, the key's header, the form's target field, and how its error names the 408.
ROUTES = {
    "v1": ("/v1/translate_file", f"Authorization: Bearer {KEY}", "target_lang"),
    "libretranslate": ("/translate_file", f"Authorization: Bearer {KEY}", "target"),
    "deepl": ("/v2/document", f"Authorization: DeepL-Auth-Key {KEY}", "target_lang"),
}


@pytest.fixture(scope="module")
def server(start_service: StartService) -> ServiceProcess:
    """One upload slot, so that a dripping upload holds the only one."""
    return start_service(
        max_uploads=1,
        api_keys=KEY,
        upload_timeout_s=UPLOAD_TIMEOUT_S,
        min_body_rate=MIN_RATE,
        body_rate_window_s=WINDOW_S,
    )


def form(target_field: str, text: bytes) -> bytes:
    return (
        (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{target_field}"\r\n\r\nde\r\n'
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\n'
        ).encode()
        + text
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )


def open_upload(server: ServiceProcess, route: str, body: bytes) -> socket.socket:
    """A connection that has sent an upload's head, with the whole body's Content-Length."""
    path, key_header, _ = ROUTES[route]
    head = (
        f"POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{key_header}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=UPLOAD_TIMEOUT_S)
    sock.sendall(head.encode())
    return sock


def answer_of(sock: socket.socket) -> tuple[int, bytes]:
    """The status and body of the server's answer, read until it closes the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def drip(sock: socket.socket, body: bytes) -> float:
    """Sends ``body`` a byte every DRIP_EVERY_S until the server answers (or closes); the seconds
    that took."""
    started = time.monotonic()
    sock.settimeout(DRIP_EVERY_S)
    for byte in body:
        try:
            if sock.recv(1, socket.MSG_PEEK):
                break
        except TimeoutError:
            pass
        try:
            sock.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            break
    sock.settimeout(UPLOAD_TIMEOUT_S)
    return time.monotonic() - started


@pytest.mark.parametrize("route", ROUTES)
def test_a_dripping_upload_is_a_408_long_before_its_deadline(server: ServiceProcess, route: str) -> None:
    body = form(ROUTES[route][2], b"A dog runs in the park.\n" * 40)
    with open_upload(server, route, body) as sock:
        took = drip(sock, body)
        status, answer = answer_of(sock)
    assert status == 408, answer
    assert "MT_MIN_BODY_RATE" in error_message(route, json.loads(answer)), answer
    # Cut off at the first window's end, not at MT_UPLOAD_TIMEOUT_S (a generous margin for a busy machine).
    assert took < UPLOAD_TIMEOUT_S / 4, took
    steady = steady_upload(server, route)
    assert steady == 200, "the dripping upload's slot is free again"


def error_message(route: str, error: dict[str, Any]) -> str:
    """The message of an error in the route's API's shape."""
    if route == "v1":
        assert set(error) == {"error"} and error["error"]["type"] == "request_timeout", error
        return str(error["error"]["message"])
    assert set(error) == ({"message"} if route == "deepl" else {"error"}), error
    return str(error["message" if route == "deepl" else "error"])


def steady_upload(server: ServiceProcess, route: str) -> int:
    """An upload sent in 1 KiB pieces at 4 KiB a second, over several windows: above the minimum."""
    body = form(ROUTES[route][2], b"A dog runs in the park.\n" * 400)
    with open_upload(server, route, body) as sock:
        for start in range(0, len(body), 1024):
            sock.sendall(body[start : start + 1024])
            time.sleep(0.25)
        return answer_of(sock)[0]


def test_a_slow_upload_above_the_minimum_is_translated(server: ServiceProcess) -> None:
    """Four times the minimum rate, in pieces spread over about three windows: never cut off."""
    assert steady_upload(server, "v1") == 200
