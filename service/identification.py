"""Language identification for the runtime: which language each text of a job that names no
source is in, and which served source language it is therefore translated from, kept in, or
refused for (``engine.language_choice.choose``).

The identifier ranks the languages of MT_DETECT_LANGUAGES (by default those the served sources
include that it knows); a short text is ranked among the served languages alone. Each text's
identified language is counted in ``mt_detected_languages_total``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.language_choice import Choice, choose, request_prior
from engine.language_id import Detection, LanguageIdentifier, default_languages, supported_languages
from engine.languages import primary_subtag
from engine.repository import Router
from service.metrics import Metrics

UNDETERMINED_LABEL = "und"  # ISO 639-2's code for an undetermined language


@dataclass(frozen=True)
class Refused(Detection):
    """The identification of a text that is refused: in a language no model translates into the
    target, identified with confidence (``engine.language_choice.choose``), or in none determined. A
    request whose texts with words in them are all refused is a 400 (``UnsupportedLanguage``);
    otherwise each refused text comes back unchanged, with this detection and its ``message``."""

    message: str = ""


class Identification:
    """The identifier of a router's languages, and what it makes of the texts of a request."""

    def __init__(self, identifier: LanguageIdentifier, router: Router, metrics: Metrics) -> None:
        self.identifier = identifier
        self.router = router
        self.metrics = metrics
        self._sources_into: dict[str, dict[str, str]] = {}  # target -> its sources (``served_sources``)

    @classmethod
    def build(cls, router: Router, detect_languages: str, metrics: Metrics) -> Identification:
        """The identifier of MT_DETECT_LANGUAGES (``detect_languages``), or else of the router's
        sources that it knows; slow (it reads its model): call it off the event loop."""
        detect = [c.strip() for c in detect_languages.split(",") if c.strip()]
        # Served languages the identifier does not know are left out: text in them is taken for
        # its nearest known language, and pairs from them need source_lang.
        known = supported_languages()
        candidates = detect or [c for c in default_languages(router.sources()) if c in known]
        # Short texts are ranked among the served languages alone: which of them it is, is the question.
        served = sorted({primary_subtag(code) for pair in router.pairs() for code in pair})
        return cls(LanguageIdentifier(candidates, short_languages=served), router, metrics)

    def detect(self, text: str) -> Detection:
        found = self.identifier.detect(text)
        self.metrics.detected_languages.labels(found.language or UNDETERMINED_LABEL).inc()
        return found

    def identify(self, texts: list[str | None], target: str) -> list[Choice | None]:
        """What each text becomes on its way into ``target`` (None: not to identify): translated from
        the likeliest source language that a model translates into ``target``, kept, or refused
        (``choose``); a text only guessed is taken for the language the others are identified in."""
        sources, base = self.served_sources(target).keys(), primary_subtag(target)
        detections = [None if text is None else self.detect(text) for text in texts]
        choices = [None if d is None else choose(d, sources, base) for d in detections]
        if (prior := request_prior(choices)) is None:
            return choices
        return [
            choose(d, sources, base, prior=prior) if c is not None and d is not None and c.detection.guessed else c
            for d, c in zip(detections, choices, strict=True)
        ]

    def served_sources(self, target: str) -> dict[str, str]:
        """The source languages some route translates into ``target``, by the identifier's code of
        each: a text identified as "pt" is translated from "pt" where it is served, else from the
        first of its variants ("pt-BR" of "pt-BR" and "pt-PT", which the identifier cannot tell
        apart; "pt" alone would name neither)."""
        if target not in self._sources_into:
            by_base: dict[str, str] = {}
            for code in sorted(_sources_into(self.router, target), key=lambda code: code != primary_subtag(code)):
                by_base.setdefault(primary_subtag(code), code)
            self._sources_into[target] = by_base
        return self._sources_into[target]

    def refused(self, detection: Detection, text: str, target: str) -> Refused:
        """``detection`` of a text refused on its way into ``target``, saying why."""
        router, language = self.router, detection.language
        if language is None:
            message = f"could not identify the language of {text[:40]!r}: name it with source_lang"
        elif language not in router.sources():
            message = f"the text is in {language!r}, which no model translates from (served: {router.sources()})"
        else:
            served = _sources_into(router, target)
            message = f"the text is in {language!r}, which no model translates into {target!r} (served: {served})"
        return Refused(language, detection.confidence, detection.candidates, message=message)


def _sources_into(router: Router, target: str) -> list[str]:
    """The source languages some route translates into ``target``."""
    return [s for s, t in router.pairs() if t == target]


def prefer_served(detection: Detection, served: Sequence[str]) -> Detection:
    """The identified language, unless no model in ``served`` translates from it and the identifier
    is not confident of it (``engine.language_choice.choose``, no target): then the likeliest served
    one."""
    return choose(detection, served).detection
