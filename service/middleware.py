"""Pure ASGI middleware: request accounting (metrics, in-flight, draining), the body's size limit and
timeout, the connection's end after an answer given before the body was read, the path prefix
behind a reverse proxy, and HEAD answered as GET.

Accounting and the limit run before routing and body parsing, so that a draining server refuses
new translation requests before reading them, a request counts as accepted from its first byte
(SIGTERM lets it finish even if its body is still arriving), and an oversized body is never
buffered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import ClientDisconnected, PayloadTooLarge, ServiceError, error_response
from service.metrics import Metrics
from service.runtime import Runtime

TRANSLATION_PATHS = frozenset(
    {"/v1/translate", "/v1/translate/stream", "/translate", "/v1/translate_file", "/translate_file"}
)
# Probes and scrapes are counted, but their latency would only dilute the API's latency histogram.
UNTIMED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


async def _send_error(exc: Exception, scope: Scope, receive: Receive, send: Send, metrics: Metrics) -> int:
    response, error_type = error_response(exc)
    metrics.errors.labels(error_type).inc()
    await response(scope, receive, send)
    return response.status_code


class RequestAccounting:
    """Counts every request by route and status, times API requests, tracks translations in flight."""

    def __init__(self, app: ASGIApp, *, runtime: Runtime) -> None:
        self.app = app
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        metrics = self.runtime.metrics
        started = time.perf_counter()
        status = 500  # if the app dies before sending a response, that is what the client sees
        translating = route_path(scope) in TRANSLATION_PATHS
        unfinished = False  # a response started and not ended

        async def send_and_record(message: Message) -> None:
            nonlocal status, unfinished
            if message["type"] == "http.response.start":
                status = message["status"]
            unfinished = message["type"] == "http.response.start" or message.get("more_body", False)
            await send(message)

        try:
            if translating:
                self.runtime.in_flight.enter()
        except ServiceError as exc:  # refused: the server is draining
            status = await _send_error(exc, scope, receive, send, metrics)
        else:
            try:
                await self.app(scope, receive, send_and_record)
                if unfinished:  # a stream whose client left before its end
                    status = ClientDisconnected.status
                    metrics.errors.labels(ClientDisconnected.type).inc()
            finally:
                if translating:
                    self.runtime.in_flight.leave()
        finally:
            route = _route_label(scope)
            metrics.requests.labels(route, str(status)).inc()
            if route not in UNTIMED_PATHS and route != "unmatched":
                metrics.request_duration.labels(route).observe(time.perf_counter() - started)


class SlowBody:
    """Answers 408 when a request's body, while the app waits for it, sends nothing for
    ``timeout_s``, or less than ``min_rate`` bytes a second over a ``window_s`` of waiting: a client
    that stops halfway through its body would hold its connection for ever, and one that drips a
    byte now and then would hold it, and an upload's slot, until MT_UPLOAD_TIMEOUT_S (the request
    head has its deadline in ``service.__main__``). Only the time the app spends waiting for the
    body counts, which is when uvicorn reads it from the connection: a route busy with what it has
    read never makes its client too slow."""

    def __init__(self, app: ASGIApp, *, timeout_s: float, min_rate: int, window_s: float) -> None:
        self.app = app
        self.timeout_s = timeout_s
        self.min_rate = min_rate
        self.window_s = window_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body_read = False
        window = _RateWindow(self.min_rate * self.window_s, self.window_s)

        async def timed_receive() -> Message:
            nonlocal body_read
            if body_read:  # what comes next is the disconnect, which a route may wait for as long as it likes
                return await receive()
            message = await self._receive_within(receive, window)
            body_read = not message.get("more_body", False)
            return message

        await self.app(scope, timed_receive, send)

    async def _receive_within(self, receive: Receive, window: _RateWindow) -> Message:
        """The next message, waited for while neither the idle timeout nor the rate's window runs
        out; each window that ends with its bytes starts the next. Raised into the route reading
        the body as an HTTPException, as the body limit's 413 is."""
        loop = asyncio.get_running_loop()
        idle_until = loop.time() + self.timeout_s
        while True:
            started = loop.time()
            try:
                # A wait that times out cancels the receive, which loses nothing: uvicorn keeps what
                # it has read for the next one. (A task per receive cost a tenth of the HTTP
                # process's CPU at 64 clients.)
                async with asyncio.timeout(min(idle_until - started, window.left_s)):
                    message: Message | None = await receive()
            except TimeoutError:
                message = None
            window.waited(loop.time() - started)
            if message is not None:
                window.received(len(message.get("body", b"")))
                if not message.get("more_body", False):
                    return message  # the body's end: no rate to keep any more
            elif loop.time() >= idle_until:
                raise HTTPException(
                    408, f"the request body stopped: nothing came for {self.timeout_s:g} s (MT_IDLE_TIMEOUT_S)"
                )
            if window.left_s <= 0 and not window.next():
                raise HTTPException(
                    408,
                    f"the request body came at less than {self.min_rate} bytes a second over "
                    f"{self.window_s:g} s (MT_MIN_BODY_RATE, MT_BODY_RATE_WINDOW_S)",
                )
            if message is not None:
                return message


class _RateWindow:
    """The bytes a body brought in its current window of waiting: the window must bring ``need``
    bytes in ``length_s`` seconds of waiting (or the body end within it)."""

    def __init__(self, need: float, length_s: float) -> None:
        self.need = need
        self.length_s = length_s
        self.waited_s = 0.0
        self.bytes = 0

    @property
    def left_s(self) -> float:
        return self.length_s - self.waited_s

    def waited(self, seconds: float) -> None:
        self.waited_s += seconds

    def received(self, size: int) -> None:
        self.bytes += size

    def next(self) -> bool:
        """At the window's end: whether it brought its bytes, and if so the next one begun."""
        if self.bytes < self.need:
            return False
        self.waited_s, self.bytes = 0.0, 0
        return True


class CloseUnreadBody:
    """Closes the connection after an answer given before the request's body was all read (a
    refused API key, a body too large by its Content-Length, a draining server): uvicorn would
    otherwise go on reading the rest of the body, and throwing it away, to keep the connection for
    another request. A client that sent ``Expect: 100-continue`` (curl does for bodies over 1 MB)
    sends none of it: uvicorn asks for the body only when the app first reads it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _has_body(scope):
            await self.app(scope, receive, send)
            return
        body_read = False

        async def tracked_receive() -> Message:
            nonlocal body_read
            message = await receive()
            body_read = body_read or not message.get("more_body", False)
            return message

        async def closing_send(message: Message) -> None:
            if message["type"] == "http.response.start" and not body_read:
                message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        await self.app(scope, tracked_receive, closing_send)


def _has_body(scope: Scope) -> bool:
    headers = dict(scope["headers"])
    return headers.get(b"content-length", b"0") != b"0" or b"transfer-encoding" in headers


class RootPath:
    """The service under a path prefix (``MT_ROOT_PATH``), whether a reverse proxy strips it from
    the path or passes it on: the ASGI ``root_path`` is the prefix and the path starts with it, as
    ASGI has it. Routing takes it off again; /docs, the web page and the OpenAPI document's server
    URL name it. (uvicorn's own root path is for stripping proxies only: it prefixes every path, so
    a path that has the prefix already would have it twice.)"""

    def __init__(self, app: ASGIApp, *, prefix: str) -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope = {**scope, "root_path": self.prefix}
            if route_path(scope) == scope["path"]:  # stripped by the proxy
                scope["path"] = self.prefix + scope["path"]
                if "raw_path" in scope:
                    scope["raw_path"] = self.prefix.encode() + scope["raw_path"]
        await self.app(scope, receive, send)


class HeadAsGet:
    """HEAD as GET without the body, as HTTP asks of every server (RFC 9110, 9.3.2): FastAPI's
    routes take only the methods they name, so monitors' and ``curl -I``'s HEADs would be 405s."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] != "http.response.body":
                await send(message)
            elif not message.get("more_body", False):
                await send({"type": "http.response.body", "body": b""})

        await self.app({**scope, "method": "GET"}, receive, headers_only)


def route_path(scope: Scope) -> str:
    """The path the routes see: behind a proxy that passes the prefix on (MT_ROOT_PATH), the
    request's path without it."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and (path == root or path.startswith(f"{root}/")):
        return path[len(root) :] or "/"
    return path


def _route_label(scope: Scope) -> str:
    """The matched route's template, which keeps the label set bounded; requests refused before
    routing (draining, body too large) still count under their translation route."""
    route: Any = scope.get("route")
    if template := getattr(route, "path", None):
        return str(template)
    path = route_path(scope)
    return path if path in TRANSLATION_PATHS else "unmatched"


class BodyLimit:
    """Rejects bodies over ``max_bytes`` (``path_limits`` for those paths: file uploads) with 413:
    by Content-Length up front, else while streaming."""

    def __init__(
        self, app: ASGIApp, *, max_bytes: int, metrics: Metrics, path_limits: Mapping[str, int] | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.metrics = metrics
        self.path_limits = dict(path_limits or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self.path_limits.get(route_path(scope), self.max_bytes)
        too_large = f"request body larger than {max_bytes} bytes"
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > max_bytes:
            await _send_error(PayloadTooLarge(too_large), scope, receive, send, self.metrics)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > max_bytes:
                # Raised into the route reading the body; the error handler shapes the response.
                raise HTTPException(413, too_large)
            return message

        await self.app(scope, limited_receive, send)
