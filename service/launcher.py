"""Start the real service in a subprocess on a free loopback port: the one launcher that tests and
benchmarks share.

``serve_command`` is the command that starts the service, defined once: the Dockerfile's CMD must
equal it (tests/deploy/test_dockerfile.py), and ``LiveService`` runs it. Only the standard library
is used, so that the module also loads in the runtime image, which has no test dependencies.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Collection, Mapping
from pathlib import Path

HOST = "127.0.0.1"
# Guards against a hung start, not performance assertions: a loaded machine may take a while to
# import and warm up the engine, and the wait ends as soon as the process exits.
READY_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 60.0
POLL_S = 0.1
# The directory that holds this ``service`` package: the child imports the same code as its parent.
PACKAGE_ROOT = Path(__file__).resolve().parents[1]
# Loopback requests must not go to an HTTP proxy that the environment may name.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def serve_command(*, host: str, port: int, python: str = "python") -> list[str]:
    """argv of the service; in the image ``python`` is the virtualenv's interpreter."""
    return [python, "-m", "service", "--host", host, "--port", str(port)]


def service_env(settings: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without its ``MT_*`` variables, plus ``settings``: the service
    is configured by exactly what the caller gives, whatever the calling shell exports."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("MT_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
    return {**env, **settings}


class LiveService:
    """``python -m service`` on a free loopback port, configured by ``MT_*`` ``settings``.

    The process starts at construction; ``wait_ready`` waits for ``/readyz``. As a context manager
    it waits on entry and stops on exit. Its stdout and stderr go to ``log_path``. ``cpus`` pins it
    (and the engine processes it starts) to those CPUs, as a container's cpuset would.
    """

    def __init__(self, settings: Mapping[str, str], log_path: Path, *, cpus: Collection[int] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log_path = log_path
        self._terminated = False
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            serve_command(host=HOST, port=self.port, python=sys.executable),
            env=service_env(settings),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus),
        )

    def __enter__(self) -> LiveService:
        self.wait_ready()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def log(self, chars: int = 4000) -> str:
        """The end of the service's log."""
        return self.log_path.read_text(errors="replace")[-chars:]

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Return once ``/readyz`` answers 200; stop the service and raise if it exits or hangs."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"service exited with {self.process.returncode} while starting:\n{self.log()}")
            if self._ready():
                return
            time.sleep(POLL_S)
        self.stop()
        raise RuntimeError(f"service not ready after {timeout_s:.0f} s:\n{self.log()}")

    def _ready(self) -> bool:
        try:
            with _DIRECT.open(f"{self.url}/readyz", timeout=2) as response:
                return response.status == 200
        except OSError:  # not listening yet, or an HTTPError such as 503 while the model loads
            return False

    def terminate(self) -> None:
        """SIGTERM, as a container runtime stops it: the service drains, then exits (a second
        SIGTERM would stop it at once)."""
        self.process.send_signal(signal.SIGTERM)
        self._terminated = True

    def wait(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        return self.process.wait(timeout_s)

    def stop(self) -> int:
        """SIGTERM (unless ``terminate`` sent it), then SIGKILL if it has not exited after
        ``STOP_TIMEOUT_S``; the exit code."""
        if self.process.poll() is None:
            if not self._terminated:
                self.terminate()
            try:
                self.wait()
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode
