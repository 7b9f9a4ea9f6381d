"""Real servers for the HTTP tests: ``python -m service`` in a subprocess on a free port, serving the
shared ``tiny_bundle``. Each configuration is started once per session and shared by its tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from live_server import API_KEYS, ServiceProcess, StartService


@pytest.fixture(scope="session")
def start_service(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartService]:
    """A factory for servers (``start_service(**MT_settings)``), all stopped at the end of the session."""
    started: list[ServiceProcess] = []

    def start(**settings: str | int | float) -> ServiceProcess:
        log_path = tmp_path_factory.mktemp("service") / "service.log"
        settings.setdefault("data_dir", str(log_path.parent / "data"))  # glossaries: never in the checkout
        server = ServiceProcess(tiny_bundle, log_path, **settings)
        started.append(server)
        return server

    yield start
    for server in started:  # all at once: each drains on its own, instead of one after another
        if server.process.poll() is None:
            server.terminate()
    exits = {server.url: server.stop() for server in started}
    assert set(exits.values()) <= {0}, f"services exited non-zero after SIGTERM: {exits}"


@pytest.fixture(scope="session")
def server(start_service: StartService) -> ServiceProcess:
    """The main server: API keys on, small request limits so that 413s are cheap to provoke."""
    return start_service(api_keys=",".join(API_KEYS), max_texts=16, max_chars=3000, max_wait_ms=2)


@pytest.fixture(scope="session")
def client(server: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {API_KEYS[0]}"}, timeout=60) as c:
        yield c


@pytest.fixture(scope="session")
def anonymous(server: ServiceProcess) -> Iterator[httpx.Client]:
    """A client of the main server that sends no API key."""
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


@pytest.fixture(scope="session")
def held_server(start_service: StartService) -> ServiceProcess:
    """A server whose batches start only when full (8 texts): queue states are deterministic.

    max_wait is far longer than any test, so a partial batch just waits. Two engine processes on any
    machine: a full batch that finds both free is shared between them (4 texts each). No API keys
    (the default) and no cache, so that a text sent twice is queued twice.
    """
    return start_service(
        streams=2,
        max_batch_sentences=8,
        max_wait_ms=600_000,
        max_queue_sentences=12,
        max_texts=8,
        request_timeout_s=3,
        cache_size=0,
    )
