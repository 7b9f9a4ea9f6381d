"""A real ``python -m service`` in a subprocess on a free loopback port, for the HTTP tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
API_KEYS = ("key-one", "key-two")
START_TIMEOUT_S = 120  # generous: the test machine may be busy; only reached if startup is broken


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServiceProcess:
    """A running ``python -m service``; ``url`` is its base address."""

    def __init__(
        self, bundle: Path, log_path: Path, *, cpus: set[int] | None = None, **settings: str | int | float
    ) -> None:
        """``cpus``: pin the service to these CPUs (its CPU affinity), as a container's cpuset would."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        env = {k: v for k, v in os.environ.items() if not k.startswith("MT_")}
        env.update({"MT_MODEL_DIR": str(bundle), "MT_THREADS": "1", "MT_LOG_LEVEL": "warning"})
        env.update({f"MT_{k.upper()}": str(v) for k, v in settings.items()})
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "service", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=REPO,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus),
        )
        self._wait_ready()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"service exited with {self.process.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"service not ready after {START_TIMEOUT_S} s:\n{self.log()}")

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout_s: float = 60) -> int:
        return self.process.wait(timeout_s)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.terminate()
            try:
                self.wait()
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode


StartService = Callable[..., ServiceProcess]  # the ``start_service`` fixture: settings -> running server


def scrape(client: httpx.Client) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """/metrics as {(sample name, labels): value}, parsed by prometheus_client's own parser."""
    response = client.get("/metrics")
    response.raise_for_status()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def metric(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def wait_for_metric(client: httpx.Client, name: str, value: float, **labels: str) -> None:
    """Poll /metrics until ``name`` has ``value`` (a state, not a duration: a bounded number of polls)."""
    for _ in range(300):
        if metric(scrape(client), name, **labels) == value:
            return
        time.sleep(0.05)
    raise AssertionError(f"{name}{labels} never reached {value}; last {metric(scrape(client), name, **labels)}")


def assert_error(response: httpx.Response, status: int, error_type: str) -> dict[str, str]:
    """The response is an error in the service's one shape, with this status and type."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message"}, body
    assert body["error"]["type"] == error_type
    assert body["error"]["message"]
    return body["error"]
