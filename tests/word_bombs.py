"""Decompression bombs of the .docx kind, for the document limits' tests."""

from __future__ import annotations

import io
import zipfile


def word_bomb(document: bytes, expanded: int) -> bytes:
    """``document`` (a .docx) with its word/document.xml's body replaced by ``expanded`` bytes of
    empty paragraphs: a few hundred KB for 250 MB. Compressed as it is written, so that the test
    never holds it expanded."""
    original = zipfile.ZipFile(io.BytesIO(document))
    head, tail = original.read("word/document.xml").split(b"<w:body>")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bomb:
        for info in original.infolist():
            if info.filename != "word/document.xml":
                bomb.writestr(info, original.read(info))
                continue
            with bomb.open(info.filename, "w") as part:
                part.write(head + b"<w:body>")
                for _ in range(expanded // (6 << 16)):
                    part.write(b"<w:p/>" * (1 << 16))
                part.write(tail)
    return out.getvalue()
