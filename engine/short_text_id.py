"""Which of the served languages a short text is in: lingua's n-gram models, for one to three words.

    ranker = ShortTextRanker(["en", "de"])  # build once, at start-up
    ranker.rank("Abbrechen")  # [("de", 0.98...), ("en", 0.01...)]

fastText's lid.176 "lite" model (``engine.language_id``) is the better identifier from four words up
and the only one that names a language the service does not serve, but on one to three words it
often knows nothing ("Hallo", "Ja", "Zur Kasse": the answer it gives an empty text) or is sure and
wrong ("Abbrechen": English 0.37, German 0.005). Restricted to the served languages, lingua ranks
them well there and its shares are calibrated: on Multi30K val's English and German windows of one
to three words, 1 of 6,080 gave the wrong one of the two 0.9 or more (fastText: 101), on this
project's short everyday texts none (benchmarks/RESULTS.md, section 6.2). It cannot tell a served
language from an unserved one; it can tell that none of the served languages is written in a text's
script (all shares 0: "Привет" to a service of English and German).

Memory is lingua's cost: about 33 MB a language in its high-accuracy mode, so a service of more than
``HIGH_ACCURACY_UP_TO`` languages ranks them in its low-accuracy mode (trigrams, about 1.5 MB each).
"""

from __future__ import annotations

from collections.abc import Iterable

# Up to this many words a text is short: from four words up fastText is as accurate on Multi30K
# (RESULTS 6.2), and the short-text model's time grows with the text.
SHORT_WORDS = 3
HIGH_ACCURACY_UP_TO = 8
LINGUA_ALIASES = {"no": "nb"}  # lingua knows Norwegian as Bokmål and Nynorsk; lid.176 as "no"


def is_short(text: str) -> bool:
    return len(text.split()) <= SHORT_WORDS


class ShortTextRanker:
    """lingua restricted to ``languages`` (ISO 639-1 codes; those lingua does not know are left out)."""

    def __init__(self, languages: Iterable[str]) -> None:
        from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

        known = {language.iso_code_639_1.name.lower() for language in Language.all()}
        ours = sorted({code.strip().lower() for code in languages})
        self._code_of = {LINGUA_ALIASES.get(c, c): c for c in ours if LINGUA_ALIASES.get(c, c) in known}
        wanted = sorted(self._code_of)
        self._languages = sorted(self._code_of.values())
        self._detector = None
        if len(wanted) >= 2:  # one language ranks nothing (and lingua needs two)
            builder = LanguageDetectorBuilder.from_iso_codes_639_1(*(IsoCode639_1.from_str(c) for c in wanted))
            if len(wanted) > HIGH_ACCURACY_UP_TO:
                builder = builder.with_low_accuracy_mode()
            self._detector = builder.with_preloaded_language_models().build()

    @property
    def languages(self) -> list[str]:
        """The languages ranked: those asked for that lingua knows, when at least two are."""
        return list(self._languages) if self._detector is not None else []

    def rank(self, text: str) -> list[tuple[str, float]]:
        """Every language of ``languages`` with its share (summing to 1, or all 0 when none of them
        is written in the text's script), best first."""
        if self._detector is None:
            return []
        values = self._detector.compute_language_confidence_values(text)
        return [(self._code_of[v.language.iso_code_639_1.name.lower()], v.value) for v in values]
