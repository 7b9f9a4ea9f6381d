"""A translation job's plan: every check that needs no model, made before any text is queued.

``Planner.plan`` reads what each text says (markup's text, malformed markup refused), identifies
the source language of each text when the job names none (``service.identification``), chooses
each text's route (``service.routing``), checks the glossary's languages and what the routes can
give, and admits the job by its cost: ``engine.cost.text_work`` over each text's source tokens,
counted by its first model's tokenizer, against MT_MAX_BEAM_TOKENS (and with alignments, the
weights of each text's matrix against MT_MAX_ALIGNMENT_CELLS). The counts go with the plan to the
batcher, which then need not count them again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.api import TextFormat, TranslationOptions
from engine.bundle import BundleError, load_bundle
from engine.cost import text_work
from engine.language_id import Detection, is_passthrough
from engine.markup import MarkupError, plain_text
from engine.repository import ModelEntry, Route
from engine.tokenizer import Tokenizer
from service.errors import MalformedMarkup, PayloadTooLarge, Unavailable
from service.identification import Identification
from service.routing import (
    check_glossary,
    check_options,
    identified_routes,
    route_terms,
    stated_routes,
    target_code,
)
from service.settings import Settings
from service.translation import JobGlossary, TranslationJob


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

    def by_route(self) -> dict[Route, list[int]]:
        """The texts each route translates, by index, in order; the others are not translated."""
        groups: dict[Route, list[int]] = {}
        for i, route in enumerate(self.routes):
            if route is not None:
                groups.setdefault(route, []).append(i)
        return groups


def check_size(texts: Sequence[str], settings: Settings) -> None:
    """PayloadTooLarge (413) past MT_MAX_TEXTS texts or MT_MAX_CHARS characters."""
    if len(texts) > settings.max_texts:
        raise PayloadTooLarge(f"{len(texts)} texts in one request; the limit is {settings.max_texts}")
    if (chars := sum(map(len, texts))) > settings.max_chars:
        raise PayloadTooLarge(f"{chars} characters in one request; the limit is {settings.max_chars}")


class Planner:
    """Plans the jobs of the router that ``identification`` identifies languages for."""

    def __init__(self, settings: Settings, identification: Identification) -> None:
        self.settings = settings
        self.identification = identification
        self.router = identification.router
        self._entries: dict[str, ModelEntry] = {entry.id: entry for entry in self.router.entries}
        self._tokenizers: dict[str, Tokenizer] = {}  # the cost check's own, read on first use

    def plan(self, job: TranslationJob) -> Plan:
        """Every check of ``job`` that needs no model but its size (``check_size``): the languages
        (its texts' identified when the source is not given), each text's route, the glossary and
        the cost; raises what they find."""
        readable = [_readable(i, t, job.options.format) for i, t in enumerate(job.texts)]
        verbatim = [is_passthrough(t) for t in readable]
        detections: list[Detection | None] | None = None
        if job.identifies_source:
            target = target_code(self.router, job.target_lang)
            to_identify = [None if v else t for t, v in zip(readable, verbatim, strict=True)]
            choices = self.identification.identify(to_identify, target)
            routes, detections = identified_routes(self.identification, readable, choices, target)
        else:
            routes = stated_routes(self.router, verbatim, job)
        if job.glossary is not None:
            check_glossary(self.router, job, job.glossary)
        for route in dict.fromkeys(route for route in routes if route is not None):
            check_options(route, job.options)
        text_tokens = self._check_cost(readable, routes, job.options, job.glossary)
        timeout = min(job.timeout_s or self.settings.request_timeout_s, self.settings.request_timeout_s)
        return Plan(job, routes, detections, timeout, text_tokens)

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
            terms = route_terms(route, glossary)
            work += text_work(tokens, beams, says_terms=terms is not None and bool(terms.said(text, options.format)))
            cells += (tokens - 1) ** 2
        _check_limit(work, s.max_beam_tokens, "source tokens times beams", "MT_MAX_BEAM_TOKENS")
        if options.return_alignments:
            _check_limit(cells, s.max_alignment_cells, "alignment weights", "MT_MAX_ALIGNMENT_CELLS")
        return counted

    def _beam_size(self, model: str, options: TranslationOptions) -> int:
        """The beam ``options`` get from ``model``."""
        manifest = self._entries[model].manifest
        assert manifest is not None  # the router serves only entries with one
        return options.beam(manifest.decoding.beam_size)

    def _tokenizer(self, model: str) -> Tokenizer:
        if model not in self._tokenizers:
            try:
                bundle = load_bundle(self._entries[model].path, verify_checksums=False, check_graphs=False)
            except BundleError as e:
                raise Unavailable(f"model {model!r} is unavailable: {e}") from None
            self._tokenizers[model] = Tokenizer.from_bundle(bundle)
        return self._tokenizers[model]


def _check_limit(requested: int, limit: int, what: str, setting: str) -> None:
    """PayloadTooLarge (413) naming the setting, when ``requested`` is over its ``limit``."""
    if requested > limit:
        raise PayloadTooLarge.over(
            f"{requested} {what} in one request; the limit is {limit}", setting, limit, requested
        )


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
