"""SIGTERM's drain is the shutdown's whole wait: uvicorn's graceful shutdown after it no longer
waits MT_DRAIN_TIMEOUT_S a second time (which made SIGTERM take twice the drain, past the
Kubernetes manifests' terminationGracePeriodSeconds)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import uvicorn

from service.__main__ import GRACE_AFTER_DRAIN_S, _DrainingServer
from service.app import create_app
from service.settings import Settings


def test_after_the_drain_uvicorn_only_finishes_writing(tiny_bundle: Path) -> None:
    settings = Settings(model_dir=tiny_bundle, drain_timeout_s=30)
    app = create_app(settings)
    config = uvicorn.Config(app, timeout_graceful_shutdown=round(settings.drain_timeout_s))
    server = _DrainingServer(config, app.state.runtime, settings.drain_timeout_s)
    asyncio.run(server._drain_then_exit())  # nothing in flight: the drain ends at once
    assert server.should_exit and app.state.runtime.in_flight.draining
    assert server.config.timeout_graceful_shutdown == GRACE_AFTER_DRAIN_S < settings.drain_timeout_s
