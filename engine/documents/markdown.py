"""Markdown (.md): the text of each paragraph, heading, list item and table cell is translated.

markdown-it-py (CommonMark, with GitHub's tables, strikethrough and footnotes) finds the blocks and
their inline structure; the file itself is rewritten in place, so everything outside a block's text
stays byte for byte: front matter, list markers and indentation, task list checkboxes (``[ ]``,
``[x]``), block quote markers, heading markers and a heading's attribute block (``{#id .class}``),
table rows and delimiters (a cell's escaped ``\\|`` too), footnote definitions' labels, code blocks
and fences, HTML blocks, reference definitions, blank lines, line endings and a byte order mark.

A block's inline content becomes an HTML fragment translated with format "html": emphasis, strong
and strikethrough as ``<em>``, ``<strong>`` and ``<s>``, links as ``<a>`` (their text translated),
each numbered (``data-i``) so that it is written back with its own Markdown markers (``*`` or ``_``,
the link's destination and title). Inline code, autolinks, images, inline HTML and footnote
references are written back as they were, wherever the engine put them (at the end if it dropped
them).

Changed, not lost: a paragraph's soft line breaks become spaces (its sentences are reordered by the
translation, so its source lines cannot be kept); hard breaks are written as a backslash and a new
line; reference links come back as inline links; link destinations as markdown-it normalizes them
(non-ASCII percent-encoded); text characters that Markdown would read as syntax are escaped. Not
translated: image alt text, HTML blocks, and a block whose lines markdown-it rewrote (tabs in a
continuation line's indentation) so that its text cannot be found in the file. Refused: lists and
block quotes nested deeper than ``MAX_NESTING`` levels; more texts than the reader is allowed, and
more lines or blocks than ``LINES_PER_TEXT`` and ``TOKENS_PER_TEXT`` times that many.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.rules_core import StateCore
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token

from engine.documents import fragments
from engine.documents.base import (
    Document,
    DocumentError,
    DocumentTooLarge,
    TooManyBlocks,
    TooManyTexts,
    Utf8Text,
)
from engine.segmenter import LINE_BREAK

MEDIA_TYPE = "text/markdown; charset=utf-8"
# Blocks nested deeper than this (a block quote or a footnote definition is one level, a list two:
# the list and its item) are refused; markdown-it would leave them out of its tokens, untranslated,
# past its own limit (the preset's 20: nine lists), which is set past ours (a list opens two levels at
# once). Deeper than any real document; each level of nesting parses its lines once more.
MAX_NESTING = 50
# markdown-it's work and memory grow with a file's lines (it keeps five numbers for each) and blocks
# (a token of some 500 bytes for each opening, closing and content), whether or not they hold text:
# 10 MB of blank lines took 2.3 GB to read, of "- a" lines 7 GB. A file may have this many of each
# per text it is allowed, checked before parsing (lines) and as blocks are parsed (tokens): a text
# takes 3 tokens (a paragraph's opening, content, closing), 5 in a list item, and a file rarely has
# more lines of code and blank lines than of text.
LINES_PER_TEXT = 10
TOKENS_PER_TEXT = 8
# The markup a written file may carry past its own length (``_Written``): links and images by
# reference are written out with their destinations, a few times a README's badges, never more.
EXPANSION = 2
EXPANSION_SLACK = 1 << 20
TOKEN_BUDGET = "token_budget"  # the markdown-it env's key for the most block tokens a parse may make
PARSER = MarkdownIt("commonmark", {"maxNesting": MAX_NESTING + 3}).enable(["table", "strikethrough"])
# Inline elements (emphasis in a link in emphasis) keep the preset's limit, past which markdown-it
# reads them as text (translated): brackets nested on purpose parse several times slower under a
# higher one.
INLINE_PARSER = MarkdownIt("commonmark").enable("strikethrough")
PAIRED_TAGS = {"em": "em", "strong": "strong", "s": "s", "link": "a"}  # markdown-it token name -> fragment tag
DATA_MARK = "data-i"  # numbers an element of a fragment: its index in the block's marks
# Characters that Markdown could read as syntax in translated text ("|" ends a table cell; an "&"
# that begins a character reference: "&amp;copy;" would come back as "&copy;", read as "©").
# An underscore inside a word is never emphasis: left alone.
MARKDOWN_SYNTAX = re.compile(r"([\\`*\[\]<|]|(?<!\w)_|_(?!\w)|&(?=#?[0-9A-Za-z]+;))")
# What would make translated text at the start of a line begin another block: a heading's "#", a
# list item's bullet or number, a block quote's ">", a thematic break or setext underline, a fence.
# The backslash goes before the marker, or between an ordered item's number and its "." or ")".
LINE_START_SYNTAX = re.compile(
    r"[ \t]*(?P<marker>(?P<number>\d{1,9})(?=[.)](?:[ \t]|$))|#{1,6}(?=[ \t]|$)|[-+](?=[ \t]|$)|[-=]+[ \t]*$|>|~~~)"
)
# GitHub's footnotes: a reference, `[^label]`, and a definition, `[^label]: text` at the start of a
# line. A reference is kept as written only where its label is defined, as GitHub reads it: otherwise
# `[^label](url)` would be no link.
FOOTNOTE_REFERENCE = re.compile(r"\[\^([^\s\[\]]+)\]")
FOOTNOTE_DEFINITION = re.compile(FOOTNOTE_REFERENCE.pattern + ":")
FOOTNOTES = "footnotes"  # the markdown-it env's key for the labels defined
FOOTNOTE_OPEN = "footnote_definition_open"
# A task list item's checkbox, GitHub's, at the start of its first paragraph.
TASK_MARKER = re.compile(r"\[[ xX]\](?:[ \t]+|\Z)")
# An attribute block ending a heading: `{#id .class key=value}` (Pandoc, Hugo, kramdown's `{: #id}`,
# MkDocs' attr_list) or Pandoc's `{-}`. It holds no braces: it begins at the heading's last "{".
HEADING_ATTRIBUTE = r"""(?:[#.][^\s{}]+|[\w:-]+=(?:"[^"]*"|'[^']*'|[^\s{}"']+)|-)"""
HEADING_ATTRIBUTES = re.compile(rf"\{{:?[ \t]*{HEADING_ATTRIBUTE}(?:[ \t]+{HEADING_ATTRIBUTE})*[ \t]*\}}")
# Front matter, YAML (Jekyll, Hugo, ...) or TOML (Hugo): not Markdown, never translated.
FRONT_MATTER = re.compile(
    r"\A(?:---[ \t]*(?:\r\n|\r|\n).*?^(?:---|\.\.\.)|\+\+\+[ \t]*(?:\r\n|\r|\n).*?^\+\+\+)[ \t]*$",
    re.DOTALL | re.MULTILINE,
)


@dataclass(frozen=True)
class _Mark:
    """What a numbered element of a fragment is written back as."""

    open: str  # the whole construct when atomic
    close: str = ""
    atomic: bool = False  # code, image, autolink, inline HTML: kept as it was, its content untranslated
    # A link the translation left no words in is still written, `[](destination)`, as HTML keeps an
    # empty <a>: its destination is not lost. Empty emphasis would be literal asterisks.
    kept_empty: bool = False


@dataclass(frozen=True)
class _Block:
    """A block's inline content: where it lies in the file and how to write its translation."""

    start: int  # offsets in the decoded file
    end: int
    marks: list[_Mark]
    continuation: str  # what begins the block's second line (its container markers): for hard breaks
    # Its text begins its lines (a paragraph's, a setext heading's; not an ATX heading's or a cell's),
    # where a translation must not begin another block.
    begins_lines: bool = True
    # Its first line follows a task's checkbox, after which no other block can begin: left unescaped.
    after_checkbox: bool = False
    # In a table cell, where a "|" that is not escaped would end it: in code spans too, as GitHub
    # reads a cell before its inline content.
    cell: bool = False


def read(data: bytes, *, max_bytes: int, max_texts: int) -> Document:
    source = Utf8Text.decode(data, max_bytes=max_bytes)
    text = source.text
    lines = text.count("\n") + text.count("\r") - text.count("\r\n") + 1  # as LINE_BREAK splits them
    if lines > LINES_PER_TEXT * max_texts:
        raise TooManyBlocks(max_texts, f"lines ({lines})")
    blocks, texts = [], []
    written = _Written(EXPANSION * len(text) + EXPANSION_SLACK)
    for block, children in _locate(text, TOKENS_PER_TEXT * max_texts):
        fragment, translatable = _fragment(children, block.marks, written)
        if block.cell:
            block.marks[:] = map(_in_cell, block.marks)
        if translatable:
            if len(texts) == max_texts:
                raise TooManyTexts(max_texts)
            blocks.append(block)
            texts.append(fragment)
    eol = match.group() if (match := LINE_BREAK.search(text)) else "\n"

    def write(translations: list[str]) -> bytes:
        out, done = [], 0  # the blocks are in file order and never overlap
        for block, translation in zip(blocks, translations, strict=True):
            out += [text[done : block.start], _markdown(translation, block, eol)]
            done = block.end
        return source.encode("".join([*out, text[done:]]))

    return Document(texts=texts, format="html", extension=".md", media_type=MEDIA_TYPE, writer=write)


def _refuse_past_limits(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
    """A block rule tried before every other, that matches nothing: it refuses a block nested past
    ``MAX_NESTING``, or one begun once the parse has made its budget's tokens."""
    if len(state.tokens) > state.env[TOKEN_BUDGET]:
        raise TooManyBlocks(state.env[TOKEN_BUDGET] // TOKENS_PER_TEXT, f"blocks (by line {start_line + 1})")
    if state.level > MAX_NESTING:
        raise DocumentError(
            f"line {start_line + 1}: lists and block quotes nest deeper than {MAX_NESTING} levels "
            "(a list counts as two: the list and its item), the most that is read"
        )
    return False


def _footnote_definition(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
    """A block rule for a footnote definition, as markdown-it-footnote reads it: the text after its
    label, and the lines indented under it, are blocks of their own. It ends a paragraph before it
    (so that definitions on consecutive lines stay apart) and takes ``[^label]: url`` from the
    reference definitions. A definition in a definition would mean nothing: it is text there."""
    if state.is_code_block(start_line) or state.parentType == "footnote":
        return False
    begin = state.bMarks[start_line] + state.tShift[start_line]
    match = FOOTNOTE_DEFINITION.match(state.src, begin, state.eMarks[start_line])
    if match is None or silent:
        return match is not None
    state.env.setdefault(FOOTNOTES, set()).add(match[1].casefold())
    opening = state.push(FOOTNOTE_OPEN, "", 1)
    # Where its text begins in the line: the label is not looked for its text ("[^a]: a").
    opening.meta["column"] = match.end() - state.bMarks[start_line]
    _tokenize_footnote(state, start_line, end_line, match.end())
    opening.map = [start_line, state.line]
    state.push("footnote_definition_close", "", -1)
    return True


def _tokenize_footnote(state: StateBlock, start_line: int, end_line: int, text: int) -> None:
    """Parse a footnote's blocks: its first line from offset ``text`` on, counted as indented as far
    as the lines under it must be (4 columns) plus the whitespace it begins with (a wide gap still
    makes code), and the lines indented under it."""
    saved = (state.bMarks[start_line], state.tShift[start_line], state.sCount[start_line], state.parentType)
    column = state.sCount[start_line] + text - (state.bMarks[start_line] + state.tShift[start_line])
    first = state.skipSpaces(text)
    width = len((" " * column + state.src[text:first]).expandtabs(4)) - column
    state.blkIndent += 4
    state.bMarks[start_line], state.tShift[start_line] = text, first - text
    state.sCount[start_line] = width + (state.blkIndent if width < state.blkIndent else 0)
    state.parentType = "footnote"
    state.md.block.tokenize(state, start_line, end_line)
    state.blkIndent -= 4
    state.bMarks[start_line], state.tShift[start_line], state.sCount[start_line], state.parentType = saved


def _footnote_reference(state: StateInline, silent: bool) -> bool:
    """An inline rule for a reference to a footnote defined in the document: an atom, kept as written.

    Silent, it matches nothing: markdown-it scans a link's text so, and would take a reference there
    for a nested link, making ``[see [^1]](url)`` no link."""
    match = FOOTNOTE_REFERENCE.match(state.src, state.pos, state.posMax)
    if silent or match is None or match[1].casefold() not in state.env.get(FOOTNOTES, ()):
        return False
    state.push("footnote_ref", "", 0).content = match[0]
    state.pos = match.end()
    return True


def _inline(state: StateCore) -> None:
    """markdown-it's inline stage (its core rule "inline"), with ``INLINE_PARSER``'s nesting limit,
    on each inline token's content less what ``_kept`` keeps (recorded in its meta as "kept")."""
    for index, token in enumerate(state.tokens):
        if token.type == "inline":
            prefix, suffix = token.meta["kept"] = _kept(state.tokens, index)
            content = token.content[prefix : len(token.content) - suffix]
            token.children = INLINE_PARSER.inline.parse(content, INLINE_PARSER, state.env, [])


def _kept(tokens: list[Token], index: int) -> tuple[int, int]:
    """How many characters at the start and at the end of inline ``tokens[index]`` are kept as
    written, outside its text: a task list item's checkbox, a heading's attribute block (ids that
    links point to)."""
    content, opening = tokens[index].content, tokens[index - 1]
    if opening.type == "heading_open":
        return 0, _heading_attributes(content)
    if opening.type == "paragraph_open" and index > 1 and tokens[index - 2].type == "list_item_open":
        match = TASK_MARKER.match(content)
        return (match.end() if match else 0), 0
    return 0, 0


def _heading_attributes(content: str) -> int:
    """The length of the attribute block that ends a heading's ``content``, with the spaces before
    it; 0 if there is none."""
    brace = content.rfind("{")
    before = content[: max(brace, 0)]
    if brace < 0 or before[-1:] not in ("", " ", "\t") or not HEADING_ATTRIBUTES.fullmatch(content, brace):
        return 0
    return len(content) - len(before.rstrip(" \t"))


PARSER.block.ruler.before("table", "refuse_past_limits", _refuse_past_limits)
PARSER.block.ruler.before("reference", "footnote_definition", _footnote_definition, {"alt": ["paragraph", "reference"]})
PARSER.core.ruler.at("inline", _inline)
INLINE_PARSER.inline.ruler.before("link", "footnote_reference", _footnote_reference)


def _lines(text: str) -> list[tuple[int, str]]:
    """Each line of ``text`` without its break, with the offset where it starts (markdown-it counts
    lines as ``LINE_BREAK`` splits them)."""
    lines, offset = [], 0
    pieces = LINE_BREAK.split(text)  # line, break, line, break, ..., line
    for i in range(0, len(pieces), 2):
        lines.append((offset, pieces[i]))
        offset += len(pieces[i]) + (len(pieces[i + 1]) if i + 1 < len(pieces) else 0)
    return lines


def _locate(text: str, token_budget: int) -> list[tuple[_Block, list[Token]]]:
    """Every block's inline content whose lines are found in the file, and the span they cover;
    TooManyBlocks once markdown-it has made more than ``token_budget`` block tokens."""
    lines = _lines(text)
    cursor = [0] * len(lines)  # table cells share a line: each is looked for after the one before
    located = []
    # Front matter is parsed as blank lines, so that the other lines keep their numbers.
    markdown = FRONT_MATTER.sub(lambda match: re.sub(r"[^\r\n]", "", match.group()), text)
    tokens = PARSER.parse(markdown, {TOKEN_BUDGET: token_budget})
    for index, token in enumerate(tokens):
        if token.type == FOOTNOTE_OPEN:
            cursor[token.map[0]] = max(cursor[token.map[0]], token.meta["column"])
        if token.type != "inline" or token.map is None or not token.content.strip():
            continue
        opening = tokens[index - 1]
        cell = opening.type in ("th_open", "td_open")
        spans = []  # (line, start column, end column) of each content line
        for number, content in enumerate(token.content.split("\n"), start=token.map[0]):
            span = _find(lines[number][1], content, cursor[number], cell)
            if span is None:
                break
            spans.append((number, *span))
        else:
            (first, start, _), (last, _, end) = spans[0], spans[-1]
            cursor[last] = end
            continuation = lines[spans[1][0]][1][: spans[1][1]] if len(spans) > 1 else ""
            begins_lines = opening.type == "paragraph_open" or (
                opening.type == "heading_open" and not opening.markup.startswith("#")
            )
            prefix, suffix = token.meta["kept"]
            start, end = lines[first][0] + start + prefix, lines[last][0] + end - suffix
            block = _Block(start, end, [], continuation, begins_lines, after_checkbox=prefix > 0, cell=cell)
            located.append((block, token.children or []))
    return located


def _find(line: str, content: str, start: int, cell: bool) -> tuple[int, int] | None:
    """Where ``content`` lies in ``line``, from column ``start`` on. A table cell's "|" is escaped
    in the file, its backslash removed by markdown-it before it reads the cell."""
    if cell and "|" in content:
        escaped = re.compile(re.escape(content).replace(re.escape("|"), re.escape("\\|")))
        match = escaped.search(line, start)
        return match.span() if match else None
    column = line.find(content, start)
    return None if column < 0 else (column, column + len(content))


@dataclass
class _Written:
    """The characters of markup the writer will put back, against ``limit``: a link or image by
    reference is written with its destination, so a 100,000-character definition used 2,000
    times (112 KB of Markdown) wrote 200 MB."""

    limit: int
    spent: int = 0

    def spend(self, mark: _Mark) -> None:
        self.spent += len(mark.open) + len(mark.close)
        if self.spent > self.limit:
            raise DocumentTooLarge(
                f"its links and images by reference would be written out past {self.limit:,} characters, "
                f"{EXPANSION} times the file's own and {EXPANSION_SLACK:,} more"
            )


def _fragment(children: list[Token], marks: list[_Mark], written: _Written) -> tuple[str, bool]:
    """Inline tokens as an HTML fragment, their markers appended to ``marks`` (and spent from
    ``written``); and whether it has text to translate."""
    parts, translatable = [], False

    def numbered(tag: str, mark: _Mark, content: str = "") -> str:
        written.spend(mark)
        marks.append(mark)
        element = f'<{tag} {DATA_MARK}="{len(marks) - 1}">'
        return element if tag in fragments.VOID_ELEMENTS else f"{element}{fragments.escape(content)}</{tag}>"

    tokens = iter(children)
    for token in tokens:
        kind = token.type.removesuffix("_open").removesuffix("_close")
        if token.type == "text":
            parts.append(fragments.escape(token.content))
            translatable = translatable or bool(token.content.strip())
        elif token.type == "softbreak":
            parts.append(" ")
        elif token.type == "hardbreak":
            parts.append("<br>")
        elif token.type == "link_open" and token.markup == "autolink":
            url = next(tokens).content
            next(tokens)  # its link_close
            parts.append(numbered("a", _Mark(f"<{url}>", atomic=True), url))
        elif kind in PAIRED_TAGS and token.nesting == 1:
            marks.append(_paired(token))
            written.spend(marks[-1])
            parts.append(f'<{PAIRED_TAGS[kind]} {DATA_MARK}="{len(marks) - 1}">')
        elif kind in PAIRED_TAGS:
            parts.append(f"</{PAIRED_TAGS[kind]}>")
        elif token.type == "code_inline":
            parts.append(numbered("code", _Mark(_code_span(token), atomic=True), token.content))
        elif token.type == "image":
            parts.append(numbered("img", _Mark(_image(token), atomic=True)))
        elif token.type in ("html_inline", "footnote_ref"):
            parts.append(numbered("img", _Mark(token.content, atomic=True)))
    return "".join(parts), translatable


def _paired(token: Token) -> _Mark:
    """The markers around emphasis, strong, strikethrough or a link's text."""
    if token.type == "link_open":
        return _Mark("[", f"]({_destination(token)})", kept_empty=True)
    return _Mark(token.markup, token.markup)


def _destination(token: Token) -> str:
    """A link's or image's destination and title, as written between its parentheses."""
    href = str(token.attrGet("href") or token.attrGet("src") or "")
    if not href or re.search(r"[\s()<>]", href):
        href = "<" + href.replace("<", "%3C").replace(">", "%3E") + ">"
    title = token.attrGet("title")
    return href if title is None else href + ' "' + str(title).replace('"', '\\"') + '"'


def _image(token: Token) -> str:
    alt = token.content.replace("[", "\\[").replace("]", "\\]")
    return f"![{alt}]({_destination(token)})"


def _code_span(token: Token) -> str:
    """A code span as markdown-it read it: its backticks around its content, padded with a space
    where the content begins or ends with a backtick or a space (CommonMark strips one)."""
    pad = " " if token.content[:1] in ("`", " ") or token.content[-1:] in ("`", " ") else ""
    return f"{token.markup}{pad}{token.content}{pad}{token.markup}"


def _in_cell(mark: _Mark) -> _Mark:
    """``mark`` as written in a table cell: its pipes escaped."""
    return replace(mark, open=mark.open.replace("|", "\\|"), close=mark.close.replace("|", "\\|"))


def _markdown(fragment: str, block: _Block, eol: str) -> str:
    """A translated fragment as Markdown: each numbered element with its markers, every atomic
    one exactly once."""
    marks = block.marks
    hard_break = "\\" + eol + block.continuation
    written: set[int] = set()
    stack: list[tuple[str, int | None, list[str]]] = [("", None, [])]  # (tag, mark, output) per open element
    skipping = 0  # depth inside an atomic element: its translated content is not used
    for event in fragments.parse(fragment):
        if skipping:
            skipping += 1 if isinstance(event, fragments.Start) and not event.void else 0
            skipping -= 1 if isinstance(event, fragments.End) else 0
            continue
        out = stack[-1][2]
        if isinstance(event, fragments.Text):
            out.append(MARKDOWN_SYNTAX.sub(r"\\\1", event.text))
        elif isinstance(event, fragments.Start):
            number = event.number(DATA_MARK, len(marks))
            if event.tag == "br" and number is None:
                out.append(hard_break)
            elif number is not None and marks[number].atomic:
                if number not in written:
                    out.append(marks[number].open)
                written.add(number)
                skipping = 0 if event.void else 1
            elif not event.void:
                stack.append((event.tag, number, []))
        elif len(stack) > 1 and stack[-1][0] == event.tag:
            _close(stack, marks)
    while len(stack) > 1:
        _close(stack, marks)
    missing = [marks[n].open for n, mark in enumerate(marks) if mark.atomic and n not in written]
    markdown = " ".join(["".join(stack[0][2]).strip(), *missing]).strip()
    if not block.begins_lines:
        return markdown
    lines = markdown.split(hard_break)
    return hard_break.join(
        line if number == 0 and block.after_checkbox else _escape_line_start(line) for number, line in enumerate(lines)
    )


def _escape_line_start(line: str) -> str:
    """``line`` with a backslash where its beginning would begin another block ("1\\." is no list)."""
    match = LINE_START_SYNTAX.match(line)
    if match is None:
        return line
    at = match.end("number") if match.group("number") else match.start("marker")
    return line[:at] + "\\" + line[at:]


def _close(stack: list[tuple[str, int | None, list[str]]], marks: list[_Mark]) -> None:
    """Write the innermost open element into its parent, with its markers around its text and any
    space at its edges outside them (``*word *`` would not be emphasis)."""
    _, number, out = stack.pop()
    content = "".join(out)
    inner = content.strip()
    if number is None or not (inner or marks[number].kept_empty):
        stack[-1][2].append(content)
        return
    lead, trail = content[: len(content) - len(content.lstrip())], content[len(content.rstrip()) :]
    stack[-1][2].append(lead + marks[number].open + inner + marks[number].close + trail)
