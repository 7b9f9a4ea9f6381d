"""HTML pages (.html, .htm): cut into blocks, each translated by the engine with format "html".

The engine translates HTML (``engine.markup``) and decides everything about it: which elements
are blocks, which are kept as written (``<code>``, ``<pre>``, ``<script>``, ``<style>``,
``translate="no"``, ...), how inline tags are put back around the translated words, which
attributes are translated (``alt``, ``title``). This module only cuts the page, parsed by the
engine's lossless parser, into pieces small enough to be translated in batches: each block element
that holds no other block (a paragraph, heading, list item, cell, ``<title>``) and each run of
inline content between blocks is one text, with its tags. Everything between these pieces (the
doctype, ``<head>``'s other elements, the tags of the containers, comments, whitespace) is copied
byte for byte, as is a UTF-8 byte order mark. Mis-nested or unclosed inline elements, which the
engine could not put back in place, and a tag, comment or CDATA section left open, whose content
browsers hide, make the page a DocumentError saying where. So does a page of more elements, texts
and comments than ``NODES_PER_TEXT`` times the texts it may have, as soon as the parser reaches them.
"""

from __future__ import annotations

from engine.documents.base import Document, MalformedDocument, TooManyBlocks, TooManyTexts, Utf8Text
from engine.markup import Document as Markup
from engine.markup import MarkupError
from engine.markup.document import HTML_BLOCKS, holds_blocks, kept
from engine.markup.tree import Element, Node, TooManyNodes, parse

MEDIA_TYPE = "text/html; charset=utf-8"
# The parse tree's nodes (elements, runs of text, comments) a page may have per text it is allowed:
# the parser builds the whole tree before any text is counted (10 MB of "<p>a</p>": 2.6 M nodes,
# 1 GB and 31 s to reach a refusal). Real pages are at least 17 characters a node (Rust's HTML
# documentation: a median of 56, code listings of one text 20), so that at the 10 MB upload limit
# they have at most 0.6 M of the 1 M allowed with 100,000 texts; per text, 18 at most in prose pages
# with as many texts as nodes could be counted (Rust's reference), which the upload limit keeps far
# under 100,000 texts.
NODES_PER_TEXT = 10


def read(data: bytes, *, max_bytes: int, max_texts: int) -> Document:
    source = Utf8Text.decode(data, max_bytes=max_bytes)
    try:
        nodes = parse(source.text, "html", max_nodes=NODES_PER_TEXT * max_texts)
    except MarkupError as e:
        raise MalformedDocument(f"malformed HTML: {e}", e.line, e.column) from None
    except TooManyNodes as e:
        raise TooManyBlocks(max_texts, f"elements, texts and comments (by line {e.line})") from None
    pieces: list[str] = []  # the page, cut; concatenated, they are the page again
    translated: list[int] = []  # the pieces to translate
    _cut(nodes, pieces, translated, max_texts)

    def write(translations: list[str]) -> bytes:
        out = list(pieces)
        for i, translation in zip(translated, translations, strict=True):
            out[i] = translation
        return source.encode("".join(out))

    return Document(
        texts=[pieces[i] for i in translated],
        format="html",
        extension=".html",
        media_type=MEDIA_TYPE,
        writer=write,
    )


def _cut(nodes: list[Node], pieces: list[str], translated: list[int], max_texts: int) -> None:
    """Append the pieces of ``nodes``: containers of blocks opened, the rest as runs between them."""
    run: list[Node] = []
    for node in nodes:
        if isinstance(node, Element) and node.name in HTML_BLOCKS:
            _piece(run, pieces, translated, max_texts)
            run = []
            if holds_blocks(node) and not kept(node, "html"):
                pieces.append(node.start)
                _cut(node.children, pieces, translated, max_texts)
                pieces.append(node.end)
            else:
                _piece([node], pieces, translated, max_texts)
        else:
            run.append(node)
    _piece(run, pieces, translated, max_texts)


def _piece(nodes: list[Node], pieces: list[str], translated: list[int], max_texts: int) -> None:
    """One piece of the page: translated if the engine would find anything in it to translate (one
    more than ``max_texts`` is TooManyTexts)."""
    text = "".join(node.source for node in nodes)
    if text and Markup(text, "html").units:
        if len(translated) == max_texts:
            raise TooManyTexts(max_texts)
        translated.append(len(pieces))
    pieces.append(text)
