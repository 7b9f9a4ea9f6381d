"""HTML fragments as the formats build them for translation, and as they come back translated.

A format that translates with format "html" writes each text as a fragment whose elements stand
for its structure (a Word run, a Markdown emphasis, a subtitle's line break), numbered with a
``data-*`` attribute where the format needs to know which is which. The engine keeps the tags and
places them around the translated words; ``parse`` reads the result back as a flat event list.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from html.parser import HTMLParser

# Elements that have no end tag: never waited for when reading a fragment back.
VOID_ELEMENTS = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)


def escape(text: str) -> str:
    """``text`` as fragment content: ``&``, ``<`` and ``>`` escaped (quotes need not be)."""
    return html.escape(text, quote=False)


@dataclass(frozen=True)
class Start:
    tag: str
    attrs: dict[str, str]

    @property
    def void(self) -> bool:
        return self.tag in VOID_ELEMENTS

    def number(self, attribute: str, count: int) -> int | None:
        """The number in ``attribute`` that the fragment was built with, below ``count``; None for an
        element without one (or with one the engine could not have been given)."""
        value = self.attrs.get(attribute, "")
        return int(value) if value.isdigit() and int(value) < count else None


@dataclass(frozen=True)
class End:
    tag: str


@dataclass(frozen=True)
class Text:
    text: str  # character references resolved


Event = Start | End | Text


def parse(fragment: str) -> list[Event]:
    """The start tags, end tags and text of ``fragment`` in order; ``<x/>`` is a start tag (and
    an end tag unless ``x`` is void). Comments and declarations are dropped."""
    parser = _Parser()
    parser.feed(fragment)
    parser.close()
    return parser.events


def balanced(events: list[Event]) -> bool:
    """Every start tag (but a void one) closed by a matching end tag, properly nested."""
    open_tags: list[str] = []
    for event in events:
        if isinstance(event, Start) and not event.void:
            open_tags.append(event.tag)
        elif isinstance(event, End) and event.tag not in VOID_ELEMENTS:
            closed = open_tags.pop() if open_tags else None
            if closed != event.tag:
                return False
    return not open_tags


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.events: list[Event] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.events.append(Start(tag, {name: value or "" for name, value in attrs}))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID_ELEMENTS:
            self.events.append(End(tag))

    def handle_endtag(self, tag: str) -> None:
        self.events.append(End(tag))

    def handle_data(self, data: str) -> None:
        self.events.append(Text(data))
