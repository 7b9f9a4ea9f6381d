"""A markup text as units to translate and a template to put their translations back into.

The tree (``engine.markup.tree``) is cut into blocks:

- HTML: block elements (p, li, h1-h6, td, div, br, ...) bound blocks; the text and inline elements
  (b, i, a, span, ...) between them form one block, translated as a whole (sentence by sentence)
  with its inline elements re-inserted around the aligned target words (``engine.markup.projection``).
  A ``<br>`` inside an inline element (``A <b>dog<br>runs</b>``) cannot bound blocks, since the
  element goes on after it: it ends a line of its block instead, each line a unit of its own as
  the lines of ``A dog<br>runs`` are, and the lines' translations are joined for the element to
  be placed across them.
- XML has no block names: an element with text of its own holds one block, its child elements
  being inline; an element with only child elements bounds blocks. A ``<br/>`` ends a line of its
  block as in HTML: placed as an item, it would leave the words on either side glued into one.

Kept as written and never translated: code, kbd, samp, var, pre, script, style, textarea, svg, math
and template elements, anything under ``translate="no"`` or ``class="notranslate"``, comments,
declarations, processing instructions, CDATA, attributes, and the whitespace around each block.
``alt`` and ``title`` attribute values are units of their own. An element of digits and symbols glued
to the word before it (``dog<sup>1</sup>``) is kept too, placed after that word's translation.
Inside a block, runs of whitespace read as one space; translated text is escaped again with the
entities the input used (``&nbsp;`` stays ``&nbsp;``). The runs of symbols between a line's words,
and its URLs and e-mail addresses, are kept out of its text as plain text keeps them out of a
sentence's (``engine.insets``): each is placed as an item of the element that holds it, and an
element of them alone is kept whole.
"""

from __future__ import annotations

import bisect
import html
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeGuard

from engine import insets
from engine.markup.projection import LineBreak, Positions, Span, WordAlignment, place
from engine.markup.tree import P_CLOSERS, Element, MarkupFormat, Node, Text, parse

# Elements that bound blocks: those that end a paragraph, and others that hold no inline text.
OTHER_BLOCK_NAMES = (
    "audio body br canvas caption center col colgroup dd dir dt embed frameset head html iframe legend li link meta "
    "noscript object optgroup option script select source style summary tbody td template textarea tfoot th thead "
    "title tr track video"
)
HTML_BLOCKS = P_CLOSERS | frozenset(OTHER_BLOCK_NAMES.split())
KEPT_NAMES = "code kbd samp var pre script style textarea svg math template"
HTML_KEPT = frozenset(KEPT_NAMES.split())
TRANSLATED_ATTRIBUTES = ("alt", "title")
SPACE = " \t\n\r\f"
OTHER_THAN_A_SPACE = re.compile(r"[ \t\n\r\f]{2,}|[\t\n\r\f]")  # whitespace but a lone " "
LINE_END = "\n"  # ends a line of a block's text; never the text's own, whose whitespace reads as " "
REFERENCE = re.compile(r"&#?\w+;")
# name, then `=value`, inside a start tag the parser has already read: where to put a translation.
ATTRIBUTES = {
    name: re.compile(rf"""(?<=[\s"'])({name})(\s*=\s*)("[^"]*"|'[^']*'|[^\s"'=<>`]+)""", re.IGNORECASE)
    for name in TRANSLATED_ATTRIBUTES
}


@dataclass
class Translation:
    """A unit's translation; ``alignment`` links its words to the unit's (blocks need it)."""

    text: str
    alignment: WordAlignment | None = None


@dataclass
class _Block:
    lines: list[tuple[int, int | None]]  # where each line starts in ``source``; its unit, None if it has no text
    source: str  # the block's text, its lines joined by LINE_END
    lead: str  # whitespace before and after the text, kept as written
    trail: str
    root: Span


@dataclass
class _StartTag:
    element: Element


@dataclass
class _Verbatim:
    """An element between blocks with no text of its own: copied, but for translated attributes."""

    element: Element


class Document:
    """``units``: the texts to translate, in document order; ``render`` puts translations back."""

    def __init__(self, markup: str, kind: MarkupFormat) -> None:
        self.kind = kind
        self.units: list[str] = []
        self._parts: list[str | _Block | _StartTag | _Verbatim] = []
        self._attributes: dict[int, list[tuple[str, int]]] = {}  # id(element) -> [(name, unit)]
        self._break_spaces: dict[int, tuple[str, str]] = {}  # id(<br>) -> whitespace around it, as written
        nodes = parse(markup, kind)
        self._entities = _entities(nodes)  # character -> the reference the input wrote it as
        self._flow(nodes)

    def render(self, translations: Sequence[Translation]) -> str:
        if len(translations) != len(self.units):
            raise ValueError(f"{len(self.units)} units, {len(translations)} translations")
        out: list[str] = []
        for part in self._parts:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, _StartTag):
                out.append(self._start_tag(part.element, translations))
            elif isinstance(part, _Verbatim):
                out.append(self._verbatim(part.element, translations))
            else:
                out.append(part.lead + self._block(part, translations) + part.trail)
        return "".join(out)

    # -- building ---------------------------------------------------------------------------

    def _flow(self, children: list[Node]) -> None:
        """Children of a container: block children recursively, the runs between them as blocks."""
        run: list[Node] = []
        mixed = any(isinstance(c, Text) and _says_something(c.text) for c in children)  # text of their own
        for child in children:
            if isinstance(child, Element) and self._bounds_blocks(child, mixed):
                self._run(run)
                run = []
                self._container(child)
            else:
                run.append(child)
        self._run(run)

    def _bounds_blocks(self, element: Element, mixed: bool) -> bool:
        if self.kind == "xml":
            return not mixed
        return element.name in HTML_BLOCKS or (not self._kept(element) and holds_blocks(element))

    def _container(self, element: Element) -> None:
        if self._kept(element):
            self._parts.append(element.source)
            return
        self._note_attributes(element)
        self._parts.append(_StartTag(element))
        self._flow(element.children)
        self._parts.append(element.end)

    def _run(self, run: list[Node]) -> None:
        """Inline nodes between blocks: a block if they have text, else copied (attributes translated)."""
        if not any(self._text_in(node) for node in run):
            for node in run:
                self._note_subtree(node)
                self._parts.append(_Verbatim(node) if isinstance(node, Element) else node.source)
            return
        text = _TextBuffer()
        root = Span(None, 0, 0)
        self._inline(run, root, text, outer=True)
        source = self._take_out_insets(text.finish(root), root)
        lead, trail = _space(run[0], leading=True), _space(run[-1], leading=False)
        self._parts.append(_Block(self._lines(source), source, lead, trail, root))

    def _take_out_insets(self, source: str, root: Span) -> str:
        """``source`` without the symbols between words, URLs and e-mail addresses of its lines
        (``engine.insets``), each an atom of the innermost element that holds it, written back as
        the input wrote it: read by the model, they cost it the sentence's translation. One that an
        element's edge or another atom cuts stays in the text, as no one place can hold it."""
        bounds = sorted({p for span in _below(root) for p in (span.start, span.end)})
        lines: list[str] = []
        moves: list[tuple[int, int, insets.Stripped | None]] = []  # each line's start, before and after
        before = after = 0
        for line in source.split(LINE_END):
            spans = [(s, e) for s, e in insets.find(line) if not _cut(bounds, before + s, before + e)]
            stripped = insets.take_out(line, spans) if spans else None
            for (s, e), inset in zip(spans, stripped.insets, strict=True) if stripped else ():
                atom = Text(self._escape(inset.text), inset.text)
                _hold(root, Span(None, before + s, before + s, atom=atom, spaced=inset.spaced), before + e)
            lines.append(stripped.words if stripped else line)
            moves.append((before, after, stripped))
            before += len(line) + len(LINE_END)
            after += len(lines[-1]) + len(LINE_END)
        moved, stripped_source = _mover(moves), LINE_END.join(lines)
        _keep_whole(root, moved, source, stripped_source)
        _move(root, moved)
        return stripped_source

    def _lines(self, source: str) -> list[tuple[int, int | None]]:
        """Each line of a block's text as a unit, if it has text: where it starts, and the unit."""
        lines: list[tuple[int, int | None]] = []
        start = 0
        for line in source.split(LINE_END):
            unit = len(self.units) if line.strip(SPACE) else None
            if unit is not None:
                self.units.append(line.rstrip(SPACE))
            lines.append((start, unit))
            start += len(line) + len(LINE_END)
        return lines

    def _inline(self, nodes: list[Node], span: Span, text: _TextBuffer, *, outer: bool = False) -> None:
        """``outer``: ``nodes`` are the block's, whose whitespace at either end is kept apart."""
        for i, node in enumerate(nodes):
            if isinstance(node, Text):
                text.add(node)
            elif _line_break(node):
                self._note_subtree(node)
                span.children.append(Span(None, text.position, text.position, atom=node, line_break=True))
                self._break_spaces[id(node)] = _break_space(nodes, i, outer=outer)
                text.break_line()
            elif isinstance(node, Element) and self._inline_element(node, nodes[i - 1] if i else None):
                self._note_attributes(node)
                child = Span(node, text.position, 0)
                self._inline(node.children, child, text)
                child.end = text.position
                span.children.append(child)
            else:
                self._note_subtree(node)
                spaced = _space_at(nodes[i - 1], end=True) if i else False, _space_at(nodes[i + 1 : i + 2], end=False)
                span.children.append(Span(None, text.position, text.position, atom=node, spaced=spaced))

    def _inline_element(self, element: Element, before: Node | None) -> bool:
        """Whether ``element`` is placed around the translation of its words, rather than kept
        whole at a place in it (it has none, or is a footnote mark): one that ends a line is too."""
        return (self._text_in(element) and not _marker(element, before)) or self._breaks_in(element)

    def _breaks_in(self, element: Element) -> bool:
        if self._kept(element):
            return False
        return any(_line_break(c) or (isinstance(c, Element) and self._breaks_in(c)) for c in element.children)

    def _text_in(self, node: Node) -> bool:
        if isinstance(node, Text):
            return _says_something(node.text)
        if isinstance(node, Element) and not self._kept(node):
            return any(self._text_in(child) for child in node.children)
        return False

    def _kept(self, element: Element) -> bool:
        return kept(element, self.kind)

    def _note_subtree(self, node: Node) -> None:
        if isinstance(node, Element) and not self._kept(node):
            self._note_attributes(node)
            for child in node.children:
                self._note_subtree(child)

    def _note_attributes(self, element: Element) -> None:
        for name in TRANSLATED_ATTRIBUTES:
            value = element.attributes.get(name, "")
            if value.strip(SPACE):
                self._attributes.setdefault(id(element), []).append((name, len(self.units)))
                self.units.append(value.strip(SPACE))

    # -- rendering --------------------------------------------------------------------------

    def _block(self, block: _Block, translations: Sequence[Translation]) -> str:
        target, alignment, breaks = _joined(block, translations)
        positions = Positions(alignment, breaks)
        ranges = place(block.root, alignment, positions)
        words = alignment.target_words
        out: list[str] = []

        def char_range(span: Span) -> tuple[int, int]:
            if span.line_break:
                at = positions.break_at[span.start].char
                return at, at
            return _reaching(span, positions, aligned_range(span))

        def aligned_range(span: Span) -> tuple[int, int]:
            a, b = ranges[id(span)]
            if a < b:
                return _punctuation_out(span, block.source, target, words[a][0], words[b - 1][1])
            if _inset(span):  # where plain text puts one back (engine.insets)
                at = (
                    insets.after_word(target, words[a - 1], insets.follows_a_word(block.source, span.start)) if a else 0
                )
                at = insets.glued_to_what_follows(target, at, span.spaced)
                return at, at
            if span.spaced[0] and a < len(words):  # after the space before the next word
                return words[a][0], words[a][0]
            if a == 0:
                return (words[0][0], words[0][0]) if words else (0, 0)
            at = _before_punctuation(span, block.source, target, words[a - 1][1])
            return at, at

        def write(span: Span, begin: int, end: int) -> None:
            cursor = begin
            for child in sorted(span.children, key=lambda c: ranges[id(c)]):
                start, stop = char_range(child)
                start, stop = min(max(start, cursor), end), min(max(stop, cursor), end)
                out.append(self._escape(target[cursor:start]))
                if child.line_break:
                    assert child.atom is not None
                    before, after = self._break_spaces[id(child.atom)]
                    out.append(before + self._verbatim(child.atom, translations) + after)
                elif child.atom is not None:
                    out.append(" " if child.spaced[0] and start > 0 and not target[start - 1].isspace() else "")
                    out.append(self._verbatim(child.atom, translations))
                    out.append(" " if _needs_space(child, target, start) else "")
                else:
                    assert child.element is not None
                    out.append(self._start_tag(child.element, translations))
                    write(child, start, stop)
                    out.append(child.element.end)
                cursor = stop
            out.append(self._escape(target[cursor:end]))

        write(block.root, 0, len(target))
        return "".join(out)

    def _verbatim(self, node: Node, translations: Sequence[Translation]) -> str:
        if not isinstance(node, Element) or self._kept(node):
            return node.source
        inner = "".join(self._verbatim(child, translations) for child in node.children)
        return self._start_tag(node, translations) + inner + node.end

    def _start_tag(self, element: Element, translations: Sequence[Translation]) -> str:
        tag = element.start
        for name, unit in self._attributes.get(id(element), []):
            value = self._escape(translations[unit].text)
            tag = ATTRIBUTES[name].sub(lambda m, v=value: m[1] + m[2] + _quoted(m[3][:1], v), tag, count=1)
        return tag

    def _escape(self, text: str) -> str:
        text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        for char, reference in self._entities.items():
            text = text.replace(char, reference)
        return text


class _TextBuffer:
    """A block's text, whitespace runs read as one space and none at either end."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.position = 0

    def add(self, node: Text) -> None:
        # One piece a node, not one a word: a text of 5 million words took seconds in calls.
        text = OTHER_THAN_A_SPACE.sub(" ", node.text)
        if text.startswith(" ") and (not self.parts or self.parts[-1][-1] in (" ", LINE_END)):
            text = text[1:]
        if text:
            self._append(text)

    def break_line(self) -> None:
        self._append(LINE_END)

    def _append(self, piece: str) -> None:
        self.parts.append(piece)
        self.position += len(piece)

    def finish(self, root: Span) -> str:
        text = "".join(self.parts)
        if text.endswith(" "):
            text = text[:-1]
            _clamp(root, len(text))
        return text


def _clamp(span: Span, length: int) -> None:
    span.start, span.end = min(span.start, length), min(span.end, length)
    for child in span.children:
        _clamp(child, length)


def _below(span: Span) -> Iterator[Span]:
    for child in span.children:
        yield child
        yield from _below(child)


def _cut(bounds: list[int], start: int, end: int) -> bool:
    """Whether an element or atom starts or ends inside (start, end)."""
    k = bisect.bisect_right(bounds, start)
    return k < len(bounds) and bounds[k] < end


def _hold(root: Span, atom: Span, end: int) -> None:
    """Make ``atom``, the inset from its start to ``end``, a child of the innermost element that
    holds it, after the children before it."""
    parent = root
    while True:
        k = bisect.bisect_right(parent.children, atom.start, key=lambda c: c.start)
        inner = parent.children[k - 1] if k else None  # siblings never overlap: only it can hold the inset
        if inner is None or inner.element is None or inner.end < end:
            parent.children.insert(k, atom)
            return
        parent = inner


def _mover(moves: list[tuple[int, int, insets.Stripped | None]]) -> Callable[[int], int]:
    """Where a position of a block's text is once its lines lost their insets (``moves``: each
    line's start before and after, and what it lost): one inside an inset goes where it was."""
    starts = [before for before, _, _ in moves]

    def moved(position: int) -> int:
        before, after, stripped = moves[bisect.bisect_right(starts, position) - 1]
        return after + (stripped.position(position - before) if stripped else position - before)

    return moved


def _keep_whole(span: Span, moved: Callable[[int], int], source: str, stripped: str) -> None:
    """Make each element whose text was all insets (``source`` with them, ``stripped`` without) an
    atom, written as it is and placed by the words around it: its insets inside it, and the
    spaces around it outside. One that ends a line stays an element, placed across it."""
    for i, child in enumerate(span.children):
        text = source[child.start : child.end]
        if (
            child.element is not None
            and LINE_END not in text
            and not _says_something(stripped[moved(child.start) : moved(child.end)])
        ):
            spaced = source[child.start - 1 : child.start] == " ", source[child.end : child.end + 1] == " "
            span.children[i] = Span(None, child.start, child.start, atom=child.element, spaced=spaced)
        else:
            _keep_whole(child, moved, source, stripped)


def _move(span: Span, moved: Callable[[int], int]) -> None:
    span.start, span.end = moved(span.start), moved(span.end)
    for child in span.children:
        _move(child, moved)


def plain_text(markup: str, kind: MarkupFormat) -> str:
    """What a markup text says: its blocks and attribute values, a line each (MarkupError if malformed)."""
    return "\n".join(Document(markup, kind).units)


def holds_blocks(element: Element) -> bool:
    """Whether an HTML block element is somewhere inside ``element``; a <br> is not one there, as
    it only ends a line of the block that the element is in."""
    return any(
        isinstance(c, Element) and ((c.name in HTML_BLOCKS and c.name != "br") or holds_blocks(c))
        for c in element.children
    )


def _joined(block: _Block, translations: Sequence[Translation]) -> tuple[str, WordAlignment, list[LineBreak]]:
    """The translations of a block's lines as one text, their alignments as one, and where each
    line's translation ends."""
    target, alignment, breaks = "", WordAlignment(), []
    for n, (source_at, unit) in enumerate(block.lines):
        if n:
            breaks.append(LineBreak(source_at - len(LINE_END), len(alignment.target_words), len(target)))
        if unit is not None:
            translation = translations[unit]
            alignment.extend(translation.alignment or WordAlignment(), source_at, len(target))
            target += translation.text
    return target, alignment, breaks


def _reaching(span: Span, positions: Positions, at: tuple[int, int]) -> tuple[int, int]:
    """Characters ``at`` widened to the line ends ``span`` holds: its <br>s stay inside it."""
    first, last = positions.lines(span)
    if first == last:
        return at
    return min(at[0], positions.breaks[first].char), max(at[1], positions.breaks[last - 1].char)


def _line_break(node: Node) -> TypeGuard[Element]:
    """A <br> in a block: it ends a line there (in HTML, only inside an inline element, since one
    between them bounds blocks)."""
    return isinstance(node, Element) and node.name == "br"


def _break_space(nodes: list[Node], i: int, *, outer: bool) -> tuple[str, str]:
    """The whitespace before and after the <br> ``nodes[i]``, written with it, as its lines'
    translations have none at their ends. Whitespace alone is written once: between two <br>s,
    after the first; at either end of the block (``outer``), as the block's own."""
    at_end = (0, len(nodes) - 1) if outer else ()
    before = nodes[i - 1] if i else None
    after = nodes[i + 1] if i + 1 < len(nodes) else None
    if before is not None and _blank(before) and (i - 1 in at_end or (i > 1 and _line_break(nodes[i - 2]))):
        before = None
    if after is not None and _blank(after) and i + 1 in at_end:
        after = None
    return (
        _space(before, leading=False) if before is not None else "",
        _space(after, leading=True) if after is not None else "",
    )


def _says_something(text: str) -> bool:
    """Whether ``text`` has more than whitespace, Unicode's included: a text of no-break spaces
    alone (``<p>&nbsp;</p>``, a spacer) is no text to translate, and kept as written, for a
    model would translate it as nothing."""
    return bool(text.strip())


def _blank(node: Node) -> bool:
    return isinstance(node, Text) and not node.text.strip(SPACE)


def kept(element: Element, kind: MarkupFormat) -> bool:
    """Whether ``element`` and everything in it are kept as written, untranslated."""
    a = element.attributes
    if a.get("translate", a.get("its:translate", "")).lower() == "no":
        return True
    if "notranslate" in a.get("class", "").split():
        return True
    return kind == "html" and element.name in HTML_KEPT


def _space(node: Node, *, leading: bool) -> str:
    """The whitespace a block starts (ends) with, as written, when that is text at its edge."""
    if not isinstance(node, Text):
        return ""
    kept = node.source.lstrip(SPACE) if leading else node.source.rstrip(SPACE)
    return node.source[: len(node.source) - len(kept)] if leading else node.source[len(kept) :]


def _punctuation_out(span: Span, source: str, target: str, start: int, stop: int) -> tuple[int, int]:
    """Target characters [start, stop) less the punctuation at either end where the element's own
    source text has none: "<b>runs</b>." gives "<b>rennt</b>.", not "<b>rennt.</b>", and a link over
    words inside a sentence does not take the sentence's period when its words come last in the
    translation."""
    text = source[span.start : span.end].strip(SPACE)
    if text[:1].isalnum():
        while start < stop and not target[start].isalnum():
            start += 1
    if text[-1:].isalnum():
        while stop > start and not target[stop - 1].isalnum():
            stop -= 1
    return start, stop


def _before_punctuation(span: Span, source: str, target: str, at: int) -> int:
    """Where an element whose words have no translation goes when placed at ``at``, the end of a
    target word: before that word's punctuation, unless the source has punctuation right before
    the element ("a <b>gown</b>." and "ein Kleid." give "ein Kleid<b></b>.", not "ein Kleid.<b></b>")."""
    if not source[: span.start].rstrip(SPACE)[-1:].isalnum():
        return at
    word = at
    while word > 0 and not target[word - 1].isalnum() and target[word - 1] not in SPACE:
        word -= 1
    return word if word > 0 and target[word - 1].isalnum() else at


def _needs_space(atom: Span, target: str, at: int) -> bool:
    """An atom spaced on both sides in the source, placed before a word: a space between them; an
    inset spaced after, placed before a word or what opens one (engine.insets)."""
    before, after = atom.spaced
    if _inset(atom):
        return after and insets.starts_a_word(target[at : at + 1])
    return after and 0 < at < len(target) and not target[at].isspace() and (before or target[at - 1].isspace())


def _inset(span: Span) -> bool:
    """Whether ``span`` is a run of symbols or an address taken out of its block's text: the only
    text that is an atom."""
    return isinstance(span.atom, Text)


def _marker(element: Element, before: Node | None) -> bool:
    """An element of digits and symbols glued to the word before it (a footnote mark, an exponent:
    ``dog<sup>1</sup>``, ``m<sup>2</sup>``): kept as it is, after that word's translation, rather
    than fed to the model as part of the word ("dog1"), which it would mistranslate."""
    glued = isinstance(before, Text) and before.text[-1:].isalnum()
    return glued and not any(c.isalpha() for c in _text_of(element))


def _text_of(node: Node) -> str:
    if isinstance(node, Element):
        return "".join(_text_of(child) for child in node.children)
    return node.text if isinstance(node, Text) else ""


def _space_at(node: Node | list[Node], *, end: bool) -> bool:
    """Whether text with whitespace at its end (start) is there: around an item placed in a block."""
    node = node if isinstance(node, Node) else (node[0] if node else None)
    if not isinstance(node, Text):
        return False
    return node.text[-1:] in SPACE if end else node.text[:1] in SPACE


def _quoted(quote: str, value: str) -> str:
    """``value`` (already escaped for text) as an attribute value in the quotes the input used."""
    if quote == "'":
        return "'" + value.replace("'", "&#39;") + "'"
    return '"' + value.replace('"', "&quot;") + '"'


def _entities(nodes: list[Node]) -> dict[str, str]:
    """Characters the input wrote as references (``&nbsp;``, ``&#8217;``): written so again."""
    found: dict[str, str] = {}
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, Element):
            stack += node.children
        elif isinstance(node, Text) and node.source != node.text:
            for reference in REFERENCE.findall(node.source):
                char = html.unescape(reference)
                if len(char) == 1 and char not in "&<>":
                    found.setdefault(char, reference)
    return found
