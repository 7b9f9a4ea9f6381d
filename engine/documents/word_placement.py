"""A Word paragraph's translation written back into its runs, in the translation's order.

The translation is an HTML fragment (``engine.documents.word``): a ``<span data-r="N">`` for each
group of runs that it sent as one, and bare text for the paragraph's plain text. Its order need not
be the runs': a span's text goes into its group's first run if the spans before it left that in
place, else into a copy of it (inside a copy of its hyperlink, with the same address) just after
the text before it; text outside spans goes into a copy of a plain run. A group whose span came back
empty is emptied, but a hyperlink's takes the nearest word of the translation: a link without text
is invisible, and would be lost. Tabs, line breaks, images, field codes and bookmarks stay among the
runs that stayed in place, where they were.

A hyperlink is the only element around runs that is split or copied. Runs in any other (a content
control, tracked change, simple field, smart tag, custom XML, ruby) or in a complex field's result
are pinned: their text stays in them, where it was, whatever order the translation put it in (a
span left out empties them), and text that would go next to it goes outside them instead. A copy of
such an element would lack its properties or repeat its revision id, a field's result could show
twice, and a field cut apart is broken: Word calls such a file corrupt. Where a pinned text sits
away from the translation's order, a space keeps the words around it from running together.
"""

from __future__ import annotations

import bisect
import math
import re
from copy import deepcopy
from dataclasses import dataclass
from itertools import accumulate, pairwise, takewhile

from docx.oxml.ns import qn
from lxml import etree

from engine.documents import fragments
from engine.documents.wordml import (
    BREAKS,
    DATA_RUN,
    HYPERLINK,
    RUN,
    RUN_PROPERTIES,
    TEXT,
    Field,
    Group,
    containers,
    outside,
    texts_and_separators,
)

FORMAT_CHANGE = qn("w:rPrChange")  # a tracked change of a run's formatting
# A word of a translation, as an emptied hyperlink is given one: without the punctuation at its ends,
# which stays outside the link ("Seite," gives "Seite").
WORD = re.compile(r"\w(?:\S*\w)?")
SPACE = re.compile(r"\s+")


def write(paragraph: etree._Element, groups: list[Group], base: Group | None, translation: str) -> None:
    """``paragraph``'s text made its translation's: each span's text in a run of its group's
    formatting, in the translation's order, and the text outside spans in runs of the plain text's
    (``base``'s, or without formatting where the paragraph has no text of its own)."""
    pieces = _pieces(translation, groups)
    for piece, text in zip(pieces, _keeping_links(pieces), strict=True):
        piece.text = text
    home = _home(pieces)
    _unspaced_before_breaks(pieces, home)
    slots = [_slot(group) for group in groups]
    edges = [_edges(slot, group.fields, paragraph) for slot, group in zip(slots, groups, strict=True)]
    template = _text_run(paragraph) if base is None else slots[groups.index(base)]
    written = _Placer(paragraph, slots, edges, template).place(pieces, home)
    kept = {pieces[i].number for i in home}
    for n, (slot, group) in enumerate(zip(slots, groups, strict=True)):
        if n not in kept:
            _vacate(slot, group, paragraph)
    _apart(paragraph, written, pieces)


@dataclass
class _Piece:
    """A piece of a translated fragment, in the translation's order: a span's text (``number``, its
    group), or text outside every span."""

    text: str
    group: Group | None = None
    number: int | None = None

    @property
    def linked(self) -> bool:
        return self.group is not None and self.group.linked

    @property
    def separated(self) -> bool:
        return self.group is not None and self.group.separated

    @property
    def pinned(self) -> bool:
        return self.group is not None and self.group.pinned


def _pieces(fragment: str, groups: list[Group]) -> list[_Piece]:
    """A translated fragment's spans and the text between them, in order; it begins and ends with
    text outside every span (empty, if need be), which a link's punctuation can go to."""
    pieces = [_Piece("")]
    inside = False
    for event in fragments.parse(fragment):
        if isinstance(event, fragments.Text) and (inside or pieces[-1].group is None):
            pieces[-1].text += event.text
        elif isinstance(event, fragments.Text):
            pieces.append(_Piece(event.text))
        elif isinstance(event, fragments.Start) and (number := event.number(DATA_RUN, len(groups))) is not None:
            pieces.append(_Piece("", groups[number], number))
            inside = True
        elif isinstance(event, fragments.End) and event.tag == "span":
            inside = False
    if pieces[-1].group is not None:
        pieces.append(_Piece(""))
    return pieces


def _home(pieces: list[_Piece]) -> set[int]:
    """The pieces written into their groups' runs where those are: the first of each pinned group's
    (its text cannot leave its field or element), and of the other spans' a longest run in the
    translation's order that keeps the order of the pinned ones around it."""
    # Read backwards, so that a group's first piece is the last one written down.
    first = {piece.number: i for i, piece in reversed(list(enumerate(pieces))) if piece.pinned}
    fixed = {i: number for number, i in first.items()}  # pinned piece -> its group's number
    below = list(accumulate((fixed.get(i, -1) for i in range(len(pieces))), max))
    above = list(accumulate((fixed.get(i, math.inf) for i in reversed(range(len(pieces)))), min))[::-1]
    free = [
        (i, n)
        for i, piece in enumerate(pieces)
        if (n := piece.number) is not None and not piece.pinned and below[i] < n < above[i]
    ]
    return set(fixed) | _increasing(free)


def _increasing(keyed: list[tuple[int, int]]) -> set[int]:
    """Of ``keyed`` (item, key) pairs, the items of a longest run of strictly increasing keys:
    the spans whose runs can stay where they are, since the translation has them in their order."""
    tails: list[int] = []  # the smallest key that ends a run of each length
    ends: list[int] = []  # the pair that ends it
    before = [-1] * len(keyed)  # the pair before each in its run
    for i, (_, key) in enumerate(keyed):
        length = bisect.bisect_left(tails, key)
        if length == len(tails):
            tails.append(key)
            ends.append(i)
        else:
            tails[length], ends[length] = key, i
        before[i] = ends[length - 1] if length else -1
    chosen: set[int] = set()
    i = ends[-1] if ends else -1
    while i >= 0:
        chosen.add(keyed[i][0])
        i = before[i]
    return chosen


def _unspaced_before_breaks(pieces: list[_Piece], home: set[int]) -> None:
    """Drops the space that the fragment put before a group after a tab or break, which the
    translation left outside its span, where that group stays after its tab: the tab separates. A
    pinned group stays there even where the text before it goes elsewhere, which needs its space."""
    for i in home:
        if pieces[i].separated and not pieces[i].pinned and pieces[i - 1].group is None:
            pieces[i - 1].text = pieces[i - 1].text.rstrip()


def _slot(group: Group) -> etree._Element:
    """The run that holds ``group``'s text from now on: the run of its first ``<w:t>``, split from
    whatever else that run holds. The runs of its other ``<w:t>``s go."""
    runs = [_isolated(text) for text in group.texts]
    for run in runs[1:]:
        run.getparent().remove(run)
    return runs[0]


def _isolated(text: etree._Element) -> etree._Element:
    """The run of ``text``, cut so that it holds nothing else but its formatting: a run's content cut
    into runs of the same formatting shows the same, and a tab or image around the text can stay
    where it is when the text moves."""
    run = text.getparent()
    content = [child for child in run if child.tag != RUN_PROPERTIES]
    after = content[content.index(text) + 1 :]
    if after:
        run.addnext(_run_holding(run, after))
    if content[0] is text:
        return run
    own = _run_holding(run, [text])
    run.addnext(own)
    return own


def _run_holding(run: etree._Element, content: list[etree._Element]) -> etree._Element:
    """A run of ``run``'s formatting, ``content`` moved into it."""
    new = run.makeelement(run.tag, dict(run.attrib))
    properties = run.find(RUN_PROPERTIES)
    if properties is not None:
        new.append(_copied(properties))
    new.extend(content)
    return new


def _text_run(paragraph: etree._Element) -> etree._Element:
    """A run of one empty ``<w:t>``, without formatting of its own."""
    run = paragraph.makeelement(RUN, {})
    run.append(paragraph.makeelement(TEXT, {}))
    return run


def _run_like(template: etree._Element, text: str) -> etree._Element:
    run = _copied(template)
    _set_text(run, text)
    return run


def _copied(element: etree._Element) -> etree._Element:
    """A copy of a run or its properties without their tracked formatting changes: a revision's id
    must be unique in the document, and the change was made to the original's text, not the copy's."""
    copy = deepcopy(element)
    for change in list(copy.iter(FORMAT_CHANGE)):
        change.getparent().remove(change)
    return copy


def _set_text(run: etree._Element, text: str) -> None:
    element = run.find(TEXT)
    element.text = text
    # Word drops leading and trailing spaces of a <w:t> unless told to keep them.
    element.set(qn("xml:space"), "preserve")


def _links(chain: list[etree._Element]) -> list[etree._Element]:
    """The hyperlinks of ``chain`` outside every other element of it: those a copy of a run may be
    put in."""
    return list(takewhile(lambda container: container.tag == HYPERLINK, chain))


def _edges(
    slot: etree._Element, fields: tuple[Field, ...], paragraph: etree._Element
) -> tuple[etree._Element, etree._Element]:
    """What text put before and after ``slot`` goes next to: outside the fields ``slot`` is in that
    begin (end) in the paragraph, and outside every element around it but hyperlinks, which may be
    split. Text inside a field's result would be replaced when the field is updated."""
    begin = next((field.begin.getparent() for field in fields if field.begin is not None), slot)
    end = next((field.end.getparent() for field in fields if field.end is not None), slot)
    return outside(begin, paragraph), outside(end, paragraph)


def _vacate(slot: etree._Element, group: Group, paragraph: etree._Element) -> None:
    """``group``'s run, whose span the translation left out, emptied; taken out if it is not pinned
    (where a pinned run goes, its field or element could go with it)."""
    if group.pinned:
        _set_text(slot, "")
    else:
        _remove(slot, paragraph)


def _apart(paragraph: etree._Element, written: dict[etree._Element, int], pieces: list[_Piece]) -> None:
    """A space put before a text of the paragraph that follows another, with nothing between them
    that shows as space, which the translation does not have next to it: a pinned text kept where it
    was can come between texts that the translation has apart (or next to one it has elsewhere)."""
    rank = list(accumulate((bool(piece.text) for piece in pieces), initial=0))  # texts before each piece
    previous: tuple[int, etree._Element] | None = None
    for element in texts_and_separators(paragraph):
        if element.tag in BREAKS:
            previous = None
        elif element.tag == TEXT and element.text and (i := written.get(element.getparent())) is not None:
            if previous is not None and rank[i] != previous[0] + 1 and _run_together(previous[1].text, element.text):
                element.text = " " + element.text
            previous = (rank[i], element)


def _run_together(before: str, after: str) -> bool:
    return not before[-1].isspace() and not after[0].isspace()


def _remove(element: etree._Element, paragraph: etree._Element) -> None:
    """``element`` taken out of ``paragraph``, with the containers it leaves empty: a hyperlink
    whose text moved into a copy of it elsewhere."""
    parent = element.getparent()
    parent.remove(element)
    while parent is not paragraph and len(parent) == 0:
        element, parent = parent, parent.getparent()
        parent.remove(element)


class _Placer:
    """Writes pieces into a paragraph in order. A span in ``home`` fills its group's run where it is
    (``slots``); any other piece goes in a run just after the piece before it (before the
    paragraph's first text, for the first), beyond the ``edges`` of a pinned run: a span's in a
    copy of its group's run, inside its group's hyperlink (a copy of it, where the piece before is
    not in it) unless the group is pinned inside another element, and text outside spans in a copy
    of ``template``, in the paragraph itself. What is not text (tabs, breaks, images, fields,
    bookmarks) stays where it was among the runs that stay."""

    def __init__(
        self,
        paragraph: etree._Element,
        slots: list[etree._Element],
        edges: list[tuple[etree._Element, etree._Element]],
        template: etree._Element,
    ) -> None:
        self.paragraph, self.slots, self.edges, self.template = paragraph, slots, edges, template
        self.chains = [_links(containers(slot, paragraph)) for slot in slots]
        self.originals: dict[etree._Element, etree._Element] = {}  # copied hyperlink -> its original

    def place(self, pieces: list[_Piece], home: set[int]) -> dict[etree._Element, int]:
        """Each run written, with its piece."""
        cursor, after = self.edges[0][0], False
        written: dict[etree._Element, int] = {}
        for i, piece in enumerate(pieces):
            n = piece.number
            if i in home:
                run = self.slots[n]  # type: ignore[index]
                _set_text(run, piece.text)
                cursor = self.edges[n][1]  # type: ignore[index]
            elif n is not None:
                run = cursor = self._insert(_run_like(self.slots[n], piece.text), self.chains[n], cursor, after=after)
            elif piece.text:
                run = cursor = self._insert(_run_like(self.template, piece.text), [], cursor, after=after)
            else:
                continue
            after = True
            written[run] = i
        return written

    def _insert(
        self, run: etree._Element, chain: list[etree._Element], beside: etree._Element, *, after: bool
    ) -> etree._Element:
        """``run`` put just after (before) ``beside``, inside the hyperlinks of ``chain``: out of
        those ``beside`` is in that are not in ``chain``, into copies of those it is not in.
        ``beside`` is in no element but hyperlinks."""
        node = beside
        while (parent := node.getparent()) is not self.paragraph and self._original(parent) not in chain:
            self._split(parent, node, after=after)
            node = parent
        holder = self._original(node.getparent())
        outer = run
        for container in reversed(chain[chain.index(holder) + 1 :] if holder in chain else chain):
            copy = self._copy(container)
            copy.append(outer)
            outer = copy
        if after:
            node.addnext(outer)
        else:
            node.addprevious(outer)
        return run

    def _split(self, container: etree._Element, node: etree._Element, *, after: bool) -> None:
        """What follows (precedes) ``node`` in ``container`` moved into a copy of it just after
        (before) it, so that what is put after (before) ``container`` lands next to ``node``, not
        past runs of ``container`` that stay where they are (the rest of a hyperlink)."""
        siblings = list(node.itersiblings(preceding=not after))
        if not siblings:
            return
        copy = self._copy(container)
        if after:
            copy.extend(siblings)
            container.addnext(copy)
        else:
            copy.extend(reversed(siblings))
            container.addprevious(copy)

    def _copy(self, container: etree._Element) -> etree._Element:
        """An empty copy of ``container``, a hyperlink: with the same address."""
        copy = container.makeelement(container.tag, dict(container.attrib))
        self.originals[copy] = self._original(container)
        return copy

    def _original(self, element: etree._Element) -> etree._Element:
        return self.originals.get(element, element)


def _keeping_links(pieces: list[_Piece]) -> list[str]:
    """The pieces' texts, with a word for each hyperlink's span whose words the engine aligned with
    none of the translation's, and so left out of the link. An empty element is what the markup
    engine makes of an element whose words it cannot place (in HTML the element stays, empty); in
    Word an empty hyperlink is invisible, and the link lost with it. The word comes from the nearest
    piece, in the translation's order, that can spare one (ties: the words after); only the
    boundaries between pieces move, and so the paragraph still says the same."""
    texts = [piece.text for piece in pieces]
    text = "".join(texts)
    words = list(WORD.finditer(text))
    cuts = list(accumulate((len(t) for t in texts), initial=0))
    starts = [word.start() for word in words]
    before = [bisect.bisect_left(starts, cut) for cut in cuts]  # words before each cut
    counts = [end - start for start, end in pairwise(before)]
    wanting = [p.group is not None and p.group.linked and WORD.search(p.group.text) is not None for p in pieces]
    filled: set[int] = set()
    for i in range(len(pieces)):
        # A word the engine glued across the link's edge ("ETA<a>ZETA</a>") is partly the link's: it shows.
        if wanting[i] and not WORD.search(texts[i]) and (donor := _donor(counts, wanting, i)) is not None:
            counts[i], counts[donor] = counts[i] + 1, counts[donor] - 1
            filled.add(i)
    if not filled:
        return texts
    moved = list(accumulate(counts, initial=0))
    for k in range(1, len(pieces)):
        if moved[k] != before[k] or {k - 1, k} & filled:
            cuts[k] = _cut(text, words, moved[k], pieces[k - 1], pieces[k])
        # A boundary kept where it was may lie further on, between the same two words.
        cuts[k] = max(cuts[k], cuts[k - 1])
    return [text[start:end] for start, end in pairwise(cuts)]


def _donor(counts: list[int], wanting: list[bool], i: int) -> int | None:
    """The piece with a word to spare (a link keeps one) whose word is nearest piece ``i``: the
    fewest words between them."""
    words_before = list(accumulate(counts, initial=0))
    spare = [j for j, count in enumerate(counts) if count > wanting[j]]

    def between(j: int) -> int:
        return words_before[j] - words_before[i + 1] if j > i else words_before[i] - words_before[j + 1]

    return min(spare, key=lambda j: (between(j), j < i), default=None)


def _cut(text: str, words: list[re.Match[str]], k: int, before: _Piece, after: _Piece) -> int:
    """Where in ``text`` the boundary between pieces ``before`` and ``after`` falls that has ``k``
    of its ``words`` before it. What lies between two words stays outside a link (a link's text is
    underlined: "<Seite>, um", not "<Seite,> um"); between two other pieces, punctuation stays with
    the word before it and space goes to the piece after, unless a tab or break begins that one."""
    end = words[k - 1].end() if k else 0
    start = words[k].start() if k < len(words) else len(text)
    if not before.linked and (after.linked or after.separated):
        return start
    space = None if before.linked else SPACE.search(text, end, start)
    return end if space is None else space.start()
