"""The engine runs in a child process of the service: killing it fails one batch, not the service."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
from live_server import StartService, assert_error

ROUTE = "/v1/translate"
BODY = {"text": ["A dog runs.", "The boy plays."], "target_lang": "de", "beam_size": 2}


def engine_pid(server_pid: int) -> int:
    """The service's engine child (not multiprocessing's resource tracker)."""
    # Children are listed under the thread that started them, which need not be the main one.
    children = [
        pid for task in Path(f"/proc/{server_pid}/task").iterdir() for pid in (task / "children").read_text().split()
    ]
    engines = [int(pid) for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(engines) == 1, f"expected one engine process among {children}"
    return engines[0]


def test_a_killed_engine_fails_one_batch_then_the_service_recovers(start_service: StartService) -> None:
    server = start_service(cache_size=0)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        expected = client.post(ROUTE, json=BODY).json()
        first = engine_pid(server.process.pid)
        os.kill(first, signal.SIGKILL)
        assert_error(client.post(ROUTE, json=BODY), 500, "internal_error")
        assert client.get("/readyz").status_code == 200
        assert client.post(ROUTE, json=BODY).json() == expected
        assert engine_pid(server.process.pid) != first
    assert server.stop() == 0, server.log()
