"""The load generator's HTTP clients: one connection each, requests one after another.

Two kinds, chosen by ``python -m benchmarks.service --client``:

- ``raw``: HTTP/1.1 keep-alive over an asyncio stream. It writes the request in one piece and
  reads only what framing needs (the status line, ``Content-Length`` or chunked encoding, and
  ``Connection: close``). The clients share the 2 cores with the service under test, so every
  millisecond they spend is taken from it: against a trivial FastAPI endpoint on uvloop this client
  costs 0.12-0.13 ms of CPU per request, ``httpx`` 1.6-2.0 ms (benchmarks/RESULTS.md, tried and dropped).
- ``httpx``: ``httpx.AsyncClient``, the general-purpose client, for comparison.

Both return the response's status code, or 0 when the request failed in transport (refused or
reset connection, malformed or truncated response, timeout); a failed connection is reopened for
the next request. ``RawClient.abandon`` sends a request and hangs up without reading the answer (the
soak's deliberate disconnects, ``benchmarks/soak.py``).
"""

from __future__ import annotations

import asyncio
from typing import Literal, Protocol
from urllib.parse import urlsplit

import httpx

ClientKind = Literal["raw", "httpx"]
TIMEOUT_S = 120.0
MAX_HEAD = 64 * 1024


class Client(Protocol):
    async def post(self, path: str, body: bytes) -> int:
        """POST a JSON body; the response's status code (0: transport error)."""
        ...

    async def aclose(self) -> None: ...


def open_client(url: str, kind: ClientKind) -> Client:
    return RawClient(url) if kind == "raw" else HttpxClient(url)


class RawClient:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, path: str, body: bytes) -> int:
        try:
            async with asyncio.timeout(TIMEOUT_S):
                reader, writer = await self._connection()
                writer.write(self._head(path, body) + body)
                return await self._response(reader)
        except (OSError, EOFError, ValueError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            await self.aclose()
            return 0

    async def abandon(self, path: str, body: bytes, *, body_sent: int | None = None, after_s: float = 0.0) -> bool:
        """A client that gives up: send the request (only its head and the first ``body_sent``
        bytes of its body, if given), then close the connection ``after_s`` later without reading
        the answer. False if the request could not be sent."""
        try:
            async with asyncio.timeout(TIMEOUT_S):
                _, writer = await self._connection()
                writer.write(self._head(path, body) + body[:body_sent])
                await writer.drain()
                await asyncio.sleep(after_s)
        except (OSError, TimeoutError):
            return False
        finally:
            await self.aclose()
        return True

    def _head(self, path: str, body: bytes) -> bytes:
        return (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.streams is None:
            self.streams = await asyncio.open_connection(self.host, self.port, limit=MAX_HEAD)
        return self.streams

    async def _response(self, reader: asyncio.StreamReader) -> int:
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        version, status, *_ = status_line.split(" ", 2)
        if not version.startswith("HTTP/1."):
            raise ValueError(f"not an HTTP/1.x response: {status_line!r}")
        fields = (line.lower().split(":", 1) for line in lines if ":" in line)
        headers = {name.strip(): value.strip() for name, value in fields}
        if status in ("204", "304"):
            pass  # no body by definition
        elif "content-length" in headers:
            await reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding") == "chunked":
            while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                await reader.readexactly(size + 2)  # the chunk and its CRLF
            await reader.readuntil(b"\r\n")  # the empty trailer
        else:
            raise ValueError("response without Content-Length or chunked encoding")
        if headers.get("connection") == "close":
            await self.aclose()
        return int(status)

    async def aclose(self) -> None:
        if self.streams is not None:
            _, writer = self.streams
            self.streams = None
            writer.close()


class HttpxClient:
    def __init__(self, url: str) -> None:
        self.client = httpx.AsyncClient(base_url=url, timeout=TIMEOUT_S)

    async def post(self, path: str, body: bytes) -> int:
        try:
            response = await self.client.post(path, content=body, headers={"content-type": "application/json"})
        except httpx.HTTPError:
            return 0
        return response.status_code

    async def aclose(self) -> None:
        await self.client.aclose()
