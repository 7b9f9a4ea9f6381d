"""The service's live state and the translation path shared by all translation routes.

``Runtime`` owns the engine (loaded in the background so that liveness answers at once), the
batcher, the cache, readiness and draining. Routes call ``Runtime.translate``, which checks the
request against the limits, answers what it can from the cache, and sends the rest through the
batcher while watching for the client going away.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security.utils import get_authorization_scheme_param

from engine.translator import (
    ModelInfo,
    TranslationOptions,
    TranslationResult,
    Translator,
    TranslatorConfig,
    auto_streams,
)
from service.batcher import Batcher, BatcherConfig
from service.cache import TranslationCache
from service.engine_process import EngineProcess
from service.errors import ClientDisconnected, PayloadTooLarge, Unauthorized, Unavailable, UnsupportedLanguage
from service.metrics import Metrics
from service.settings import Settings

log = logging.getLogger(__name__)

Engine = Translator | EngineProcess
TranslatorFactory = Callable[[TranslatorConfig], Engine]


class Runtime:
    def __init__(self, settings: Settings, metrics: Metrics, *, factory: TranslatorFactory | None = None) -> None:
        self.settings = settings
        self.metrics = metrics
        self.factory = factory or (
            functools.partial(EngineProcess, nice=settings.engine_nice) if settings.engine_process else Translator
        )
        self.translator: Engine | None = None
        self.batcher: Batcher | None = None
        self.cache: TranslationCache[TranslationResult] | None = None
        self.load_error: str | None = None
        self.draining = False
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self.batcher is not None and not self.draining

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
        translator = await asyncio.to_thread(self.factory, config)
        info = translator.info
        self.metrics.set_model(name=info.name, version=info.version, variant=info.variant, provider=info.provider)
        self.cache = TranslationCache(s.cache_size, model_id=f"{info.name}/{info.version}/{info.variant}")
        batcher = Batcher(
            translator,
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
        self.translator, self.batcher = translator, batcher
        log.info("model %s %s (%s, %s) ready", info.name, info.version, info.variant, info.provider)

    async def close(self) -> None:
        if self.batcher is not None:
            await self.batcher.close()
        if self.translator is not None:
            self.translator.close()
        self.batcher = self.translator = None

    async def drain(self, timeout_s: float) -> bool:
        """Turn unready, refuse new translation requests, wait for accepted ones; True if all finished."""
        self.draining = True
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

    # -- request checks ----------------------------------------------------------------------

    def authorize(self, key: str | None) -> None:
        keys = self.settings.api_key_set
        if not keys:
            return
        if not key:
            raise Unauthorized("an API key is required (Authorization: Bearer <key>)")
        # Compare against every key in constant time so that timing reveals nothing about them.
        if not any([secrets.compare_digest(key.encode(), k.encode()) for k in keys]):
            raise Unauthorized("invalid API key")

    def check_languages(self, source: str | None, target: str) -> None:
        info = self.loaded_info()
        src_ok = source is None or source.lower() == info.source_language
        if not src_ok or target.lower() != info.target_language:
            raise UnsupportedLanguage(
                f"unsupported language pair {source or info.source_language!r} -> {target!r}; "
                f"this model translates {info.source_language!r} -> {info.target_language!r}"
            )

    def check_size(self, texts: Sequence[str]) -> None:
        s = self.settings
        if len(texts) > s.max_texts:
            raise PayloadTooLarge(f"{len(texts)} texts in one request; the limit is {s.max_texts}")
        if (chars := sum(map(len, texts))) > s.max_chars:
            raise PayloadTooLarge(f"{chars} characters in one request; the limit is {s.max_chars}")

    # -- translating -------------------------------------------------------------------------

    async def translate(
        self, request: Request, texts: Sequence[str], options: TranslationOptions, *, timeout_s: float | None = None
    ) -> list[TranslationResult]:
        """Results for ``texts`` in order: cached ones at once, the rest through the batcher."""
        _, batcher, cache = self._loaded()
        timeout = min(timeout_s or self.settings.request_timeout_s, self.settings.request_timeout_s)
        results: list[TranslationResult | None] = [cache.get(text, options) for text in texts]
        missing = [i for i, r in enumerate(results) if r is None]
        if cache.enabled:
            self.metrics.cache_hits.inc(len(texts) - len(missing))
            self.metrics.cache_misses.inc(len(missing))
        if missing:
            fresh = await _unless_disconnected(
                request, batcher.translate([texts[i] for i in missing], options, timeout_s=timeout)
            )
            for i, result in zip(missing, fresh, strict=True):
                results[i] = result
                cache.put(texts[i], options, result)
                self.metrics.input_tokens.inc(result.input_tokens)
                self.metrics.output_tokens.inc(result.output_tokens)
        return [r for r in results if r is not None]

    def _loaded(self) -> tuple[Engine, Batcher, TranslationCache[TranslationResult]]:
        if self.translator is None or self.batcher is None or self.cache is None:
            raise Unavailable(self.load_error or "the model is still loading")
        return self.translator, self.batcher, self.cache


async def _unless_disconnected(request: Request, work: Awaitable[Any]) -> Any:
    """Await ``work``, cancelling it (which drops its queued texts) if the client disconnects."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        abandoned = not task.done()
        if abandoned:
            task.cancel()
    if abandoned:
        raise ClientDisconnected("client disconnected before the translation finished")
    return task.result()


async def _disconnected(request: Request) -> None:
    # The body has been read, so the next ASGI message is the disconnect (or the end of the response).
    while (await request.receive())["type"] != "http.disconnect":
        pass


# A coroutine because FastAPI runs plain-function dependencies in its thread pool: a thread hop
# per dependency per request, which was a fifth of the HTTP process's CPU under load.
async def get_runtime(request: Request) -> Runtime:
    """FastAPI dependency (also awaited directly by the translation routes): the app's runtime."""
    runtime: Runtime = request.app.state.runtime
    return runtime


def bearer_key(request: Request) -> str | None:
    """The key of an ``Authorization: Bearer <key>`` header, if any. The translation routes call
    this themselves: as a FastAPI security dependency it cost ~0.07 ms of CPU per request."""
    scheme, key = get_authorization_scheme_param(request.headers.get("authorization"))
    return key if scheme.lower() == "bearer" and key else None


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
