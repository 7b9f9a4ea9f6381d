"""Startup: readiness only once the model is warm, and a clear failure when it cannot load."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from live_server import assert_error
from repo_root import REPO, python_path

from engine.translator import Translator, TranslatorConfig
from service.__main__ import main
from service.app import create_app
from service.launcher import free_port
from service.settings import Settings


@pytest.fixture
def slow_loading_server(tiny_bundle: Path) -> Iterator[tuple[str, threading.Event]]:
    """A real uvicorn server in a thread whose (real) translator loads only when the test says so."""
    loaded = threading.Event()

    def load_when_released(config: TranslatorConfig) -> Translator:
        assert loaded.wait(60), "the test never let the model load"
        return Translator(config)

    port = free_port()
    app = create_app(Settings(model_dir=tiny_bundle, threads=1), engine_factory=load_when_released)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}", loaded
    finally:
        loaded.set()
        server.should_exit = True
        thread.join(60)


def test_ready_only_once_the_model_is_loaded(slow_loading_server: tuple[str, threading.Event]) -> None:
    url, loaded = slow_loading_server
    with httpx.Client(base_url=url, timeout=60) as client:
        wait_until(client, "/healthz", 200)  # alive at once, before the model is there
        error = assert_error(client.get("/readyz"), 503, "unavailable")
        assert "loading" in error["message"]
        assert_error(client.post("/v1/translate", json={"text": "a", "target_lang": "de"}), 503, "unavailable")
        assert_error(client.get("/v1/models"), 503, "unavailable")
        loaded.set()
        wait_until(client, "/readyz", 200)
        assert client.post("/v1/translate", json={"text": "a", "target_lang": "de"}).status_code == 200


def wait_until(client: httpx.Client, path: str, status: int) -> None:
    for _ in range(600):
        try:
            if client.get(path).status_code == status:
                return
        except httpx.TransportError:
            pass  # not listening yet
        time.sleep(0.05)
    raise AssertionError(f"{path} never answered {status}")


def test_a_missing_bundle_fails_the_process_with_a_clear_message(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-bundle"
    result = subprocess.run(
        [sys.executable, "-m", "service", "--port", str(free_port())],
        cwd=REPO,
        env={"MT_MODEL_DIR": str(missing), "PYTHONPATH": python_path(), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert f"{missing}: bundle directory does not exist" in result.stderr


def test_invalid_settings_are_named_by_their_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MT_PROVIDER", "tpu")
    monkeypatch.setenv("MT_MAX_TEXTS", "0")
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "MT_PROVIDER" in err and "MT_MAX_TEXTS" in err
