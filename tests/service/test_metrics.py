"""/metrics on a real server: parsed with prometheus_client's parser, checked with promtool."""

from __future__ import annotations

import shutil
import subprocess

import httpx
import pytest
from live_server import metric, scrape
from prometheus_client.parser import text_string_to_metric_families

from engine.runner import resolve_provider
from service.errors import ERROR_TYPES
from service.metrics import Metrics

EXPECTED = {
    "mt_requests": "counter",
    "mt_request_duration_seconds": "histogram",
    "mt_requests_in_flight": "gauge",
    "mt_errors": "counter",
    "mt_stage_duration_seconds": "histogram",
    "mt_batch_size_sentences": "histogram",
    "mt_batch_size_tokens": "histogram",
    "mt_queue_depth_sentences": "gauge",
    "mt_input_tokens": "counter",
    "mt_output_tokens": "counter",
    "mt_cache_hits": "counter",
    "mt_cache_misses": "counter",
    "mt_detected_languages": "counter",
    "mt_model_info": "gauge",  # a constant 1 per loaded model, whose labels describe it
    "mt_model_loaded": "gauge",
    "mt_model_memory_bytes": "gauge",
    "mt_model_loads": "counter",
    "mt_model_unloads": "counter",
    "mt_model_load_failures": "counter",
}


@pytest.fixture(scope="module")
def exposition(client: httpx.Client) -> str:
    """The metrics text after some traffic of every kind."""
    client.post("/v1/translate", json={"text": ["A dog runs.", "A cat sits."], "target_lang": "de"})
    client.post("/v1/translate", json={"text": "A dog runs.", "target_lang": "de"})  # a cache hit
    client.post("/v1/translate", json={"text": "A dog runs.", "target_lang": "xx"})
    client.get("/healthz")
    return client.get("/metrics").text


def test_every_metric_exists_with_its_type(exposition: str) -> None:
    families = {f.name: f for f in text_string_to_metric_families(exposition)}
    for name, kind in EXPECTED.items():
        assert name in families, name
        assert families[name].type == kind, name
    assert all(f.documentation for f in families.values())


def test_labels_and_values_reflect_traffic(client: httpx.Client, exposition: str) -> None:
    samples = scrape(client)
    assert metric(samples, "mt_requests_total", route="/v1/translate", status="200") >= 2
    assert metric(samples, "mt_requests_total", route="/v1/translate", status="400") >= 1
    assert metric(samples, "mt_errors_total", type="unsupported_language") >= 1
    assert {t for (name, labels) in samples if name == "mt_errors_total" for k, t in labels if k == "type"} == set(
        ERROR_TYPES
    )
    assert metric(samples, "mt_cache_hits_total") >= 1 and metric(samples, "mt_cache_misses_total") >= 1
    assert metric(samples, "mt_detected_languages_total", language="en") >= 3
    model = {"model": "mt-en-de"}
    assert (
        metric(samples, "mt_input_tokens_total", **model) > 0 and metric(samples, "mt_output_tokens_total", **model) > 0
    )
    for stage in ("queue", "encode", "decode"):
        assert metric(samples, "mt_stage_duration_seconds_count", stage=stage, **model) > 0, stage
    assert metric(samples, "mt_batch_size_tokens_count", **model) > 0
    [info] = [dict(labels) for name, labels in samples if name == "mt_model_info"]
    assert set(info) == {"model", "version", "variant", "provider"} and info["provider"] == resolve_provider("auto")
    assert metric(samples, "mt_model_loaded", **model) == 1 and metric(samples, "mt_model_loads_total", **model) == 1
    assert metric(samples, "mt_model_memory_bytes", **model) > 0


def test_probes_and_scrapes_are_counted_but_not_timed(client: httpx.Client, exposition: str) -> None:
    samples = scrape(client)
    assert metric(samples, "mt_requests_total", route="/healthz", status="200") >= 1
    timed = {dict(labels)["route"] for name, labels in samples if name == "mt_request_duration_seconds_count"}
    assert "/v1/translate" in timed
    assert not timed & {"/healthz", "/readyz", "/metrics"}


def test_latency_buckets_resolve_milliseconds(exposition: str) -> None:
    [family] = [f for f in text_string_to_metric_families(exposition) if f.name == "mt_request_duration_seconds"]
    bounds = sorted({float(s.labels["le"]) for s in family.samples if s.name.endswith("_bucket")})
    assert bounds[0] <= 0.001 and sum(b <= 0.1 for b in bounds) >= 6


def test_promtool_accepts_the_exposition(exposition: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package 'prometheus'); the parser checks above still ran")
    result = subprocess.run([promtool, "check", "metrics"], input=exposition, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "" and result.stderr.strip() == "", result.stdout + result.stderr


def test_each_app_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()
    first.cache_hits.inc()
    assert first.registry.get_sample_value("mt_cache_hits_total") == 1
    assert second.registry.get_sample_value("mt_cache_hits_total") == 0
