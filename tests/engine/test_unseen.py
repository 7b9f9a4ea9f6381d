"""Escape sequences, control characters and invisible characters: out of what the model reads, back
in the translation (engine.insets), around the words they wrapped, none lost and nothing invented."""

from __future__ import annotations

import re

import pytest
from repo_root import REPO
from test_insets import aligned

from engine.api import TranslationOptions
from engine.insets import Inset, take_out
from engine.markup import Document, MarkupError
from engine.translator import Translator, TranslatorConfig

BUNDLE = REPO / "models" / "en-de" / "bundle"
PLAIN = TranslationOptions(source_language="en", target_language="de")
HTML = TranslationOptions(source_language="en", target_language="de", format="html")
RED, RESET = "\x1b[31m", "\x1b[0m"
LINK = "\x1b]8;;https://x.org\x1b\\"


@pytest.mark.parametrize(
    ("sentence", "words", "insets"),
    [
        (f"A {RED}red{RESET} car.", "A red car.", [Inset(RED, 2, (True, False)), Inset(RESET, 5, (False, True))]),
        ("A do\u200bg runs.", "A dog runs.", [Inset("\u200b", 4, (False, False))]),
        ("A pa\u00adrk.", "A park.", [Inset("\u00ad", 4, (False, False))]),
        ("\ufeffA dog.", "A dog.", [Inset("\ufeff", 0, (False, False))]),
        ("A dog\x07\x00 runs.", "A dog runs.", [Inset("\x07\x00", 5, (False, True))]),
        ("A dog\x1b[K runs.", "A dog runs.", [Inset("\x1b[K", 5, (False, True))]),
        (
            f"See {LINK}the site{LINK[:5]}\x1b\\.",
            "See the site.",
            [Inset(LINK, 4, (True, False)), Inset(f"{LINK[:5]}\x1b\\", 12, (False, False))],
        ),
        ("A dog \u200b😀 runs.", "A dog runs.", [Inset("\u200b😀", 6, (True, True))]),
    ],
)
def test_what_does_not_show_is_taken_out_and_leaves_words_whole(sentence: str, words: str, insets: list[Inset]) -> None:
    stripped = take_out(sentence)
    assert stripped is not None
    assert (stripped.words, list(stripped.insets)) == (words, insets)


@pytest.mark.parametrize(
    "sentence",
    [
        "می\u200cخواهم بروم",  # a zero-width non-joiner spelling a Persian word
        "नमस्\u200dते दुनिया",  # a joiner after a virama
    ],
)
def test_joiners_that_spell_a_word_stay_in_it(sentence: str) -> None:
    assert take_out(sentence) is None


def test_joiners_inside_an_emoji_are_the_emojis() -> None:
    stripped = take_out("A family 👨\u200d👩\u200d👧 walks.")
    assert stripped is not None
    assert [i.text for i in stripped.insets] == ["👨\u200d👩\u200d👧"]


@pytest.mark.parametrize(
    ("translation", "pairs", "expected"),
    [
        ("Das Auto ist rot.", [(0, 0), (1, 3), (2, 1)], f"Das Auto ist {RED}rot{RESET}."),
        # the coloured word aligned to nothing: the colour still wraps a word, the one after the opening
        ("Ein rotes Auto.", [(0, 0), (2, 1), (2, 2)], f"Ein {RED}rotes{RESET} Auto."),
    ],
)
def test_a_formatting_sequence_wraps_the_translation_of_its_word(
    translation: str, pairs: list[tuple[int, int]], expected: str
) -> None:
    stripped = take_out(f"A {RED}red{RESET} car.")
    assert stripped is not None
    assert stripped.put_back(translation, aligned(stripped.words, translation, pairs)) == expected


def test_sequences_at_a_sentences_ends_stay_there() -> None:
    stripped = take_out(f"\x1b[1mA red car.{RESET}")
    assert stripped is not None
    translation = "Ein rotes Auto."
    alignment = aligned(stripped.words, translation, [(0, 2), (1, 1), (2, 0)])  # read backwards
    assert stripped.put_back(translation, alignment) == f"\x1b[1mEin rotes Auto.{RESET}"


@pytest.fixture(scope="module")
def shipped() -> Translator:
    if not (BUNDLE / "manifest.json").is_file():
        pytest.skip(f"no shipped model at {BUNDLE}")
    return Translator(TranslatorConfig(model_dir=BUNDLE, threads=1))


def translate(translator: Translator, text: str, options: TranslationOptions = PLAIN) -> str:
    return translator.translate_batch([text], options).results[0].text


INSERTED = re.compile(
    r"\x1b\[[0-9;]*[A-Za-z]|\x1b\]8;;[^\x1b]*\x1b\\|[\x00-\x08\x0e-\x1f\x7f-\x9f\u00ad\u200b-\u200d\u2060\ufeff]"
)


@pytest.mark.parametrize(
    "sentence",
    [
        f"A {RED}red{RESET} car drives down the street.",
        f"\x1b[1mA dog runs in the park.{RESET}",
        f"A dog runs {LINK}in the park{LINK[:5]}\x1b\\.",
        "A dog\x07 runs in the\x00 park.",
        "A dog runs in the \x85park.",
        "A do\u200bg runs in the pa\u00adrk.",
        "\ufeffA dog runs in the park.",
        "A dog runs\u2060 in the\u200d park.",
        "Two men are playing. \x1b[0m",
    ],
)
def test_the_words_translate_as_without_them_and_each_comes_back_once(shipped: Translator, sentence: str) -> None:
    clean = INSERTED.sub("", sentence)
    translation = translate(shipped, sentence)
    assert INSERTED.sub("", translation) in (translate(shipped, clean), translate(shipped, clean.strip()) + " ")
    assert INSERTED.findall(translation) == INSERTED.findall(sentence)


def test_a_coloured_word_stays_coloured(shipped: Translator) -> None:
    assert translate(shipped, f"A {RED}red{RESET} car drives down the street.").startswith(f"Ein {RED}rotes{RESET} ")


def test_a_sentence_in_capitals_is_one_with_its_escape_sequences(shipped: Translator) -> None:
    translation = translate(shipped, f"A {RED}DOG{RESET} RUNS IN THE PARK.")
    assert INSERTED.sub("", translation) == translate(shipped, "A DOG RUNS IN THE PARK.")
    assert INSERTED.findall(translation) == [RED, RESET]  # as written, not in capitals


def test_markup_in_capitals_is_read_as_plain_text_is_and_keeps_its_tags(shipped: Translator) -> None:
    translation = translate(shipped, "<p>A <b>DOG</b> RUNS IN THE PARK.</p>", HTML)
    assert re.findall(r"</?\w+>", translation) == ["<p>", "<b>", "</b>", "</p>"]
    assert re.sub(r"</?\w+>", "", translation) == translate(shipped, "A DOG RUNS IN THE PARK.")
    assert translation == "<p>EIN <b>HUND</b> RENNT IM PARK.</p>"


def test_markup_keeps_an_opening_sequence_glued_to_its_word(shipped: Translator) -> None:
    translation = translate(shipped, f"<p>A {RED}dog{RESET} runs in the park.</p>", HTML)
    assert re.search(rf"{re.escape(RED)}\w+{re.escape(RESET)} ", translation), translation


def test_xml_still_refuses_control_characters() -> None:
    with pytest.raises(MarkupError, match="malformed XML"):
        Document(f"<p>A {RED}dog</p>", "xml")
