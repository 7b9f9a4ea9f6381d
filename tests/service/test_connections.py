"""Connections that keep the server waiting are closed after MT_IDLE_TIMEOUT_S: one that never sends
a request, one that trickles its headers in (slowloris), one that trickles the next request's head
after a response. Raw sockets against real servers: the service itself, and uvicorn serving a tiny
app through the service's protocol on each of uvicorn's HTTP implementations."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import uvicorn
from live_server import ServiceProcess, StartService
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from service.__main__ import http_protocol

IDLE_TIMEOUT_S = 1.0
# Far longer than the timeout, so that a connection still open then was not going to be closed.
PATIENCE_S = 6.0
HEAD = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nUser-Agent: slow\r\nX-Padding: " + b"a" * 200 + b"\r\n\r\n"


def connect(url: str) -> socket.socket:
    address = urlsplit(url)
    return socket.create_connection((address.hostname, address.port), timeout=5)


def seconds_until_closed(sock: socket.socket, trickle: bytes = b"", every_s: float = 0.1) -> float | None:
    """Seconds until the server closes ``sock`` while ``trickle`` is sent a byte every ``every_s``
    (then nothing); None if it is still open after PATIENCE_S. Anything the server answers is read."""
    started = time.monotonic()
    sock.settimeout(every_s)
    while (elapsed := time.monotonic() - started) < PATIENCE_S:
        try:
            if trickle:
                sock.send(trickle[:1])
                trickle = trickle[1:]
            if sock.recv(65536) == b"":
                return elapsed
        except TimeoutError:
            continue
        except OSError:  # reset, or a send after the server closed
            return elapsed
    return None


def read_response(sock: socket.socket) -> bytes:
    """One whole response (headers, and a body of its Content-Length) from ``sock``."""
    sock.settimeout(5)
    response = b""
    while b"\r\n\r\n" not in response:
        response += _received(sock)
    head, _, body = response.partition(b"\r\n\r\n")
    length = int(next(line for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:"))[15:])
    while len(body) < length:
        body += _received(sock)
    return head + b"\r\n\r\n" + body


def _received(sock: socket.socket) -> bytes:
    data = sock.recv(65536)
    assert data, "closed by the server"
    return data


def answer_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    sock.settimeout(PATIENCE_S)
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    return answer


def get(sock: socket.socket) -> None:
    """One request on ``sock``, answered 200."""
    sock.sendall(HEAD)
    response = read_response(sock)
    assert response.startswith(b"HTTP/1.1 200 "), response


@pytest.fixture(scope="module")
def server(start_service: StartService) -> ServiceProcess:
    return start_service(idle_timeout_s=IDLE_TIMEOUT_S)


def test_a_connection_that_sends_nothing_is_closed(server: ServiceProcess) -> None:
    with connect(server.url) as sock:
        closed = seconds_until_closed(sock)
    assert closed is not None and IDLE_TIMEOUT_S - 0.1 <= closed < IDLE_TIMEOUT_S + 1, closed


def test_a_connection_trickling_its_headers_is_closed(server: ServiceProcess) -> None:
    """Slowloris: a byte every 0.1 s, each of which would have reset an inactivity timer."""
    with connect(server.url) as sock:
        closed = seconds_until_closed(sock, trickle=HEAD)
    assert closed is not None and IDLE_TIMEOUT_S - 0.1 <= closed < IDLE_TIMEOUT_S + 1, closed


def test_a_connection_trickling_its_next_request_is_closed(server: ServiceProcess) -> None:
    with connect(server.url) as sock:
        get(sock)
        closed = seconds_until_closed(sock, trickle=HEAD)
    assert closed is not None and closed < IDLE_TIMEOUT_S + 1, closed


def test_requests_whose_head_comes_in_time_are_served(server: ServiceProcess) -> None:
    with connect(server.url) as sock:
        sock.sendall(HEAD[:20])
        time.sleep(IDLE_TIMEOUT_S / 2)
        sock.sendall(HEAD[20:])
        assert read_response(sock).startswith(b"HTTP/1.1 200 ")
        for _ in range(3):  # a kept-alive connection's deadline runs from each response
            time.sleep(IDLE_TIMEOUT_S * 0.6)
            get(sock)


def test_many_idle_connections_are_all_closed(server: ServiceProcess) -> None:
    """What made the service unreachable: connections that never send a request pile up. The
    server's descriptors come back down once the timeout passes, and it keeps answering."""
    descriptors = lambda: len(os.listdir(f"/proc/{server.process.pid}/fd"))
    before = descriptors()
    idle = [connect(server.url) for _ in range(300)]
    try:
        deadline = time.monotonic() + IDLE_TIMEOUT_S / 2
        # accepted from the backlog; a few descriptors of the service's own come and go meanwhile
        while descriptors() < before + 295 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert descriptors() >= before + 295
        time.sleep(IDLE_TIMEOUT_S + 1)
        assert descriptors() <= before + 5
        for sock in idle:
            assert sock.recv(1) == b""  # closed by the server
        with connect(server.url) as sock:
            get(sock)
    finally:
        for sock in idle:
            sock.close()


async def _hello(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture(params=[HttpToolsProtocol, H11Protocol], ids=["httptools", "h11"])
def uvicorn_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """uvicorn in a thread, serving a tiny app through the service's protocol on this implementation."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
    config = uvicorn.Config(
        _hello, host="127.0.0.1", port=port, http=http_protocol(IDLE_TIMEOUT_S, request.param), log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=asyncio.run, args=(server.serve(),), daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    else:
        raise RuntimeError("uvicorn did not start")
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join()


def test_each_uvicorn_implementation_closes_waiting_connections(uvicorn_url: str) -> None:
    with connect(uvicorn_url) as idle, connect(uvicorn_url) as slow:
        assert (closed := seconds_until_closed(idle)) is not None and closed < IDLE_TIMEOUT_S + 1
        assert (closed := seconds_until_closed(slow, trickle=HEAD)) is not None and closed < IDLE_TIMEOUT_S + 1
    with connect(uvicorn_url) as served:
        started = time.monotonic()
        served.sendall(HEAD * 2)  # pipelined: the second request's head is already there
        answers = answer_until_closed(served)
    assert answers.count(b"HTTP/1.1 200 ") == 2, answers
    assert time.monotonic() - started < IDLE_TIMEOUT_S + 1


def test_a_body_that_stops_is_answered_408_and_closed(server: ServiceProcess) -> None:
    """Headers whole, then part of the body, then nothing: the connection would be held for ever."""
    body = b'{"text": "A dog runs.", "target_lang": "de"}'
    head = f"POST /v1/translate HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(body) + 10}\r\n\r\n"
    with connect(server.url) as sock:
        started = time.monotonic()
        sock.sendall(head.encode() + body)
        answer = answer_until_closed(sock)
        closed = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408 ") and b"connection: close" in answer.lower(), answer
    assert b'"type":"request_timeout"' in answer
    assert IDLE_TIMEOUT_S - 0.1 <= closed < IDLE_TIMEOUT_S + 1, closed


def test_a_body_that_keeps_coming_is_read(server: ServiceProcess) -> None:
    body = b'{"text": "A dog runs.", "target_lang": "de"}'
    head = f"POST /v1/translate HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(body)}\r\n\r\n"
    with connect(server.url) as sock:
        sock.sendall(head.encode())
        for start in range(0, len(body), 10):  # over twice the timeout in all, a piece every 0.3 s
            time.sleep(IDLE_TIMEOUT_S * 0.3)
            sock.sendall(body[start : start + 10])
        assert read_response(sock).startswith(b"HTTP/1.1 200 ")
