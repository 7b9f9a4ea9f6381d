"""Which language pair a request means, among those a bundle serves.

A language is named by its code (``de``, ``zh-Hant``) or by the model's own code (``deu_Latn``),
in any case; a bare language subtag (``zh``) also names the one language it starts, when there is
only one. Every source language is served into every target language other than itself.
"""

from __future__ import annotations

from engine.bundle import Language, Languages

# Languages whose text has no spaces between words, so none between sentences either (by ISO 639-1
# code or the 639-3 code a model may name them by).
WRITTEN_WITHOUT_SPACES = frozenset(
    ["zh", "ja", "th", "lo", "km", "my", "bo", "zho", "jpn", "tha", "lao", "khm", "mya", "bod", "yue"]
)


def word_separator(language: Language) -> str:
    """What goes between two words, and two sentences, of ``language``: a space or nothing."""
    primary = language.code.replace("_", "-").split("-")[0].lower()
    return "" if primary in WRITTEN_WITHOUT_SPACES else " "


class UnsupportedLanguage(ValueError):
    """The model does not translate from or into the language asked for."""


def find(languages: list[Language], name: str) -> Language | None:
    wanted = name.strip().lower()
    for lang in languages:
        if wanted in (lang.code.lower(), (lang.model_code or "").lower()):
            return lang
    # By code: the languages of several models name one language several times.
    by_subtag = {lang.code: lang for lang in languages if lang.code.lower().split("-")[0] == wanted}
    return next(iter(by_subtag.values())) if len(by_subtag) == 1 else None


def resolve_pair(languages: Languages, source: str | None, target: str | None) -> tuple[Language, Language]:
    """The (source, target) languages a request names; None picks the model's only language on that side."""
    src = _resolve(languages.source, source, "source")
    tgt = _resolve(languages.target, target, "target")
    if src.code == tgt.code:
        raise UnsupportedLanguage(f"source and target language are both {src.code!r}")
    return src, tgt


def _resolve(languages: list[Language], name: str | None, side: str) -> Language:
    if name is None:
        if len(languages) == 1:
            return languages[0]
        raise UnsupportedLanguage(f"the model has several {side} languages ({describe(languages)}): name one")
    if (lang := find(languages, name)) is None:
        raise UnsupportedLanguage(f"unsupported {side} language {name!r}; the model has {describe(languages)}")
    return lang


def describe(languages: list[Language], limit: int = 12) -> str:
    codes = [lang.code for lang in languages]
    shown = ", ".join(repr(c) for c in codes[:limit])
    return shown + (f" and {len(codes) - limit} more (see /v1/models)" if len(codes) > limit else "")


def pairs(languages: Languages) -> list[tuple[str, str]]:
    return [(s.code, t.code) for s in languages.source for t in languages.target if s.code != t.code]
