"""What reading a hostile document allocates, counted by tracemalloc: bounded by the file's size,
not by the count of what it holds."""

from __future__ import annotations

import tracemalloc

from engine.documents import read_document

LINES = 1_000_000


def test_an_html_page_of_line_breaks_takes_a_few_bytes_a_line_to_parse() -> None:
    """The parser keeps where each line starts: as Python ints in a list that is 36 bytes a line."""
    page = b"\n" * LINES
    tracemalloc.start()
    try:
        assert read_document(page, "blank.html").texts == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * LINES
