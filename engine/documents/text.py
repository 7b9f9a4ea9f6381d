"""Plain text (.txt): each non-empty line is a text to translate.

Everything else is kept: line endings (``\\r\\n``, ``\\n``, ``\\r``, mixed), blank lines, each
line's leading and trailing whitespace, and a UTF-8 byte order mark. A line is one text because a
.txt file has no other structure to go by; the engine splits a line into sentences itself.
"""

from __future__ import annotations

from engine.documents.base import Document, Utf8Text, limited
from engine.segmenter import LINE_BREAK

MEDIA_TYPE = "text/plain; charset=utf-8"


def read(data: bytes, *, max_bytes: int, max_texts: int) -> Document:
    source = Utf8Text.decode(data, max_bytes=max_bytes)
    pieces = LINE_BREAK.split(source.text)  # line, break, line, break, ..., line
    lines = list(limited(((i, line) for i, line in enumerate(pieces) if i % 2 == 0 and line.strip()), max_texts))

    def write(translations: list[str]) -> bytes:
        out = list(pieces)
        for (i, line), translation in zip(lines, translations, strict=True):
            content = line.strip()
            start = line.index(content)
            out[i] = line[:start] + translation + line[start + len(content) :]
        return source.encode("".join(out))

    return Document(
        texts=[line.strip() for _, line in lines],
        format="text",
        extension=".txt",
        media_type=MEDIA_TYPE,
        writer=write,
    )
