""".docx: a paragraph reads as its translation, whatever order the engine put its spans in, each
span's words in a run of its formatting (the text outside spans in the plain text's), and each
hyperlink with its address. Stand-in engines reorder the spans; the shipped model does it too."""

from __future__ import annotations

import io
import random
import re
from collections.abc import Iterator

import docx
import pytest
from docx.oxml.ns import qn
from repo_root import REPO
from word_links import add_hyperlink, links, paragraph_text

from engine.documents import fragments, read_document

SITE, TERMS, PRIVACY = "https://example.com/", "https://example.com/terms", "https://example.com/privacy"
Run = tuple[str, str]  # a run's text, and its formatting: "", "b", "i", "bi", or a hyperlink's address
TAG = re.compile(r"<[^>]+>")


def word(*runs: Run, tab_before: int | None = None) -> bytes:
    """A document of one paragraph of ``runs`` (a tab before run ``tab_before``)."""
    document = docx.Document()
    paragraph = document.add_paragraph()
    for i, (text, formatting) in enumerate(runs):
        if i == tab_before:
            paragraph.add_run().add_tab()
        if formatting.startswith("http"):
            add_hyperlink(paragraph, text, formatting)
            continue
        run = paragraph.add_run(text)
        if "b" in formatting:
            run.bold = True
        if "i" in formatting:
            run.italic = True
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def written(data: bytes) -> list[Run]:
    """The first paragraph's text as it reads, in runs of one formatting."""
    document = docx.Document(io.BytesIO(data))
    rels = document.part.rels
    read: list[Run] = []
    for t in document.paragraphs[0]._p.iter(qn("w:t")):
        run = t.getparent()
        link = next(run.iterancestors(qn("w:hyperlink")), None)
        style = "".join(tag for tag in "bi" if run.find(f"{qn('w:rPr')}/{qn('w:' + tag)}") is not None)
        read.append((t.text or "", style if link is None else rels[link.get(qn("r:id"))].target_ref))
    return joined(read)


def joined(runs: list[Run]) -> list[Run]:
    """``runs`` without empty ones, those of one formatting next to each other made one."""
    out: list[Run] = []
    for text, formatting in runs:
        if text and out and out[-1][1] == formatting:
            out[-1] = (out[-1][0] + text, formatting)
        elif text:
            out.append((text, formatting))
    return out


def expected(translation: str, runs: tuple[Run, ...], plain: str) -> list[Run]:
    """What a paragraph of ``runs`` (no two of one formatting next to each other: a span each)
    reads as when written with ``translation``: each span's text in its run's formatting, the text
    outside spans in ``plain``'s."""
    pieces: list[Run] = []
    formatting = plain
    for event in fragments.parse(translation):
        if isinstance(event, fragments.Start):
            formatting = runs[int(event.attrs["data-r"])][1]
        elif isinstance(event, fragments.End):
            formatting = plain
        else:
            pieces.append((event.text, formatting))
    return joined(pieces)


def plain_formatting(fragment: str, runs: tuple[Run, ...]) -> str:
    """The formatting of the runs sent bare, not as spans; none if every run is a span."""
    spans = {int(n) for n in re.findall(r'data-r="(\d+)"', fragment)}
    return next((formatting for i, (_, formatting) in enumerate(runs) if i not in spans), "")


def pieces_of(fragment: str) -> list[tuple[int | None, str]]:
    """A fragment's spans (number, text) and its bare text (None, text), in order."""
    out: list[tuple[int | None, str]] = []
    number: int | None = None
    for event in fragments.parse(fragment):
        if isinstance(event, fragments.Start):
            number = int(event.attrs["data-r"])
            out.append((number, ""))
        elif isinstance(event, fragments.End):
            number = None
        elif number is not None:
            out[-1] = (number, out[-1][1] + event.text)
        elif event.text.strip():
            out.append((None, event.text))
    return out


def fragment_of(pieces: list[tuple[int | None, str]], glue: list[str]) -> str:
    """The translated fragment of ``pieces`` in this order, ``glue[i]`` before piece ``i``."""
    return "".join(
        space + (fragments.escape(text) if n is None else f'<span data-r="{n}">{fragments.escape(text)}</span>')
        for space, (n, text) in zip(glue, pieces, strict=True)
    )


def reversed_translation(fragment: str) -> str:
    """The stand-in engine that puts a fragment's pieces in the opposite order, upper-cased."""
    pieces = [(n, text.strip().upper()) for n, text in reversed(pieces_of(fragment))]
    return fragment_of(pieces, ["", *[" "] * (len(pieces) - 1)])


def translate(runs: tuple[Run, ...], engine: object) -> tuple[str, str, bytes]:
    """The paragraph's fragment, ``engine``'s translation of it, and the document written with it."""
    doc = read_document(word(*runs), "order.docx")
    assert len(doc.texts) == 1
    translation = engine(doc.texts[0])  # type: ignore[operator]
    return doc.texts[0], translation, doc.write([translation])


TWO_LINKS = ("Read the ", ""), ("terms", TERMS), (" and the ", ""), ("privacy policy", PRIVACY), (" now.", "")
REVERSED = {
    "two links": TWO_LINKS,
    "formatting": (("A ", ""), ("bold", "b"), (" and ", ""), ("italic", "i"), (" word.", "")),
    "starting with a link": (("Click here", SITE), (" to get the ", ""), ("report", "b"), (".", "")),
    "all formatted": (("Bold", "b"), (" italic ", "i"), ("both", "bi")),
    "links only": (("Home", SITE), ("Terms", TERMS), ("Privacy", PRIVACY)),
}


@pytest.mark.parametrize("runs", REVERSED.values(), ids=REVERSED.keys())
def test_spans_in_the_opposite_order_are_written_in_that_order(runs: tuple[Run, ...]) -> None:
    fragment, translation, out = translate(runs, reversed_translation)
    assert paragraph_text(out) == TAG.sub("", translation)
    assert written(out) == expected(translation, runs, plain_formatting(fragment, runs))
    # Each hyperlink once, with its address: moved, not copied and left behind empty.
    addresses = [address for text, address in links(out)]
    assert sorted(addresses) == sorted(f for _, f in runs if f.startswith("http"))
    assert all(text.strip() for text, _ in links(out))


def test_a_verb_the_translation_puts_last_keeps_its_formatting() -> None:
    runs = ("You must ", ""), ("sign", "b"), (" the ", ""), ("contract", "i"), (" today.", "")
    doc = read_document(word(*runs), "verb.docx")
    assert doc.texts == ['You must <span data-r="1">sign</span> the <span data-r="3">contract</span> today.']
    translation = 'Sie müssen den <span data-r="3">Vertrag</span> heute <span data-r="1">unterschreiben</span>.'
    assert written(doc.write([translation])) == [
        ("Sie müssen den ", ""),
        ("Vertrag", "i"),
        (" heute ", ""),
        ("unterschreiben", "b"),
        (".", ""),
    ]


def test_the_shipped_models_reordered_links_as_stand_in() -> None:
    """The brief's report: the runs were written in the paragraph's order, not the spans'
    ("Sie mänt mit dem Zemenzen.sich vor dem Schild ")."""
    doc = read_document(word(*TWO_LINKS), "links.docx")
    translation = (
        'Sie mänt<span data-r="1"></span> sich vor dem Schild <span data-r="3">mit dem Zemenzen.</span>'
        '<span data-r="4"></span>'
    )
    out = doc.write([translation])
    assert paragraph_text(out) == "Sie mänt sich vor dem Schild mit dem Zemenzen."
    assert links(out) == [("sich", TERMS), ("mit dem Zemenzen.", PRIVACY)]


def test_a_tab_stays_between_the_runs_that_stay_and_the_words_around_it_apart() -> None:
    runs = ("Name:", ""), ("John ", ""), ("Smith", "b")
    doc = read_document(word(*runs, tab_before=1), "tab.docx")
    # The text after the tab is a span, with a space standing for the tab.
    assert doc.texts == ['Name: <span data-r="1">John </span><span data-r="2">Smith</span>']
    out = doc.write(['Name: <span data-r="2">SMITH</span> <span data-r="1">JOHN</span>'])
    paragraph = docx.Document(io.BytesIO(out)).paragraphs[0]
    assert paragraph.text == "Name: SMITH\tJOHN"  # John stays after the tab; Smith goes before it
    out = doc.write(['Name: <span data-r="1">JOHN</span> <span data-r="2">SMITH</span>'])
    assert docx.Document(io.BytesIO(out)).paragraphs[0].text == "Name:\tJOHN SMITH"


WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
FORMATS = ["", "b", "i", "bi", SITE, TERMS]


def random_runs(rng: random.Random) -> tuple[Run, ...]:
    """Runs with words, no two of one formatting (but links) next to each other: a group each."""
    runs: list[Run] = []
    for _ in range(rng.randint(1, 7)):
        formatting = rng.choice([f for f in FORMATS if not runs or f != runs[-1][1] or f.startswith("http")])
        words = " ".join(rng.choices(WORDS, k=rng.randint(1, 3)))
        runs.append((rng.choice(["", " "]) + words + rng.choice(["", " ", ", "]), formatting))
    return tuple(runs)


def random_engine(rng: random.Random, *, emptying: bool) -> object:
    """A stand-in engine that shuffles a fragment's pieces, changes their words and the space
    between them, and (``emptying``) empties some spans, as the engine does one whose words it
    aligned with none."""

    def engine(fragment: str) -> str:
        pieces = pieces_of(fragment)
        rng.shuffle(pieces)
        changed = [(n, "" if emptying and n is not None and rng.random() < 0.4 else text.upper()) for n, text in pieces]
        return fragment_of(changed, [rng.choice(["", " ", "  "]) for _ in changed])

    return engine


@pytest.mark.parametrize("emptying", [False, True], ids=["spans kept", "spans emptied"])
def test_any_order_of_spans_reads_as_the_translation(emptying: bool) -> None:
    for seed in range(120):
        rng = random.Random(seed)
        runs = random_runs(rng)
        fragment, translation, out = translate(runs, random_engine(rng, emptying=emptying))
        context = f"seed {seed}: {runs} -> {translation!r}"
        assert paragraph_text(out) == TAG.sub("", translation), context
        addresses = [address for _, address in links(out)]
        assert sorted(addresses) == sorted(f for _, f in runs if f.startswith("http")), context
        if not emptying:  # each span's words in its formatting: nothing moved to fill a link
            assert written(out) == expected(translation, runs, plain_formatting(fragment, runs)), context


# -- the shipped model --------------------------------------------------------------------------

BUNDLE = REPO / "models" / "en-de" / "bundle"
shipped = pytest.mark.skipif(not (BUNDLE / "manifest.json").is_file(), reason=f"no shipped model at {BUNDLE}")


@pytest.fixture(scope="module")
def model_translate() -> Iterator[object]:
    from engine.api import TranslationOptions
    from engine.translator import Translator, TranslatorConfig

    translator = Translator(TranslatorConfig(model_dir=BUNDLE, threads=1))
    options = TranslationOptions(source_language="en", target_language="de", format="html")
    yield lambda fragment: translator.translate_batch([fragment], options).results[0].text
    translator.close()


@shipped
def test_the_shipped_models_translation_of_two_links_reads_as_it_says(model_translate: object) -> None:
    runs = ("Read the ", ""), ("terms", TERMS), (" and the ", ""), ("privacy policy", SITE)
    runs += ((" before you sign up.", ""),)
    _, translation, out = translate(runs, model_translate)
    assert paragraph_text(out) == TAG.sub("", translation)
    assert [address for _, address in links(out)] == [TERMS, SITE]
    assert all(re.search(r"\w", text) for text, _ in links(out)), links(out)


@shipped
def test_the_shipped_models_italic_words_stay_italic(model_translate: object) -> None:
    """Sent as a span, the plain text after the italic run reached over "schnell", aligned with
    "much faster", and left the italic run empty."""
    runs = ("The new version is ", ""), ("much faster", "i"), (" than the old one.", "")
    _, translation, out = translate(runs, model_translate)
    assert written(out) == expected(translation, runs, "")
    assert ("schnell", "i") in written(out)


def test_a_links_words_the_translation_parts_go_into_copies_of_it_and_a_line_break_stays() -> None:
    document = docx.Document()
    paragraph = document.add_paragraph()
    add_hyperlink(paragraph, "user ", SITE)
    bold = paragraph.add_run("guide")
    bold.bold = True
    paragraph._p[-2].append(bold._r)  # the link's second run, bold
    paragraph.add_run(" now.")
    paragraph.add_run().add_break()
    paragraph.add_run("Next line.")
    data = io.BytesIO()
    document.save(data)
    doc = read_document(data.getvalue(), "link.docx")
    assert doc.texts == [
        '<span data-r="0">user </span><span data-r="1">guide</span> now. <span data-r="3">Next line.</span>'
    ]
    out = doc.write(
        ['<span data-r="1">HANDBUCH</span> JETZT <span data-r="0">BENUTZER</span> <span data-r="3">NÄCHSTE.</span>']
    )
    assert written(out) == [("HANDBUCH", SITE), (" JETZT ", ""), ("BENUTZER", SITE), ("NÄCHSTE.", "")]
    assert links(out) == [("HANDBUCH", SITE), ("BENUTZER", SITE)]  # two links to one address
    paragraph = docx.Document(io.BytesIO(out)).paragraphs[0]
    assert paragraph.text == "HANDBUCH JETZT BENUTZER\nNÄCHSTE."  # the break before the text after it
