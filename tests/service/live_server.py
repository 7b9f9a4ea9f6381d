"""The service in a subprocess for the HTTP tests (``service.launcher``), and helpers to read its
answers: /metrics samples and the error shape."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from service.launcher import LiveService
from service.schemas import ErrorDetail

API_KEYS = ("key-one", "key-two")


class ServiceProcess(LiveService):
    """A ready ``python -m service`` on ``bundle``; ``settings`` are ``MT_*`` names in lower case
    without the prefix (``max_wait_ms=2``). One thread and warning logs unless a setting says otherwise."""

    def __init__(
        self, bundle: Path, log_path: Path, *, cpus: set[int] | None = None, **settings: str | int | float
    ) -> None:
        env = {"MT_MODEL_DIR": str(bundle), "MT_THREADS": "1", "MT_LOG_LEVEL": "warning"}
        env.update({f"MT_{name.upper()}": str(value) for name, value in settings.items()})
        super().__init__(env, log_path, cpus=cpus)
        self.wait_ready()


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


def assert_libretranslate_error(response: httpx.Response, status: int, message: str | None = None) -> str:
    """LibreTranslate's error: ``{"error": "<message>"}`` and no other field, with this status."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and isinstance(body["error"], str) and body["error"], body
    if message is not None:
        assert body["error"] == message
    return body["error"]


def assert_error(response: httpx.Response, status: int, error_type: str) -> dict[str, str]:
    """The response is an error in the service's one shape, with this status and type."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and {"type", "message"} <= set(body["error"]), body
    assert set(body["error"]) <= set(ErrorDetail.model_fields), body
    assert body["error"]["type"] == error_type
    assert body["error"]["message"]
    return body["error"]
