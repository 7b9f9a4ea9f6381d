"""HTML pages (.html, .htm): the text of each block (paragraph, heading, list item, cell, title, ...)
is translated as an HTML fragment, its inline markup (links, emphasis, spans, images, line breaks)
kept by the engine.

The file is rewritten in place: everything but the translated fragments stays byte for byte (the
doctype, ``<head>``, attributes, comments, whitespace between blocks, a byte order mark). Not
translated: ``<script>``, ``<style>``, ``<pre>``, ``<textarea>``, ``<svg>``, ``<math>`` and anything
marked ``translate="no"`` (as HTML defines it); attribute values (``alt``, ``title``,
``placeholder``); and text whose inline tags do not nest, which is left as it is rather than
guessed at. The file must be UTF-8.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser

from engine.documents import fragments
from engine.documents.base import Document, Utf8Text

# Elements that begin or end a block of text: a fragment never spans one. Any other element is
# inline and travels inside its block's fragment.
BLOCKS = frozenset(
    [
        "address", "article", "aside", "base", "blockquote", "body", "caption", "col", "colgroup", "dd",
        "details", "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2",
        "h3", "h4", "h5", "h6", "head", "header", "hgroup", "hr", "html", "legend", "li", "link", "main", "menu",
        "meta", "nav", "ol", "optgroup", "option", "p", "section", "select", "summary", "table", "tbody", "td",
        "tfoot", "th", "thead", "title", "tr", "ul",
    ]
)  # fmt: skip
# Elements whose content is not prose: kept as it is.
UNTRANSLATED = frozenset(["script", "style", "pre", "textarea", "svg", "math", "template"])


@dataclass(frozen=True)
class _Token:
    """A piece of the file: a tag, text (or a character reference), or anything else (a comment, the
    doctype, untranslated content), which ends a block of text as a block element's tag does."""

    kind: str  # "start", "end", "text" or "other"
    start: int  # offset in the file; a token ends where the next one starts
    tag: str = ""


def read(data: bytes) -> Document:
    source = Utf8Text.decode(data)
    text = source.text
    spans = [span for run in _runs(_tokens(text), len(text)) if (span := _span(run, text)) is not None]

    def write(translations: list[str]) -> bytes:
        out = text
        for (start, end), translation in sorted(zip(spans, translations, strict=True), reverse=True):
            out = out[:start] + translation + out[end:]
        return source.encode(out)

    return Document(
        texts=[text[start:end] for start, end in spans],
        format="html",
        extension=".html",
        media_type="text/html; charset=utf-8",
        writer=write,
    )


def _tokens(text: str) -> list[_Token]:
    tokenizer = _Tokenizer(text)
    tokenizer.feed(text)
    tokenizer.close()
    return tokenizer.tokens


def _runs(tokens: list[_Token], length: int) -> Iterator[list[tuple[_Token, int]]]:
    """The maximal runs of inline tokens (text and inline tags), each token with its end offset."""
    run: list[tuple[_Token, int]] = []
    for token, end in zip(tokens, [t.start for t in tokens[1:]] + [length], strict=True):
        if token.kind == "other" or token.tag in BLOCKS:
            yield run
            run = []
        else:
            run.append((token, end))
    yield run


def _span(run: list[tuple[_Token, int]], text: str) -> tuple[int, int] | None:
    """Where a run's fragment lies: without the whitespace and the unmatched tags at its edges (an
    inline element that a block interrupts); None if it has no text or its tags do not nest."""
    unmatched = _unmatched([token for token, _ in run])
    wording = [token.kind == "text" and bool(html.unescape(text[token.start : end]).strip()) for token, end in run]
    kept = [i for i, (token, _) in enumerate(run) if wording[i] or (token.kind != "text" and i not in unmatched)]
    if not any(wording) or any(i in unmatched for i in range(kept[0], kept[-1] + 1)):
        return None
    first, last = kept[0], kept[-1] + 1
    start, end = run[first][0].start, run[last - 1][1]
    fragment = text[start:end]
    return start + len(fragment) - len(fragment.lstrip()), end - len(fragment) + len(fragment.rstrip())


def _unmatched(tokens: list[_Token]) -> set[int]:
    """The indices of the start tags never closed and the end tags never opened in ``tokens``."""
    open_tags: list[int] = []
    unmatched = set()
    for i, token in enumerate(tokens):
        if token.kind == "start" and token.tag not in fragments.VOID_ELEMENTS:
            open_tags.append(i)
        elif token.kind == "end" and open_tags and tokens[open_tags[-1]].tag == token.tag:
            open_tags.pop()
        elif token.kind == "end" and token.tag not in fragments.VOID_ELEMENTS:
            unmatched.add(i)
    return unmatched | set(open_tags)


class _Tokenizer(HTMLParser):
    """The file as ``_Token`` s; untranslated elements and their content as "other" tokens."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=False)
        # HTMLParser reports (line, column); lines are counted at "\n" only.
        self.line_starts = [0] + [i + 1 for i, char in enumerate(text) if char == "\n"]
        self.tokens: list[_Token] = []
        self.skipping: tuple[str, int] | None = None  # an untranslated element: its tag and nesting depth

    def _add(self, kind: str, tag: str = "") -> None:
        line, column = self.getpos()
        self.tokens.append(_Token("other" if self.skipping else kind, self.line_starts[line - 1] + column, tag))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.skipping and self.skipping[0] == tag:
            self.skipping = (tag, self.skipping[1] + 1)
        elif not self.skipping and (tag in UNTRANSLATED or ("translate", "no") in attrs):
            self.skipping = (tag, 1)
        self._add("start", tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._add("start", tag)  # void: never skipped, never waited for

    def handle_endtag(self, tag: str) -> None:
        self._add("end", tag)
        if self.skipping and self.skipping[0] == tag:
            depth = self.skipping[1] - 1
            self.skipping = (tag, depth) if depth else None

    def handle_data(self, data: str) -> None:
        self._add("text")

    def handle_entityref(self, name: str) -> None:
        self._add("text")

    def handle_charref(self, name: str) -> None:
        self._add("text")

    def handle_comment(self, data: str) -> None:
        self._add("other")

    def handle_decl(self, decl: str) -> None:
        self._add("other")

    def handle_pi(self, data: str) -> None:
        self._add("other")

    def unknown_decl(self, data: str) -> None:
        self._add("other")
