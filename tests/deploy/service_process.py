"""The command that starts the service, defined once: the Dockerfile's CMD must equal it (checked by
test_dockerfile.py) and the deployment tests start the real service with it.

``running_service`` runs it as a subprocess on a free loopback port, waits for /readyz, and stops it
with SIGTERM as a container runtime would.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]
CONTAINER_HOST = "0.0.0.0"
CONTAINER_PORT = 8000
# A guard against a hung start, not a performance assertion: loading a tiny bundle takes seconds.
STARTUP_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0


def serve_command(*, host: str, port: int, python: str = "python") -> list[str]:
    """argv of the service; in the image ``python`` is the virtualenv's interpreter."""
    return [python, "-m", "service", "--host", host, "--port", str(port)]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_service(model_dir: Path, *, env: dict[str, str] | None = None) -> Iterator[str]:
    """Start the service on the tiny bundle; yield its base URL; SIGTERM it and require exit 0."""
    port = free_port()
    argv = serve_command(host="127.0.0.1", port=port, python=sys.executable)
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("MT_")}  # only the settings given here
    child_env = {**inherited, "MT_MODEL_DIR": str(model_dir), **(env or {})}
    with tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen(argv, cwd=REPO_ROOT, env=child_env, stdout=log, stderr=subprocess.STDOUT)
        try:
            base_url = f"http://127.0.0.1:{port}"
            _wait_until_ready(base_url, process, log)
            yield base_url
        finally:
            _stop(process)
        assert process.returncode == 0, f"service exited {process.returncode} after SIGTERM:\n{_read(log)}"


def _wait_until_ready(base_url: str, process: subprocess.Popen[bytes], log: IO[str]) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"service exited with {process.returncode} while starting:\n{_read(log)}")
        try:
            if httpx.get(f"{base_url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass  # not listening yet
        time.sleep(0.2)
    raise AssertionError(f"service not ready after {STARTUP_TIMEOUT_S:.0f} s:\n{_read(log)}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _read(log: IO[str]) -> str:
    log.seek(0)
    return log.read()[-5000:]
