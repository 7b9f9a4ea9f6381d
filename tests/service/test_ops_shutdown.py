"""SIGTERM ends the process promptly and cleanly whatever is still running: a model still loading
is given up rather than waited for (a large one could outlast the orchestrator's grace period),
and a request that outlives the drain is answered 503 in its route's error shape, not cancelled
into a bare 500 with a traceback in the log."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
from live_server import (
    ServiceProcess,
    StartService,
    assert_error,
    assert_libretranslate_error,
    wait_for_metric,
)
from test_app_lifecycle import wait_until

from service.launcher import LiveService

MESSAGE = "the service shut down before the translation finished: try again"


@contextmanager
def weights_cache_held(data_dir: Path) -> Iterator[None]:
    """Hold every entry of the engines' weights cache (``engine.shared_weights``) as a process
    building it would: an engine process that loads a model waits for it, for as long as it is held."""
    with ExitStack() as stack:
        for lock in sorted((data_dir / "weights").glob("*.lock")):
            file = stack.enter_context(lock.open("a"))
            fcntl.flock(file, fcntl.LOCK_EX)
        yield


def test_sigterm_while_a_model_loads_exits_0_without_waiting_for_it(tiny_bundle: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    ServiceProcess(tiny_bundle, tmp_path / "first.log", data_dir=str(data)).stop()  # fills the weights cache
    with weights_cache_held(data):
        settings = {"MT_MODEL_DIR": str(tiny_bundle), "MT_THREADS": "1", "MT_DATA_DIR": str(data)}
        service = LiveService(settings, tmp_path / "service.log")
        try:
            with httpx.Client(base_url=service.url, timeout=60) as client:
                wait_until(client, "/healthz", 200)
                assert "loading" in assert_error(client.get("/readyz"), 503, "unavailable")["message"]
            service.terminate()
            # The load never ends while the cache is held: before, the process waited for it for ever.
            assert service.wait() == 0, service.log()
        finally:
            service.stop()
    assert "Traceback" not in service.log(1 << 20), service.log()


def test_a_request_that_outlives_the_drain_is_answered_503_in_its_routes_shape(
    start_service: StartService,
) -> None:
    # A text waits for a batch of 8 that never fills: each request runs until the drain runs out.
    server = start_service(
        max_batch_sentences=8, max_wait_ms=600_000, request_timeout_s=600, drain_timeout_s=1, streams=1
    )
    requests = [
        ("/v1/translate", {"json": {"text": "A dog runs.", "target_lang": "de"}}),
        ("/v1/translate/stream", {"json": {"text": "A man sings.", "target_lang": "de"}}),
        ("/translate", {"json": {"q": "A cat sits.", "source": "en", "target": "de"}}),
        ("/v2/translate", {"data": {"text": "The boy plays.", "target_lang": "DE"}}),
    ]
    with httpx.Client(base_url=server.url, timeout=60) as client, ThreadPoolExecutor(len(requests)) as pool:
        running = [pool.submit(client.post, path, **body) for path, body in requests]
        wait_for_metric(client, "mt_requests_in_flight", len(requests))
        server.terminate()
        v1, stream, libretranslate, deepl = (future.result() for future in running)
    assert assert_error(v1, 503, "unavailable")["message"] == MESSAGE
    assert assert_error(stream, 503, "unavailable")["message"] == MESSAGE
    assert_libretranslate_error(libretranslate, 503, MESSAGE)
    assert deepl.status_code == 503 and deepl.json() == {"message": MESSAGE}, deepl.text
    assert server.wait() == 0, server.log()
    log = server.log(1 << 20)
    assert "Traceback" not in log and "CancelledError" not in log, log
