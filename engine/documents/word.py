"""Word documents (.docx), read and written by python-docx: each paragraph's text is translated.

Paragraphs are found wherever the document body and its headers and footers hold them: in tables
(nested too), text boxes, hyperlinks, fields and content controls. A paragraph becomes one HTML
fragment, translated with format "html": each group of adjacent runs that share their formatting is
a ``<span data-r="N">``, so the engine places each group's formatting around the translated words
aligned with it. The translation of a group goes into the text of its first run and the group's
other runs are emptied; a group whose span came back empty is emptied. Only text (``<w:t>``)
changes: run and paragraph formatting, styles, numbering, tabs, line breaks, images, field codes,
bookmarks and section layout are the document's own and stay as they were.

Not translated: footnotes, endnotes and comments (python-docx does not read them), document
properties (title, author), and text in charts or SmartArt. A tab or line break inside a paragraph
stays where it was among the runs, which the translation may have reordered around it.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass, field

import docx
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.opc.exceptions import PackageNotFoundError
from docx.oxml.ns import qn
from lxml import etree

from engine.documents import fragments
from engine.documents.base import Document, DocumentError

MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
# A .docx is a ZIP archive; one that would expand past this is refused before python-docx reads it
# (a few MB of compressed XML can otherwise expand into GBs of memory).
MAX_EXPANDED_BYTES = 256 << 20
PARAGRAPH, RUN, TEXT, RUN_PROPERTIES = qn("w:p"), qn("w:r"), qn("w:t"), qn("w:rPr")
# Run content that separates the text around it: a group of runs never spans one.
SEPARATORS = frozenset(
    qn(tag) for tag in ("w:tab", "w:ptab", "w:br", "w:cr", "w:drawing", "w:pict", "w:object", "w:sym", "w:fldChar")
)
DATA_RUN = "data-r"


@dataclass
class _Group:
    """Adjacent text of one formatting in a paragraph: its ``<w:t>`` elements in order."""

    texts: list[etree._Element] = field(default_factory=list)
    separated: bool = False  # a tab, break, image or field comes before it: words must not run together

    @property
    def text(self) -> str:
        return "".join(t.text or "" for t in self.texts)

    def replace(self, text: str) -> None:
        for i, element in enumerate(self.texts):
            element.text = text if i == 0 else ""
            # Word drops leading and trailing spaces of a <w:t> unless told to keep them.
            element.set(qn("xml:space"), "preserve")


def read(data: bytes) -> Document:
    document = _open(data)
    grouped = [_groups(paragraph) for paragraph in _paragraphs(document)]
    paragraphs = [groups for groups in grouped if any(group.text.strip() for group in groups)]

    def write(translations: list[str]) -> bytes:
        for groups, translation in zip(paragraphs, translations, strict=True):
            for group, text in zip(groups, _span_texts(translation, groups), strict=True):
                group.replace(text)
        out = io.BytesIO()
        document.save(out)
        return out.getvalue()

    return Document(
        texts=[_fragment(groups) for groups in paragraphs],
        format="html",
        extension=".docx",
        media_type=MEDIA_TYPE,
        writer=write,
    )


def _open(data: bytes) -> docx.document.Document:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            expanded = sum(info.file_size for info in archive.infolist())
    except zipfile.BadZipFile:
        raise DocumentError("not a .docx file (not a ZIP archive); .doc files are not supported") from None
    if expanded > MAX_EXPANDED_BYTES:
        raise DocumentError(f"the .docx file expands to {expanded} bytes; at most {MAX_EXPANDED_BYTES} are read")
    try:
        return docx.Document(io.BytesIO(data))
    # Whatever python-docx meets in a damaged file: a missing part (KeyError), malformed XML (lxml's
    # XMLSyntaxError is a SyntaxError), a package of another kind (ValueError), a broken archive.
    except (KeyError, ValueError, SyntaxError, PackageNotFoundError, zipfile.BadZipFile) as e:
        raise DocumentError(f"not a valid .docx file: {e}") from None


def _paragraphs(document: docx.document.Document) -> list[etree._Element]:
    """Every paragraph of the body, the headers and the footers, in document order."""
    roots = [document.element.body]
    for rel in document.part.rels.values():
        if rel.reltype in (RELATIONSHIP_TYPE.HEADER, RELATIONSHIP_TYPE.FOOTER) and not rel.is_external:
            roots.append(rel.target_part.element)
    return [paragraph for root in roots for paragraph in root.iter(PARAGRAPH)]


def _groups(paragraph: etree._Element) -> list[_Group]:
    """The paragraph's text in groups of adjacent runs with the same formatting and parent (a
    hyperlink's runs are never grouped with the runs around it). Paragraphs nested in it (in a
    text box) are paragraphs of their own."""
    groups: list[_Group] = []
    previous: tuple[object, bytes] | None = None  # the last text's (run parent, run formatting)
    separated = False
    for element in paragraph.iter(TEXT, *SEPARATORS):
        if _paragraph_of(element) is not paragraph:
            continue
        if element.tag != TEXT:
            previous, separated = None, bool(groups)
            continue
        run = element.getparent()
        properties = run.find(RUN_PROPERTIES)
        key = (run.getparent(), b"" if properties is None else etree.tostring(properties))
        if key != previous:
            groups.append(_Group(separated=separated))
            separated = False
        groups[-1].texts.append(element)
        previous = key
    return groups


def _paragraph_of(element: etree._Element) -> etree._Element | None:
    return next(element.iterancestors(PARAGRAPH), None)


def _fragment(groups: list[_Group]) -> str:
    return "".join(
        (" " if g.separated else "") + f'<span {DATA_RUN}="{i}">{fragments.escape(g.text)}</span>'
        for i, g in enumerate(groups)
    )


def _span_texts(fragment: str, groups: list[_Group]) -> list[str]:
    """The text of each group's span in a translated fragment. Text between spans joins the span
    before it (the engine may leave the space between two words outside both), or the first span;
    but the space put before a group after a tab or break (``_fragment``) is dropped again."""
    texts = [""] * len(groups)
    current: int | None = None  # the span the text is in
    last: int | None = None  # the span that closed last
    between = ""  # text outside any span since then
    for event in fragments.parse(fragment):
        if isinstance(event, fragments.Text) and current is not None:
            texts[current] += event.text
        elif isinstance(event, fragments.Text):
            between += event.text
        elif isinstance(event, fragments.Start) and (number := event.number(DATA_RUN, len(groups))) is not None:
            if between.strip() or not groups[number].separated:
                texts[number if last is None else last] += between
            current, between = number, ""
        elif isinstance(event, fragments.End) and event.tag == "span" and current is not None:
            current, last = None, current
    if between and groups:
        texts[len(groups) - 1 if last is None else last] += between
    return texts
