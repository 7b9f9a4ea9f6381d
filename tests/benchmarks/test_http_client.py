"""The load generator's HTTP clients (benchmarks/http_client.py) against a real uvicorn server, and
the minimal client against a hand-written server that breaks its responses."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import uvicorn
from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.responses import StreamingResponse

from benchmarks.http_client import ClientKind, open_client
from service.launcher import free_port


def make_app() -> FastAPI:
    app = FastAPI()

    @app.post("/echo")
    async def echo(request: Request) -> dict:
        return {"bytes": len(await request.body())}

    @app.post("/chunked")
    async def chunked() -> StreamingResponse:
        async def parts() -> AsyncIterator[bytes]:
            for part in (b"one ", b"two ", b"three"):
                yield part

        return StreamingResponse(parts(), media_type="text/plain")

    @app.post("/close")
    async def close() -> Response:
        return Response(b"bye", headers={"connection": "close"})

    @app.post("/empty", status_code=204)
    async def empty() -> Response:
        return Response(status_code=204)

    @app.post("/invalid")
    async def invalid() -> None:
        raise HTTPException(422, "invalid")

    return app


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(make_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.mark.parametrize("kind", ["raw", "httpx"])
def test_status_codes_over_one_connection(server_url: str, kind: ClientKind) -> None:
    """Content-Length, chunked and empty (204) bodies, a server that closes the connection (the next
    request reconnects), and error statuses all come back as the server sent them."""
    paths = ["/echo", "/chunked", "/close", "/echo", "/empty", "/missing", "/invalid", "/echo"]

    async def run() -> list[int]:
        client = open_client(server_url, kind)
        try:
            return [await client.post(path, b'{"text": "x"}') for path in paths]
        finally:
            await client.aclose()

    assert asyncio.run(run()) == [200, 200, 200, 200, 204, 404, 422, 200]


def test_raw_client_reports_broken_responses_and_reconnects() -> None:
    """A truncated body and a response that is not HTTP count as transport errors (0); every next
    request gets a fresh connection and succeeds; a healthy connection is reused."""
    replies = iter([
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",  # then the server closes: truncated
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    ])  # fmt: skip
    connections = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
            await reader.readexactly(length)
            reply = next(replies, b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
            writer.write(reply)
            await writer.drain()
            if not reply.endswith(b"ok") and not reply.startswith(b"HTTP/1.1 201"):
                writer.close()
                return

    async def run() -> list[int]:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = open_client(f"http://127.0.0.1:{port}", "raw")
        try:
            return [await client.post("/", b"{}") for _ in range(5)]
        finally:
            await client.aclose()
            server.close()

    assert asyncio.run(run()) == [0, 0, 200, 201, 201]
    assert connections == 3, "a broken connection is replaced, a healthy one reused"


def test_a_refused_connection_is_a_transport_error() -> None:
    async def run() -> int:
        client = open_client(f"http://127.0.0.1:{free_port()}", "raw")
        return await client.post("/", b"{}")

    assert asyncio.run(run()) == 0
