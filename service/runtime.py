"""The service's live state and the translation path shared by all translation routes.

``Runtime`` composes the parts of that path and owns what they share: the model pool
(``service.models``), the router over the repository, the cache, the key checks
(``service.access``), the requests in flight and their draining (``service.in_flight``), and
readiness. Routes describe what they want as a ``TranslationJob`` (``service.translation``) and
call ``Runtime.translate``, which reads as its three steps:

1. plan (``service.planning``): the key, the limits, each text's source language identified when
   it is not given (``service.identification``), each text's route, and the cost;
2. route (``service.routing``): the texts of each route along it, one model or two through a
   pivot language, with the job's glossary;
3. gather (``service.gathering``): each model's part from the cache where it has it, the rest
   from that model's batcher, and the results back in the job's order.

It knows nothing of HTTP: cancelling the call (the route does when its client disconnects) drops
the job's texts that are still queued. The streaming route splits the work: ``plan`` makes every
check that needs no model, once for its whole text, and ``translate_part`` translates each
sentence of that text along the planned route.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from engine.api import Engine, Hypothesis, TranslationResult
from engine.language_id import Detection, is_passthrough
from engine.repository import Router, discover, single
from engine.translator import TranslatorConfig, auto_streams
from service.access import Access
from service.batcher import BatcherConfig
from service.cache import TranslationCache
from service.engine_process import EngineHost
from service.errors import Unavailable
from service.gathering import Batching, Gathering
from service.identification import Identification
from service.in_flight import InFlight
from service.metrics import Metrics
from service.models import EngineLoader, InProcessLoader, ModelPool, PoolConfig
from service.planning import Plan, Planner, check_size
from service.routing import Routing, route_terms
from service.settings import Settings
from service.translation import Translated, TranslationJob

log = logging.getLogger(__name__)

# Batches in flight per engine stream with the row pool (MT_ROW_POOL): a pool of 128 rows holds 32
# sentences at beam 4, which the batcher's batches of a few texts each keep topped up.
POOL_BATCHES_PER_STREAM = 4

EngineFactory = Callable[[TranslatorConfig], Engine]


class StartupError(RuntimeError):
    """A start-up failure that the configuration or the repository explains (a model name that is
    not there, no bundle, none that loads): its message says all there is, without a traceback."""


class Runtime:
    def __init__(self, settings: Settings, metrics: Metrics, *, factory: EngineFactory | None = None) -> None:
        self.settings = settings
        self.metrics = metrics
        self.factory = factory
        self.pool: ModelPool | None = None
        self.router: Router | None = None
        self.identification: Identification | None = None
        self.cache = TranslationCache(settings.cache_size, int(settings.cache_mb * 1e6))
        # Who may translate: MT_API_KEYS' keys, and the managed keys once the app gives it their store.
        self.access = Access(settings)
        self.load_error: str | None = None
        self.in_flight = InFlight(metrics)
        self._planner: Planner | None = None
        self._routing: Routing | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def check_live(self) -> None:
        """Unavailable (503) once no model can serve: a restart is what would help."""
        if self.load_error:
            raise Unavailable(self.load_error)

    async def check_ready(self) -> dict[str, str]:
        """Unavailable (503) while the preloaded models load, when none can serve, while every
        engine process is down (its restarts failing: requests would only get 500s), and while
        draining; else the models that failed to load (by name: why), which the others outlive."""
        if self.in_flight.draining:
            raise Unavailable("draining: the service is shutting down")
        pool, _ = self.serving()
        if (down := await asyncio.to_thread(pool.loader.down)) is not None:
            raise Unavailable(f"every engine process is down, restarted again as its back-off ends: {down}")
        return {model: slot.error for model, slot in pool.slots.items() if slot.error}

    async def load(self) -> None:
        """Read the repository, build language identification, load the preloaded models."""
        s = self.settings
        entries = await asyncio.to_thread(single if s.model_dir else discover, s.model_dir or s.models_dir)
        for entry in entries:
            if entry.error:
                log.error("model %s is unavailable: %s", entry.id, entry.error)
            elif entry.manifest is not None and entry.manifest.card is not None:
                card = entry.manifest.card
                log.info("model %s: trained on %s; reliable for %s", entry.id, card.trained_on, card.reliable_for)
        self.router = router = Router(entries, pivot=s.pivot)
        if not router.entries:
            raise StartupError("; ".join(e.error or "" for e in entries) or f"no model bundle in {s.models_dir}")
        names = s.preload_names
        unknown = sorted((names or set()) - {e.id for e in entries})
        if unknown:  # a typo would otherwise preload nothing and report ready
            raise StartupError(
                f"MT_PRELOAD names no model of the repository: {', '.join(unknown)} "
                f"(its models: {', '.join(sorted(e.id for e in entries))})"
            )
        self.identification = await asyncio.to_thread(Identification.build, router, s.detect_languages, self.metrics)
        self._planner = Planner(s, self.identification)
        pool = ModelPool(entries, self._pool_config(), self._loader(), self.metrics)
        try:
            await pool.preload([e.id for e in router.entries if names is None or e.id in names])
        except asyncio.CancelledError:  # shut down while loading
            await _give_up_loading(pool)
            raise
        self.pool = pool
        self._routing = Routing(Gathering(pool, self.cache, self.metrics))
        loaded = [model for model, slot in pool.slots.items() if slot.loaded]
        if names is None and not loaded:
            self.load_error = "no model could be loaded: " + "; ".join(
                f"{m}: {slot.error}" for m, slot in pool.slots.items()
            )
            raise StartupError(self.load_error)
        log.info("serving %s; loaded: %s", router.describe_pairs(), ", ".join(loaded) or "none yet")

    def _pool_config(self) -> PoolConfig:
        s = self.settings
        streams = s.streams or auto_streams(s.provider)
        translator = TranslatorConfig(
            provider=s.provider,
            threads=s.threads,
            streams=streams,
            variant=None if s.variant == "auto" else s.variant,
            max_batch_sentences=s.max_batch_sentences,
            max_batch_tokens=s.max_batch_tokens,
            pool=s.row_pool,
            cuda_graphs=s.row_pool and s.cuda_graphs,
        )
        batcher = BatcherConfig(
            max_batch_sentences=s.max_batch_sentences,
            max_batch_tokens=s.max_batch_tokens,
            max_wait_s=s.max_wait_ms / 1000,
            max_queue_sentences=s.max_queue_sentences,
            # Engine processes: a child per stream, each taking a batch of its own; the in-process
            # translator splits each batch over its streams instead. A row pool takes sentences in
            # between steps, so each stream is fed several batches at once: its rows stay full
            # while each batch's sentences finish, instead of waiting for a batch's longest.
            concurrency=(streams if s.engine_process and self.factory is None else 1)
            * (POOL_BATCHES_PER_STREAM if s.row_pool else 1),
        )
        return PoolConfig(translator, batcher, s.max_loaded_models, int(s.max_loaded_mb * 1e6))

    def _loader(self) -> EngineLoader:
        s = self.settings
        if self.factory is not None or not s.engine_process:
            return InProcessLoader(self.factory) if self.factory else InProcessLoader()
        config = self._pool_config().translator
        return EngineHost(
            streams=config.streams, threads=config.threads_per_stream, nice=s.engine_nice, weights_cache=s.weights_cache
        )

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()
        self.pool = None

    def serving(self) -> tuple[ModelPool, Router]:
        """The pool and router; Unavailable (503) until the repository is read."""
        if self.pool is None or self.router is None:
            raise Unavailable(self.load_error or "the models are still loading")
        return self.pool, self.router

    def detect(self, text: str) -> Detection:
        """The language ``text`` is in, as the identifier ranks them."""
        if self.identification is None:
            raise Unavailable(self.load_error or "the service is still starting")
        return self.identification.detect(text)

    def authorize(self, key: str | None) -> None:
        """Unauthorized (401) unless ``key`` is one the routes have checked (``Access.check``)."""
        self.access.check(key)

    # -- translating -------------------------------------------------------------------------

    def plan(self, job: TranslationJob) -> Plan:
        """Every check of ``job`` that needs no model (``Planner.plan``), after its key and its size;
        raises what they find."""
        self.authorize(job.api_key)
        check_size(job.texts, self.settings)
        planner, _ = self._parts()
        return planner.plan(job)

    async def translate(self, job: TranslationJob) -> Translated:
        """Results for ``job.texts`` in order, after every check: text with nothing to translate
        as it is, cached ones at once, the rest through their model's batcher."""
        plan = self.plan(job)
        routed = await self.in_flight.stopping(self._route(plan))
        return _gather(plan, routed)

    async def _route(self, plan: Plan) -> list[tuple[list[int], list[TranslationResult], str]]:
        """The planned texts along their routes, all routes at once: for each route, its texts (by
        index), their results and the models that translated them."""
        _, routing = self._parts()
        job, batching = plan.job, Batching(plan.timeout_s)
        groups = plan.by_route()
        translations = [
            routing.translate(
                route,
                [job.texts[i] for i in idx],
                job.options,
                route_terms(route, job.glossary),
                batching,
                tokens=[plan.text_tokens[i] or 0 for i in idx],
            )
            for route, idx in groups.items()
        ]
        # Most requests take one route: awaited in the request's task, not one of its own.
        done = [await translations[0]] if len(translations) == 1 else await asyncio.gather(*translations)
        return [(idx, results, model) for idx, (results, model) in zip(groups.values(), done, strict=True)]

    async def translate_part(self, plan: Plan, part: str) -> tuple[TranslationResult, str | None]:
        """``part`` of the plan's one text (a sentence of it) along that text's route, as a text of
        its own; with the model that translated it (None: passed through)."""
        [route] = plan.routes
        if route is None or is_passthrough(part):
            return _unchanged(part), None
        _, routing = self._parts()
        job = plan.job
        batching = Batching(plan.timeout_s, plan.source_tokens)
        [result], model = await self.in_flight.stopping(
            routing.translate(route, [part], job.options, route_terms(route, job.glossary), batching)
        )
        return result, model

    def _parts(self) -> tuple[Planner, Routing]:
        """The planner and the routing; Unavailable (503) until the models are loaded."""
        self.serving()
        assert self._planner is not None and self._routing is not None  # set with the router and the pool
        return self._planner, self._routing


async def _give_up_loading(pool: ModelPool) -> None:
    """Close a pool whose models are still loading: its engines first, which cancels the load under
    way (``service.engine_process``) instead of waiting for it and every one after it."""
    await asyncio.to_thread(pool.loader.close)
    await pool.close()


def _gather(plan: Plan, routed: list[tuple[list[int], list[TranslationResult], str]]) -> Translated:
    """The routes' results (``Runtime._route``) in the job's order, the texts they did not
    translate as they are."""
    texts = plan.job.texts
    results = [_unchanged(text) for text in texts]
    models: list[str | None] = [None] * len(texts)
    for idx, translated, model in routed:
        for i, result in zip(idx, translated, strict=True):
            results[i], models[i] = result, model
    return Translated(results, models, plan.detections)


def _unchanged(text: str) -> TranslationResult:
    """The result for a text with nothing to translate (symbols, numbers, URLs): itself."""
    return TranslationResult(text=text, hypotheses=[Hypothesis(text, 0.0, 0.0)])
