"""Which models translate each text, and translating a text along them: one model, or two through a
pivot language (``engine.repository.Router``), with the job's glossary.

A job's glossary (``JobGlossary``) is for one language pair: a job that names other languages is
refused (``GlossaryMismatch``), and with the source identified, a text identified as another
language than the glossary's is translated without it. Through a pivot, the first model translates
without the glossary and the second uses, for each text, the terms the text says, placed where the
text says them (``engine.glossary.Glossary.placed_as_said``); the terms a result reports are the
text's.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from engine import languages
from engine.api import TermUse, TranslationOptions, TranslationResult, term_uses
from engine.glossary import Glossary, Match
from engine.language_choice import Choice
from engine.language_id import Detection
from engine.repository import Hop, Route, Router
from service.errors import GlossaryMismatch, InvalidRequest, UnsupportedLanguage
from service.gathering import Batching, Gathering
from service.identification import Identification, Refused
from service.translation import JobGlossary, TranslationJob

# -- choosing each text's route ----------------------------------------------------------------


def stated_routes(router: Router, verbatim: list[bool], job: TranslationJob) -> list[Route | None]:
    """Each text's route, from the stated source language; None for a text with nothing to
    translate. The languages a request names are checked even when none of its texts needs
    them: whether it is refused does not depend on what its texts are."""
    if job.keep_same_language and _same_language(router, job.source_lang or "", job.target_lang):
        return [None] * len(verbatim)
    route = _route(router, job.source_lang or "", job.target_lang, detected=False)
    return [None if unchanged else route for unchanged in verbatim]


def identified_routes(
    identification: Identification, texts: list[str], choices: list[Choice | None], target: str
) -> tuple[list[Route | None], list[Detection | None]]:
    """Each identified text's route and what the response says of its language; None for a text
    with nothing to translate, kept (identified as written in the target language already, as
    DeepL does) or refused (its detection a ``Refused``). When every text with words in it is
    refused, the request is: ``UnsupportedLanguage`` (400) naming the first one's language."""
    router = identification.router
    routes: list[Route | None] = []
    detections: list[Detection | None] = []
    for text, choice in zip(texts, choices, strict=True):
        if choice is None:
            routes.append(None)
            detections.append(None)
        elif choice.outcome == "refuse":
            routes.append(None)
            detections.append(identification.refused(choice.detection, text, target))
        else:
            language = choice.detection.language
            assert language is not None  # choose refuses what it cannot name a language for
            source = identification.served_sources(target).get(language, language)
            routes.append(None if choice.outcome == "keep" else _route(router, source, target, detected=True))
            detections.append(choice.detection)
    refused = [d for d in detections if isinstance(d, Refused)]
    if refused and all(isinstance(d, Refused) for d, c in zip(detections, choices, strict=True) if c is not None):
        raise UnsupportedLanguage(
            refused[0].message, details={**_served(router), "detected_language": refused[0].language}
        )
    return routes, detections


def target_code(router: Router, name: str) -> str:
    """The served target language ``name`` names; UnsupportedLanguage (400) if none."""
    try:
        return router.code(name, "target")
    except languages.UnsupportedLanguage as e:
        raise UnsupportedLanguage(str(e), details=_served(router)) from None


def check_options(route: Route, options: TranslationOptions) -> None:
    """InvalidRequest (422) for what ``route`` cannot give: alignments through a pivot."""
    if route.pivot is not None and options.return_alignments:
        hops = " -> ".join([route.source, *(h.target for h in route.hops)])
        raise InvalidRequest(f"alignments are not available for a pair served through a pivot ({hops})")


def check_glossary(router: Router, job: TranslationJob, glossary: JobGlossary) -> None:
    """GlossaryMismatch (400) when the job names other languages than its glossary's."""
    if glossary.target_lang is None:
        return
    asked = [("target", job.target_lang, glossary.target_lang)]
    if not job.identifies_source:
        asked.append(("source", job.source_lang or "", glossary.source_lang))
    for side, name, wanted in asked:
        if router.code(name, side) != wanted:
            raise GlossaryMismatch(
                f"the glossary is for {glossary.source_lang}->{glossary.target_lang}: "
                f"its {side} language is not {name!r}"
            )


def route_terms(route: Route, glossary: JobGlossary | None) -> Glossary | None:
    """The terms to translate along ``route`` with: none for a text identified as another language
    than its glossary's source."""
    if glossary is None or glossary.source_lang not in (None, route.source):
        return None
    return glossary.terms


def _route(router: Router, source: str, target: str, detected: bool) -> Route:
    try:
        return router.route(source, target)
    except languages.UnsupportedLanguage as e:
        details = _served(router)
        if detected and source not in router.sources():
            details["detected_language"] = source
            message = f"the text is in {source!r}, which no model translates from (served: {router.sources()})"
            raise UnsupportedLanguage(message, details=details) from None
        raise UnsupportedLanguage(str(e), details=details) from None


def _served(router: Router) -> dict[str, object]:
    """The details of an ``UnsupportedLanguage``: what is served instead."""
    return {"supported_pairs": [f"{s}-{t}" for s, t in router.pairs()]}


def _same_language(router: Router, source: str, target: str) -> bool:
    """Whether ``source`` and ``target`` name one served language (False: either names none)."""
    try:
        return router.code(source, "source") == router.code(target, "target")
    except languages.UnsupportedLanguage:
        return False


# -- translating along a route -----------------------------------------------------------------


class Routing:
    """Texts translated along their route, each model's part through ``gathering``."""

    def __init__(self, gathering: Gathering) -> None:
        self.gathering = gathering

    async def translate(
        self,
        route: Route,
        texts: list[str],
        asked: TranslationOptions,
        terms: Glossary | None,
        batching: Batching,
        *,
        tokens: list[int] | None = None,
    ) -> tuple[list[TranslationResult], str]:
        """``texts`` along ``route``, using ``terms``; with the models that translated them.
        ``tokens``: each text's source tokens by the route's first model, where already counted."""
        hop_translate = self.gathering.translate
        if route.pivot is None:
            [hop] = route.hops
            return await hop_translate(hop, texts, replace(asked, glossary=terms), batching, tokens)
        first, second = route.hops
        # The pivot text is an intermediate: one hypothesis, the model's own length rule.
        pivot = replace(asked, num_hypotheses=1, max_length=None, min_length=0)
        pivoted, first_name = await hop_translate(first, texts, pivot, batching, tokens)
        current = [r.text for r in pivoted]
        if terms is None:
            results, second_name = await hop_translate(second, current, asked, batching)
        else:
            results, second_name = await self._placed(second, texts, current, asked, terms, batching)
        return _chained(pivoted, results), f"{first_name}+{second_name}"

    async def _placed(
        self,
        hop: Hop,
        texts: list[str],
        pivoted: list[str],
        asked: TranslationOptions,
        terms: Glossary,
        batching: Batching,
    ) -> tuple[list[TranslationResult], str]:
        """The pivot texts ``pivoted`` of ``texts`` by ``hop``, each with the terms its text says,
        placed where it says them: texts that say different terms in different places are
        translated with different glossaries. Each result reports the terms of its text."""
        found = [terms.said(text, asked.format) for text in texts]
        groups: dict[Glossary | None, list[int]] = {}
        for i, said in enumerate(found):
            groups.setdefault(terms.placed_as_said(said), []).append(i)
        done = await asyncio.gather(
            *(
                self.gathering.translate(hop, [pivoted[i] for i in idx], replace(asked, glossary=placed), batching)
                for placed, idx in groups.items()
            )
        )
        results: list[TranslationResult | None] = [None] * len(texts)
        for idx, (translated, _) in zip(groups.values(), done, strict=True):
            for i, result in zip(idx, translated, strict=True):
                uses = _said_terms(terms, [m for m, _ in found[i]], result, markup=asked.format != "text")
                results[i] = replace(result, terms=uses)
        return [r for r in results if r is not None], done[0][1]


def _said_terms(terms: Glossary, matches: list[Match], result: TranslationResult, *, markup: bool) -> list[TermUse]:
    """The terms a text says (``matches``), with where the translation of its pivot text has them."""
    return term_uses([(terms.terms[m.term], None if markup else (m.start, m.end)) for m in matches], result.text)


def _chained(first: list[TranslationResult], second: list[TranslationResult]) -> list[TranslationResult]:
    """Results through a pivot: the second model's output, the first's source-side counts."""
    return [
        replace(b, truncated=a.truncated or b.truncated, input_tokens=a.input_tokens)
        for a, b in zip(first, second, strict=True)
    ]
