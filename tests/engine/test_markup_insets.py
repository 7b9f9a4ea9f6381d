"""Symbols between words, URLs and e-mail addresses in markup: out of the text the model reads, as
in plain text (engine.insets), and back in the translation, in the element that held them."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from markup_checks import Translate, assert_same_elements, reverse, translate
from repo_root import REPO

from engine.api import TranslationOptions
from engine.glossary import Glossary
from engine.insets import take_out
from engine.markup import Document
from engine.translator import Translator, TranslatorConfig

BUNDLE = REPO / "models" / "en-de" / "bundle"


@pytest.mark.parametrize(
    "sentence",
    [
        "A dog ❤️ runs.",
        "Two men🎸 are here.",
        "I❤️you.",
        "Mail anna.smith@example.org, then 😀 go.",
        "See www.example.com.",
        "https://x.y/😀 is it",
    ],
)
def test_the_model_reads_a_block_as_it_reads_the_plain_sentence(sentence: str) -> None:
    stripped = take_out(sentence)
    assert stripped is not None
    assert Document(f"<p>{sentence}</p>", "html").units == [stripped.words]


def test_a_position_of_the_sentence_moves_to_where_it_is_in_the_words_left() -> None:
    """What places a block's elements once its insets are out: the inverse of ``Stripped.origin``."""
    rng = random.Random(0)
    alphabet = ["a", "b", " ", " ", "😀", "👍🏽", "\ufe0f", "™", ".", "x@y.org", "https://q.r/s"]
    for _ in range(2000):
        sentence = "w" + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) + "z"
        stripped = take_out(sentence)
        if stripped is None:
            continue
        for origin in range(len(sentence) + 1):
            # the first position of the words at or after it in the sentence
            first = next(p for p in range(len(stripped.words) + 1) if stripped.origin(p) >= origin)
            assert stripped.position(origin) == first, (sentence, origin)


@pytest.mark.parametrize(
    ("markup", "units", "expected"),
    [
        ("<p>A dog ❤️ runs.</p>", ["A dog runs."], "<p>A DOG ❤️ RUNS.</p>"),
        ("<p>Mail anna@example.org today.</p>", ["Mail today."], "<p>MAIL anna@example.org TODAY.</p>"),
        ("<p>See www.example.com.</p>", ["See."], "<p>SEE www.example.com.</p>"),
        ("<p>I❤️you.</p>", ["I you."], "<p>I❤️ YOU.</p>"),
        (  # written back as the input wrote it
            "<p>A dog &#10084;&#xfe0f; runs &copy; now &amp; then.</p>",
            ["A dog runs now & then."],
            "<p>A DOG &#10084;&#xfe0f; RUNS &copy; NOW &amp; THEN.</p>",
        ),
        ("<p><b>A dog ❤️</b> runs.</p>", ["A dog runs."], "<p><b>A DOG ❤️</b> RUNS.</p>"),
        ("<p>A dog <img src=x> ❤️ runs.</p>", ["A dog runs."], "<p>A DOG <img src=x> ❤️ RUNS.</p>"),
        (  # an element of insets alone: kept whole, between the words around it
            '<p>See <a href="https://x.org/?a=1&amp;b=2">https://x.org/?a=1&amp;b=2</a> now.</p>',
            ["See now."],
            '<p>SEE <a href="https://x.org/?a=1&amp;b=2">https://x.org/?a=1&amp;b=2</a> NOW.</p>',
        ),
        ("<p>A <b>❤️</b> runs.</p>", ["A runs."], "<p>A <b>❤️</b> RUNS.</p>"),
        (  # kept elements are kept; each line is a sentence of its own
            '<p>A <code>x ❤️ y</code> dog ❤️ <span translate="no">b ❤️ c</span> runs.</p>',
            ["A dog runs."],
            '<p>A <code>x ❤️ y</code> DOG ❤️ <span translate="no">b ❤️ c</span> RUNS.</p>',
        ),
        ("<p>A <b>dog ❤️<br>runs ❤️ fast</b>.</p>", ["A dog ❤️", "runs fast."], "<p>A <b>DOG ❤️<br>RUNS ❤️ FAST</b>.</p>"),
    ],
)
def test_insets_are_out_of_the_units_and_back_as_written(markup: str, units: list[str], expected: str) -> None:
    assert Document(markup, "html").units == units
    assert translate(markup) == expected


@pytest.mark.parametrize(
    ("markup", "expected"),
    [
        ("<p><b>A dog ❤️</b> runs</p>", "<p>runs <b>dog ❤️ A</b></p>"),
        ("<p>A <i>big dog 🐕</i> runs <b>now ❤️ here</b></p>", "<p><b>here now ❤️</b> runs <i>dog 🐕 big</i> A</p>"),
        ("<p>A dog ❤️ runs.</p>", "<p>runs. dog ❤️ A</p>"),
        ("<p>A man 🎸 runs, then it rains.</p>", "<p>rains. it then runs, man 🎸 A</p>"),
    ],
)
def test_an_inset_follows_the_translation_of_the_word_before_it_inside_its_element(markup: str, expected: str) -> None:
    out = translate(markup, by=reverse)
    assert out == expected
    assert_same_elements(markup, out)


def test_an_inset_goes_before_the_punctuation_of_the_word_it_follows_as_in_plain_text() -> None:
    def moved(text: str) -> tuple[str, list[tuple[int, int]]]:  # "A dog runs." -> "Runs a dog."
        return "Runs a dog.", [(0, 1), (1, 2), (2, 0)]

    assert translate("<p>A dog ❤️ runs.</p>", by=moved) == "<p>Runs a dog ❤️.</p>"


ADDRESSES = ["anna@example.org", "https://x.org/a?b=1"]
INSETS = ["❤️", "🐕", "👍🏽", "&#128054;", "&copy;", *ADDRESSES]
WORDS = ["a", "dog", "runs", "big", "park."]


def random_markup(rng: random.Random) -> str:
    """A block of words and insets, some of either in (nested) inline elements; some glued together
    outside them, but for addresses, which would read as one (a run that an element's edge cuts
    stays in the text: no one element holds it)."""
    markup = rng.choice(WORDS)
    for _ in range(rng.randint(2, 12)):
        piece = rng.choice(INSETS) if rng.random() < 0.4 else rng.choice(WORDS)
        if rng.random() < 0.3:
            inner = piece if rng.random() < 0.6 else f"{piece} <u>{rng.choice(WORDS)} {rng.choice(INSETS)}</u>"
            tag = rng.choice("bi")
            markup += f" <{tag}>{inner}</{tag}> "
        else:
            markup += (" " if piece in ADDRESSES else rng.choice(["", " "])) + piece
    return f"<p>{markup} {rng.choice(WORDS)}</p>"


def shuffled_without_symbols(rng: random.Random) -> Translate:
    """A stand-in model: words in a random order, a symbol or an address it reads lost."""

    def translate_unit(text: str) -> tuple[str, list[tuple[int, int]]]:
        kept = [(i, w) for i, w in enumerate(text.split()) if re.fullmatch(r"[a-z.]+", w)]
        rng.shuffle(kept)
        return " ".join(w.upper() for _, w in kept), [(i, t) for t, (i, _) in enumerate(kept)]

    return translate_unit


def held(markup: str, tag: str) -> list[str]:
    """The insets inside each <tag> element."""
    return sorted(i for inside in re.findall(rf"<{tag}>.*?</{tag}>", markup) for i in INSETS if i in inside)


def test_every_inset_comes_back_once_and_the_elements_stay_as_they_were() -> None:
    rng = random.Random(0)
    for _ in range(300):
        markup = random_markup(rng)
        out = translate(markup, by=shuffled_without_symbols(rng))
        assert_same_elements(markup, out)
        for inset in INSETS:
            assert out.count(inset) == markup.count(inset), (markup, out)
        for tag in "biu":
            assert held(out, tag) == held(markup, tag), (tag, markup, out)


@pytest.fixture(scope="module")
def tiny(tiny_bundle: Path) -> Translator:
    return Translator(TranslatorConfig(model_dir=tiny_bundle, provider="cpu", threads=1))


@pytest.mark.parametrize("inset", ["❤️", "anna@example.org"])
def test_a_block_is_translated_as_without_its_inset_and_the_inset_put_back_once(tiny: Translator, inset: str) -> None:
    html = TranslationOptions(format="html")
    texts = ["<p>a dog runs in the park .</p>", f"<p>a dog {inset} runs in the park .</p>"]
    plain, with_inset = tiny.translate_batch(texts, html).results
    assert with_inset.text.count(inset) == 1, with_inset.text
    assert with_inset.text.replace(inset, "").split() == plain.text.split(), (plain.text, with_inset.text)


@pytest.mark.skipif(not (BUNDLE / "manifest.json").is_file(), reason=f"no shipped model at {BUNDLE}")
def test_a_glossary_term_with_an_inset_inside_it_is_found_and_used() -> None:
    translator = Translator(TranslatorConfig(model_dir=BUNDLE, threads=1))
    options = TranslationOptions(format="html", glossary=Glossary.of({"red shirt": "rotes Oberteil"}))
    [result] = translator.translate_batch(["<p>A man in a red ❤️ shirt walks his dog.</p>"], options).results
    translator.close()
    assert "rotes" in result.text and "Oberteil" in result.text and result.text.count("❤️") == 1, result.text
