"""An engine process whose replacement cannot start (killed while it loads its models, or its
bundle gone from the disk) leaves its stream down, not wedged: requests fail at once instead of
waiting for their deadline, the next request starts a replacement again, and SIGTERM still exits 0."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import httpx
from live_server import ServiceProcess
from test_app_engine_crash import engine_pid

BODY = {"text": "A dog runs.", "source_lang": "en", "target_lang": "de"}


def test_a_replacement_that_fails_to_load_is_retried_by_the_next_request(tiny_bundle: Path, tmp_path: Path) -> None:
    bundle = shutil.copytree(tiny_bundle, tmp_path / "bundle")
    server = ServiceProcess(
        bundle,
        tmp_path / "service.log",
        streams=1,
        cache_size=0,
        shared_weights="false",  # the replacement reads its model from the bundle itself
        request_timeout_s=600,  # a wedged stream shows as a request that never ends, not as a 504
        data_dir=str(tmp_path / "data"),
    )
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
    assert "engine process could not be restarted" in server.log(1 << 20)
