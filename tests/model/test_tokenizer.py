"""Text normalisation before sentencepiece."""

from __future__ import annotations

import pytest

from engine.tokenizer import normalize_text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A dog runs.", "A dog runs."),
        ("  A \t dog\nruns.\r\n", "A dog runs."),  # whitespace runs collapse, ends trimmed
        ("a\x00b\x07c", "a b c"),  # control characters (Cc) become spaces
        ("zero\u200bwidth", "zero width"),  # format characters (Cf)
        ("line\u2028para\u2029end", "line para end"),  # line and paragraph separators
        ("ﬁne Ｆｕｌｌ", "fine Full"),  # NFKC
        ("café 😀", "café 😀"),  # printable non-ASCII is kept
        ("\u00a0nbsp\u00a0", "nbsp"),  # NFKC makes no-break spaces plain ones, then trimmed
    ],
)
def test_normalize_text(text: str, expected: str) -> None:
    assert normalize_text(text) == expected
