"""SubRip subtitles (.srt), read and written by the ``srt`` package: each cue's text is translated.

Kept: cue numbers, timings (as values: ``srt`` writes them as ``HH:MM:SS,mmm``), coordinates after
the timing, line endings, a byte order mark, the formatting tags players know (``<i>``, ``<b>``,
``<u>``, ``<font ...>``) and a leading positioning code such as ``{\\an8}``.

A cue is one text, translated as an HTML fragment with a ``<wbr>`` where each line ends: a
sentence that runs over two lines is translated as one sentence, and the engine puts the ``<wbr>``
after the translation of the word before it, so a cue keeps its number of lines and breaks where
the sentence did. (``<br>`` would not do: the engine translates the text on either side of one
separately, which is line by line, each half sentence on its own; rewrapping a translated cue by
length would break it anywhere.) In a dialogue cue, where every line begins with a dash, each line
is a speaker's own: the lines are separated by ``<br>`` instead, and translated one by one. A cue
whose tags do not nest is translated without them. A timing too long for a ``timedelta`` (some
2.7 million years) is refused. A timing line right after a cue's text (no blank line, no number)
starts a cue of its own rather than becoming text to translate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import srt

from engine.documents import fragments
from engine.documents.base import Document, DocumentError, TooManyTexts, Utf8Text

MEDIA_TYPE = "application/x-subrip; charset=utf-8"

TAG = re.compile(r"(</?[A-Za-z][^<>]*>)")
DASH = re.compile(r"^[-–—]\s*")  # a dialogue line's speaker dash
LINE_BREAKS = ("wbr", "br")
POSITION = re.compile(r"^(?:\{\\[^{}]*\})+")  # {\an8}: SSA override codes that players honour in SubRip
TIMING_LINE = re.compile(r"[ \t]*\d+:\d+:\d+[,.]\d+[ \t]*-->")


def read(data: bytes, *, max_bytes: int, max_texts: int) -> Document:
    source = Utf8Text.decode(data, max_bytes=max_bytes)
    cues = _cues(source.text, max_texts)
    translated = [(i, _Cue.read(cue.content)) for i, cue in enumerate(cues) if cue.content.strip()]

    def write(translations: list[str]) -> bytes:
        out = list(cues)
        for (i, cue), translation in zip(translated, translations, strict=True):
            old = cues[i]
            out[i] = srt.Subtitle(old.index, old.start, old.end, cue.write(translation), old.proprietary)
        eol = "\r\n" if "\r\n" in source.text else "\n"
        return source.encode(srt.compose(out, reindex=False, eol=eol))

    return Document(
        texts=[cue.fragment for _, cue in translated],
        format="html",
        extension=".srt",
        media_type=MEDIA_TYPE,
        writer=write,
    )


def _cues(text: str, max_texts: int) -> list[srt.Subtitle]:
    """The file's cues, TooManyTexts at the one with text past ``max_texts``."""
    cues: list[srt.Subtitle] = []
    with_text = 0
    try:
        for cue in srt.parse(_separated(text)):  # one at a time: an error is in the cue after the last one parsed
            with_text += bool(cue.content.strip())
            if with_text > max_texts:
                raise TooManyTexts(max_texts)
            cues.append(cue)
    except TooManyTexts:
        raise  # a DocumentError, so a ValueError: not the timing's below
    except srt.SRTParseError as e:
        raise DocumentError(f"not a SubRip (.srt) file: {str(e)[:200]}") from None
    # A timing with more digits than Python reads as an integer (ValueError) or longer than a
    # timedelta holds (OverflowError).
    except (ValueError, OverflowError):
        raise DocumentError(f"the timing of cue {len(cues) + 1} (counted from the top) is out of range") from None
    return cues


def _separated(text: str) -> str:
    """``text`` with a blank line before each timing line that follows a cue's text directly. A
    file that leaves it out (and the cue number) would otherwise have the next cue's timing and
    text read as the text of the one before, and translated with it."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    for i, line in enumerate(lines):
        before = lines[i - 1].strip() if i else ""
        if TIMING_LINE.match(line) and before and not before.isdigit():
            out.append(lines[i - 1][len(lines[i - 1].rstrip("\r\n")) :])  # the line ending it uses
        out.append(line)
    return "".join(out)


@dataclass(frozen=True)
class _Cue:
    """A cue's text as the fragment to translate, and what is written back around its translation."""

    fragment: str
    position: str  # the positioning codes before the text
    dashes: list[str]  # a dialogue's speaker dashes, one per line; empty if it is not one

    @classmethod
    def read(cls, content: str) -> _Cue:
        match = POSITION.match(content)
        position = match.group() if match else ""
        lines = content[len(position) :].split("\n")
        dashes = [match.group() for line in lines if (match := DASH.match(line))]
        dialogue = len(dashes) == len(lines)
        if dialogue:
            lines = [line[len(dash) :] for line, dash in zip(lines, dashes, strict=True)]
        keep_tags = fragments.balanced(fragments.parse("".join(TAG.findall("".join(lines)))))

        def piece(i: int, text: str) -> str:  # TAG.split gives text, tag, text, ..., text
            if i % 2 == 0:
                return fragments.escape(text)
            return text if keep_tags else ""

        pieces = ["".join(piece(i, p) for i, p in enumerate(TAG.split(line))) for line in lines]
        return cls(("<br>" if dialogue else "<wbr>").join(pieces), position, dashes if dialogue else [])

    def write(self, translation: str) -> str:
        lines = _lines(translation)
        dashes = self.dashes + [""] * len(lines)  # the engine keeps <br>: one line per dash
        return self.position + "\n".join(dash + line for dash, line in zip(dashes, lines, strict=False))


def _lines(fragment: str) -> list[str]:
    """A translated fragment as cue lines: a new line at each ``<wbr>`` or ``<br>``, tags written
    back, no blank lines (a blank line would end the cue)."""
    lines = [""]
    for event in fragments.parse(fragment):
        if isinstance(event, fragments.Text):
            lines[-1] += event.text
        elif isinstance(event, fragments.Start) and event.tag in LINE_BREAKS:
            lines.append("")
        elif isinstance(event, fragments.Start):
            lines[-1] += "<" + event.tag + "".join(f' {name}="{value}"' for name, value in event.attrs.items()) + ">"
        elif event.tag not in LINE_BREAKS:
            lines[-1] += f"</{event.tag}>"
    return [line.strip() for line in lines if line.strip()]
