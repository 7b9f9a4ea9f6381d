"""``python -m service [--host H] [--port P]`` (or ``mt-service``): run the service under uvicorn;
``python -m service keys {create,list,revoke,limits}``: its managed API keys (``service.key_commands``).

Other settings come from ``MT_*`` environment variables (``service/settings.py``).

Shutdown on SIGTERM is graceful: readiness turns 503 and new translation requests are refused at
once, every request already accepted completes (up to ``MT_DRAIN_TIMEOUT_S``), then uvicorn stops
and the process exits 0. A second SIGTERM, or SIGINT, stops at once as uvicorn does.

A connection that has not sent a whole request head ``MT_IDLE_TIMEOUT_S`` after it opened (or
after its previous response) is closed: uvicorn itself keeps a connection that sends nothing, or
trickles its headers in, open for ever. (A body that stops for as long: ``middleware.SlowBody``.)
A request head larger than ``MAX_HEAD_BYTES`` is answered 431 and its connection closed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import socket
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn
from pydantic import ValidationError
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from engine.cli import HelpFormatter, definition_list
from service import key_commands
from service.app import create_app
from service.errors import DatabaseUnavailable
from service.runtime import Runtime
from service.settings import Settings

log = logging.getLogger("service")

# uvicorn's own graceful shutdown, after the drain: accepted translations are done (or past
# MT_DRAIN_TIMEOUT_S, and cancelled anyway), so it only has responses to finish writing. Waiting
# MT_DRAIN_TIMEOUT_S again made SIGTERM take twice the drain, past Kubernetes' grace period.
GRACE_AFTER_DRAIN_S = 1
# httptools' parser, uvicorn's by default, takes a request head of any size, in the event loop and
# in time that grows with the square of its size: one client's 120 MB header held every other
# request up to 5.7 s. Browsers' and proxies' heads stay far below (nginx's default is 32 KiB).
MAX_HEAD_BYTES = 64 << 10
_HEAD_TOO_LARGE_TEXT = f"request head larger than {MAX_HEAD_BYTES} bytes\n".encode()
_HEAD_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_HEAD_TOO_LARGE_TEXT), _HEAD_TOO_LARGE_TEXT)
)


class _DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, runtime: Runtime, drain_timeout_s: float) -> None:
        super().__init__(config)
        self.runtime = runtime
        self.drain_timeout_s = drain_timeout_s
        self.exit_code = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain: asyncio.Future[None] | None = None  # referenced so that the task is not collected

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig != signal.SIGTERM or self.runtime.in_flight.draining or self._loop is None:
            super().handle_exit(sig, frame)
            return
        # Refuse new requests from this moment. Not recorded as a captured signal: uvicorn would
        # re-raise it after shutdown, and the process would die by SIGTERM instead of exiting 0.
        self.runtime.in_flight.start_draining()
        self._loop.call_soon_threadsafe(self._start_drain)

    def _start_drain(self) -> None:
        self._drain = asyncio.ensure_future(self._drain_then_exit())

    async def _drain_then_exit(self) -> None:
        log.info("SIGTERM: draining (up to %g s)", self.drain_timeout_s)
        await self.runtime.in_flight.drain(self.drain_timeout_s)
        self.config.timeout_graceful_shutdown = GRACE_AFTER_DRAIN_S
        self.should_exit = True

    def fail(self) -> None:
        self.exit_code = 1
        self.should_exit = True


class _HeadDeadline(asyncio.Protocol):
    """Mixed into a uvicorn HTTP protocol (h11's or httptools'): closes the connection when a
    request head has not all arrived ``idle_timeout_s`` after the connection opened or its previous
    response ended, whether the client sent nothing or trickles its headers in (slowloris). uvicorn's
    own keep-alive timeout starts only after a response and stops at the next request's first byte;
    no option of it (timeout_keep_alive, limit_concurrency, h11_max_incomplete_event_size) closes
    either connection. A head that grows past ``MAX_HEAD_BYTES`` before it is whole is answered 431
    and its connection closed, before the parser has spent more on it."""

    idle_timeout_s: float
    # Set by uvicorn's protocol: the connection, and the request being answered (None before the first).
    transport: asyncio.Transport
    cycle: Any
    _deadline: asyncio.TimerHandle | None = None
    _after: Any = None  # the request whose successor's head is awaited
    _head_bytes = 0  # received while that head is awaited

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._deadline is None:
            return
        if self.cycle is not self._after:  # a new request's head is whole
            self._deadline.cancel()
            self._deadline = None
            return
        self._head_bytes += len(data)
        if self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
            self._deadline.cancel()
            self.transport.write(_HEAD_TOO_LARGE)
            self._close()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if self._deadline is None and self.cycle.response_complete:  # and no pipelined request started
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        super().connection_lost(exc)

    def _await_head(self) -> None:
        self._after = self.cycle
        self._head_bytes = 0
        self._deadline = asyncio.get_running_loop().call_later(self.idle_timeout_s, self._close)

    def _close(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def http_protocol(idle_timeout_s: float, base: type[asyncio.Protocol] = AutoHTTPProtocol) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools' when installed, as uvicorn's ``auto``) with the request
    head's deadline."""
    return type("HttpProtocol", (_HeadDeadline, base), {"idle_timeout_s": idle_timeout_s})


def _describe_settings_errors(error: ValidationError) -> str:
    """Name each problem by its environment variable: ``MT_PROVIDER: Input should be ...``."""
    problems = []
    for err in error.errors():
        field = "_".join(str(p) for p in err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        problems.append(f"MT_{field.upper()}: {message}" if field else message)
    return "; ".join(problems)


def _unresolvable_host(host: str, port: int) -> str | None:
    """Why ``host`` cannot be listened on when it names no address (a host name that does not
    resolve); None when it does. Asked here, at start-up, because uvicorn's own failure names no
    setting and exits 3."""
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:  # UnicodeError: a name IDNA cannot encode
        return f"{host!r} does not resolve to an address ({e.args[-1]})"
    return None


def program_name(argv0: str) -> str:
    """How the service was started: ``python -m service`` runs ``service/__main__.py``; the
    installed script (``mt-service``) runs under its own name."""
    return "python -m service" if Path(argv0).name == "__main__.py" else "mt-service"


def _env_value(value: object) -> str:
    """A default as the environment variable would spell it."""
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


def settings_help() -> str:
    """Every ``MT_*`` setting with its default and description, from ``Settings`` itself."""
    entries = [
        (f"MT_{name.upper()}={_env_value(info.default)}", info.description or "")
        for name, info in Settings.model_fields.items()
    ]
    return definition_list("environment variables (each with its default; nothing after = is empty)", entries)


def build_parser(prog: str) -> argparse.ArgumentParser:
    defaults = Settings.model_fields
    parser = argparse.ArgumentParser(
        prog=prog, description=__doc__.split("\n\n")[0], epilog=settings_help(), formatter_class=HelpFormatter
    )
    parser.add_argument("--host", help=f"address to listen on (default: MT_HOST, else {defaults['host'].default})")
    parser.add_argument(
        "--port", type=int, help=f"port to listen on (default: MT_PORT, else {defaults['port'].default})"
    )
    return parser


def _keys(argv: list[str], prog: str) -> int:
    """``keys ...``: the managed API keys (``service.key_commands``)."""
    try:
        return key_commands.main(argv, prog)
    except ValidationError as e:
        return _refuse(prog, _describe_settings_errors(e))
    except DatabaseUnavailable as e:
        print(f"{prog} keys: {e.reason}", file=sys.stderr)  # noqa: T201
        return 1


def _refuse(prog: str, problems: str) -> int:
    """Refuse to start, with one line: the exit status of a bad setting."""
    print(f"{prog}: invalid configuration: {problems}", file=sys.stderr)  # noqa: T201
    return 2


def main(argv: list[str] | None = None) -> int:
    prog = program_name(sys.argv[0])
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["keys"]:
        return _keys(argv[1:], prog)
    args = build_parser(prog).parse_args(argv)
    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    try:
        settings = Settings(**overrides)
    except ValidationError as e:
        return _refuse(prog, _describe_settings_errors(e))
    if problem := _unresolvable_host(settings.host, settings.port):
        return _refuse(prog, f"{'--host' if args.host is not None else 'MT_HOST'}: {problem}")
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server: _DrainingServer | None = None
    app = create_app(settings, on_load_failure=lambda: server.fail() if server else None)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        http=http_protocol(settings.idle_timeout_s),
        log_level=settings.log_level,
        timeout_graceful_shutdown=max(1, round(settings.drain_timeout_s)),
    )
    server = _DrainingServer(config, app.state.runtime, settings.drain_timeout_s)
    settle_heap()
    server.run()
    return server.exit_code


def settle_heap() -> None:
    """Take what is alive once the app is built (the imported modules, the app and its schemas:
    about 96,000 objects) out of the cyclic garbage collector's sight, and let it run a fourteenth
    as often. A request leaves a few hundred containers to collect, and every third of them or so
    set off a collection that walked all of those objects again: at 64 clients the collector took
    a quarter of this process's CPU (benchmarks/RESULTS.md, section 35). What is made later, the
    models' objects among it, is collected as before, so a model unloaded leaves nothing behind."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)


if __name__ == "__main__":
    sys.exit(main())
