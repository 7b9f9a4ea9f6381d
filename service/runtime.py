"""The service's live state and the translation path shared by all translation routes.

``Runtime`` owns the model pool (``service.models``), the router over the repository, language
identification, the cache and readiness; the requests in flight and their draining are
``service.in_flight``'s. Routes describe what they want as a
``TranslationJob`` and call ``Runtime.translate``, which checks the key and the limits, identifies
the source language of each text when it is not given, routes each text to one model or two
through a pivot language, answers what it can from the cache, and sends the rest through that
model's batcher. It knows nothing of HTTP: cancelling the call (the route does when its client
disconnects) drops the job's texts that are still queued. The streaming route splits the work:
``plan`` makes every check that needs no model, once for its whole text, and ``translate_part``
translates each sentence of that text along the planned route.

A job's glossary (``JobGlossary``) is for one language pair: a job that names other languages is
refused (``GlossaryMismatch``), and with the source identified, a text identified as another
language than the glossary's is translated without it. Through a pivot, the first model translates
without the glossary and the second uses, for each text, the terms the text says, placed where the
text says them (``engine.glossary.Glossary.placed``); the terms a result reports are the text's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from engine import languages
from engine.api import (
    Engine,
    Hypothesis,
    ModelInfo,
    TermUse,
    TextFormat,
    TranslationOptions,
    TranslationResult,
    term_uses,
)
from engine.bundle import BundleError, load_bundle
from engine.cost import text_work
from engine.glossary import Glossary, Match
from engine.language_choice import Choice, choose, request_prior
from engine.language_id import Detection, LanguageIdentifier, default_languages, is_passthrough, supported_languages
from engine.languages import primary_subtag
from engine.markup import Document, MarkupError, plain_text
from engine.repository import Hop, ModelEntry, Route, Router, discover, single
from engine.tokenizer import Tokenizer
from engine.translator import TranslatorConfig, auto_streams
from service.access import Access
from service.batcher import BatcherConfig
from service.cache import TranslationCache
from service.engine_process import EngineHost
from service.errors import (
    GlossaryMismatch,
    InvalidRequest,
    MalformedMarkup,
    PayloadTooLarge,
    Unavailable,
    UnsupportedLanguage,
)
from service.in_flight import InFlight
from service.metrics import Metrics
from service.models import EngineLoader, InProcessLoader, ModelPool, PoolConfig
from service.settings import Settings

log = logging.getLogger(__name__)

UNDETERMINED_LABEL = "und"  # ISO 639-2's code for an undetermined language
# Batches in flight per engine stream with the row pool (MT_ROW_POOL): a pool of 128 rows holds 32
# sentences at beam 4, which the batcher's batches of a few texts each keep topped up.
POOL_BATCHES_PER_STREAM = 4

EngineFactory = Callable[[TranslatorConfig], Engine]
T = TypeVar("T")


class StartupError(RuntimeError):
    """A start-up failure that the configuration or the repository explains (a model name that is
    not there, no bundle, none that loads): its message says all there is, without a traceback."""


@dataclass(frozen=True)
class JobGlossary:
    """The terms a job's translations must use, and the language pair they are for (languages by
    the router's codes; None: a glossary given with the request, for whatever it translates)."""

    terms: Glossary
    source_lang: str | None = None
    target_lang: str | None = None


@dataclass(frozen=True)
class TranslationJob:
    """One translation request, as every route module describes it."""

    texts: Sequence[str]
    target_lang: str
    source_lang: str | None = None  # None or "auto": identified per text
    options: TranslationOptions = field(default_factory=TranslationOptions)
    api_key: str | None = None
    timeout_s: float | None = None  # capped at MT_REQUEST_TIMEOUT_S
    glossary: JobGlossary | None = None
    # A stated source that is the target returns the texts as they are (LibreTranslate's identity
    # translation) rather than being refused (400), as it is on the service's own API.
    keep_same_language: bool = False


@dataclass(frozen=True)
class Refused(Detection):
    """The identification of a text that is refused: in a language no model translates into the
    target, identified with confidence (``engine.language_choice.choose``), or in none determined. A
    request whose texts with words in them are all refused is a 400 (``UnsupportedLanguage``);
    otherwise each refused text comes back unchanged, with this detection and its ``message``."""

    message: str = ""


@dataclass(frozen=True)
class Plan:
    """A job that passed every check that needs no model, ready to translate."""

    job: TranslationJob
    # per text; None: returned as it is (nothing to translate, already in the target, or refused)
    routes: list[Route | None]
    detections: list[Detection | None] | None  # when the source language was identified; Refused: refused
    timeout_s: float  # the job's deadline, within MT_REQUEST_TIMEOUT_S
    # each text's source tokens by its first model's tokenizer (None: not translated): counted once,
    # for the cost check, and handed to that model's batcher
    text_tokens: list[int | None]

    @property
    def source_tokens(self) -> int:
        return sum(n for n in self.text_tokens if n is not None)


@dataclass(frozen=True)
class _Batching:
    """What the batches of one request's texts share: its deadline, and the request's source
    tokens where it is translated a part at a time (a stream's sentences), so that each part goes
    in the batcher's lane of the whole (a long text's sentences are heavy, one by one too)."""

    timeout_s: float
    request_tokens: int | None = None


@dataclass
class Translated:
    """A job's results in input order, and for each text what translated it."""

    results: list[TranslationResult]
    models: list[str | None]  # "name:version", "a:1+b:2" through a pivot; None: passed through
    detections: list[Detection | None] | None  # when the source language was identified; Refused: refused

    @property
    def model(self) -> str:
        """The models used, in order of first use; empty when every text passed through."""
        return ", ".join(dict.fromkeys(m for m in self.models if m))


class Runtime:
    def __init__(self, settings: Settings, metrics: Metrics, *, factory: EngineFactory | None = None) -> None:
        self.settings = settings
        self.metrics = metrics
        self.factory = factory
        self.pool: ModelPool | None = None
        self.router: Router | None = None
        self.identifier: LanguageIdentifier | None = None
        self.cache = TranslationCache(settings.cache_size, int(settings.cache_mb * 1e6))
        # Who may translate: MT_API_KEYS' keys, and the managed keys once the app gives it their store.
        self.access = Access(settings)
        self._entries: dict[str, ModelEntry] = {}
        self._tokenizers: dict[str, Tokenizer] = {}  # the request checks' own, read on first use
        self._sources_into: dict[str, dict[str, str]] = {}  # target -> its sources (``_served_sources``)
        self.load_error: str | None = None
        self.in_flight = InFlight(metrics)

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
        pool, _ = self._loaded()
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
        self.router = Router(entries, pivot=s.pivot)
        self._sources_into = {}
        self._entries = {entry.id: entry for entry in self.router.entries}
        if not self.router.entries:
            raise StartupError("; ".join(e.error or "" for e in entries) or f"no model bundle in {s.models_dir}")
        names = s.preload_names
        unknown = sorted((names or set()) - {e.id for e in entries})
        if unknown:  # a typo would otherwise preload nothing and report ready
            raise StartupError(
                f"MT_PRELOAD names no model of the repository: {', '.join(unknown)} "
                f"(its models: {', '.join(sorted(e.id for e in entries))})"
            )
        detect = [c.strip() for c in s.detect_languages.split(",") if c.strip()]
        # Served languages the identifier does not know are left out: text in them is taken for
        # its nearest known language, and pairs from them need source_lang.
        known = supported_languages()
        candidates = detect or [c for c in default_languages(self.router.sources()) if c in known]
        # Short texts are ranked among the served languages alone: which of them it is, is the question.
        served = sorted({primary_subtag(code) for pair in self.router.pairs() for code in pair})
        self.identifier = await asyncio.to_thread(LanguageIdentifier, candidates, short_languages=served)
        pool = ModelPool(entries, self._pool_config(), self._loader(), self.metrics)
        try:
            await pool.preload([e.id for e in self.router.entries if names is None or e.id in names])
        except asyncio.CancelledError:  # shut down while loading
            await _give_up_loading(pool)
            raise
        self.pool = pool
        loaded = [model for model, slot in pool.slots.items() if slot.loaded]
        if names is None and not loaded:
            self.load_error = "no model could be loaded: " + "; ".join(
                f"{m}: {slot.error}" for m, slot in pool.slots.items()
            )
            raise StartupError(self.load_error)
        log.info("serving %s; loaded: %s", self.router.describe_pairs(), ", ".join(loaded) or "none yet")

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
        return self._loaded()

    # -- language identification -------------------------------------------------------------

    def detect(self, text: str) -> Detection:
        if self.identifier is None:
            raise Unavailable(self.load_error or "the service is still starting")
        found = self.identifier.detect(text)
        self.metrics.detected_languages.labels(found.language or UNDETERMINED_LABEL).inc()
        return found

    def _identify(self, texts: list[str | None], router: Router, target: str) -> list[Choice | None]:
        """What each text becomes on its way into ``target`` (None: not to identify): translated from
        the likeliest source language that a model translates into ``target``, kept, or refused
        (``choose``); a text only guessed is taken for the language the others are identified in."""
        sources, base = self._served_sources(router, target).keys(), primary_subtag(target)
        detections = [None if text is None else self.detect(text) for text in texts]
        choices = [None if d is None else choose(d, sources, base) for d in detections]
        if (prior := request_prior(choices)) is None:
            return choices
        return [
            choose(d, sources, base, prior=prior) if c is not None and d is not None and c.detection.guessed else c
            for d, c in zip(detections, choices, strict=True)
        ]

    def _served_sources(self, router: Router, target: str) -> dict[str, str]:
        """The source languages some route translates into ``target``, by the identifier's code of
        each: a text identified as "pt" is translated from "pt" where it is served, else from the
        first of its variants ("pt-BR" of "pt-BR" and "pt-PT", which the identifier cannot tell
        apart; "pt" alone would name neither)."""
        if target not in self._sources_into:
            by_base: dict[str, str] = {}
            for code in sorted(_sources_into(router, target), key=lambda code: code != primary_subtag(code)):
                by_base.setdefault(primary_subtag(code), code)
            self._sources_into[target] = by_base
        return self._sources_into[target]

    # -- translating -------------------------------------------------------------------------

    def plan(self, job: TranslationJob) -> Plan:
        """Every check of ``job`` that needs no model: the key, the limits, the languages (its texts'
        identified when the source is not given) and each text's route; raises what they find."""
        self.authorize(job.api_key)
        self._check_size(job.texts)
        _, router = self._loaded()
        texts = list(job.texts)
        auto = job.source_lang is None or job.source_lang.lower() == "auto"
        readable = [_readable(i, t, job.options.format) for i, t in enumerate(texts)]
        verbatim = [is_passthrough(t) for t in readable]
        if auto:
            target = self._target(router, job.target_lang)
            to_identify = [None if v else t for t, v in zip(readable, verbatim, strict=True)]
            choices = self._identify(to_identify, router, target)
            routes, detections = self._identified_routes(router, readable, choices, target)
        else:
            routes, detections = self._routes(router, verbatim, job), None
        if job.glossary is not None:
            _check_glossary(router, job, job.glossary)
        for route in dict.fromkeys(route for route in routes if route is not None):
            _check_options(route, job.options)
        text_tokens = self._check_cost(readable, routes, job.options, job.glossary)
        timeout = min(job.timeout_s or self.settings.request_timeout_s, self.settings.request_timeout_s)
        return Plan(job, routes, detections, timeout, text_tokens)

    async def translate(self, job: TranslationJob) -> Translated:
        """Results for ``job.texts`` in order, after every check: text with nothing to translate
        as it is, cached ones at once, the rest through their model's batcher."""
        plan = self.plan(job)
        texts = list(job.texts)
        results: list[TranslationResult | None] = [None] * len(texts)
        models: list[str | None] = [None] * len(texts)
        groups: dict[Route, list[int]] = {}
        for i, route in enumerate(plan.routes):
            if route is None:
                results[i] = _unchanged(texts[i])
            else:
                groups.setdefault(route, []).append(i)
        done = await self.in_flight.stopping(
            asyncio.gather(
                *(
                    self._translate_route(
                        r,
                        [texts[i] for i in idx],
                        job.options,
                        _terms(r, job.glossary),
                        _Batching(plan.timeout_s),
                        tokens=[plan.text_tokens[i] or 0 for i in idx],
                    )
                    for r, idx in groups.items()
                )
            )
        )
        for (_, idx), (translated, model) in zip(groups.items(), done, strict=True):
            for i, result in zip(idx, translated, strict=True):
                results[i], models[i] = result, model
        return Translated([r for r in results if r is not None], models, plan.detections)

    async def translate_part(self, plan: Plan, part: str) -> tuple[TranslationResult, str | None]:
        """``part`` of the plan's one text (a sentence of it) along that text's route, as a text of
        its own; with the model that translated it (None: passed through)."""
        [route] = plan.routes
        if route is None or is_passthrough(part):
            return _unchanged(part), None
        job = plan.job
        [result], model = await self.in_flight.stopping(
            self._translate_route(
                route, [part], job.options, _terms(route, job.glossary), _Batching(plan.timeout_s, plan.source_tokens)
            )
        )
        return result, model

    def _routes(self, router: Router, verbatim: list[bool], job: TranslationJob) -> list[Route | None]:
        """Each text's route, from the stated source language; None for a text with nothing to
        translate. The languages a request names are checked even when none of its texts needs
        them: whether it is refused does not depend on what its texts are."""
        if job.keep_same_language and _same_language(router, job.source_lang or "", job.target_lang):
            return [None] * len(verbatim)
        route = self._route(router, job.source_lang or "", job.target_lang, detected=False)
        return [None if unchanged else route for unchanged in verbatim]

    def _identified_routes(
        self, router: Router, texts: list[str], choices: list[Choice | None], target: str
    ) -> tuple[list[Route | None], list[Detection | None]]:
        """Each identified text's route and what the response says of its language; None for a text
        with nothing to translate, kept (identified as written in the target language already, as
        DeepL does) or refused (its detection a ``Refused``). When every text with words in it is
        refused, the request is: ``UnsupportedLanguage`` (400) naming the first one's language."""
        routes: list[Route | None] = []
        detections: list[Detection | None] = []
        for text, choice in zip(texts, choices, strict=True):
            if choice is None:
                routes.append(None)
                detections.append(None)
            elif choice.outcome == "refuse":
                routes.append(None)
                detections.append(_refused(router, choice.detection, text, target))
            else:
                language = choice.detection.language
                assert language is not None  # choose refuses what it cannot name a language for
                source = self._served_sources(router, target).get(language, language)
                routes.append(None if choice.outcome == "keep" else self._route(router, source, target, detected=True))
                detections.append(choice.detection)
        refused = [d for d in detections if isinstance(d, Refused)]
        if refused and all(isinstance(d, Refused) for d, c in zip(detections, choices, strict=True) if c is not None):
            raise _refusal(router, refused[0])
        return routes, detections

    def _target(self, router: Router, name: str) -> str:
        try:
            return router.code(name, "target")
        except languages.UnsupportedLanguage as e:
            raise UnsupportedLanguage(str(e), details=_served(router)) from None

    def _route(self, router: Router, source: str, target: str, detected: bool) -> Route:
        try:
            return router.route(source, target)
        except languages.UnsupportedLanguage as e:
            details = _served(router)
            if detected and source not in router.sources():
                details["detected_language"] = source
                message = f"the text is in {source!r}, which no model translates from (served: {router.sources()})"
                raise UnsupportedLanguage(message, details=details) from None
            raise UnsupportedLanguage(str(e), details=details) from None

    async def _translate_route(
        self,
        route: Route,
        texts: list[str],
        asked: TranslationOptions,
        terms: Glossary | None,
        batching: _Batching,
        *,
        tokens: list[int] | None = None,
    ) -> tuple[list[TranslationResult], str]:
        """``texts`` along ``route``, using ``terms``; with the models that translated them.
        ``tokens``: each text's source tokens by the route's first model, where already counted."""
        if route.pivot is None:
            [hop] = route.hops
            return await self._translate_hop(hop, texts, replace(asked, glossary=terms), batching, tokens)
        first, second = route.hops
        # The pivot text is an intermediate: one hypothesis, the model's own length rule.
        pivot = replace(asked, num_hypotheses=1, max_length=None, min_length=0)
        pivoted, first_name = await self._translate_hop(first, texts, pivot, batching, tokens)
        current = [r.text for r in pivoted]
        if terms is None:
            results, second_name = await self._translate_hop(second, current, asked, batching)
        else:
            results, second_name = await self._translate_placed(second, texts, current, asked, terms, batching)
        return _chained(pivoted, results), f"{first_name}+{second_name}"

    async def _translate_placed(
        self,
        hop: Hop,
        texts: list[str],
        pivoted: list[str],
        asked: TranslationOptions,
        terms: Glossary,
        batching: _Batching,
    ) -> tuple[list[TranslationResult], str]:
        """The pivot texts ``pivoted`` of ``texts`` by ``hop``, each with the terms its text says,
        placed where it says them: texts that say different terms in different places are
        translated with different glossaries. Each result reports the terms of its text."""
        found = [_said(terms, text, asked.format) for text in texts]
        groups: dict[Glossary | None, list[int]] = {}
        for i, said in enumerate(found):
            groups.setdefault(_placed(terms, said), []).append(i)
        done = await asyncio.gather(
            *(
                self._translate_hop(hop, [pivoted[i] for i in idx], replace(asked, glossary=placed), batching)
                for placed, idx in groups.items()
            )
        )
        results: list[TranslationResult | None] = [None] * len(texts)
        for idx, (translated, _) in zip(groups.values(), done, strict=True):
            for i, result in zip(idx, translated, strict=True):
                uses = _said_terms(terms, [m for m, _ in found[i]], result, markup=asked.format != "text")
                results[i] = replace(result, terms=uses)
        return [r for r in results if r is not None], done[0][1]

    async def _translate_hop(
        self,
        hop: Hop,
        texts: list[str],
        asked: TranslationOptions,
        batching: _Batching,
        tokens: list[int] | None = None,
    ) -> tuple[list[TranslationResult], str]:
        pool, _ = self._loaded()
        model = hop.model
        async with pool.use(model) as loaded:
            info = loaded.engine.info
            options = _resolve(replace(asked, source_language=hop.source, target_language=hop.target), info)
            key = f"{info.name}:{info.version}:{info.variant}"
            results: list[TranslationResult | None] = [self.cache.get(key, text, options) for text in texts]
            missing = [i for i, r in enumerate(results) if r is None]
            if self.cache.enabled:
                self.metrics.cache_hits.inc(len(texts) - len(missing))
                self.metrics.cache_misses.inc(len(missing))
            if missing:
                fresh = await loaded.batcher.translate(
                    [texts[i] for i in missing],
                    options,
                    timeout_s=batching.timeout_s,
                    request_tokens=batching.request_tokens,
                    tokens=None if tokens is None else [tokens[i] for i in missing],
                )
                for i, result in zip(missing, fresh, strict=True):
                    results[i] = result
                    self.cache.put(key, texts[i], options, result)
                    self.metrics.input_tokens.labels(model).inc(result.input_tokens)
                    self.metrics.output_tokens.labels(model).inc(result.output_tokens)
        return [r for r in results if r is not None], f"{info.name}:{info.version}"

    # -- request checks ----------------------------------------------------------------------

    def authorize(self, key: str | None) -> None:
        """Unauthorized (401) unless ``key`` is one the routes have checked (``Access.check``)."""
        self.access.check(key)

    def _check_size(self, texts: Sequence[str]) -> None:
        s = self.settings
        if len(texts) > s.max_texts:
            raise PayloadTooLarge(f"{len(texts)} texts in one request; the limit is {s.max_texts}")
        if (chars := sum(map(len, texts))) > s.max_chars:
            raise PayloadTooLarge(f"{chars} characters in one request; the limit is {s.max_chars}")

    def _check_cost(
        self,
        texts: list[str],
        routes: list[Route | None],
        options: TranslationOptions,
        glossary: JobGlossary | None,
    ) -> list[int | None]:
        """What the request would cost, estimated from each text's source tokens before any of it is
        queued: ``engine.cost.text_work`` over each text's route and, with alignments, the weights
        of each text's matrix, taking its translation as long as itself. Returns each text's source
        tokens (None: not translated)."""
        s = self.settings
        counted: list[int | None] = []
        work = cells = 0
        for text, route in zip(texts, routes, strict=True):
            if route is None:
                counted.append(None)
                continue
            tokens = len(self._tokenizer(route.hops[0].model).encode(text))  # EOS included
            counted.append(tokens)
            beams = [self._beam_size(hop.model, options) for hop in route.hops]
            terms = _terms(route, glossary)
            work += text_work(tokens, beams, says_terms=terms is not None and bool(_said(terms, text, options.format)))
            cells += (tokens - 1) ** 2
        _check_limit(work, s.max_beam_tokens, "source tokens times beams", "MT_MAX_BEAM_TOKENS")
        if options.return_alignments:
            _check_limit(cells, s.max_alignment_cells, "alignment weights", "MT_MAX_ALIGNMENT_CELLS")
        return counted

    def _beam_size(self, model: str, options: TranslationOptions) -> int:
        """The beam ``options`` get from ``model`` (``TranslationOptions.resolved``'s rule)."""
        manifest = self._entries[model].manifest
        assert manifest is not None  # the router serves only entries with one
        return options.beam_size or max(manifest.decoding.beam_size, options.num_hypotheses)

    def _tokenizer(self, model: str) -> Tokenizer:
        if model not in self._tokenizers:
            try:
                bundle = load_bundle(self._entries[model].path, verify_checksums=False, check_graphs=False)
            except BundleError as e:
                raise Unavailable(f"model {model!r} is unavailable: {e}") from None
            self._tokenizers[model] = Tokenizer.from_bundle(bundle)
        return self._tokenizers[model]

    def _loaded(self) -> tuple[ModelPool, Router]:
        if self.pool is None or self.router is None:
            raise Unavailable(self.load_error or "the models are still loading")
        return self.pool, self.router


async def _give_up_loading(pool: ModelPool) -> None:
    """Close a pool whose models are still loading: its engines first, which cancels the load under
    way (``service.engine_process``) instead of waiting for it and every one after it."""
    await asyncio.to_thread(pool.loader.close)
    await pool.close()


def _check_limit(requested: int, limit: int, what: str, setting: str) -> None:
    """PayloadTooLarge (413) naming the setting, when ``requested`` is over its ``limit``."""
    if requested > limit:
        raise PayloadTooLarge.over(
            f"{requested} {what} in one request; the limit is {limit}", setting, limit, requested
        )


def _served(router: Router) -> dict[str, object]:
    """The details of an ``UnsupportedLanguage``: what is served instead."""
    return {"supported_pairs": [f"{s}-{t}" for s, t in router.pairs()]}


def _same_language(router: Router, source: str, target: str) -> bool:
    """Whether ``source`` and ``target`` name one served language (False: either names none)."""
    try:
        return router.code(source, "source") == router.code(target, "target")
    except languages.UnsupportedLanguage:
        return False


def _sources_into(router: Router, target: str) -> list[str]:
    """The source languages some route translates into ``target``."""
    return [s for s, t in router.pairs() if t == target]


def _refused(router: Router, detection: Detection, text: str, target: str) -> Refused:
    """``detection`` of a text refused on its way into ``target``, saying why."""
    language = detection.language
    if language is None:
        message = f"could not identify the language of {text[:40]!r}: name it with source_lang"
    elif language not in router.sources():
        message = f"the text is in {language!r}, which no model translates from (served: {router.sources()})"
    else:
        served = _sources_into(router, target)
        message = f"the text is in {language!r}, which no model translates into {target!r} (served: {served})"
    return Refused(language, detection.confidence, detection.candidates, message=message)


def _refusal(router: Router, refused: Refused) -> UnsupportedLanguage:
    """The 400 of a request whose every text is refused, the first one's ``refused``."""
    return UnsupportedLanguage(refused.message, details={**_served(router), "detected_language": refused.language})


def prefer_served(detection: Detection, served: Sequence[str]) -> Detection:
    """The identified language, unless no model in ``served`` translates from it and the identifier
    is not confident of it (``engine.language_choice.choose``, no target): then the likeliest served
    one."""
    return choose(detection, served).detection


def _readable(index: int, text: str, format: TextFormat) -> str:
    """What a text says: for markup, the text of its blocks and attributes. Malformed markup is
    refused here, before it could fail a batch of other requests' texts."""
    if format == "text":
        return text
    try:
        return plain_text(text, format)
    except MarkupError as e:
        details = {"text_index": index, "line": e.line, "column": e.column}
        raise MalformedMarkup(f"text {index}: malformed {format.upper()}: {e}", details=details) from None


def _check_options(route: Route, options: TranslationOptions) -> None:
    if route.pivot is not None and options.return_alignments:
        hops = " -> ".join([route.source, *(h.target for h in route.hops)])
        raise InvalidRequest(f"alignments are not available for a pair served through a pivot ({hops})")


def _check_glossary(router: Router, job: TranslationJob, glossary: JobGlossary) -> None:
    """GlossaryMismatch (400) when the job names other languages than its glossary's."""
    if glossary.target_lang is None:
        return
    asked = [("target", job.target_lang, glossary.target_lang)]
    if job.source_lang is not None and job.source_lang.lower() != "auto":
        asked.append(("source", job.source_lang, glossary.source_lang))
    for side, name, wanted in asked:
        if router.code(name, side) != wanted:
            raise GlossaryMismatch(
                f"the glossary is for {glossary.source_lang}->{glossary.target_lang}: "
                f"its {side} language is not {name!r}"
            )


def _terms(route: Route, glossary: JobGlossary | None) -> Glossary | None:
    """The terms to translate along ``route`` with: none for a text identified as another language
    than its glossary's source."""
    if glossary is None or glossary.source_lang not in (None, route.source):
        return None
    return glossary.terms


def _said(terms: Glossary, text: str, kind: TextFormat) -> list[tuple[Match, float]]:
    """The terms ``text`` says, each with its place: a fraction of the text's length; in markup,
    what its units say (not its tags), each at its unit's number plus a fraction of the unit's
    length, as the pivot text has the same units (``Glossary.in_units``)."""
    if kind == "text":
        return [(m, m.start / len(text)) for m in terms.find(text)]
    units = Document(text, kind).units
    return [(m, number + m.start / len(unit)) for number, unit in enumerate(units) for m in terms.find(unit)]


def _placed(terms: Glossary, said: list[tuple[Match, float]]) -> Glossary | None:
    """The terms a text says (``_said``), each at each place it says it, for the second model of a
    pivot; None when it says none."""
    if not said:
        return None
    return Glossary(tuple(terms.terms[m.term] for m, _ in said), placed=tuple(place for _, place in said))


def _said_terms(terms: Glossary, matches: list[Match], result: TranslationResult, *, markup: bool) -> list[TermUse]:
    """The terms a text says (``matches``), with where the translation of its pivot text has them."""
    return term_uses([(terms.terms[m.term], None if markup else (m.start, m.end)) for m in matches], result.text)


def _unchanged(text: str) -> TranslationResult:
    """The result for a text with nothing to translate (symbols, numbers, URLs): itself."""
    return TranslationResult(text=text, hypotheses=[Hypothesis(text, 0.0, 0.0)])


def _chained(first: list[TranslationResult], second: list[TranslationResult]) -> list[TranslationResult]:
    """Results through a pivot: the second model's output, the first's source-side counts."""
    return [
        replace(b, truncated=a.truncated or b.truncated, input_tokens=a.input_tokens)
        for a, b in zip(first, second, strict=True)
    ]


def _resolve(options: TranslationOptions, info: ModelInfo) -> TranslationOptions:
    """Options with the model's defaults and language codes filled in: equal requests share
    batches and cache entries."""
    try:
        return options.resolved(info)
    except languages.UnsupportedLanguage as e:
        raise UnsupportedLanguage(str(e)) from None
    except ValueError as e:
        raise InvalidRequest(str(e)) from None
