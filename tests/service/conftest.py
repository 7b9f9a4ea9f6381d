"""Real servers for the HTTP tests: ``python -m service`` in a subprocess on a free port, serving the
shared ``tiny_bundle``. A server runs until the end of the module that started it; the session's
shared ones (``server``, ``held_server``) until the end of the session. Each test worker holds its
own, so servers that outlived their module would add up to gigabytes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from live_server import API_KEYS, ServiceProcess, StartService

_RUNNING: list[ServiceProcess] = []  # started and not yet stopped, oldest first
_SHARED: list[ServiceProcess] = []  # the session's: stopped at its end


def _stop(servers: list[ServiceProcess]) -> None:
    for server in servers:  # all at once: each drains on its own, instead of one after another
        if server.process.poll() is None:
            server.terminate()
    exits = {server.url: server.stop() for server in servers}
    for server in servers:
        _RUNNING.remove(server)
    assert set(exits.values()) <= {0}, f"services exited non-zero after SIGTERM: {exits}"


@pytest.fixture(scope="session")
def start_service(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartService]:
    """A factory for servers (``start_service(**MT_settings)``)."""

    def start(**settings: str | int | float) -> ServiceProcess:
        log_path = tmp_path_factory.mktemp("service") / "service.log"
        settings.setdefault("data_dir", str(log_path.parent / "data"))  # glossaries: never in the checkout
        server = ServiceProcess(tiny_bundle, log_path, **settings)
        _RUNNING.append(server)
        return server

    yield start
    _stop(list(_RUNNING))


@pytest.fixture(scope="module", autouse=True)
def _stop_the_module_s_servers() -> Iterator[None]:
    first = len(_RUNNING)
    yield  # after the module's own fixtures, which may hold its servers, are torn down
    _stop([server for server in _RUNNING[first:] if server not in _SHARED])


@pytest.fixture(scope="session")
def server(start_service: StartService) -> ServiceProcess:
    """The main server: API keys on, small request limits so that 413s are cheap to provoke."""
    _SHARED.append(start_service(api_keys=",".join(API_KEYS), max_texts=16, max_chars=3000, max_wait_ms=2))
    return _SHARED[-1]


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
    _SHARED.append(
        start_service(
            streams=2,
            max_batch_sentences=8,
            max_wait_ms=600_000,
            max_queue_sentences=12,
            max_texts=8,
            request_timeout_s=3,
            cache_size=0,
        )
    )
    return _SHARED[-1]
