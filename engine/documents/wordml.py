"""The parts of WordprocessingML that reading a Word paragraph and writing its translation share:
element names, a paragraph's text in groups of runs, and where a run sits among the elements
around it (hyperlinks, fields, content controls) in its paragraph."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import takewhile

from docx.oxml.ns import qn
from lxml import etree

PARAGRAPH, RUN, TEXT, RUN_PROPERTIES = qn("w:p"), qn("w:r"), qn("w:t"), qn("w:rPr")
HYPERLINK = qn("w:hyperlink")
FIELD_CHARACTER, FIELD_CHARACTER_TYPE = qn("w:fldChar"), qn("w:fldCharType")
# Run content that separates the text around it: a group of runs never spans one.
SEPARATORS = frozenset(
    qn(tag) for tag in ("w:tab", "w:ptab", "w:br", "w:cr", "w:drawing", "w:pict", "w:object", "w:sym", "w:fldChar")
)
# Those that show as a space or more between the text around them (a field's code does not show).
BREAKS = SEPARATORS - {FIELD_CHARACTER}
DATA_RUN = "data-r"  # the attribute of a group's span in a paragraph's fragment: the group's number


@dataclass(eq=False)
class Field:
    """A complex field: its outermost ``<w:fldChar>`` begin and end in a paragraph, either None
    where the field began in an earlier paragraph or ends in a later one."""

    begin: etree._Element | None = None
    end: etree._Element | None = None


@dataclass
class Group:
    """Adjacent text of one formatting in a paragraph: its ``<w:t>`` elements in order."""

    texts: list[etree._Element] = field(default_factory=list)
    formatting: bytes = b""  # its runs' <w:rPr>, as written
    separated: bool = False  # a tab, break or image comes before it: words must not run together
    linked: bool = False  # its runs are a hyperlink's text
    own: bool = False  # its runs are the paragraph's own children, in no hyperlink, field or other element
    plain: bool = False  # sent as the paragraph's bare text rather than as a span (``engine.documents.word``)
    fields: tuple[Field, ...] = ()  # the complex fields whose result it is in, outermost first
    pinned: bool = False  # in a field or an element other than a hyperlink: its text stays there

    @property
    def text(self) -> str:
        return "".join(t.text or "" for t in self.texts)


def texts_and_separators(paragraph: etree._Element) -> list[etree._Element]:
    """The paragraph's ``<w:t>``s and separators in order, not those of paragraphs nested in it."""
    return [element for element in paragraph.iter(TEXT, *SEPARATORS) if paragraph_of(element) is paragraph]


def paragraph_of(element: etree._Element) -> etree._Element | None:
    return next(element.iterancestors(PARAGRAPH), None)


def containers(run: etree._Element, paragraph: etree._Element) -> list[etree._Element]:
    """The elements between ``run`` and ``paragraph`` (a hyperlink, a field), outermost first."""
    return list(reversed(list(takewhile(lambda ancestor: ancestor is not paragraph, run.iterancestors()))))


def outside(node: etree._Element, paragraph: etree._Element) -> etree._Element:
    """The outermost element around ``node`` in ``paragraph`` that is not a hyperlink; ``node``, if
    it is in none."""
    return next((c for c in containers(node, paragraph) if c.tag != HYPERLINK), node)
