"""``python -m service [--host H] [--port P]`` (or ``mt-service``): run the service under uvicorn.

Other settings come from ``MT_*`` environment variables (``service/settings.py``).

Shutdown on SIGTERM is graceful: readiness turns 503 and new translation requests are refused at
once, every request already accepted completes (up to ``MT_DRAIN_TIMEOUT_S``), then uvicorn stops
and the process exits 0. A second SIGTERM, or SIGINT, stops at once as uvicorn does.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socket
import sys
from types import FrameType

import uvicorn
from pydantic import ValidationError

from service.app import create_app
from service.runtime import Runtime
from service.settings import Settings

log = logging.getLogger("service")


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
        if sig != signal.SIGTERM or self.runtime.draining or self._loop is None:
            super().handle_exit(sig, frame)
            return
        # Refuse new requests from this moment. Not recorded as a captured signal: uvicorn would
        # re-raise it after shutdown, and the process would die by SIGTERM instead of exiting 0.
        self.runtime.start_draining()
        self._loop.call_soon_threadsafe(self._start_drain)

    def _start_drain(self) -> None:
        self._drain = asyncio.ensure_future(self._drain_then_exit())

    async def _drain_then_exit(self) -> None:
        log.info("SIGTERM: draining (up to %g s)", self.drain_timeout_s)
        await self.runtime.drain(self.drain_timeout_s)
        self.should_exit = True

    def fail(self) -> None:
        self.exit_code = 1
        self.should_exit = True


def _describe_settings_errors(error: ValidationError) -> str:
    """Name each problem by its environment variable: ``MT_PROVIDER: Input should be ...``."""
    problems = []
    for err in error.errors():
        field = "_".join(str(p) for p in err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        problems.append(f"MT_{field.upper()}: {message}" if field else message)
    return "; ".join(problems)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="mt-service", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", help="address to listen on (default: MT_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to listen on (default: MT_PORT or 8000)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    try:
        settings = Settings(**overrides)
    except ValidationError as e:
        print(f"mt-service: invalid configuration: {_describe_settings_errors(e)}", file=sys.stderr)  # noqa: T201
        return 2
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server: _DrainingServer | None = None
    app = create_app(settings, on_load_failure=lambda: server.fail() if server else None)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        timeout_graceful_shutdown=max(1, round(settings.drain_timeout_s)),
    )
    server = _DrainingServer(config, app.state.runtime, settings.drain_timeout_s)
    server.run()
    return server.exit_code


if __name__ == "__main__":
    sys.exit(main())
