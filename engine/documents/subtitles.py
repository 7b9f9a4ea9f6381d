"""SubRip subtitles (.srt), read and written by the ``srt`` package: each cue's text is translated.

Kept: cue numbers, timings (as values: ``srt`` writes them as ``HH:MM:SS,mmm``), coordinates after
the timing, line endings, a byte order mark, the formatting tags players know (``<i>``, ``<b>``,
``<u>``, ``<font ...>``) and a leading positioning code such as ``{\\an8}``.

A cue is one text, translated as an HTML fragment whose line breaks are ``<br>``: a sentence that
runs over two lines is translated as one sentence, and the engine puts the break back between the
words aligned with those around it, so a cue keeps its number of lines. (Line by line, each half
sentence would be translated on its own; rewrapping a translated cue by length would ignore where
the sentence breaks naturally.) A cue whose tags do not nest is translated without them.
"""

from __future__ import annotations

import re

import srt

from engine.documents import fragments
from engine.documents.base import Document, DocumentError, Utf8Text

TAG = re.compile(r"(</?[A-Za-z][^<>]*>)")
POSITION = re.compile(r"^(?:\{\\[^{}]*\})+")  # {\an8}: SSA override codes that players honour in SubRip


def read(data: bytes) -> Document:
    source = Utf8Text.decode(data)
    try:
        cues = list(srt.parse(source.text))
    except srt.SRTParseError as e:
        raise DocumentError(f"not a SubRip (.srt) file: {str(e)[:200]}") from None
    translated = [i for i, cue in enumerate(cues) if cue.content.strip()]
    positions = [_position(cues[i].content) for i in translated]

    def write(translations: list[str]) -> bytes:
        out = list(cues)
        for i, position, translation in zip(translated, positions, translations, strict=True):
            cue = cues[i]
            out[i] = srt.Subtitle(cue.index, cue.start, cue.end, position + _content(translation), cue.proprietary)
        eol = "\r\n" if "\r\n" in source.text else "\n"
        return source.encode(srt.compose(out, reindex=False, eol=eol))

    return Document(
        texts=[_fragment(cues[i].content[len(p) :]) for i, p in zip(translated, positions, strict=True)],
        format="html",
        extension=".srt",
        media_type="application/x-subrip; charset=utf-8",
        writer=write,
    )


def _position(content: str) -> str:
    match = POSITION.match(content)
    return match.group() if match else ""


def _fragment(content: str) -> str:
    """A cue's lines as one fragment: its tags as they are, ``<br>`` between lines, text escaped."""
    keep_tags = fragments.balanced(fragments.parse("".join(TAG.findall(content))))

    def piece(i: int, text: str) -> str:  # TAG.split gives text, tag, text, ..., text
        if i % 2 == 0:
            return fragments.escape(text)
        return text if keep_tags else ""

    return "<br>".join("".join(piece(i, p) for i, p in enumerate(TAG.split(line))) for line in content.split("\n"))


def _content(fragment: str) -> str:
    """A translated fragment as cue text: a line per ``<br>``, tags written back, no blank lines
    (a blank line would end the cue)."""
    lines = [""]
    for event in fragments.parse(fragment):
        if isinstance(event, fragments.Text):
            lines[-1] += event.text
        elif isinstance(event, fragments.Start) and event.tag == "br":
            lines.append("")
        elif isinstance(event, fragments.Start):
            lines[-1] += "<" + event.tag + "".join(f' {name}="{value}"' for name, value in event.attrs.items()) + ">"
        elif event.tag != "br":
            lines[-1] += f"</{event.tag}>"
    return "\n".join(line.strip() for line in lines if line.strip())
