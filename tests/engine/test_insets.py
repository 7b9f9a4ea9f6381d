"""Symbols between a sentence's words, URLs and e-mail addresses: taken out of what the model reads,
put back after the translation of the word before them."""

from __future__ import annotations

import random
import re

import pytest

from engine.insets import Inset, Stripped, take_out
from engine.markup import WordAlignment


def stripped(sentence: str) -> Stripped:
    result = take_out(sentence)
    assert result is not None
    return result


def aligned(source: str, target: str, pairs: list[tuple[int, int]]) -> WordAlignment:
    alignment = WordAlignment()
    alignment.add(source, 0, target, 0, pairs)
    return alignment


@pytest.mark.parametrize(
    ("sentence", "words", "insets"),
    [
        ("A dog ❤️ runs.", "A dog runs.", [Inset("❤️", 6, (True, True))]),
        ("Two men🎸 are here.", "Two men are here.", [Inset("🎸", 7, (False, True))]),
        ("I❤️you.", "I you.", [Inset("❤️", 1, (False, False))]),
        ("dogs 🐕 🐕 walk", "dogs walk", [Inset("🐕", 5, (True, True)), Inset("🐕", 5, (True, True))]),
        ("a 👍🏽 b ™ c", "a b c", [Inset("👍🏽", 2, (True, True)), Inset("™", 4, (True, True))]),
        (
            "A man at https://x.org/a_b?c=1 is here.",
            "A man at is here.",
            [Inset("https://x.org/a_b?c=1", 9, (True, True))],
        ),
        ("See www.example.com.", "See.", [Inset("www.example.com", 3, (True, False))]),
        ("(see https://a.b/c).", "(see).", [Inset("https://a.b/c", 4, (True, False))]),
        ("See https://w.org/Foo_(bar), it", "See, it", [Inset("https://w.org/Foo_(bar)", 3, (True, False))]),
        (
            "Mail anna.smith@example.org, then 😀 go.",
            "Mail, then go.",
            [Inset("anna.smith@example.org", 4, (True, False)), Inset("😀", 11, (True, True))],
        ),
        ("https://x.y/😀 is it", "is it", [Inset("https://x.y/😀", 0, (False, True))]),
    ],
)
def test_runs_between_words_are_taken_out(sentence: str, words: str, insets: list[Inset]) -> None:
    result = stripped(sentence)
    assert result.words == words
    assert list(result.insets) == insets


@pytest.mark.parametrize(
    "sentence",
    [
        "A dog runs.",
        "😀 A dog runs. ✅",  # at the edges: segments of their own (engine.segmenter)
        "😀😀",
        "می\u200cخواهم بروم",  # a zero-width non-joiner inside a Persian word
        "x^2 and `ls` here",  # modifier letters
        "https://x.y/z 😀",  # nothing else to read
    ],
)
def test_sentences_without_visible_symbols_between_words_are_left_alone(sentence: str) -> None:
    assert take_out(sentence) is None


def test_every_kept_character_maps_back_to_its_place_in_the_sentence() -> None:
    rng = random.Random(0)
    alphabet = ["a", "b", " ", " ", "😀", "👍🏽", "\ufe0f", "™", ".", "\u200d"]
    for _ in range(2000):
        sentence = "w" + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) + "z"
        result = take_out(sentence)
        if result is None:
            continue
        moved = [i for i, c in enumerate(result.words) if sentence[result.origin(i)] != c]
        # only the space left where a run glued to words on both sides was
        assert all(result.words[i] == " " for i in moved), (sentence, result)
        assert result.origin(len(result.words)) == len(sentence), sentence


def test_a_run_goes_back_after_the_translation_of_the_word_before_it() -> None:
    result = stripped("A dog ❤️ runs.")
    assert result.put_back("Ein Hund rennt.", aligned(result.words, "Ein Hund rennt.", [(0, 0), (1, 1), (2, 2)])) == (
        "Ein Hund ❤️ rennt."
    )
    # the translation's order, not the source's; before the period the sentence did not have there
    reordered = aligned(result.words, "Rennt ein Hund.", [(0, 1), (1, 2), (2, 0)])
    assert result.put_back("Rennt ein Hund.", reordered) == "Rennt ein Hund ❤️."


def test_spacing_follows_the_source() -> None:
    glued = stripped("Two men🎸 are here.")
    alignment = aligned(glued.words, "Zwei Männer sind hier.", [(0, 0), (1, 1), (2, 2), (3, 3)])
    assert glued.put_back("Zwei Männer sind hier.", alignment) == "Zwei Männer🎸 sind hier."
    both = stripped("dogs 🐕 🐕 walk")
    assert both.put_back("Hunde gehen", aligned(both.words, "Hunde gehen", [(0, 0), (1, 1)])) == "Hunde 🐕 🐕 gehen"


def test_without_an_alignment_every_run_still_goes_back_once() -> None:
    rng = random.Random(1)
    for _ in range(500):
        words = [rng.choice(["a", "bb", "c."]) for _ in range(rng.randint(1, 6))]
        sentence = " ".join(w + rng.choice(["", " 😀", "🎸"]) for w in words) + " end"
        result = take_out(sentence)
        if result is None:
            continue
        target = " ".join(rng.choice(["x", "yy", "z."]) for _ in range(rng.randint(0, 7)))
        pairs = sorted({(rng.randrange(len(words) + 1), rng.randrange(7)) for _ in range(rng.randint(0, 5))})
        alignment = aligned(result.words, target, pairs)
        out = result.put_back(target, alignment)
        assert out.count("😀") + out.count("🎸") == len(result.insets), (sentence, target, out)
        assert re.sub(r"[\s😀🎸]", "", out) == re.sub(r"\s", "", target), "the translation's words, in order"
