"""The service's live state and the translation path shared by all translation routes.

``Runtime`` owns the engine (loaded in the background so that liveness answers at once), the
batcher, the cache, readiness and draining. Routes describe what they want as a
``TranslationJob`` and call ``Runtime.translate``, which checks the key, the limits and the
language pair, answers what it can from the cache, and sends the rest through the batcher. It knows
nothing of HTTP: cancelling the call (the route does when its client disconnects) drops the job's
texts that are still queued.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from engine import languages
from engine.api import Engine, ModelInfo, TranslationOptions, TranslationResult
from engine.translator import Translator, TranslatorConfig, auto_streams
from service.batcher import Batcher, BatcherConfig
from service.cache import TranslationCache
from service.engine_process import EngineProcess
from service.errors import InvalidRequest, PayloadTooLarge, Unauthorized, Unavailable, UnsupportedLanguage
from service.metrics import Metrics
from service.settings import Settings

log = logging.getLogger(__name__)

EngineFactory = Callable[[TranslatorConfig], Engine]


@dataclass(frozen=True)
class TranslationJob:
    """One translation request, as every route module describes it."""

    texts: Sequence[str]
    target_lang: str
    source_lang: str | None = None  # None: the model's only source language
    options: TranslationOptions = field(default_factory=TranslationOptions)
    api_key: str | None = None
    timeout_s: float | None = None  # capped at MT_REQUEST_TIMEOUT_S


class Runtime:
    def __init__(self, settings: Settings, metrics: Metrics, *, factory: EngineFactory | None = None) -> None:
        self.settings = settings
        self.metrics = metrics
        self.factory = factory or (
            functools.partial(EngineProcess, nice=settings.engine_nice) if settings.engine_process else Translator
        )
        self.engine: Engine | None = None
        self.batcher: Batcher | None = None
        self.cache: TranslationCache[TranslationResult] | None = None
        self.load_error: str | None = None
        self.draining = False
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    # -- lifecycle ---------------------------------------------------------------------------

    def check_live(self) -> None:
        """Unavailable (503) once the model has failed to load: a restart is what would help."""
        if self.load_error:
            raise Unavailable(self.load_error)

    def check_ready(self) -> None:
        """Unavailable (503) while the model loads, after it failed to, and while draining."""
        if self.draining:
            raise Unavailable("draining: the service is shutting down")
        self._loaded()

    async def load(self) -> None:
        """Create and warm up the engine off the event loop; raises what the engine raises."""
        s = self.settings
        streams = s.streams or auto_streams(s.provider)
        config = TranslatorConfig(
            model_dir=s.model_dir,
            provider=s.provider,
            threads=s.threads,
            streams=streams,
            variant=None if s.variant == "auto" else s.variant,
            max_batch_sentences=s.max_batch_sentences,
            max_batch_tokens=s.max_batch_tokens,
        )
        engine = await asyncio.to_thread(self.factory, config)
        info = engine.info
        self.metrics.set_model(name=info.name, version=info.version, variant=info.variant, provider=info.provider)
        self.cache = TranslationCache(s.cache_size, model_id=f"{info.name}/{info.version}/{info.variant}")
        batcher = Batcher(
            engine,
            BatcherConfig(
                max_batch_sentences=s.max_batch_sentences,
                max_batch_tokens=s.max_batch_tokens,
                max_wait_s=s.max_wait_ms / 1000,
                max_queue_sentences=s.max_queue_sentences,
                # The engine process runs a child per stream, each taking a batch of its own; the
                # in-process translator splits each batch over its streams instead.
                concurrency=streams if s.engine_process else 1,
            ),
            self.metrics,
        )
        batcher.start()
        self.engine, self.batcher = engine, batcher
        log.info("model %s %s (%s, %s) ready", info.name, info.version, info.variant, info.provider)

    async def close(self) -> None:
        if self.batcher is not None:
            await self.batcher.close()
        if self.engine is not None:
            self.engine.close()
        self.batcher = self.engine = None

    def start_draining(self) -> None:
        """Turn unready and refuse new translation requests from now on (``enter`` raises)."""
        self.draining = True

    async def drain(self, timeout_s: float) -> bool:
        """Drain: wait up to ``timeout_s`` for accepted requests; True if all finished."""
        self.start_draining()
        try:
            async with asyncio.timeout(timeout_s):
                await self._idle.wait()
        except TimeoutError:
            log.warning("drain: %d requests still running after %g s", self._in_flight, timeout_s)
            return False
        return True

    def enter(self) -> None:
        """Count an accepted translation request in flight; refuse it while draining."""
        if self.draining:
            raise Unavailable("the service is shutting down")
        self._in_flight += 1
        self._idle.clear()
        self.metrics.in_flight.set(self._in_flight)

    def leave(self) -> None:
        self._in_flight -= 1
        self.metrics.in_flight.set(self._in_flight)
        if self._in_flight == 0:
            self._idle.set()

    def loaded_info(self) -> ModelInfo:
        """The engine's model info; Unavailable (503) until it is loaded."""
        return self._loaded()[0].info

    @property
    def model_id(self) -> str:
        info = self.loaded_info()
        return f"{info.name}:{info.version}"

    # -- translating -------------------------------------------------------------------------

    async def translate(self, job: TranslationJob) -> list[TranslationResult]:
        """Results for ``job.texts`` in order, after every check: cached ones at once, the rest
        through the batcher."""
        self._authorize(job.api_key)
        self._check_size(job.texts)
        engine, batcher, cache = self._loaded()
        asked = replace(job.options, source_language=job.source_lang, target_language=job.target_lang)
        options = _resolve(asked, engine.info)
        texts = job.texts
        timeout = min(job.timeout_s or self.settings.request_timeout_s, self.settings.request_timeout_s)
        results: list[TranslationResult | None] = [cache.get(text, options) for text in texts]
        missing = [i for i, r in enumerate(results) if r is None]
        if cache.enabled:
            self.metrics.cache_hits.inc(len(texts) - len(missing))
            self.metrics.cache_misses.inc(len(missing))
        if missing:
            fresh = await batcher.translate([texts[i] for i in missing], options, timeout_s=timeout)
            for i, result in zip(missing, fresh, strict=True):
                results[i] = result
                cache.put(texts[i], options, result)
                self.metrics.input_tokens.inc(result.input_tokens)
                self.metrics.output_tokens.inc(result.output_tokens)
        return [r for r in results if r is not None]

    # -- request checks ----------------------------------------------------------------------

    def _authorize(self, key: str | None) -> None:
        keys = self.settings.api_key_set
        if not keys:
            return
        if not key:
            raise Unauthorized("an API key is required (Authorization: Bearer <key>)")
        # Compare against every key in constant time so that timing reveals nothing about them.
        if not any([secrets.compare_digest(key.encode(), k.encode()) for k in keys]):
            raise Unauthorized("invalid API key")

    def _check_size(self, texts: Sequence[str]) -> None:
        s = self.settings
        if len(texts) > s.max_texts:
            raise PayloadTooLarge(f"{len(texts)} texts in one request; the limit is {s.max_texts}")
        if (chars := sum(map(len, texts))) > s.max_chars:
            raise PayloadTooLarge(f"{chars} characters in one request; the limit is {s.max_chars}")

    def _loaded(self) -> tuple[Engine, Batcher, TranslationCache[TranslationResult]]:
        if self.engine is None or self.batcher is None or self.cache is None:
            raise Unavailable(self.load_error or "the model is still loading")
        return self.engine, self.batcher, self.cache


def _resolve(options: TranslationOptions, info: ModelInfo) -> TranslationOptions:
    """Options with the model's defaults and language codes filled in: equal requests share
    batches and cache entries."""
    try:
        return options.resolved(info)
    except languages.UnsupportedLanguage as e:
        raise UnsupportedLanguage(str(e)) from None
    except ValueError as e:
        raise InvalidRequest(str(e)) from None
