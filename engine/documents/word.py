"""Word documents (.docx), read and written by python-docx: each paragraph's text is translated.

Paragraphs are found wherever the document body and its headers and footers hold them: in tables
(nested too), text boxes, hyperlinks, fields and content controls. A paragraph becomes one HTML
fragment, translated with format "html": each group of adjacent runs that share their formatting is
a ``<span data-r="N">``, so the engine places each group's formatting around the translated words
aligned with it; but the plain text (the paragraph's own runs of the formatting most of its text
has) is bare, as in an HTML paragraph. The translation is written in its own order, which need not
be the runs' (``engine.documents.word_placement``). Run and paragraph formatting, styles, numbering,
tabs, line breaks, images, field codes, bookmarks and section layout are the document's own and stay
as they were.

Not translated: footnotes, endnotes and comments (python-docx does not read them), document
properties (title, author), and text in charts or SmartArt.

A .docx is a ZIP archive whose XML compresses a hundredfold or more: a file of a few hundred KB can
hold GBs of XML. One whose members' declared sizes come to more than ``max_bytes`` is refused before
any is read, and no member is decompressed past its declared size.
"""

from __future__ import annotations

import io
import lzma
import zipfile
import zlib
from itertools import accumulate

import docx
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.opc.exceptions import PackageNotFoundError
from docx.oxml.ns import nsmap
from lxml import etree

from engine.documents import fragments, word_placement
from engine.documents.base import Document, DocumentError, DocumentTooLarge, limited
from engine.documents.wordml import (
    BREAKS,
    DATA_RUN,
    FIELD_CHARACTER,
    FIELD_CHARACTER_TYPE,
    HYPERLINK,
    PARAGRAPH,
    RUN_PROPERTIES,
    TEXT,
    Field,
    Group,
    outside,
    texts_and_separators,
)

MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
FIELD_STEPS = {"begin": 1, "end": -1}  # how each w:fldChar changes how many fields are open
# Paragraphs with text, found by libxml2 rather than element by element in Python: a document within
# the size limit can still hold millions of empty ones.
PARAGRAPHS_WITH_TEXT = etree.XPath(".//w:p[.//w:t]", namespaces={"w": nsmap["w"]})


class _Paragraph:
    """A paragraph's groups, sent as a fragment, and written back in the order of its translation.

    The formatting that most of the paragraph's own text has is its plain text: sent bare, as the
    text of an HTML paragraph is, and not as spans. As spans, plain text would be placed too: the
    span of the words after an italic run can reach over words aligned with it, and leave it empty
    ("is <i>much faster</i> than" gave "ist schnell zu sehen, als" with "schnell" in the plain run)."""

    def __init__(self, element: etree._Element, groups: list[Group]) -> None:
        self.element, self.groups = element, groups
        self.base = _base(groups)
        for group in groups:
            group.plain = self.base is not None and _plain(group, self.base)

    def fragment(self) -> str:
        return "".join(
            fragments.escape(g.text)
            if g.plain
            else (" " if g.separated else "") + f'<span {DATA_RUN}="{i}">{fragments.escape(g.text)}</span>'
            for i, g in enumerate(self.groups)
        )

    def write(self, translation: str) -> None:
        word_placement.write(self.element, self.groups, self.base, translation)


def read(data: bytes, *, max_bytes: int, max_texts: int) -> Document:
    unpacked = _unpacked(data, max_bytes)
    pending = [_parsed(unpacked, max_texts)]
    paragraphs = pending[0][1]

    def write(translations: list[str]) -> bytes:
        # Writing moves runs: a second write starts again from the file as it was read.
        document, paragraphs = pending.pop() if pending else _parsed(unpacked, max_texts)
        for paragraph, translation in zip(paragraphs, translations, strict=True):
            paragraph.write(translation)
        out = io.BytesIO()
        document.save(out)
        return out.getvalue()

    return Document(
        texts=[paragraph.fragment() for paragraph in paragraphs],
        format="html",
        extension=".docx",
        media_type=MEDIA_TYPE,
        writer=write,
    )


def _parsed(unpacked: bytes, max_texts: int) -> tuple[docx.document.Document, list[_Paragraph]]:
    """The document, and its paragraphs that have text: TooManyTexts at the one past ``max_texts``,
    before the rest are grouped (which takes most of the time and memory of reading)."""
    document = _open(unpacked)
    try:
        grouped = (_Paragraph(paragraph, _groups(paragraph)) for paragraph in _paragraphs(document))
        return document, list(limited((p for p in grouped if any(g.text.strip() for g in p.groups)), max_texts))
    # A part whose root is not the element it must be (a document without a body): python-docx
    # hands out None or an element without the attribute asked for.
    except (AttributeError, TypeError) as e:
        raise DocumentError(f"not a valid .docx file: {e}") from None


def _unpacked(data: bytes, max_bytes: int) -> bytes:
    """The archive in ``data`` rebuilt uncompressed, if its members' declared sizes come to at most
    ``max_bytes``.

    python-docx opens the rebuilt archive, never ``data``: it reads exactly the bytes counted here,
    whatever the original's headers say."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise DocumentError("not a .docx file (not a ZIP archive); .doc files are not supported") from None
    with archive:
        # Of members of the same name, zipfile (and so python-docx) reads the last.
        members = list({info.filename: info for info in archive.infolist()}.values())
        declared = sum(info.file_size for info in members)
        if declared > max_bytes:
            raise DocumentTooLarge(f"the .docx file expands to {declared} bytes; the limit is {max_bytes}")
        return _rebuilt(archive, members)


def _rebuilt(archive: zipfile.ZipFile, members: list[zipfile.ZipInfo]) -> bytes:
    """``members`` copied into a new uncompressed archive, each read through a stream that stops at
    its declared size: a header that understates its member's size cannot make it expand further, nor
    take more memory while it is decompressed (which a read of the whole member would, whatever
    zipfile keeps of it)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as rebuilt:
        for info in members:
            try:
                with archive.open(info) as member:
                    content = member.read(info.file_size)
            # A damaged member (bad CRC or compressed stream, cut short), or one that is encrypted
            # or compressed with a method zipfile lacks.
            except (
                zipfile.BadZipFile,
                zlib.error,
                lzma.LZMAError,
                OSError,
                EOFError,
                RuntimeError,
                NotImplementedError,
            ) as e:
                raise DocumentError(f"not a valid .docx file: {e}") from None
            rebuilt.writestr(info.filename, content)
    return out.getvalue()


def _open(data: bytes) -> docx.document.Document:
    try:
        return docx.Document(io.BytesIO(data))
    # Whatever python-docx meets in a damaged file: a missing part (KeyError), malformed XML (lxml's
    # XMLSyntaxError is a SyntaxError), a package of another kind (ValueError), a broken archive, a
    # part whose root is another element than the one it must be (AttributeError, TypeError).
    except (
        KeyError,
        ValueError,
        SyntaxError,
        AttributeError,
        TypeError,
        PackageNotFoundError,
        zipfile.BadZipFile,
    ) as e:
        raise DocumentError(f"not a valid .docx file: {e}") from None


def _paragraphs(document: docx.document.Document) -> list[etree._Element]:
    """Every paragraph of the body, the headers and the footers that holds text, in document order."""
    roots = [document.element.body]
    for rel in document.part.rels.values():
        if rel.reltype in (RELATIONSHIP_TYPE.HEADER, RELATIONSHIP_TYPE.FOOTER) and not rel.is_external:
            roots.append(rel.target_part.element)
    return [paragraph for root in roots for paragraph in PARAGRAPHS_WITH_TEXT(root)]


def _groups(paragraph: etree._Element) -> list[Group]:
    """The paragraph's text in groups of adjacent runs with the same formatting and parent (a
    hyperlink's runs are never grouped with the runs around it). Paragraphs nested in it (in a
    text box) are paragraphs of their own."""
    groups: list[Group] = []
    previous: tuple[object, bytes] | None = None  # the last text's (run parent, run formatting)
    separated = False
    elements = texts_and_separators(paragraph)
    for element, fields in zip(elements, _open_fields(elements), strict=True):
        if element.tag != TEXT:
            previous, separated = None, separated or (bool(groups) and element.tag in BREAKS)
            continue
        run = element.getparent()
        properties = run.find(RUN_PROPERTIES)
        key = (run.getparent(), b"" if properties is None else etree.tostring(properties))
        if key != previous:
            own = run.getparent() is paragraph and not fields
            pinned = bool(fields) or outside(run, paragraph) is not run
            linked = _in_hyperlink(run)
            groups.append(
                Group(formatting=key[1], separated=separated, linked=linked, own=own, fields=fields, pinned=pinned)
            )
            separated = False
        groups[-1].texts.append(element)
        previous = key
    return groups


def _open_fields(elements: list[etree._Element]) -> list[tuple[Field, ...]]:
    """For each of a paragraph's texts and separators, the complex fields it lies in, outermost
    first: between a ``<w:fldChar>`` begin and its end, or before an end whose begin is in an earlier
    paragraph, or after a begin whose end is in a later one."""
    steps = [FIELD_STEPS.get(e.get(FIELD_CHARACTER_TYPE), 0) if e.tag == FIELD_CHARACTER else 0 for e in elements]
    open_fields = [Field() for _ in range(-min(accumulate(steps, initial=0)))]
    out: list[tuple[Field, ...]] = []
    for element, step in zip(elements, steps, strict=True):
        if step > 0:
            open_fields.append(Field(begin=element))
        elif step < 0:
            open_fields.pop().end = element
        out.append(tuple(open_fields))
    return out


def _in_hyperlink(run: etree._Element) -> bool:
    """Whether ``run`` is in a hyperlink of its paragraph (directly, or in a smart tag or tracked
    change inside one)."""
    nearest = next(run.iterancestors(HYPERLINK, PARAGRAPH), None)
    return nearest is not None and nearest.tag == HYPERLINK


def _base(groups: list[Group]) -> Group | None:
    """The first group of the paragraph's own text (in no hyperlink or other element) in the
    formatting that most of that text has; None if the paragraph has no text of its own."""
    lengths: dict[bytes, int] = {}
    for group in groups:
        if group.own:
            lengths[group.formatting] = lengths.get(group.formatting, 0) + len(group.text)
    if not lengths:
        return None
    formatting = max(lengths, key=lengths.__getitem__)
    return next(group for group in groups if group.own and group.formatting == formatting)


def _plain(group: Group, base: Group) -> bool:
    """Whether ``group`` is plain text, sent bare. One after a tab or break stays a span, which says
    where the tab falls in the translation."""
    return group.own and not group.separated and group.formatting == base.formatting
