"""Every Prometheus metric the service exports, in one place.

Names start with ``mt_``, are in base units (seconds, not milliseconds) and have bounded labels:
``route`` is a route template (or ``unmatched``), ``status`` an HTTP status, ``type`` one of
``errors.ERROR_TYPES``, ``stage`` one of ``STAGES``, ``model`` a model of the repository (or a
``source->target`` route for the end-to-end token counts). Each app owns its own ``CollectorRegistry`` so
that several apps (tests) can live in one process.
"""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from service.errors import ERROR_TYPES

# Translation latency on CPU ranges from a few milliseconds (cache hit, short greedy sentence) to
# seconds (long texts, beam search, queueing under load).
LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
BATCH_SENTENCE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
BATCH_TOKEN_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
STAGES = ("queue", "encode", "decode")


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)

        # HTTP
        self.requests = Counter("mt_requests", "HTTP requests by route and status.", ["route", "status"], registry=r)
        self.request_duration = Histogram(
            "mt_request_duration_seconds",
            "Latency of API requests (health and metrics endpoints excluded).",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge("mt_requests_in_flight", "Translation requests being served.", registry=r)
        self.errors = Counter("mt_errors", "Error responses by error type.", ["type"], registry=r)
        for error_type in ERROR_TYPES:
            self.errors.labels(error_type)

        # Batching and the engine
        self.stage_duration = Histogram(
            "mt_stage_duration_seconds",
            "Time per stage: queue (per text, until its batch starts), encode and decode (per batch).",
            ["stage", "model"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.batch_sentences = Histogram(
            "mt_batch_size_sentences",
            "Sentences per engine batch.",
            ["model"],
            buckets=BATCH_SENTENCE_BUCKETS,
            registry=r,
        )
        self.batch_tokens = Histogram(
            "mt_batch_size_tokens",
            "Padded source tokens per engine batch.",
            ["model"],
            buckets=BATCH_TOKEN_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "mt_queue_depth_sentences", "Texts admitted and waiting for a batch.", ["model"], registry=r
        )
        self.input_tokens = Counter("mt_input_tokens", "Source tokens translated.", ["model"], registry=r)
        self.output_tokens = Counter("mt_output_tokens", "Target tokens generated.", ["model"], registry=r)
        self.detected_languages = Counter(
            "mt_detected_languages",
            "Texts whose language was identified (no source language given, documents, /detect), by language found.",
            ["language"],
            registry=r,
        )

        # Cache and model
        self.cache_hits = Counter("mt_cache_hits", "Texts answered from the translation cache.", registry=r)
        self.cache_misses = Counter("mt_cache_misses", "Texts not found in the translation cache.", registry=r)
        self.model_info = Gauge(
            "mt_model_info", "1 for each loaded model.", ["model", "version", "variant", "provider"], registry=r
        )
        self.model_loaded = Gauge("mt_model_loaded", "1 while the model is loaded, else 0.", ["model"], registry=r)
        self.model_memory = Gauge(
            "mt_model_memory_bytes", "Resident memory the model added when it loaded.", ["model"], registry=r
        )
        self.model_loads = Counter(
            "mt_model_loads", "Model loads (first use, or again after unloading).", ["model"], registry=r
        )
        self.model_unloads = Counter(
            "mt_model_unloads", "Models unloaded to stay within the budget.", ["model"], registry=r
        )
        self.model_load_failures = Counter(
            "mt_model_load_failures", "Models that failed to load.", ["model"], registry=r
        )

    def add_model(self, model: str) -> None:
        """Create the model's series at zero, so that dashboards see it before its first request."""
        for stage in STAGES:
            self.stage_duration.labels(stage, model)
        for metric in (self.batch_sentences, self.batch_tokens, self.queue_depth, self.model_loaded):
            metric.labels(model)
        for counter in (self.model_loads, self.model_unloads, self.model_load_failures):
            counter.labels(model)

    def render(self) -> tuple[bytes, str]:
        """(exposition text, content type) for the /metrics endpoint."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
