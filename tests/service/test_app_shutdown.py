"""Graceful shutdown: SIGTERM with requests in flight.

The in-flight requests stream their bodies and the test holds the last chunk back, so they are
still running when SIGTERM arrives, however fast or slow the machine is.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
from live_server import StartService, assert_error, wait_for_metric

ROUTE = "/v1/translate"


def held_back_body(body: dict[str, object], release: threading.Event) -> Iterator[bytes]:
    data = json.dumps(body).encode()
    yield data[:10]
    assert release.wait(60), "the test never released the request body"
    yield data[10:]


def test_sigterm_drains_in_flight_requests_then_exits_0(start_service: StartService) -> None:
    server = start_service()
    release = threading.Event()
    bodies = [{"text": t, "target_lang": "de"} for t in ("A dog runs.", ["A cat sits.", "The boy plays."])]
    with httpx.Client(base_url=server.url, timeout=60) as client, ThreadPoolExecutor(len(bodies)) as pool:
        expected = [client.post(ROUTE, json=b).json() for b in bodies]
        in_flight = [
            pool.submit(
                httpx.post,
                f"{server.url}{ROUTE}",
                content=held_back_body(b, release),
                headers={"Content-Type": "application/json"},
                timeout=60,
            )
            for b in bodies
        ]
        wait_for_metric(client, "mt_requests_in_flight", len(bodies))

        server.terminate()
        # Draining: unready, new translations refused, liveness and metrics still answer.
        wait_for_readiness_503(client)
        assert_error(client.post(ROUTE, json=bodies[0]), 503, "unavailable")
        assert_error(client.post("/translate", json={"q": "a", "target": "de"}), 503, "unavailable")
        assert client.get("/healthz").status_code == 200

        release.set()
        responses = [f.result() for f in in_flight]
    assert [r.status_code for r in responses] == [200, 200]
    assert [r.json() for r in responses] == expected
    assert server.wait() == 0, server.log()


def wait_for_readiness_503(client: httpx.Client) -> None:
    # SIGTERM is delivered asynchronously: poll until the server has seen it (a state, not a duration).
    for _ in range(300):
        response = client.get("/readyz")
        if response.status_code == 503:
            assert_error(response, 503, "unavailable")
            return
        time.sleep(0.02)
    raise AssertionError("readiness never turned 503 after SIGTERM")
