""".docx: a paragraph reads as its translation, whatever order the engine put its spans in, each
span's words in a run of its formatting (the text outside spans in the plain text's), and each
hyperlink with its address. Stand-in engines reorder the spans; the shipped model does it too."""

from __future__ import annotations

import io
import random
import re
from collections.abc import Iterator
from itertools import takewhile

import docx
import pytest
from docx.oxml import parse_xml
from docx.oxml.ns import nsdecls, qn
from repo_root import REPO
from word_links import add_hyperlink, links, paragraph_text

from engine.documents import fragments, read_document

SITE, TERMS, PRIVACY = "https://example.com/", "https://example.com/terms", "https://example.com/privacy"
Run = tuple[str, str]  # a run's text, and its formatting: "", "b", "i", "bi", a hyperlink's address or a container
TAG = re.compile(r"<[^>]+>")
# Elements around runs that are never split or copied, as Word writes them: ``{runs}`` their runs, ``{n}``
# a number of their own.
FIELD_BEGIN = '<w:r><w:fldChar w:fldCharType="begin"/></w:r>'
FIELD_CODE = '<w:r><w:instrText xml:space="preserve"> DOCPROPERTY Title{n} </w:instrText></w:r>'
FIELD_SEPARATE = '<w:r><w:fldChar w:fldCharType="separate"/></w:r>'
FIELD_END = '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
CONTAINERS = {
    "content control": '<w:sdt><w:sdtPr><w:alias w:val="Box {n}"/><w:id w:val="{n}"/></w:sdtPr>'
    "<w:sdtContent>{runs}</w:sdtContent></w:sdt>",
    "tracked insertion": '<w:ins w:id="{n}" w:author="Reviewer" w:date="2024-05-01T10:00:00Z">{runs}</w:ins>',
    "simple field": '<w:fldSimple w:instr=" DOCPROPERTY Title{n} ">{runs}</w:fldSimple>',
    "complex field": FIELD_BEGIN + FIELD_CODE + FIELD_SEPARATE + "{runs}" + FIELD_END,
    "smart tag": '<w:smartTag w:uri="urn:schemas-microsoft-com:office:smarttags" w:element="place">{runs}</w:smartTag>',
    "custom XML": '<w:customXml w:uri="urn:example" w:element="party{n}">{runs}</w:customXml>',
    "ruby": "<w:r><w:ruby><w:rubyPr/><w:rt><w:r><w:t>kana</w:t></w:r></w:rt>"
    "<w:rubyBase>{runs}</w:rubyBase></w:ruby></w:r>",
}


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
        if formatting in CONTAINERS:
            paragraph._p.extend(contained(formatting, run_xml(text), i))
            continue
        run = paragraph.add_run(text)
        if "b" in formatting:
            run.bold = True
        if "i" in formatting:
            run.italic = True
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def run_xml(text: str, *, bold: bool = False) -> str:
    properties = "<w:rPr><w:b/></w:rPr>" if bold else ""
    return f'<w:r>{properties}<w:t xml:space="preserve">{text}</w:t></w:r>'


def contained(kind: str, runs: str, n: int) -> list[object]:
    """The elements of a ``kind`` container of ``runs`` (XML), numbered ``n``, to go in a paragraph."""
    return elements(CONTAINERS[kind].format(runs=runs, n=n))


def elements(xml: str) -> list[object]:
    """The elements of ``xml``, a paragraph's content, to go in a paragraph."""
    return list(parse_xml(f"<w:p {nsdecls('w')}>{xml}</w:p>"))


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
    return translated(word(*runs), engine)


def translated(source: bytes, engine: object) -> tuple[str, str, bytes]:
    """``translate`` for a document of one paragraph, ``source``."""
    doc = read_document(source, "order.docx")
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


def random_runs(rng: random.Random, formats: list[str] = FORMATS) -> tuple[Run, ...]:
    """Runs with words, no two of one formatting (but links and containers) next to each other: a
    group each."""
    runs: list[Run] = []
    for _ in range(rng.randint(1, 7)):
        formatting = rng.choice(
            [f for f in formats if not runs or f != runs[-1][1] or f.startswith("http") or f in CONTAINERS]
        )
        words = " ".join(rng.choices(WORDS, k=rng.randint(1, 3)))
        runs.append((rng.choice(["", " "]) + words + rng.choice(["", " ", ", "]), formatting))
    return tuple(runs)


def random_engine(rng: random.Random, *, emptying: bool, glues: tuple[str, ...] = ("", " ", "  ")) -> object:
    """A stand-in engine that shuffles a fragment's pieces, changes their words and the space
    between them (one of ``glues``), and (``emptying``) empties some spans, as the engine does one
    whose words it aligned with none."""

    def engine(fragment: str) -> str:
        pieces = pieces_of(fragment)
        rng.shuffle(pieces)
        changed = [(n, "" if emptying and n is not None and rng.random() < 0.4 else text.upper()) for n, text in pieces]
        return fragment_of(changed, [rng.choice(glues) for _ in changed])

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


# -- elements other than hyperlinks around runs -------------------------------------------------

# Each kind's w:ids unique.
REVISIONS = ("w:ins", "w:del", "w:moveFrom", "w:moveTo", "w:bookmarkStart", "w:rPrChange")
KEPT_WHOLE = ("w:sdt", "w:sdtPr", "w:ins", "w:del", "w:fldSimple", "w:fldChar", "w:instrText", "w:smartTag")
KEPT_WHOLE += ("w:customXml", "w:ruby", "w:rt", "w:rubyBase", "w:bookmarkStart", "w:bookmarkEnd")


def word_with_containers(kind: str) -> bytes:
    """A paragraph with two ``kind`` containers (the first of a plain and a bold run) among plain
    text, a bold run, a hyperlink, a bookmark and a tracked deletion."""
    document = docx.Document()
    paragraph = document.add_paragraph("Send the ")
    paragraph._p.extend(contained(kind, run_xml("signed ") + run_xml("contract", bold=True), 1))
    paragraph.add_run(" to ")
    paragraph._p.extend(elements('<w:bookmarkStart w:id="7" w:name="office"/>'))
    paragraph._p.extend(contained(kind, run_xml("the office"), 2))
    paragraph._p.extend(elements('<w:bookmarkEnd w:id="7"/>'))
    paragraph.add_run(" and a ")
    paragraph.add_run("copy").bold = True
    paragraph.add_run(" to ")
    add_hyperlink(paragraph, "our lawyer", SITE)
    paragraph._p.extend(elements('<w:del w:id="9" w:author="Reviewer"><w:r><w:delText>soon</w:delText></w:r></w:del>'))
    paragraph.add_run(" today.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def fields_in_order(paragraph: object) -> bool:
    """Whether each ``w:fldChar`` begin of ``paragraph`` is followed by at most one separate and
    then its end, nested fields within."""
    separated: list[bool] = []  # of each open field, whether its separate came
    for character in paragraph.iter(qn("w:fldChar")):  # type: ignore[attr-defined]
        kind = character.get(qn("w:fldCharType"))
        if kind == "begin":
            separated.append(False)
        elif not separated or (kind == "separate" and separated[-1]):
            return False
        elif kind == "separate":
            separated[-1] = True
        else:
            separated.pop()
    return not separated


def instructions(body: object) -> list[str]:
    """The field codes of ``body``, complex and simple."""
    codes = [code.text for code in body.iter(qn("w:instrText"))]  # type: ignore[attr-defined]
    return codes + [field.get(qn("w:instr")) for field in body.iter(qn("w:fldSimple"))]  # type: ignore[attr-defined]


def contents(data: bytes) -> list[list[str]]:
    """The words in each field's result and innermost element but a hyperlink of the first
    paragraph, in order."""
    paragraph = docx.Document(io.BytesIO(data)).paragraphs[0]._p
    texts: dict[object, str] = {}
    fields = depth = 0
    for element in paragraph.iter(qn("w:t"), qn("w:fldChar")):
        if element.tag == qn("w:fldChar"):
            kind = element.get(qn("w:fldCharType"))
            fields += kind == "begin" and depth == 0
            depth += {"begin": 1, "end": -1}.get(kind, 0)
            continue
        ancestors = takewhile(lambda ancestor: ancestor is not paragraph, element.iterancestors())
        around = [ancestor for ancestor in ancestors if ancestor.tag not in (qn("w:r"), qn("w:hyperlink"))]
        key = ("field", fields) if depth else (around[0] if around else None)
        if key is not None:
            texts[key] = texts.get(key, "") + (element.text or "")
    return [text.split() for text in texts.values()]


def assert_valid(source: bytes, out: bytes, translation: str, context: str = "") -> None:
    """``out``, ``source`` written with ``translation``, opens, has every element but hyperlinks
    that ``source`` has once (no revision id twice, no content control without its properties, no
    field cut apart or its code changed), and has each word of the translation once."""
    before, after = (docx.Document(io.BytesIO(data)).element.body for data in (source, out))
    for tag in REVISIONS:
        ids = [element.get(qn("w:id")) for element in after.iter(qn(tag))]
        assert len(ids) == len(set(ids)), (tag, ids, context)
    assert all(sdt.find(qn("w:sdtPr")) is not None for sdt in after.iter(qn("w:sdt"))), context
    assert all(fields_in_order(paragraph) for paragraph in after.iter(qn("w:p"))), context
    assert instructions(after) == instructions(before), context
    count = [len(list(after.iter(qn(tag)))) for tag in KEPT_WHOLE]
    assert count == [len(list(before.iter(qn(tag)))) for tag in KEPT_WHOLE], context
    assert sorted(paragraph_text(out).split()) == sorted(TAG.sub("", translation).split()), context


@pytest.mark.parametrize("kind", CONTAINERS)
def test_text_in_a_container_stays_in_it_whatever_the_order_and_the_document_stays_valid(kind: str) -> None:
    source = word_with_containers(kind)
    _, translation, out = translated(source, reversed_translation)
    assert_valid(source, out, translation)
    # Each container holds its own runs' translation, and nothing more.
    assert contents(out) == [[word.upper() for word in words] for words in contents(source)] != []
    assert links(out) == [("OUR LAWYER", SITE)]


def test_pinned_texts_out_of_the_translations_order_stay_in_theirs_with_space_around() -> None:
    runs = ("Dear ", ""), ("Anna", "content control"), (" and ", ""), ("Ben", "content control"), (",", "")
    doc = read_document(word(*runs), "pinned.docx")
    assert doc.texts == ['Dear <span data-r="1">Anna</span> and <span data-r="3">Ben</span>,']
    out = doc.write(['Liebe <span data-r="3">BEN</span> und <span data-r="1">ANNA</span>,'])
    # The text after each span follows its content control, outside it; "BEN" is kept apart from ",".
    assert paragraph_text(out) == "Liebe ANNA, BEN und "
    assert contents(out) == [["ANNA"], ["BEN"]]


def test_copies_of_a_run_leave_its_tracked_formatting_change_to_the_original() -> None:
    """A span the translation says twice is written into its run and a copy of it: the copy must
    not repeat the run's tracked change (Word refuses a revision id twice)."""
    document = docx.Document()
    paragraph = document.add_paragraph("A ")
    change = '<w:rPrChange w:id="7" w:author="Ann" w:date="2026-01-01T00:00:00Z"><w:rPr/></w:rPrChange>'
    paragraph._p.extend(elements(f"<w:r {nsdecls('w')}><w:rPr><w:b/>{change}</w:rPr><w:t>dog</w:t></w:r>"))
    paragraph.add_run(" runs.")
    source = io.BytesIO()
    document.save(source)
    doc = read_document(source.getvalue(), "changed.docx")
    assert doc.texts == ['A <span data-r="1">dog</span> runs.']
    translation = 'Ein <span data-r="1">Hund</span> und ein <span data-r="1">Hund</span> rennen.'
    out = doc.write([translation])
    assert_valid(source.getvalue(), out, translation)
    body = docx.Document(io.BytesIO(out)).element.body
    assert [
        r.find(qn("w:rPr")).find(qn("w:b")) is not None for r in body.iter(qn("w:r")) if "Hund" in "".join(r.itertext())
    ] == [True, True]


def test_a_pinned_span_the_translation_left_out_is_emptied_in_place() -> None:
    runs = ("Total: ", ""), ("42 items", "complex field"), (" today.", "")
    source = word(*runs)
    doc = read_document(source, "field.docx")
    # A field's characters are no break between words: no space stands for them.
    assert doc.texts == ['Total: <span data-r="1">42 items</span> today.']
    translation = "Summe heute."
    out = doc.write([translation])
    assert_valid(source, out, translation)
    assert contents(out) == [[]]


@pytest.mark.parametrize("emptying", [False, True], ids=["spans kept", "spans emptied"])
def test_any_order_of_spans_around_containers_keeps_them_whole(emptying: bool) -> None:
    for seed in range(80):
        rng = random.Random(seed)
        runs = random_runs(rng, [*FORMATS, *CONTAINERS])
        source = word(*runs)
        # Words are kept apart: pinned text between two pieces the engine glued would part them.
        _, translation, out = translated(source, random_engine(rng, emptying=emptying, glues=(" ", "  ")))
        context = f"seed {seed}: {runs} -> {translation!r}"
        assert_valid(source, out, translation, context)
        addresses = [address for _, address in links(out)]
        assert sorted(addresses) == sorted(f for _, f in runs if f.startswith("http")), context


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
