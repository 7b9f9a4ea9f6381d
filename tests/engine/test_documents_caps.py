"""How many texts a document may hold: every reader stops at the text past its ``max_texts``, and a
Markdown file with more lines or blocks (an HTML page with more elements) than that many texts could
take is refused before its parser has built them all."""

from __future__ import annotations

import io

import docx
import pytest

from engine.documents import TooManyTexts, read_document
from engine.documents.base import DocumentTooLarge, TooManyBlocks
from engine.documents.html import NODES_PER_TEXT
from engine.documents.markdown import LINES_PER_TEXT, TOKENS_PER_TEXT

LIMIT = 3


def word_file(paragraphs: int) -> bytes:
    document = docx.Document()
    for _ in range(paragraphs):
        document.add_paragraph("A dog runs.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


FILES = {
    "notes.txt": lambda n: b"A dog runs.\n\n" * n,
    "notes.md": lambda n: b"- A dog runs.\n" * n,
    "page.html": lambda n: b"<p>A dog runs.</p>" * n,
    "film.srt": lambda n: b"".join(b"%d\n00:00:01,000 --> 00:00:02,000\nA dog runs.\n\n" % i for i in range(1, n + 1)),
    "report.docx": word_file,
}


@pytest.mark.parametrize("name", FILES)
def test_a_document_of_as_many_texts_as_allowed_is_read(name: str) -> None:
    assert len(read_document(FILES[name](LIMIT), name, max_texts=LIMIT).texts) == LIMIT


@pytest.mark.parametrize("name", FILES)
def test_a_document_of_one_text_more_is_refused_saying_the_limit(name: str) -> None:
    with pytest.raises(TooManyTexts) as refused:
        read_document(FILES[name](LIMIT + 1), name, max_texts=LIMIT)
    assert refused.value.limit == LIMIT
    assert str(refused.value) == (
        f"the file has more texts to translate (paragraphs, cells, cues or lines) than the limit, {LIMIT}"
    )


def test_markdown_of_more_lines_than_its_texts_could_take_is_refused_before_parsing() -> None:
    lines = LINES_PER_TEXT * LIMIT + 1
    with pytest.raises(TooManyBlocks, match=rf"more lines \({lines}\) than the {LIMIT} texts"):
        read_document(b"\n" * (lines - 1), "blank.md", max_texts=LIMIT)
    assert read_document(b"\n" * (lines - 2), "blank.md", max_texts=LIMIT).texts == []


def test_markdown_of_more_blocks_than_its_texts_could_take_is_refused_while_parsing() -> None:
    """Thematic breaks: a block each, and no text; within the lines allowed."""
    breaks = TOKENS_PER_TEXT * LIMIT + 2
    assert breaks <= LINES_PER_TEXT * LIMIT
    with pytest.raises(TooManyBlocks, match=rf"more blocks \(by line {breaks}\) than the {LIMIT} texts"):
        read_document(b"***\n" * breaks, "rules.md", max_texts=LIMIT)
    assert read_document(b"***\n" * (breaks - 1), "rules.md", max_texts=LIMIT).texts == []


def test_html_of_more_elements_than_its_texts_could_take_is_refused_while_parsing() -> None:
    """Line breaks: two nodes a line (<br> and the line's end), and no text. The parse stops at the
    node past the budget, the <br> of the line it names, not at the end of the page."""
    budget = NODES_PER_TEXT * LIMIT
    line = budget // 2 + 1
    with pytest.raises(
        TooManyBlocks, match=rf"more elements, texts and comments \(by line {line}\) than the {LIMIT} texts"
    ):
        read_document(b"<br>\n" * budget * 2, "breaks.html", max_texts=LIMIT)
    assert read_document(b"<br>\n" * (budget // 2), "breaks.html", max_texts=LIMIT).texts == []


def by_reference(destination: str, uses: int, paragraphs: int = 10) -> bytes:
    """A reference definition and ``paragraphs`` paragraphs of ``uses`` images by reference to it."""
    return (
        f"[r]: {destination}\n\n" + "\n\n".join("Dog " + "![][r]" * uses for _ in range(paragraphs)) + "\n"
    ).encode()


def test_markdown_whose_references_would_write_out_far_past_it_is_refused() -> None:
    """112 KB of Markdown whose one 100,000-character destination is used 2,000 times wrote 200 MB."""
    with pytest.raises(DocumentTooLarge, match="by reference would be written out past"):
        read_document(by_reference("http://e.com/" + "a" * 100_000, 200), "bomb.md")


def test_markdown_with_badges_by_reference_is_read_and_written_with_them() -> None:
    badge = "https://img.shields.io/badge/build-passing-green.svg"
    document = read_document(by_reference(badge, 3, paragraphs=20), "readme.md")
    written = document.write(document.texts).decode()
    assert written.count(f"![]({badge})") == 60
