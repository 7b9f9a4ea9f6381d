"""Markup translated by the shipped English-German model: tags where their words went, well formed,
what must be kept kept byte for byte; a Word document's hyperlinks never emptied."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from markup_checks import assert_same_elements
from repo_root import REPO
from word_links import links, paragraph_text, word_with_links

from engine.api import TranslationOptions
from engine.documents import read_document
from engine.translator import Translator, TranslatorConfig

BUNDLE = REPO / "models" / "en-de" / "bundle"
HTML = TranslationOptions(source_language="en", target_language="de", format="html")

pytestmark = pytest.mark.skipif(not (BUNDLE / "manifest.json").is_file(), reason=f"no shipped model at {BUNDLE}")


@pytest.fixture(scope="module")
def translator() -> Iterator[Translator]:
    t = Translator(TranslatorConfig(model_dir=BUNDLE, threads=1))
    yield t
    t.close()


def html(translator: Translator, markup: str) -> str:
    return translator.translate_batch([markup], HTML).results[0].text


def inner(markup: str, tag: str) -> str:
    match = re.search(rf"<{tag}\b[^>]*>(.*?)</{tag}>", markup, re.S)
    assert match, f"no <{tag}> in {markup!r}"
    return match.group(1)


SNIPPETS = {
    "mid-sentence": "<p>A man in a <b>blue</b> shirt is riding a bicycle.</p>",
    "nested": "<p>A <b>man <i>with a hat</i></b> walks down the street.</p>",
    "adjacent": "<p>A <b>black</b> <i>dog</i> runs through the snow.</p>",
    "across sentences": "<p>A man <b>sits on a bench. A dog</b> runs on the grass.</p>",
    "empty and self-closing": '<p>A woman<span class="icon"></span> reads a book <img src="b.png"/> in the park.</p>',
    "link with attributes": "<p>Two <a href='/dogs?a=1&amp;b=2' class=\"x\">dogs</a> play in the water.</p>",
    "list": "<ul>\n  <li>A girl is <strong>jumping</strong>.</li>\n  <li>A boy sits.</li>\n</ul>",
    "line break": "<p>A dog runs.<br>A cat sleeps.</p>",
    "line break inside inline elements": "<p>A <i>big <b>dog<br>runs</b></i> fast.<br/>A cat sleeps.</p>",
}


@pytest.mark.parametrize("markup", SNIPPETS.values(), ids=SNIPPETS.keys())
def test_the_translation_has_the_same_elements_nested_the_same_way(translator: Translator, markup: str) -> None:
    out = html(translator, markup)
    assert_same_elements(markup, out)
    assert out != markup


def test_an_inline_element_wraps_the_translation_of_its_words(translator: Translator) -> None:
    assert inner(html(translator, "<p>A <b>dog</b> runs on the grass.</p>"), "b") == "Hund"
    assert "Hund" in inner(html(translator, "<p>A man walks his <i>dog</i> in the park.</p>"), "i")


def test_punctuation_outside_an_element_stays_outside(translator: Translator) -> None:
    out = html(translator, "<p>A dog <b>runs</b>.</p>")
    assert re.search(r"</b>\.</p>$", out), out


def test_text_outside_tags_translates_as_the_plain_text_does(translator: Translator) -> None:
    markup = "<p>A man in a <b>blue</b> shirt is riding a <i>bicycle</i>.</p>"
    plain = translator.translate_batch(["A man in a blue shirt is riding a bicycle."], TranslationOptions()).results
    assert re.sub(r"<[^>]+>", "", html(translator, markup)) == plain[0].text


def test_code_comments_and_no_translate_are_kept_and_alt_title_translated(translator: Translator) -> None:
    markup = (
        '<div title="A red car">Type <code>ls  -l &amp;&amp; cd</code> in the window.'
        '<span translate="no">New York</span> is big.<!-- not for translation --></div>'
        '<pre>  A dog\n  runs.</pre><img src="dog.png" alt="A black dog">'
    )
    out = html(translator, markup)
    for kept in ("<code>ls  -l &amp;&amp; cd</code>", '<span translate="no">New York</span>',
                 "<!-- not for translation -->", "<pre>  A dog\n  runs.</pre>", 'src="dog.png"'):  # fmt: skip
        assert kept in out, out
    assert "Hund" in re.search(r'alt="([^"]*)"', out).group(1)  # type: ignore[union-attr]
    assert "Auto" in re.search(r'title="([^"]*)"', out).group(1)  # type: ignore[union-attr]


def test_whitespace_around_blocks_and_entities_round_trip(translator: Translator) -> None:
    markup = "<div>\n  <p>\n    A dog &amp; a cat.\n  </p>\n</div>\n"
    out = html(translator, markup)
    assert out.startswith("<div>\n  <p>\n    ") and out.endswith("\n  </p>\n</div>\n")
    assert "&amp;" in out or "und" in out


def test_xml_keeps_its_elements(translator: Translator) -> None:
    markup = "<doc><title>A dog</title><para>A man is <b>running</b> on the beach.</para></doc>"
    out = translator.translate_batch([markup], TranslationOptions(format="xml")).results[0].text
    assert_same_elements(markup, out, "xml")
    assert inner(out, "title") != "A dog"


def test_several_hypotheses_each_keep_the_tags(translator: Translator) -> None:
    markup = "<p>A <b>dog</b> runs.</p>"
    options = TranslationOptions(format="html", beam_size=4, num_hypotheses=3)
    result = translator.translate_batch([markup], options).results[0]
    assert len(result.hypotheses) == 3
    for hypothesis in result.hypotheses:
        assert_same_elements(markup, hypothesis.text)


def test_a_heading_cell_or_alt_text_without_a_period_gets_none(translator: Translator) -> None:
    out = html(translator, '<h1>A dog in the park</h1><table><tr><td>A red car</td></tr></table><img alt="A cat">')
    assert re.search(r"<h1>[^<.]+</h1><table><tr><td>[^<.]+</td></tr></table><img alt=\"[^\".]+\">$", out), out
    assert html(translator, "<p>A dog runs.</p>").endswith(".</p>")


def test_a_footnote_mark_follows_the_translation_of_its_word(translator: Translator) -> None:
    out = html(translator, '<p>A dog<sup><a href="#n1">1</a></sup> runs on the grass.</p>')
    assert 'Hund<sup><a href="#n1">1</a></sup>' in out, out


@pytest.mark.parametrize(
    "markup",
    ["<p>A <b>dog<br>runs</b>.</p>", "<p>A <i>big <b>dog<br/>runs</b></i> fast.</p>", "<p><b>A dog<br>runs</b></p>"],
)
def test_a_br_inside_an_inline_element_gives_the_lines_the_same_translation_as_without_it(
    translator: Translator, markup: str
) -> None:
    # Cut at <b> as well, "A" was translated alone, into "Eine Person": the model's invention.
    out = html(translator, markup)
    assert_same_elements(markup, out)
    assert re.sub(r"</?[bi]>", "", out) == html(translator, re.sub(r"</?[bi]>", "", markup))


def test_a_br_inside_an_inline_element_stays_inside_it_after_its_words(translator: Translator) -> None:
    assert "<b>Hund<br>" in html(translator, "<p>A <b>dog<br>runs</b>.</p>")
    out = translator.translate_batch(["<p>A <b>dog<br/>runs</b>.</p>"], TranslationOptions(format="xml")).results[0]
    assert "<b>Hund<br/>" in out.text and out.text.startswith("<p>Ein ")


SITE, TERMS = "https://example.com/", "https://example.com/terms"
LINKED = {
    "reported": ("Visit ", ("our website", SITE), " today."),
    "middle": ("Contact ", ("support", SITE), " if you have any questions."),
    "start": (("Click here", SITE), " to download the report."),
    "end": ("For more information, see ", ("the documentation", SITE), "."),
    "two": ("Read the ", ("terms", TERMS), " and the ", ("privacy policy", SITE), " before you sign up."),
    "whole": (("Visit our website today.", SITE),),
}


@pytest.mark.parametrize("pieces", LINKED.values(), ids=LINKED.keys())
def test_a_word_hyperlink_keeps_text_whatever_the_alignment(
    translator: Translator, pieces: tuple[str | tuple[str, str], ...]
) -> None:
    # The model aligned none of the translation with "our website" (all of it with "today."): the
    # link came back empty, invisible, and so was lost.
    doc = read_document(word_with_links(*pieces), "links.docx")
    translated = [result.text for result in translator.translate_batch(doc.texts, HTML).results]
    out = doc.write(translated)
    addresses = [piece[1] for piece in pieces if isinstance(piece, tuple)]
    assert sorted(address for _, address in links(out)) == sorted(addresses)
    assert all(re.search(r"\w", text) for text, _ in links(out)), links(out)
    # The paragraph reads as the translation: the runs were written in the spans' order.
    assert paragraph_text(out) == re.sub(r"<[^>]+>", "", translated[0])
