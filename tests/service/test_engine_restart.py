"""An engine process whose replacement cannot start (killed while it loads its models, or its
bundle gone from the disk) leaves its stream down, not wedged: requests fail at once instead of
waiting for their deadline, the next request starts a replacement again, and SIGTERM still exits 0.
One that stays down (its model no longer loads) is left to its back-off: batches go to the process
that is up, instead of each first paying a failed restart of the one that is down (which has no
batch in flight, so was picked first every time); and SIGTERM still exits 0 (unloading a model from
the down process restarted it, and shutdown failed)."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import httpx
from live_server import ServiceProcess
from test_app_engine_crash import engine_pid, engine_pids

BODY = {"text": "A dog runs.", "source_lang": "en", "target_lang": "de"}
FAILED_RESTART = "engine process could not be restarted"
REQUESTS = 6


def service_of_a_copy(tiny_bundle: Path, tmp_path: Path, **settings: str | int) -> tuple[Path, ServiceProcess]:
    """A service of a copy of the bundle, which a test may take away; its engine processes' replacements
    read their model from the bundle itself."""
    bundle = shutil.copytree(tiny_bundle, tmp_path / "bundle")
    server = ServiceProcess(
        bundle,
        tmp_path / "service.log",
        cache_size=0,
        shared_weights="false",
        data_dir=str(tmp_path / "data"),
        **settings,
    )
    return bundle, server


def test_a_replacement_that_fails_to_load_is_retried_by_the_next_request(tiny_bundle: Path, tmp_path: Path) -> None:
    # A wedged stream shows as a request that never ends, not as a 504.
    bundle, server = service_of_a_copy(tiny_bundle, tmp_path, streams=1, request_timeout_s=600)
    with httpx.Client(base_url=server.url, timeout=120) as client:
        expected = client.post("/v1/translate", json=BODY).json()
        away = bundle.rename(tmp_path / "moved")
        os.kill(engine_pid(server.process.pid), signal.SIGKILL)
        failed = client.post("/v1/translate", json=BODY)
        assert failed.status_code == 500, failed.text
        away.rename(bundle)
        assert client.post("/v1/translate", json=BODY).json() == expected
        assert client.get("/readyz").status_code == 200
    assert server.stop() == 0, server.log()
    assert FAILED_RESTART in server.log(1 << 20)


def test_batches_avoid_an_engine_process_that_stays_down(tiny_bundle: Path, tmp_path: Path) -> None:
    bundle, server = service_of_a_copy(tiny_bundle, tmp_path, streams=2)
    with httpx.Client(base_url=server.url, timeout=120) as client:
        expected = client.post("/v1/translate", json=BODY).json()
        bundle.rename(tmp_path / "moved")
        os.kill(engine_pids(server.process.pid)[0], signal.SIGKILL)
        wait_for_log(server, FAILED_RESTART)  # its replacement could not load the model: it is down
        answers = [client.post("/v1/translate", json=BODY) for _ in range(REQUESTS)]
        assert [a.json() for a in answers] == [expected] * REQUESTS
    # Before, every request tried the down process first: one failed restart each, besides the first.
    # Now at most the back-offs that run out while they are answered (5 s, then 10, 20, ...).
    assert server.log(1 << 20).count(FAILED_RESTART) < REQUESTS, server.log()
    assert server.stop() == 0, server.log()


def wait_for_log(server: ServiceProcess, text: str) -> None:
    """Poll the service's log until it says ``text`` (a state, not a duration: bounded polls)."""
    for _ in range(600):
        if text in server.log(1 << 20):
            return
        time.sleep(0.1)
    raise AssertionError(f"the log never said {text!r}:\n{server.log()}")


def test_the_service_is_unready_while_every_engine_process_is_down_and_readiness_restarts_it(
    tiny_bundle: Path, tmp_path: Path
) -> None:
    """Ready while down, it kept getting traffic only to answer 500s; unready, no batch comes to
    restart the process, so readiness itself restarts it once its back-off ends."""
    bundle, server = service_of_a_copy(tiny_bundle, tmp_path, streams=1)
    with httpx.Client(base_url=server.url, timeout=120) as client:
        expected = client.post("/v1/translate", json=BODY).json()
        away = bundle.rename(tmp_path / "moved")
        os.kill(engine_pid(server.process.pid), signal.SIGKILL)
        wait_for_log(server, FAILED_RESTART)
        unready = client.get("/readyz")
        assert unready.status_code == 503 and "every engine process is down" in unready.text, unready.text
        assert client.get("/healthz").status_code == 200  # a pod restart is not what it needs
        away.rename(bundle)
        for _ in range(600):  # the back-off is 5 s; bounded polls of a state
            if client.get("/readyz").status_code == 200:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(server.log())
        assert client.post("/v1/translate", json=BODY).json() == expected
    assert server.stop() == 0, server.log()
