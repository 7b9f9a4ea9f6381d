"""Word documents with hyperlinks, as Word writes them (a ``<w:hyperlink r:id>`` around runs, its
address in a relationship), which python-docx has no call to add."""

from __future__ import annotations

import io

import docx
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn

Piece = str | tuple[str, str]  # a run's text, or a hyperlink's (text, address)


def word_with_links(*pieces: Piece, bold: str = "") -> bytes:
    """A document of one paragraph of ``pieces``: plain runs, hyperlinks, and a bold run for each
    piece equal to ``bold``."""
    document = docx.Document()
    paragraph = document.add_paragraph()
    for piece in pieces:
        if isinstance(piece, tuple):
            add_hyperlink(paragraph, *piece)
        else:
            paragraph.add_run(piece).bold = piece == bold or None
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def add_hyperlink(paragraph: docx.text.paragraph.Paragraph, text: str, address: str) -> None:
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), paragraph.part.relate_to(address, RELATIONSHIP_TYPE.HYPERLINK, is_external=True))
    run, t = OxmlElement("w:r"), OxmlElement("w:t")
    t.text = text
    t.set(qn("xml:space"), "preserve")
    run.append(t)
    link.append(run)
    paragraph._p.append(link)


def links(data: bytes) -> list[tuple[str, str]]:
    """The first paragraph's hyperlinks as (text, address), every one Word would show or not."""
    document = docx.Document(io.BytesIO(data))
    rels = document.part.rels
    return [
        ("".join(t.text or "" for t in link.iter(qn("w:t"))), rels[link.get(qn("r:id"))].target_ref)
        for link in document.paragraphs[0]._p.iter(qn("w:hyperlink"))
    ]


def paragraph_text(data: bytes) -> str:
    """The first paragraph's text, hyperlinks' included (python-docx's ``Paragraph.text`` may skip them)."""
    paragraph = docx.Document(io.BytesIO(data)).paragraphs[0]
    return "".join(t.text or "" for t in paragraph._p.iter(qn("w:t")))
