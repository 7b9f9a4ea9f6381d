"""HTML and XML parsed into a lossless tree: every node keeps the exact source text it came from.

Two real parsers do the tokenizing, each reporting where every token starts, which a byte-exact copy
of what is not translated needs (tree-building parsers such as lxml or html5lib re-serialize instead):

- HTML: the standard library's ``html.parser`` (the tokenizer BeautifulSoup uses by default), with
  the tree built here by HTML's rules for void elements and optional end tags (``<li>`` closes the
  previous ``<li>``, a block closes an open ``<p>``). What browsers would silently repair, such as
  mis-nested or unclosed inline elements, is refused: its translation could not be put back in place.
  So is a tag, comment or CDATA section left open, whose content browsers hide: it is not text.
- XML: expat, which checks well-formedness. A fragment without one root element is parsed inside a
  synthetic root that is not part of the result.

Concatenating every node's ``source`` (``Element.start`` + children + ``Element.end``) gives back the
input exactly; ``parse`` checks this. A caller that reads untrusted files bounds the tree's nodes
(``max_nodes``): the tree takes some 150 bytes a node, and 10 MB of ``<br>`` are 2.6 M of them.
"""

from __future__ import annotations

import bisect
import html
import re
from array import array
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Literal
from xml.parsers import expat

from engine.picklable import Picklable

MarkupFormat = Literal["html", "xml"]

VOID_NAMES = "area base br col embed hr img input link meta param source track wbr keygen"
VOID = frozenset(VOID_NAMES.split())
# Elements whose end tag may be left out, and the start tags that end them (HTML's "optional tags").
P_CLOSER_NAMES = (
    "address article aside blockquote details dialog div dl fieldset figcaption figure footer form "
    "h1 h2 h3 h4 h5 h6 header hgroup hr main menu nav ol p pre section table ul"
)
P_CLOSERS = frozenset(P_CLOSER_NAMES.split())
IMPLIED_END_BY: dict[str, frozenset[str]] = {
    "p": P_CLOSERS,
    "li": frozenset({"li"}),
    "dt": frozenset({"dt", "dd"}),
    "dd": frozenset({"dt", "dd"}),
    "td": frozenset({"td", "th", "tr", "tbody", "thead", "tfoot"}),
    "th": frozenset({"td", "th", "tr", "tbody", "thead", "tfoot"}),
    "tr": frozenset({"tr", "tbody", "thead", "tfoot"}),
    "thead": frozenset({"tbody", "tfoot"}),
    "tbody": frozenset({"tbody", "tfoot"}),
    "option": frozenset({"option", "optgroup"}),
    "optgroup": frozenset({"optgroup"}),
    "rt": frozenset({"rt", "rp"}),
    "rp": frozenset({"rt", "rp"}),
    "head": frozenset({"body"}),
}
# Also closed by the end of their parent or of the input.
OPTIONAL_END = frozenset({*IMPLIED_END_BY, "html", "body", "colgroup", "caption"})
SYNTHETIC_ROOT = "mt-fragment-root"
# A "<" that may open something: before a letter (html.parser's tags begin with an ASCII one, what is
# refused as a tag left open with any), "/", "!" or "?". Any other html.parser reads as text, a "<" at
# a time.
OPENER = re.compile(r"<(?=[^\W\d_]|[/!?])")
# What such a "<" may be in the copy that html.parser reads, the first the input does not hold: to
# its patterns like "<" (control characters and noncharacters: not a letter, a digit, a space, a
# quote, "/" or ">"; a space would end a comment at "-- >"), and what no character reference decodes to.
MASKS = "".join(map(chr, [*range(0x01, 0x09), *range(0x0E, 0x1C), 0x7F, *range(0xFDD0, 0xFDF0)]))
MAX_DEPTH = 256  # elements open at once: the tree is walked recursively
NEWLINE = re.compile("\n")


class MarkupError(Picklable, ValueError):
    """Markup that cannot be translated with its tags in place: what is wrong, and where (1-based)."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


class TooManyNodes(Picklable, ValueError):
    """The tree reached more nodes than its parse was allowed (``limit``), by ``line``."""

    def __init__(self, limit: int, line: int) -> None:
        super().__init__(f"more than {limit} elements, texts and comments by line {line}")
        self.limit = limit
        self.line = line


# Slots: a node's attribute dictionary would double the tree's memory.
@dataclass(slots=True)
class Text:
    source: str  # as written, entities included
    text: str  # what it says: entities decoded


@dataclass(slots=True)
class Other:
    """A comment, doctype, processing instruction or CDATA section: copied as it is."""

    source: str


@dataclass(slots=True)
class Element:
    name: str  # lower case in HTML
    start: str  # the start tag as written (the whole tag for a void or self-closing element)
    attributes: dict[str, str]  # decoded values
    line: int
    column: int
    children: list[Node] = field(default_factory=list)
    end: str = ""  # the end tag as written; "" when void, self-closing or implied

    @property
    def source(self) -> str:
        return self.start + "".join(child.source for child in self.children) + self.end


Node = Text | Other | Element


def parse(markup: str, kind: MarkupFormat, *, max_nodes: int | None = None) -> list[Node]:
    """The top-level nodes of ``markup``; MarkupError if it is malformed, TooManyNodes (HTML) as
    soon as the tree holds more than ``max_nodes`` nodes."""
    nodes = _parse_html(markup, max_nodes) if kind == "html" else _parse_xml(markup)
    if "".join(node.source for node in nodes) != markup:
        raise AssertionError("the markup tree lost part of its source")
    return nodes


# -- HTML -------------------------------------------------------------------------------------


class _TreeBuilder:
    """Nodes from tokens, each token with its exact source; HTML's implied end tags, strict otherwise."""

    def __init__(self, *, html: bool = True) -> None:
        self.root = Element("", "", {}, 1, 1)
        self.open: list[Element] = [self.root]
        self.nodes = 0  # made so far, the root left out
        # HTML's void elements and implied end tags mean nothing in XML, where expat reports every
        # end: applied there, an element named br or p would be closed twice and lose the markup after it.
        self.html = html
        # The pieces of each text node made of several tokens, joined once at the end: a node grown
        # token by token ("< " after "< ") copied itself at each, quadratic in its length.
        self._pieces: dict[int, tuple[Text, list[str], list[str]]] = {}

    @property
    def current(self) -> Element:
        return self.open[-1]

    def text(self, source: str, text: str) -> None:
        children = self.current.children
        if children and isinstance(children[-1], Text):
            last = children[-1]
            _, sources, texts = self._pieces.setdefault(id(last), (last, [last.source], [last.text]))
            sources.append(source)
            texts.append(text)
        else:
            self._add(Text(source, text))

    def other(self, source: str) -> None:
        self._add(Other(source))

    def start(self, element: Element, *, closed: bool) -> None:
        while self.html and element.name in IMPLIED_END_BY.get(self.current.name, ()):
            self.open.pop()
        self._add(element)
        if not closed and not (self.html and element.name in VOID):
            if len(self.open) > MAX_DEPTH:
                where = f"line {element.line}, column {element.column}"
                raise MarkupError(
                    f"<{element.name}> at {where} nests deeper than {MAX_DEPTH}", element.line, element.column
                )
            self.open.append(element)

    def _add(self, node: Node) -> None:
        self.nodes += 1
        self.current.children.append(node)

    def end(self, name: str, source: str, line: int, column: int) -> None:
        where = f"line {line}, column {column}"
        if name in VOID:
            raise MarkupError(f"</{name}> at {where}: <{name}> is a void element and has no end tag", line, column)
        if all(e.name != name for e in self.open[1:]):
            raise MarkupError(f"</{name}> at {where} closes nothing: no <{name}> is open", line, column)
        while self.current.name != name and self.current.name in OPTIONAL_END:
            self.open.pop()
        if self.current.name != name:
            inner = self.current
            raise MarkupError(
                f"</{name}> at {where} closes <{name}> while <{inner.name}> "
                f"(line {inner.line}, column {inner.column}) inside it is still open",
                line,
                column,
            )
        self.open.pop().end = source

    def finish(self) -> list[Node]:
        for element in reversed(self.open[1:]):
            if element.name not in OPTIONAL_END:
                where = f"line {element.line}, column {element.column}"
                raise MarkupError(f"<{element.name}> at {where} is never closed", element.line, element.column)
        for node, sources, texts in self._pieces.values():
            node.source, node.text = "".join(sources), "".join(texts)
        return self.root.children


class _HTMLTokens(HTMLParser):
    """Feeds ``_TreeBuilder``. Each handler runs while ``getpos()`` is at the token's start, so a
    token's source runs from there to the next token's start (``_flush``)."""

    def __init__(self, markup: str, max_nodes: int | None, *, mask: str | None) -> None:
        super().__init__(convert_charrefs=False)
        self.markup = markup
        self.mask = mask  # what a "<" that opens nothing is in the copy it reads (None: it reads ``markup``)
        # An array: a list takes 36 bytes a line, 360 MB for a file of 10 M line breaks.
        self.line_starts = array("q", [0])
        self.line_starts.extend(match.end() for match in NEWLINE.finditer(markup))
        self.tree = _TreeBuilder()
        self.max_nodes = max_nodes
        self.pending: tuple[int, str, tuple] | None = None  # the token whose end is not known yet

    def _at(self) -> int:
        line, column = self.getpos()
        return self.line_starts[line - 1] + column

    def _token(self, kind: str, *args: object) -> None:
        position = self._at()
        self._flush(position)
        self.pending = (position, kind, args)

    def _flush(self, end: int) -> None:
        if self.pending is None:
            return
        start, kind, args = self.pending
        self.pending = None
        source = self.markup[start:end]
        if self.mask is not None and kind == "declaration" and self.markup.find("<", start + 1, end) >= 0:
            raise _MisreadCopy  # a doctype's internal subset: html.parser reads a "<" there as no other
        line, column = self._where(start)
        tree = self.tree
        self._check_terminated(kind, source, start)
        if kind == "data":
            tree.text(source, source)
        elif kind == "reference":
            tree.text(source, html.unescape(source))
        elif kind == "start":
            name, attrs, closed = args
            values = {k: v or "" for k, v in attrs}  # type: ignore[union-attr]
            if self.mask is not None and "<" in source[1:]:  # a name or value the copy read with masks
                name, values = self._unmasked(name), {self._unmasked(k): self._unmasked(v) for k, v in values.items()}
            tree.start(Element(name, source, values, line, column), closed=closed)  # type: ignore[arg-type]
        elif kind == "end":
            tree.end(self._unmasked(args[0]), source, line, column)  # type: ignore[arg-type]
        else:
            tree.other(source)
        if self.max_nodes is not None and tree.nodes > self.max_nodes:
            raise TooManyNodes(self.max_nodes, line)

    def _unmasked(self, text: str) -> str:
        """``text`` as the input writes it: in a tag, html.parser reads a mask as it reads a "<"."""
        return text if self.mask is None else text.replace(self.mask, "<")

    def _where(self, position: int) -> tuple[int, int]:
        """(line, column) of ``position``, both from 1."""
        # From the line starts known already: counting from the beginning for every token made a
        # long text's parse quadratic (minutes for a 1 MB page).
        line = bisect.bisect_right(self.line_starts, position)
        return line, position - self.line_starts[line - 1] + 1

    def _check_terminated(self, kind: str, source: str, start: int) -> None:
        written = self.markup[start : start + 30]
        if self.cdata_elem is None and (what := _unterminated(kind, source, written)):
            line, column = self._where(start)
            raise MarkupError(f"unterminated {what} at line {line}, column {column}: {written!r}", line, column)

    def check_tail(self) -> None:
        """After ``feed``: what the parser keeps back is a construct the input ends inside, or
        text. Python releases differ on what ``close`` makes of such a construct (since the 2025
        security releases, a tag is dropped without a token), so it is judged here."""
        self._check_terminated("data", self.rawdata, len(self.markup) - len(self.rawdata))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._token("start", tag, attrs, False)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._token("start", tag, attrs, True)

    def handle_endtag(self, tag: str) -> None:
        self._token("end", tag)

    def handle_data(self, data: str) -> None:
        if self.pending is not None and self.pending[1] == "data" and self.cdata_elem is None:
            # Text after text is the same text token, checked where it starts: html.parser hands
            # over each "<" that opens nothing as a piece of its own, and a token each made a file
            # of "< " take twice the work.
            position = self._at()
            if self.markup.startswith("<", position):  # what a construct left open begins with
                self._check_terminated("data", "", position)
            return
        self._token("data")

    def handle_entityref(self, name: str) -> None:
        self._token("reference")

    def handle_charref(self, name: str) -> None:
        self._token("reference")

    def handle_comment(self, data: str) -> None:
        self._token("other")

    def handle_decl(self, decl: str) -> None:
        self._token("declaration")

    def unknown_decl(self, data: str) -> None:
        self._token("other")

    def handle_pi(self, data: str) -> None:
        self._token("other")


def _unterminated(kind: str, source: str, written: str) -> str | None:
    """The construct that a token leaves open, if any; ``written``: the input from the token on.

    html.parser hands on a construct that the input ends inside as text (the first ``<`` of it or up
    to a ``>``), or, in newer Pythons, closes it at the end as HTML5 says; and it ends a comment at
    ``-- >``, where browsers do not. A browser hides whatever follows the opening: it would be
    translated as visible text or lost.
    """
    opening = written[:9].upper()
    if opening.startswith("<!--"):
        return None if kind == "other" and source.endswith(("-->", "--!>")) else "comment"
    if opening == "<![CDATA[":
        return None if kind == "other" and source.endswith("]]>") else "CDATA section"
    if kind != "data" or not written.startswith("<"):
        return None
    after = written[1:2]
    if after.isalpha() or after == "/":
        return "tag"
    return "declaration or processing instruction" if after in ("!", "?") else None


def _construct_at(markup: str, line: int, offset: int) -> int:
    """Where the ``<`` is that opens the construct html.parser stopped in, at ``line``, ``offset``
    (its position, 1-based line, 0-based offset)."""
    line_start = 0
    for _ in range(line - 1):
        line_start = markup.index("\n", line_start) + 1
    return markup.rfind("<", 0, line_start + offset + 1)


def _openers_only(markup: str, mask: str) -> str:
    """``markup`` with each "<" that opens nothing (``OPENER``) made ``mask``, for the parser to read:
    tokens take their source from ``markup`` by position, and text around such "<"s is then one token,
    not one a "<" (a file of "< " read at 3 µs a byte, in Python calls for each "<"). Work for each
    "<" that may open something, which the parser does far more for."""
    masked = markup.replace("<", mask)
    pieces: list[str] = []
    last = 0
    for match in OPENER.finditer(markup):
        pieces += (masked[last : match.start()], "<")
        last = match.end()
    pieces.append(masked[last:])
    return "".join(pieces)


class _MisreadCopy(Exception):
    """The copy of the input html.parser read (``_openers_only``) misread it."""


def _parse_html(markup: str, max_nodes: int | None) -> list[Node]:
    mask = next((mask for mask in MASKS if mask not in markup), None)
    if mask is not None:
        try:
            return _parse_html_read(markup, max_nodes, mask)
        except _MisreadCopy:  # a doctype's subset with a "<" that opens nothing: read as written
            pass
    return _parse_html_read(markup, max_nodes, None)


def _parse_html_read(markup: str, max_nodes: int | None, mask: str | None) -> list[Node]:
    """``markup``'s nodes, html.parser reading it, or its copy with ``mask`` (``_openers_only``)."""
    tokens = _HTMLTokens(markup, max_nodes, mask=mask)
    try:
        tokens.feed(markup if mask is None else _openers_only(markup, mask))
        tokens.check_tail()
        tokens.close()
    except AssertionError:  # html.parser's own check of a construct it cannot read ("<![ ")
        opening = _construct_at(markup, *tokens.getpos())
        before = tokens.pending  # the token before it, which ends there
        if (
            mask is not None
            and before is not None
            and before[1] == "declaration"
            and "<" in markup[before[0] + 1 : opening]
        ):
            raise _MisreadCopy from None
        line = markup.count("\n", 0, opening) + 1
        column = opening - (markup.rfind("\n", 0, opening) + 1) + 1
        # Quoted from the input: html.parser's message would quote the copy it read.
        message = f"unreadable markup at line {line}, column {column}: {markup[opening : opening + 20]!r}"
        raise MarkupError(message, line, column) from None
    tokens._flush(len(markup))
    return tokens.tree.finish()


# -- XML --------------------------------------------------------------------------------------


def _parse_xml(markup: str) -> list[Node]:
    """expat reports each event's byte offset; an event's source runs to the next one's."""
    document = markup.lstrip().startswith(("<?xml", "<!DOCTYPE"))
    prefix, suffix = ("", "") if document else (f"<{SYNTHETIC_ROOT}>", f"</{SYNTHETIC_ROOT}>")
    data = (prefix + markup + suffix).encode()
    parser = expat.ParserCreate()
    parser.ordered_attributes = True
    events: list[tuple[int, str, tuple]] = []

    def record(kind: str):
        return lambda *args: events.append((parser.CurrentByteIndex, kind, args))

    parser.StartElementHandler = record("start")
    parser.EndElementHandler = record("end")
    parser.CharacterDataHandler = record("text")
    parser.StartCdataSectionHandler = record("cdata")
    parser.EndCdataSectionHandler = record("cdata_end")
    parser.DefaultHandler = record("other")  # comments, declarations, PIs: no handler of their own
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        column = e.offset + 1 - (len(prefix) if e.lineno == 1 else 0)
        reason = expat.errors.messages[e.code]
        raise MarkupError(f"malformed XML at line {e.lineno}, column {column}: {reason}", e.lineno, column) from None
    return _xml_tree(events, data, len(prefix.encode()), len(data) - len(suffix.encode()))


def _xml_tree(events: list[tuple[int, str, tuple]], data: bytes, begin: int, end: int) -> list[Node]:
    tree = _TreeBuilder(html=False)
    cdata: list[str] | None = None  # the pieces of a CDATA section being read
    places = _Places(data, begin)
    positions = [position for position, _, _ in events] + [end]
    for (start, kind, args), stop in zip(events, positions[1:], strict=True):
        source = data[start:stop].decode()
        if start < begin or start >= end:  # the synthetic root's own tags
            continue
        if kind == "cdata":
            cdata = [source]
        elif cdata is not None:
            # A CDATA section's start, content and end are one node, joined once: grown piece by
            # piece (expat gives its content a line at a time), n lines took n² time.
            cdata.append(source)
            if kind == "cdata_end":
                tree.other("".join(cdata))
                cdata = None
        elif kind == "start":
            name, flat = args
            attributes = dict(zip(flat[::2], flat[1::2], strict=True))
            tree.start(Element(name, source, attributes, *places.at(start)), closed=False)
        elif kind == "end":
            tree.current.end = source
            tree.open.pop()
        elif kind == "text":
            tree.text(source, args[0])
        else:
            tree.other(source)
    return tree.finish()


# -- positions --------------------------------------------------------------------------------


class _Places:
    """Line and column (1-based; the column in characters) of byte offsets of ``data`` from
    ``begin``, asked in increasing order: each is counted on from the one before, so that every
    element costs its own bytes, not all the bytes before it (decoding the text before each start
    tag made a document of n elements take n² time)."""

    def __init__(self, data: bytes, begin: int) -> None:
        self.data = data
        self.offset = begin
        self.line = 1
        self.column = 1

    def at(self, offset: int) -> tuple[int, int]:
        passed = self.data[self.offset : offset]
        last_line = passed.rfind(b"\n")
        if last_line >= 0:
            self.line += passed.count(b"\n")
            self.column = 1
        self.column += len(passed[last_line + 1 :].decode())
        self.offset = offset
        return self.line, self.column
