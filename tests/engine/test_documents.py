"""engine.documents: what each format keeps, shown by a round trip through a stand-in engine that
upper-cases text and keeps tags where they are (so whatever is not upper-case afterwards was kept)."""

from __future__ import annotations

import io
import re
import struct
import tracemalloc
import zipfile
from collections.abc import Callable

import docx
import pytest
from docx.enum.text import WD_COLOR_INDEX
from docx.shared import Pt
from markup_checks import given, translate
from word_bombs import word_bomb
from word_links import links, paragraph_text, word_with_links

from engine.documents import (
    MAX_DOCUMENT_BYTES,
    SUPPORTED_EXTENSIONS,
    Document,
    DocumentError,
    DocumentTooLarge,
    MalformedDocument,
    UnsupportedFormat,
    read_document,
)
from engine.documents.markdown import MAX_NESTING

TAG_OR_REFERENCE = re.compile(r"(<[^>]*>|&#?\w+;)")


def shout(text: str) -> str:
    """The stand-in engine for an HTML fragment: text upper-cased, tags and references as they were."""
    return "".join(
        piece if TAG_OR_REFERENCE.fullmatch(piece) else piece.upper() for piece in TAG_OR_REFERENCE.split(text)
    )


def round_trip(data: bytes, filename: str) -> bytes:
    doc = read_document(data, filename)
    return doc.write([shout(text) for text in doc.texts])


# -- plain text ---------------------------------------------------------------------------------


def test_text_keeps_line_endings_blank_lines_indentation_and_bom() -> None:
    data = "\ufeffFirst line\r\n\r\n   indented line  \nlast\rno break at the end".encode()
    doc = read_document(data, "notes.txt")
    assert doc.texts == ["First line", "indented line", "last", "no break at the end"]
    assert (doc.format, doc.extension, doc.media_type) == ("text", ".txt", "text/plain; charset=utf-8")
    assert doc.write([t.upper() for t in doc.texts]) == data.decode().upper().replace("\ufeff", "\ufeff").encode()


def test_text_without_lines_to_translate_comes_back_unchanged() -> None:
    doc = read_document(b"\n  \n\t\n", "blank.TXT")
    assert doc.texts == []
    assert doc.write([]) == b"\n  \n\t\n"


def test_text_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(DocumentError, match=r"not UTF-8.*offset 3\)"):
        read_document("Café".encode("latin-1"), "old.txt")
    with pytest.raises(DocumentError, match=r"offset 6\)"):  # counted in the file, BOM included
        read_document(b"\xef\xbb\xbfCaf\xe9", "old.txt")


# -- subtitles ----------------------------------------------------------------------------------

SRT = (
    "\ufeff5\r\n"
    "00:00:01,000 --> 00:00:02,500 X1:40 X2:600\r\n"
    "<i>A sentence that runs</i>\r\n"
    "<i>over two lines & more.</i>\r\n"
    "\r\n"
    "6\r\n"
    "00:01:02,003 --> 00:01:04,000\r\n"
    "{\\an8}On top.\r\n"
    "\r\n"
)


def test_subtitles_keep_cue_numbers_timings_tags_and_line_breaks() -> None:
    doc = read_document(SRT.encode(), "film.srt")
    assert doc.format == "html"
    # A cue is one text: its lines joined by <wbr>, its tags kept, its text escaped.
    assert doc.texts == ["<i>A sentence that runs</i><wbr><i>over two lines &amp; more.</i>", "On top."]
    assert doc.write([shout(t) for t in doc.texts]).decode() == (
        "\ufeff5\r\n"
        "00:00:01,000 --> 00:00:02,500 X1:40 X2:600\r\n"
        "<i>A SENTENCE THAT RUNS</i>\r\n"
        "<i>OVER TWO LINES & MORE.</i>\r\n"
        "\r\n"
        "6\r\n"
        "00:01:02,003 --> 00:01:04,000\r\n"
        "{\\an8}ON TOP.\r\n"
        "\r\n"
    )


def test_a_cue_takes_the_lines_the_engine_gives_it_but_never_a_blank_one() -> None:
    doc = read_document(b"1\n00:00:01,000 --> 00:00:02,000\nOne\ntwo\n\n", "a.srt")
    assert doc.write(["ONE TWO<wbr><wbr> <wbr/>"]) == b"1\n00:00:01,000 --> 00:00:02,000\nONE TWO\n\n"


def test_a_cue_that_follows_another_without_a_blank_line_is_a_cue_of_its_own() -> None:
    data = b"1\n00:00:01,000 --> 00:00:02,000\nHello.\n00:00:03,000 --> 00:00:04,500\nBye.\n\n"
    doc = read_document(data, "a.srt")
    assert doc.texts == ["Hello.", "Bye."]
    written = doc.write(["Hallo.", "Tschüss."]).decode()
    assert "00:00:03,000 --> 00:00:04,500\nTschüss." in written and "Hallo.\n\n" in written


def test_a_dialogue_is_translated_line_by_line_its_dashes_kept() -> None:
    cue = "1\n00:00:01,000 --> 00:00:02,000\n"
    doc = read_document(f"{cue}- Where to?\n– Home.\n\n".encode(), "a.srt")
    assert doc.texts == ["Where to?<br>Home."]  # <br>: the engine translates each line on its own
    assert doc.write(["Wohin?<br>Nach Hause."]).decode() == f"{cue}- Wohin?\n– Nach Hause.\n\n"


def test_a_cue_whose_tags_do_not_nest_is_translated_without_them() -> None:
    doc = read_document(b"1\n00:00:01,000 --> 00:00:02,000\n<i>Open\nand <b>never</i> closed\n\n", "a.srt")
    assert doc.texts == ["Open<wbr>and never closed"]


@pytest.mark.parametrize("data", [b"not subtitles at all", b"1\n00:00:01,000 -> broken\ntext\n"])
def test_a_file_that_is_not_subrip_is_refused(data: bytes) -> None:
    with pytest.raises(DocumentError, match="not a SubRip"):
        read_document(data, "broken.srt")


@pytest.mark.parametrize(
    "timing",
    [
        "99999999999999999999:00:00,000 --> 99999999999999999999:00:01,000",  # past what a timedelta holds
        "00:00:00,000 --> 00:00:01," + "9" * 5000,  # more digits than Python reads as an integer
    ],
)
def test_a_timing_out_of_range_is_refused_naming_its_cue(timing: str) -> None:
    data = f"1\n00:00:01,000 --> 00:00:02,000\nFine.\n\n2\n{timing}\nToo late.\n\n".encode()
    with pytest.raises(DocumentError, match=r"the timing of cue 2 \(counted from the top\) is out of range"):
        read_document(data, "film.srt")


def test_a_long_but_representable_timing_is_kept() -> None:
    data = b"1\n2000000000:00:00,000 --> 2000000000:00:01,500\nLate.\n\n"
    assert round_trip(data, "film.srt") == data.replace(b"Late.", b"LATE.")


# -- Markdown -----------------------------------------------------------------------------------

MARKDOWN = """\
---
title: Front matter stays
---
# A *heading* ##

Some *em*, _em_, **strong**, __strong__ and ~~struck~~ text
with `code()`.

A [link](https://example.com/page "Title") and ![an image](img.png).
Hard\\
break.

> Quoted *text*
> continued.

- item one
  continued
- item two
  1. nested

| Column | Other |
|:-------|------:|
| cell *a* | b |

Setext
======

<div>
An HTML block stays.
</div>

```python
print("code stays")
```

    indented code stays

Auto <https://example.com> and <kbd>inline html</kbd>, snake_case and a * star.
"""

MARKDOWN_TRANSLATED = """\
---
title: Front matter stays
---
# A *HEADING* ##

SOME *EM*, _EM_, **STRONG**, __STRONG__ AND ~~STRUCK~~ TEXT WITH `code()`.

A [LINK](https://example.com/page "Title") AND ![an image](img.png). HARD\\
BREAK.

> QUOTED *TEXT* CONTINUED.

- ITEM ONE CONTINUED
- ITEM TWO
  1. NESTED

| COLUMN | OTHER |
|:-------|------:|
| CELL *A* | B |

SETEXT
======

<div>
An HTML block stays.
</div>

```python
print("code stays")
```

    indented code stays

AUTO <https://example.com> AND <kbd>INLINE HTML</kbd>, SNAKE_CASE AND A \\* STAR.
"""


def test_markdown_keeps_its_markup() -> None:
    doc = read_document(MARKDOWN.encode(), "README.md")
    assert (doc.format, doc.media_type) == ("html", "text/markdown; charset=utf-8")
    assert doc.texts[0] == 'A <em data-i="0">heading</em>'
    assert doc.texts[-1].startswith('Auto <a data-i="0">https://example.com</a> and <img data-i="1">inline html')
    assert round_trip(MARKDOWN.encode(), "README.md").decode() == MARKDOWN_TRANSLATED


def test_markdown_keeps_crlf_and_bom() -> None:
    data = "\ufeff# Title\r\n\r\nText\r\nmore\\\r\nend\r\n".encode()
    assert round_trip(data, "a.markdown") == "\ufeff# TITLE\r\n\r\nTEXT MORE\\\r\nEND\r\n".encode()


def test_markdown_code_the_engine_moved_or_dropped_is_written_as_it_was() -> None:
    doc = read_document(b"Call `f(x)` or `g(y)` with *this*.\n", "a.md")
    assert doc.texts == [
        'Call <code data-i="0">f(x)</code> or <code data-i="1">g(y)</code> with <em data-i="2">this</em>.'
    ]
    # The engine reordered the words, translated inside the code, dropped one, spaced the emphasis.
    translated = '<em data-i="2">Dies </em> mit <code data-i="1">G(Y)</code> aufrufen.'
    # The space inside the emphasis goes outside it: "*Dies *" would not be emphasis.
    assert doc.write([translated]) == b"*Dies*  mit `g(y)` aufrufen. `f(x)`\n"


def test_markdown_keeps_a_link_whose_words_the_translation_left_out() -> None:
    doc = read_document(b"A *red* car and a [ball](https://example.com/ball).\n", "a.md")
    assert doc.texts == ['A <em data-i="0">red</em> car and a <a data-i="1">ball</a>.']
    # As the markup engine places elements whose words have no aligned translation: empty.
    translated = 'Ein <em data-i="0"></em>Auto und ein<a data-i="1"></a>.'
    assert doc.write([translated]) == b"Ein Auto und ein[](https://example.com/ball).\n"


def test_a_markdown_link_keeps_its_own_words_and_the_sentence_s_period_stays_out() -> None:
    doc = read_document(b"A day [outside](https://example.com/o).\n", "a.md")
    assert doc.texts == ['A day <a data-i="0">outside</a>.']
    # "outside" aligned to "Freien" and, apart from it, to the first word: the link took the whole
    # translated sentence, its period too.
    by = given("Einen schönen Tag im Freien.", [(0, 0), (1, 2), (2, 0), (2, 4)])
    assert (
        doc.write([translate(doc.texts[0], by=by)]).decode()
        == "Einen schönen Tag im [Freien](https://example.com/o).\n"
    )
    doc = read_document(b"Read [the manual](/m) first.\n", "a.md")
    by = given("Lies zuerst das Handbuch.", [(0, 0), (1, 2), (2, 3), (3, 1)])
    assert doc.write([translate(doc.texts[0], by=by)]).decode() == "Lies zuerst [das Handbuch](/m).\n"


def nested_lists(depth: int) -> str:
    return "".join("  " * level + f"- item {level}\n" for level in range(depth))


@pytest.mark.parametrize(
    "markdown",
    [
        nested_lists(10),
        nested_lists(MAX_NESTING // 2),  # each list is two levels: the list and its item
        "".join("> " * level + f"quote {level}\n>\n" for level in range(1, 12)),
        "> " * MAX_NESTING + "deepest quote\n",
        "1. one\n   > - two\n   >   1. > three *four*\n",
    ],
)
def test_markdown_is_translated_however_deep_its_lists_and_quotes_nest(markdown: str) -> None:
    translated = round_trip(markdown.encode(), "deep.md").decode()
    assert translated == re.sub(r"[a-z]+", lambda m: m.group().upper(), markdown)


@pytest.mark.parametrize(
    ("markdown", "line"),
    [
        (nested_lists(MAX_NESTING // 2 + 1), MAX_NESTING // 2 + 1),
        ("Fine.\n\n" + "> " * (MAX_NESTING + 1) + "too deep\n", 3),
        ("- > " * MAX_NESTING + "too deep\n", 1),
    ],
)
def test_markdown_nested_past_the_limit_is_refused_naming_it(markdown: str, line: int) -> None:
    message = rf"line {line}: lists and block quotes nest deeper than {MAX_NESTING} levels"
    with pytest.raises(DocumentError, match=message):
        read_document(markdown.encode(), "deep.md")


def test_markdown_inline_elements_nest_only_as_deep_as_in_commonmarks_preset() -> None:
    # Past the preset's 20 levels they are text, however deep blocks may nest: images in images
    # parse several times slower with more.
    markdown = "![" * 30 + "a" + "](u)" * 30 + "\n"
    assert read_document(markdown.encode(), "a.md").texts == ["![" * 21 + '<img data-i="0">' + "](u)" * 21]


def test_markdown_escapes_syntax_in_translated_text() -> None:
    doc = read_document(b"| a | b |\n|---|---|\n| c | d |\n", "t.md")
    assert doc.write(["x|y", "[b]", "*c*", "`d`"]) == b"| x\\|y | \\[b\\] |\n|---|---|\n| \\*c\\* | \\`d\\` |\n"


@pytest.mark.parametrize(
    ("markdown", "kept"),
    [
        ("\\# Not a heading.\n", "\\# NOT A HEADING.\n"),
        ("1\\. Not a list.\n", "1\\. NOT A LIST.\n"),
        ("2024\\) Not a list.\n", "2024\\) NOT A LIST.\n"),
        ("\\- Not a list.\n", "\\- NOT A LIST.\n"),
        ("\\> Not a quote.\n", "\\> NOT A QUOTE.\n"),
        ("- \\+ Not nested.\n", "- \\+ NOT NESTED.\n"),
        ("> Hard\\\n> \\# break.\n", "> HARD\\\n> \\# BREAK.\n"),
        ("\\~~~ Not a fence.\n", "\\~~~ NOT A FENCE.\n"),
        ("## 1. A heading's own text\n", "## 1. A HEADING'S OWN TEXT\n"),
    ],
)
def test_markdown_text_beginning_a_line_begins_no_other_block(markdown: str, kept: str) -> None:
    assert round_trip(markdown.encode(), "a.md").decode() == kept


def test_markdown_text_that_reads_as_a_character_reference_stays_text() -> None:
    doc = read_document(b"Write &amp;copy; for \xc2\xa9, &amp;#169; too; Tom & Jerry.\n", "a.md")
    assert doc.texts == ["Write &amp;copy; for \xa9, &amp;#169; too; Tom &amp; Jerry."]
    assert doc.write(doc.texts) == b"Write \\&copy; for \xc2\xa9, \\&#169; too; Tom & Jerry.\n"


def test_markdown_toml_front_matter_is_kept() -> None:
    data = b'+++\ntitle = "Hello"\n+++\n\nBody.\n'
    assert read_document(data, "a.md").texts == ["Body."]
    assert round_trip(data, "a.md") == b'+++\ntitle = "Hello"\n+++\n\nBODY.\n'


def test_markdown_keeps_task_list_checkboxes() -> None:
    markdown = (
        "- [ ] a task with a [link](https://example.com) and **bold** text\n"
        "- [x] done\n"
        "  - [X] nested, `code`\n"
        "    1. [ ] ordered\n"
        "- [x] x\n"
        "- [ ] 1. a step, no list\n"
        "- [y] not a checkbox\n"
        "\n"
        "[ ] not in a list\n"
    )
    doc = read_document(markdown.encode(), "tasks.md")
    assert doc.texts[:2] == ['a task with a <a data-i="0">link</a> and <strong data-i="1">bold</strong> text', "done"]
    assert round_trip(markdown.encode(), "tasks.md").decode() == (
        "- [ ] A TASK WITH A [LINK](https://example.com) AND **BOLD** TEXT\n"
        "- [x] DONE\n"
        "  - [X] NESTED, `code`\n"
        "    1. [ ] ORDERED\n"
        "- [x] X\n"
        "- [ ] 1. A STEP, NO LIST\n"
        "- \\[Y\\] NOT A CHECKBOX\n"
        "\n"
        "\\[ \\] NOT IN A LIST\n"
    )


FOOTNOTES = """\
A note[^1] and [a link[^note]](https://example.com)[^note].

[^1]: The note, with a [link](https://example.com).
[^note]: A note
    continued on an indented line
and a lazy one.

    Its second paragraph.

        code in a note

[^a]: a
    - [ ] a task in a note[^1]

Not notes: [^missing] and [^b](https://example.com/b).
"""

FOOTNOTES_TRANSLATED = """\
A NOTE[^1] AND [A LINK[^note]](https://example.com)[^note].

[^1]: THE NOTE, WITH A [LINK](https://example.com).
[^note]: A NOTE CONTINUED ON AN INDENTED LINE AND A LAZY ONE.

    ITS SECOND PARAGRAPH.

        code in a note

[^a]: A
    - [ ] A TASK IN A NOTE[^1]

NOT NOTES: \\[^MISSING\\] AND [^B](https://example.com/b).
"""


def test_markdown_keeps_footnote_references_and_labels() -> None:
    doc = read_document(FOOTNOTES.encode(), "notes.md")
    assert doc.texts[:2] == [
        'A note<img data-i="0"> and <a data-i="1">a link<img data-i="2"></a><img data-i="3">.',
        'The note, with a <a data-i="0">link</a>.',
    ]
    assert round_trip(FOOTNOTES.encode(), "notes.md").decode() == FOOTNOTES_TRANSLATED
    # A reference the engine dropped is written at the end, as code is.
    assert doc.write(["Eine Notiz.", *doc.texts[1:]]).startswith(b"Eine Notiz. [^1] [^note] [^note]\n")


@pytest.mark.parametrize(
    ("markdown", "kept"),
    [
        ("# Title {#id}\n", "# TITLE {#id}\n"),
        ("## Title {#sec-2 .class key=value} ##\n", "## TITLE {#sec-2 .class key=value} ##\n"),
        ("### Title {: #id .class }\n", "### TITLE {: #id .class }\n"),
        ('Setext {#id lang="en us"}\n===\n', 'SETEXT {#id lang="en us"}\n===\n'),
        ("# Title {-}\n", "# TITLE {-}\n"),
        ("# {#only-an-id}\n", "# {#only-an-id}\n"),
        ("# Using {braces}\n", "# USING {BRACES}\n"),
        ("Not a heading {#id}\n", "NOT A HEADING {#ID}\n"),
    ],
)
def test_markdown_keeps_a_headings_attribute_block(markdown: str, kept: str) -> None:
    assert round_trip(markdown.encode(), "a.md").decode() == kept


TABLE_WITH_PIPES = """\
| a \\| b | see `x\\|y` and [l](https://example.com "t\\|t") |
|---|---|
| <b title="a\\|b">c</b> | d |
"""

TABLE_WITH_PIPES_TRANSLATED = """\
| A \\| B | SEE `x\\|y` AND [L](https://example.com "t\\|t") |
|---|---|
| <b title="a\\|b">C</b> | D |
"""


def test_markdown_table_cell_with_escaped_pipes_is_translated_and_written_escaped() -> None:
    # markdown-it reads a cell's "\\|" as "|", in code spans too: the file has it escaped.
    doc = read_document(TABLE_WITH_PIPES.encode(), "t.md")
    assert doc.texts[:2] == ["a | b", 'see <code data-i="0">x|y</code> and <a data-i="1">l</a>']
    assert round_trip(TABLE_WITH_PIPES.encode(), "t.md").decode() == TABLE_WITH_PIPES_TRANSLATED


# -- HTML ---------------------------------------------------------------------------------------

HTML = """\
<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>My page</title>
<style>p { color: red }</style><script>var x = "<p>kept</p>";</script></head>
<body>
  <h1 class="big">Hello <em>world</em></h1>
  <div>Loose text <p>paragraph</p> tail</div>
  <ul><li>One<li>Two <b>bold</b></ul>
  <div translate="no"><p>Brand name</p></div>
  <pre>  kept  </pre>
  <!-- a comment -->
</body>
</html>
"""


def test_html_is_cut_into_blocks_and_the_rest_is_kept() -> None:
    doc = read_document(HTML.encode(), "page.HTM")
    assert (doc.format, doc.media_type) == ("html", "text/html; charset=utf-8")
    assert doc.texts == [
        "<title>My page</title>",
        '<h1 class="big">Hello <em>world</em></h1>',
        "Loose text ",
        "<p>paragraph</p>",
        " tail",
        "<li>One",
        "<li>Two <b>bold</b>",
    ]
    expected = HTML
    for text in doc.texts:
        expected = expected.replace(text, shout(text), 1)
    assert doc.write([shout(t) for t in doc.texts]).decode() == expected


def test_html_the_engine_could_not_put_back_together_is_refused() -> None:
    with pytest.raises(DocumentError, match=r"malformed HTML: </b> at line 1, column 21"):
        read_document(b"<p>Mis <b>bold <i>it</b></i></p>", "bad.html")


@pytest.mark.parametrize(
    ("page", "message"),
    [
        (b"<p>Shown</p>\n<p>x <!-- hidden <b>to the end</b></p>", "unterminated comment at line 2, column 6"),
        (b"<p>Shown</p><![CDATA[ hidden</p>", "unterminated CDATA section at line 1, column 13"),
    ],
)
def test_html_left_open_in_a_comment_is_refused_not_translated(page: bytes, message: str) -> None:
    with pytest.raises(MalformedDocument, match=f"malformed HTML: {re.escape(message)}") as raised:
        read_document(page, "page.html")
    assert f"line {raised.value.line}, column {raised.value.column}" in message


# -- Word ---------------------------------------------------------------------------------------


def word_document() -> bytes:
    document = docx.Document()
    paragraph = document.add_paragraph("Plain ")
    bold = paragraph.add_run("bold")
    bold.bold, bold.font.size = True, Pt(14)
    paragraph.add_run(" and ")
    italic = paragraph.add_run("italic")
    italic.italic, italic.font.highlight_color = True, WD_COLOR_INDEX.YELLOW
    paragraph.add_run(" spl")
    paragraph.add_run("it\tafter a tab")  # same formatting as the run before: one group
    document.add_paragraph("")
    document.add_heading("A heading", level=1)
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text = "Cell"
    table.cell(0, 1).add_table(rows=1, cols=1).cell(0, 0).text = "Nested cell"
    document.sections[0].header.paragraphs[0].text = "Header"
    document.sections[0].footer.paragraphs[0].text = "Footer"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def runs(data: bytes) -> list[list[tuple[str, bool | None, bool | None, int | None]]]:
    """Each body paragraph's runs as (text, bold, italic, size)."""
    document = docx.Document(io.BytesIO(data))
    return [[(r.text, r.bold, r.italic, r.font.size) for r in p.runs] for p in document.paragraphs]


def test_word_keeps_paragraphs_runs_and_their_formatting() -> None:
    doc = read_document(word_document(), "report.docx")
    assert doc.format == "html" and doc.media_type.endswith("wordprocessingml.document")
    # Plain text is bare, as in HTML; text after a tab stays a span, which says where the tab goes.
    assert doc.texts == [
        'Plain <span data-r="1">bold</span> and <span data-r="3">italic</span> split '
        '<span data-r="5">after a tab</span>',
        "A heading",
        "Cell",
        "Nested cell",
        "Header",
        "Footer",
    ]
    translated = doc.write([shout(t) for t in doc.texts])
    assert runs(translated) == [
        [
            ("PLAIN ", None, None, None),
            ("BOLD", True, None, Pt(14)),
            (" AND ", None, None, None),
            ("ITALIC", None, True, None),
            (" SPLIT", None, None, None),  # the space standing for the tab dropped again
            ("\t", None, None, None),  # the run "it\tafter a tab" cut: its tab stays between the texts
            ("AFTER A TAB", None, None, None),
        ],
        [],
        [("A HEADING", None, None, None)],
    ]
    document = docx.Document(io.BytesIO(translated))
    assert document.paragraphs[0].runs[3].font.highlight_color == WD_COLOR_INDEX.YELLOW
    assert document.paragraphs[2].style.name == "Heading 1"
    cell = document.tables[0].cell(0, 1)
    assert (document.tables[0].cell(0, 0).text, cell.tables[0].cell(0, 0).text) == ("CELL", "NESTED CELL")
    section = document.sections[0]
    assert (section.header.paragraphs[0].text, section.footer.paragraphs[0].text) == ("HEADER", "FOOTER")


def test_word_runs_follow_their_spans_wherever_the_engine_put_them() -> None:
    doc = read_document(word_document(), "report.docx")
    # Reordered, spans dropped, the space between words left outside the spans (plain, as the text
    # outside spans is); the tab stays after the runs that stayed where they were.
    first = '<span data-r="3">Kursiv</span> <span data-r="1">fett</span><span data-r="0">Schlicht</span>'
    translated = doc.write([first, *doc.texts[1:]])
    assert runs(translated)[0] == [
        ("Kursiv", None, True, None),
        (" ", None, None, None),
        ("fett", True, None, Pt(14)),
        ("Schlicht", None, None, None),
        ("\t", None, None, None),
    ]


SITE, TERMS, PRIVACY = "https://example.com/", "https://example.com/terms", "https://example.com/privacy"


@pytest.mark.parametrize(
    ("pieces", "translated", "expected"),
    [
        (  # as the shipped model did it: every word before the link, none aligned with its words
            ("Visit ", ("our website", SITE), " today."),
            '<span data-r="0"></span><span data-r="2">Besuchen Sie uns heute.</span><span data-r="1"></span>',
            [("heute", SITE)],
        ),
        (  # the nearest words: from the group before, the link's own punctuation and space outside it
            ("For details, see ", ("the manual", SITE), "."),
            '<span data-r="0">Details siehe Handbuch</span><span data-r="1"></span>.<span data-r="2"></span>',
            [("Handbuch", SITE)],
        ),
        (  # as near before as after: the word after
            ("Contact ", ("support", SITE), " if in doubt."),
            '<span data-r="0">Im Zweifel</span><span data-r="1"></span> <span data-r="2">kontaktieren, bitte.</span>',
            [("kontaktieren", SITE)],
        ),
        (
            ("Read the ", ("terms", TERMS), " and the ", ("privacy policy", PRIVACY), "."),
            '<span data-r="0">Lesen Sie die</span> <span data-r="1">AGB</span><span data-r="2"> und die </span>'
            '<span data-r="3"></span><span data-r="4">Datenschutzerklärung.</span>',
            [("AGB", TERMS), ("Datenschutzerklärung", PRIVACY)],
        ),
        (  # a link keeps its word: with no other, the second link stays empty
            (("Home", SITE), ("Help", TERMS)),
            '<span data-r="0">Start</span><span data-r="1"></span>',
            [("Start", SITE), ("", TERMS)],
        ),
    ],
    ids=["every word after the link", "at the end", "in the middle", "two links", "no word to spare"],
)
def test_word_hyperlink_whose_words_the_engine_left_out_takes_the_nearest_word(
    pieces: tuple[str | tuple[str, str], ...], translated: str, expected: list[tuple[str, str]]
) -> None:
    """A hyperlink without text is invisible: the link would be lost. Moving a word into it moves
    only a boundary between runs, so the paragraph says what the translation says."""
    doc = read_document(word_with_links(*pieces), "links.docx")
    out = doc.write([translated])
    assert links(out) == expected
    assert paragraph_text(out) == re.sub(r"<[^>]+>", "", translated)


def test_word_hyperlink_takes_a_word_the_engine_wrote_across_two_runs_whole() -> None:
    doc = read_document(word_with_links(("Docs", SITE), "read ", "me", bold="me"), "links.docx")
    out = doc.write(['<span data-r="0"></span><span data-r="1">Lies</span><span data-r="2">mich</span>'])
    assert links(out) == [("Liesmich", SITE)]
    assert [text for text, *_ in runs(out)[0]] == ["", ""]  # the runs outside the link


def test_word_hyperlink_the_engine_gave_words_keeps_them() -> None:
    doc = read_document(word_with_links("Visit ", ("our website", SITE), " today."), "links.docx")
    out = doc.write(
        ['<span data-r="0">Besuchen Sie</span> <span data-r="1">unsere Website</span><span data-r="2"> heute.</span>']
    )
    assert links(out) == [("unsere Website", SITE)]
    assert paragraph_text(out) == "Besuchen Sie unsere Website heute."


def test_word_formatting_whose_words_the_engine_left_out_is_emptied_as_in_html() -> None:
    # Bold on some other word would be wrong; only a link is lost for good when it is empty.
    doc = read_document(word_with_links("A ", "bold", " word.", bold="bold"), "bold.docx")
    out = doc.write(['<span data-r="0">Ein</span><span data-r="1"></span><span data-r="2"> Wort.</span>'])
    assert [text for text, *_ in runs(out)[0]] == ["Ein", "", " Wort."]


def test_word_that_is_not_a_docx_is_refused() -> None:
    with pytest.raises(DocumentError, match="not a ZIP archive"):
        read_document(b"\xd0\xcf\x11\xe0 an old .doc", "old.docx")
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("hello.txt", "not a Word document")
    with pytest.raises(DocumentError, match=r"not a valid \.docx"):
        read_document(archive.getvalue(), "fake.docx")
    with pytest.raises(DocumentError):
        read_document(word_document()[:2000], "truncated.docx")


def with_part(data: bytes, name: str, content: bytes) -> bytes:
    """The archive with its part ``name`` replaced by ``content``."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as z:
        for info in source.infolist():
            z.writestr(info, content if info.filename == name else source.read(info))
    return out.getvalue()


@pytest.mark.parametrize(
    ("part", "content"),
    [
        ("[Content_Types].xml", b"<Types/>"),
        ("_rels/.rels", b"<Relationships/>"),
        ("word/document.xml", b"<document/>"),
        ("word/document.xml", b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"/>'),
    ],
)
def test_word_whose_part_has_the_wrong_root_is_refused(part: str, content: bytes) -> None:
    """Well-formed XML that is not the element python-docx expects (it fails with AttributeError or
    TypeError rather than an error of its own) is a damaged file, not a crash."""
    with pytest.raises(DocumentError, match=r"not a valid \.docx"):
        read_document(with_part(word_document(), part, content), "damaged.docx")


def understated(data: bytes, name: str, size: int) -> bytes:
    """The archive with ``name``'s uncompressed size given as ``size`` in its headers."""
    out = bytearray(data)
    entry = name.encode()
    for signature, size_at, name_at in ((b"PK\x03\x04", 22, 30), (b"PK\x01\x02", 24, 46)):
        at = out.find(signature)
        while out[at + name_at : at + name_at + len(entry)] != entry:
            at = out.find(signature, at + 1)
        out[at + size_at : at + size_at + 4] = struct.pack("<I", size)
    return bytes(out)


def peak_allocated(read: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        with pytest.raises(DocumentError):
            read()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_word_expanding_past_the_limit_is_refused_before_it_is_read() -> None:
    bomb = word_bomb(word_document(), 64 << 20)
    assert len(bomb) < 200_000
    with pytest.raises(DocumentTooLarge, match=rf"expands to 6\d{{7}} bytes; the limit is {MAX_DOCUMENT_BYTES}"):
        read_document(bomb, "bomb.docx")
    assert peak_allocated(lambda: read_document(bomb, "bomb.docx")) < 4 << 20
    with pytest.raises(DocumentTooLarge, match=r"the limit is 1000$"):
        read_document(word_document(), "report.docx", max_bytes=1000)


def test_word_whose_headers_understate_its_size_is_read_no_further() -> None:
    lying = understated(word_bomb(word_document(), 64 << 20), "word/document.xml", 5000)
    with pytest.raises(DocumentError, match=r"not a valid \.docx file: Bad CRC-32 for file 'word/document\.xml'"):
        read_document(lying, "lying.docx")
    assert peak_allocated(lambda: read_document(lying, "lying.docx")) < 4 << 20


def test_word_within_the_limit_is_read_as_it_was_stored() -> None:
    data = word_document()
    declared = sum(info.file_size for info in zipfile.ZipFile(io.BytesIO(data)).infolist())
    assert read_document(data, "report.docx", max_bytes=declared).texts == read_document(data, "report.docx").texts


@pytest.mark.parametrize("filename", ["notes.txt", "README.md", "page.html", "film.srt"])
def test_text_files_over_the_limit_are_refused(filename: str) -> None:
    with pytest.raises(DocumentTooLarge, match="the file is 2001 bytes of text; the limit is 2000"):
        read_document(b"x" * 2001, filename, max_bytes=2000)


# -- all formats --------------------------------------------------------------------------------


@pytest.mark.parametrize("filename", ["program.exe", "no_extension", "archive.tar.gz", "report.doc"])
def test_unsupported_extensions_are_refused(filename: str) -> None:
    with pytest.raises(UnsupportedFormat, match=r"unsupported file type .*supported are \.txt"):
        read_document(b"data", filename)


def test_every_extension_has_a_reader_and_write_checks_the_count() -> None:
    assert set(SUPPORTED_EXTENSIONS) == {".txt", ".md", ".markdown", ".html", ".htm", ".srt", ".docx"}
    doc: Document = read_document(b"one\ntwo\n", "a.txt")
    with pytest.raises(ValueError, match="1 translations for 2 texts"):
        doc.write(["only one"])
