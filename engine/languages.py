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


# The script a language is written in unless its tag says otherwise (CLDR's likely subtags), for the
# languages written in several; and the regions whose usual script is another (zh-TW: Traditional).
# A tag whose script is neither named here nor implied falls back to no bare language.
DEFAULT_SCRIPTS = {
    "zh": "hans", "sr": "cyrl", "uz": "latn", "az": "latn", "pa": "guru", "mn": "cyrl", "ms": "latn", "bs": "latn",
}  # fmt: skip
REGION_SCRIPTS = {
    ("zh", "tw"): "hant", ("zh", "hk"): "hant", ("zh", "mo"): "hant", ("sr", "me"): "latn",
    ("uz", "af"): "arab", ("az", "ir"): "arab", ("pa", "pk"): "arab",
}  # fmt: skip


# English names of languages by primary subtag, as LibreTranslate's and DeepL's language lists give them.
LANGUAGE_NAMES = {
    "ar": "Arabic", "bg": "Bulgarian", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek",
    "en": "English", "es": "Spanish", "et": "Estonian", "fi": "Finnish", "fr": "French", "ga": "Irish",
    "hr": "Croatian", "hu": "Hungarian", "it": "Italian", "ja": "Japanese", "ko": "Korean", "lt": "Lithuanian",
    "lv": "Latvian", "nb": "Norwegian Bokmål", "nl": "Dutch", "no": "Norwegian", "pl": "Polish",
    "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sk": "Slovak", "sl": "Slovenian", "sr": "Serbian",
    "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese",
}  # fmt: skip


def primary_subtag(code: str) -> str:
    """The language of a BCP 47 tag without its script, region and variants, in lower case: "pt" for
    "pt-BR", "zh" for "zh_Hant"."""
    return code.strip().replace("_", "-").split("-")[0].lower()


def word_separator(language: Language) -> str:
    """What goes between two words, and two sentences, of ``language``: a space or nothing."""
    return "" if primary_subtag(language.code) in WRITTEN_WITHOUT_SPACES else " "


class UnsupportedLanguage(ValueError):
    """The model does not translate from or into the language asked for."""


def find(languages: list[Language], name: str) -> Language | None:
    """The language ``name`` means among ``languages`` (``LanguageNames.find``)."""
    return LanguageNames(languages).find(name)


class LanguageNames:
    """Languages looked up by the names requests give them, each exact name (code or model code, in
    lower case) in a dict, so that the common lookup costs one probe however many are served."""

    def __init__(self, languages: list[Language]) -> None:
        self.languages = languages
        self.exact: dict[str, Language] = {}
        for lang in reversed(languages):  # the first language of a name wins
            # A language without a model code has no second name: "" (a blank name) must not match it.
            self.exact |= dict.fromkeys({lang.code.lower(), (lang.model_code or lang.code).lower()}, lang)

    def find(self, name: str) -> Language | None:
        """The language ``name`` means: by code or model code, else as the only language a bare
        subtag starts (``zh``: ``zh-Hant`` alone), else as the broader code of a regional tag
        (``broader``)."""
        wanted = name.strip().lower()
        if (lang := self.exact.get(wanted)) is not None:
            return lang
        # By code: the languages of several models name one language several times.
        by_subtag = {lang.code: lang for lang in self.languages if primary_subtag(lang.code) == wanted}
        if len(by_subtag) == 1:
            return next(iter(by_subtag.values()))
        return next((lang for code in broader(wanted) if (lang := self.exact.get(code)) is not None), None)


def broader(name: str) -> list[str]:
    """The codes that name the language of BCP 47 tag ``name`` without its region and variants,
    narrowest first, in lower case: its script kept (``zh-Hant-TW``: ``zh-hant``) or implied by its
    region (``zh-TW``: ``zh-hant``), then the bare language only when that script is the language's
    default (``en-US``: ``en``; ``zh-Hans``: ``zh``; never ``zh-Hant`` or ``zh-TW``: a bare ``zh`` is
    Simplified Chinese). A script subtag is no region: ``sr-Latn`` is not ``sr`` (Cyrillic)."""
    language, *rest = name.strip().replace("_", "-").lower().split("-")
    if not language.isalpha():  # "-de": a region of no language, which would name the first one served
        return []
    script = rest.pop(0) if rest and len(rest[0]) == 4 and rest[0].isalpha() else None
    region = rest[0] if rest and _is_region(rest[0]) else None
    if script is None and region is None:
        return []
    script = script or REGION_SCRIPTS.get((language, region or ""))
    codes = [f"{language}-{script}"] if script else []
    return codes + [language] if script in (None, DEFAULT_SCRIPTS.get(language)) else codes


def _is_region(subtag: str) -> bool:
    return (len(subtag) == 2 and subtag.isalpha()) or (len(subtag) == 3 and subtag.isdigit())


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
