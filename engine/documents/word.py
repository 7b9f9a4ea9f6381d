"""Word documents (.docx), read and written by python-docx: each paragraph's text is translated.

Paragraphs are found wherever the document body and its headers and footers hold them: in tables
(nested too), text boxes, hyperlinks, fields and content controls. A paragraph becomes one HTML
fragment, translated with format "html": each group of adjacent runs that share their formatting is
a ``<span data-r="N">``, so the engine places each group's formatting around the translated words
aligned with it. The translation of a group goes into the text of its first run and the group's
other runs are emptied; a group whose span came back empty is emptied, but a hyperlink's takes the
nearest word of the translation: a link without text is invisible, and would be lost. Only text
(``<w:t>``) changes: run and paragraph formatting, styles, numbering, tabs, line breaks, images,
field codes, bookmarks and section layout are the document's own and stay as they were.

Not translated: footnotes, endnotes and comments (python-docx does not read them), document
properties (title, author), and text in charts or SmartArt. A tab or line break inside a paragraph
stays where it was among the runs, which the translation may have reordered around it.

A .docx is a ZIP archive whose XML compresses a hundredfold or more: a file of a few hundred KB can
hold GBs of XML. One whose members' declared sizes come to more than ``max_bytes`` is refused before
any is read, and no member is decompressed past its declared size.
"""

from __future__ import annotations

import bisect
import io
import lzma
import re
import zipfile
import zlib
from dataclasses import dataclass, field
from itertools import accumulate, pairwise

import docx
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.opc.exceptions import PackageNotFoundError
from docx.oxml.ns import nsmap, qn
from lxml import etree

from engine.documents import fragments
from engine.documents.base import Document, DocumentError, DocumentTooLarge

MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PARAGRAPH, RUN, TEXT, RUN_PROPERTIES = qn("w:p"), qn("w:r"), qn("w:t"), qn("w:rPr")
HYPERLINK = qn("w:hyperlink")
# Run content that separates the text around it: a group of runs never spans one.
SEPARATORS = frozenset(
    qn(tag) for tag in ("w:tab", "w:ptab", "w:br", "w:cr", "w:drawing", "w:pict", "w:object", "w:sym", "w:fldChar")
)
DATA_RUN = "data-r"
# Paragraphs with text, found by libxml2 rather than element by element in Python: a document within
# the size limit can still hold millions of empty ones.
PARAGRAPHS_WITH_TEXT = etree.XPath(".//w:p[.//w:t]", namespaces={"w": nsmap["w"]})
# A word of a translation, as an emptied hyperlink is given one: without the punctuation at its ends,
# which stays outside the link ("Seite," gives "Seite").
WORD = re.compile(r"\w(?:\S*\w)?")
SPACE = re.compile(r"\s+")


@dataclass
class _Group:
    """Adjacent text of one formatting in a paragraph: its ``<w:t>`` elements in order."""

    texts: list[etree._Element] = field(default_factory=list)
    separated: bool = False  # a tab, break, image or field comes before it: words must not run together
    linked: bool = False  # its runs are a hyperlink's text

    @property
    def text(self) -> str:
        return "".join(t.text or "" for t in self.texts)

    def replace(self, text: str) -> None:
        for i, element in enumerate(self.texts):
            element.text = text if i == 0 else ""
            # Word drops leading and trailing spaces of a <w:t> unless told to keep them.
            element.set(qn("xml:space"), "preserve")


def read(data: bytes, *, max_bytes: int) -> Document:
    document = _open(_unpacked(data, max_bytes))
    try:
        grouped = [_groups(paragraph) for paragraph in _paragraphs(document)]
    # A part whose root is not the element it must be (a document without a body): python-docx
    # hands out None or an element without the attribute asked for.
    except (AttributeError, TypeError) as e:
        raise DocumentError(f"not a valid .docx file: {e}") from None
    paragraphs = [groups for groups in grouped if any(group.text.strip() for group in groups)]

    def write(translations: list[str]) -> bytes:
        for groups, translation in zip(paragraphs, translations, strict=True):
            for group, text in zip(groups, _keeping_links(_span_texts(translation, groups), groups), strict=True):
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
            groups.append(_Group(separated=separated, linked=_in_hyperlink(run)))
            separated = False
        groups[-1].texts.append(element)
        previous = key
    return groups


def _paragraph_of(element: etree._Element) -> etree._Element | None:
    return next(element.iterancestors(PARAGRAPH), None)


def _in_hyperlink(run: etree._Element) -> bool:
    """Whether ``run`` is in a hyperlink of its paragraph (directly, or in a smart tag or tracked
    change inside one)."""
    nearest = next(run.iterancestors(HYPERLINK, PARAGRAPH), None)
    return nearest is not None and nearest.tag == HYPERLINK


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


def _keeping_links(texts: list[str], groups: list[_Group]) -> list[str]:
    """``texts``, the translation of each group, with a word for each hyperlink whose words the
    engine aligned with none of the translation's, and so left out of the link. An empty element is
    what the markup engine makes of an element whose words it cannot place (in HTML the element
    stays, empty); in Word an empty hyperlink is invisible, and the link lost with it. The word comes
    from the nearest group, in the paragraph's order, that can spare one (ties: the words after);
    only the boundaries between groups move, and so the paragraph still says the same."""
    text = "".join(texts)
    words = list(WORD.finditer(text))
    cuts = list(accumulate((len(t) for t in texts), initial=0))
    starts = [word.start() for word in words]
    before = [bisect.bisect_left(starts, cut) for cut in cuts]  # words before each cut
    counts = [end - start for start, end in pairwise(before)]
    wanting = [group.linked and WORD.search(group.text) is not None for group in groups]
    filled: set[int] = set()
    for i in range(len(groups)):
        if wanting[i] and not counts[i] and (donor := _donor(counts, wanting, i)) is not None:
            counts[i], counts[donor] = counts[i] + 1, counts[donor] - 1
            filled.add(i)
    if not filled:
        return texts
    moved = list(accumulate(counts, initial=0))
    for k in range(1, len(groups)):
        if moved[k] != before[k] or {k - 1, k} & filled:
            cuts[k] = _cut(text, words, moved[k], groups[k - 1], groups[k])
        # A boundary kept where it was may lie further on, between the same two words.
        cuts[k] = max(cuts[k], cuts[k - 1])
    return [text[start:end] for start, end in pairwise(cuts)]


def _donor(counts: list[int], wanting: list[bool], i: int) -> int | None:
    """The group nearest group ``i`` with a word to spare: a link keeps one."""
    spare = [j for j, count in enumerate(counts) if count > wanting[j]]
    return min(spare, key=lambda j: (abs(j - i), j < i), default=None)


def _cut(text: str, words: list[re.Match[str]], k: int, before: _Group, after: _Group) -> int:
    """Where in ``text`` the boundary between groups ``before`` and ``after`` falls that has ``k``
    of its ``words`` before it. What lies between two words stays outside a link (a link's text is
    underlined: "<Seite>, um", not "<Seite,> um"); between two other groups, punctuation stays with
    the word before it and space goes to the group after, unless a tab or break begins that one."""
    end = words[k - 1].end() if k else 0
    start = words[k].start() if k < len(words) else len(text)
    if not before.linked and (after.linked or after.separated):
        return start
    space = None if before.linked else SPACE.search(text, end, start)
    return end if space is None else space.start()
