"""service.launcher: the live service that tests and benchmarks start."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import httpx
import pytest

from service.launcher import PACKAGE_ROOT, LiveService, free_port, service_env


def test_a_free_port_can_be_listened_on() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port()))


def test_the_service_gets_exactly_the_settings_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MT_CACHE_SIZE", "7")
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = service_env({"MT_THREADS": "1"})
    assert env["MT_THREADS"] == "1" and "MT_CACHE_SIZE" not in env
    assert env["PYTHONPATH"] == os.pathsep.join([str(PACKAGE_ROOT), "/elsewhere"])
    assert env["PATH"] == os.environ["PATH"]


def test_a_service_that_exits_while_starting_fails_with_its_log(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-bundle"
    log = tmp_path / "logs" / "service.log"  # the directory is created
    service = LiveService({"MT_MODEL_DIR": str(missing)}, log)
    with pytest.raises(RuntimeError, match="exited with 1 while starting") as failure:
        service.wait_ready()
    assert "bundle directory does not exist" in str(failure.value)
    assert "bundle directory does not exist" in log.read_text()


def test_a_pinned_service_is_ready_on_entry_and_exits_0_on_sigterm(tiny_bundle: Path, tmp_path: Path) -> None:
    settings = {"MT_MODEL_DIR": str(tiny_bundle), "MT_THREADS": "1", "MT_LOG_LEVEL": "warning"}
    with LiveService(settings, tmp_path / "service.log", cpus={0}) as service:
        assert httpx.get(f"{service.url}/readyz", timeout=10).status_code == 200
        assert os.sched_getaffinity(service.process.pid) == {0}
    assert service.process.returncode == 0, service.log()
