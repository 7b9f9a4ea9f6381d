"""The size of a request head, over a raw socket to a real server: httptools' parser (uvicorn's by
default) took a head of any size, in the event loop, in time growing with the square of its size;
the service answers 431 to a head larger than ``MAX_HEAD_BYTES`` and closes its connection."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from live_server import ServiceProcess

from service.__main__ import MAX_HEAD_BYTES

REQUEST_LINE = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Padding: "
END = b"\r\n\r\n"


def connect(server: ServiceProcess) -> socket.socket:
    address = urlsplit(server.url)
    return socket.create_connection((address.hostname, address.port), timeout=10)


def head_of(size: int, *, whole: bool = True) -> bytes:
    """A request head of ``size`` bytes, padded by one header; without its end unless ``whole``."""
    fixed = len(REQUEST_LINE) + (len(END) if whole else 0)
    return REQUEST_LINE + b"a" * (size - fixed) + (END if whole else b"")


def answer(sock: socket.socket) -> bytes:
    """What the server sends until it closes the connection."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def test_a_head_larger_than_the_limit_is_answered_431_and_closed(server: ServiceProcess) -> None:
    # One byte over, and no end: the server answers before the head is whole, having read every
    # byte sent (so that its close resets nothing the answer could be lost to).
    with connect(server) as sock:
        sock.sendall(head_of(MAX_HEAD_BYTES + 1, whole=False))
        response = answer(sock)
    assert response.startswith(b"HTTP/1.1 431 "), response[:100]
    assert response.endswith(f"request head larger than {MAX_HEAD_BYTES} bytes\n".encode())


def test_heads_up_to_the_limit_are_served_each_on_a_kept_connection(server: ServiceProcess) -> None:
    with connect(server) as sock:
        for _ in range(3):  # the count starts again at each request
            sock.sendall(head_of(MAX_HEAD_BYTES))
            response = b""
            while not response.endswith(b'{"status":"ok"}'):
                chunk = sock.recv(65536)
                assert chunk, f"closed by the server after {response[:100]!r}"
                response += chunk
            assert response.startswith(b"HTTP/1.1 200 "), response[:100]
