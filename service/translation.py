"""What a translation request asks of the runtime and what it gets back, as every route module
describes it: a ``TranslationJob`` (with its ``JobGlossary``) in, ``Translated`` out
(``service.runtime.Runtime.translate``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.api import TranslationOptions, TranslationResult
from engine.glossary import Glossary
from engine.language_id import Detection


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

    @property
    def identifies_source(self) -> bool:
        """Whether each text's source language is identified (none stated, or "auto")."""
        return self.source_lang is None or self.source_lang.lower() == "auto"


@dataclass
class Translated:
    """A job's results in input order, and for each text what translated it."""

    results: list[TranslationResult]
    models: list[str | None]  # "name:version", "a:1+b:2" through a pivot; None: passed through
    # when the source language was identified; a ``service.identification.Refused``: refused
    detections: list[Detection | None] | None

    @property
    def model(self) -> str:
        """The models used, in order of first use; empty when every text passed through."""
        return ", ".join(dict.fromkeys(m for m in self.models if m))
