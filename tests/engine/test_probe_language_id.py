"""Short texts in a script that no language of the identifier's set is written in, which lid.176
splits between outside languages that share it (``engine.language_choice.SET_FLOOR``)."""

from __future__ import annotations

import pytest

from engine.language_choice import OUTSIDE_FLOOR, SET_FLOOR, choose, reported
from engine.language_id import Candidate, Detection, LanguageIdentifier, default_languages

# lid.176's first language for each, under OUTSIDE_FLOOR: Persian takes 0.26 of the Arabic greeting,
# Marathi is first for the Hindi one; the set's languages get 0.0002-0.002 together.
SPLIT_OUTSIDE = {
    "مرحبا بالعالم": "ar",
    "سلام دنیا": "fa",
    "გამარჯობა": "ka",
    "नमस्ते दुनिया": "mr",
}


@pytest.fixture(scope="module")
def identifier() -> LanguageIdentifier:
    return LanguageIdentifier(default_languages(["en", "de", "fr"]))


@pytest.mark.parametrize(("text", "language"), SPLIT_OUTSIDE.items())
def test_a_script_the_set_does_not_write_is_refused_as_its_language(
    identifier: LanguageIdentifier, text: str, language: str
) -> None:
    """Before, credited to the set's likeliest at a probability near 0: "مرحبا بالعالم" was translated
    from English (0.0002) into German, and "გამარჯობა" refused as Portuguese."""
    found = identifier.detect(text)
    assert found.outside is not None and found.outside.confidence < OUTSIDE_FLOOR
    for sources, target in ((["en", "fr"], "de"), (["de", "fr"], "en")):
        chosen = choose(found, sources, target)
        assert (chosen.outcome, chosen.detection.language) == ("refuse", language)
    assert reported(found).language == language


def test_the_set_floor_is_on_the_set_s_languages_together() -> None:
    """Two set languages at half the floor each are, together, a language the model does not rule out."""
    outside = Candidate("ar", 0.5)
    under = Detection("en", SET_FLOOR / 4, (Candidate("en", SET_FLOOR / 4), Candidate("de", SET_FLOOR / 4)), outside)
    assert choose(under, ["en"], "de").detection.language == "ar"
    at = Detection("en", SET_FLOOR / 2, (Candidate("en", SET_FLOOR / 2), Candidate("de", SET_FLOOR / 2)), outside)
    assert choose(at, ["en"], "de").outcome == "translate"


@pytest.mark.parametrize("text", ["A dog.", "Ein Mann boxt", "Un chien.", "Merhaba"])
def test_short_latin_texts_keep_their_choice(identifier: LanguageIdentifier, text: str) -> None:
    """The floor changes nothing where the set's languages keep a share the model does not rule out."""
    found = identifier.detect(text)
    assert sum(c.confidence for c in found.candidates) >= SET_FLOOR


@pytest.mark.parametrize(
    "opening",
    [
        "1 " * 600,
        "😀" * 1000,
        "— " * 600,
        "https://example.com/the/long/way/home " * 60,  # letters, but an address's
        "support@example.com; " * 60,
    ],
)
def test_a_long_opening_without_letters_does_not_decide_the_language(
    identifier: LanguageIdentifier, opening: str
) -> None:
    """Before, only the opening was read (the first MAX_CHARS characters): English at 0.12."""
    found = identifier.detect(opening + "Ein Hund rennt im Park und ein Mann sitzt auf der Bank.")
    assert found.language == "de"


@pytest.mark.parametrize("text", ["https://example.com/a/b", "a.b@example.org, www.example.de"])
def test_addresses_alone_are_no_language(identifier: LanguageIdentifier, text: str) -> None:
    found = identifier.detect(text)
    assert found.language is None and not found.candidates
