"""No-break spaces in markup: text of them alone is no text to translate, and is kept as written."""

from __future__ import annotations

import pytest

from engine.markup import Document, Translation


@pytest.mark.parametrize(
    ("markup", "kind"),
    [
        ("<p>&nbsp;</p><p>A dog.</p>", "html"),
        ("<p> &nbsp; </p><p>A dog.</p>", "html"),
        ("<table><tr><td>&#160;</td><td>A dog.</td></tr></table>", "html"),
        ("<a>&#160;<b>A dog.</b></a>", "xml"),
    ],
)
def test_no_break_spaces_alone_are_kept_as_written(markup: str, kind: str) -> None:
    # A model translates such a text as nothing: a spacer paragraph or an empty cell would lose it.
    document = Document(markup, kind)  # type: ignore[arg-type]
    assert document.units == ["A dog."]
    assert document.render([Translation("Ein Hund.")]) == markup.replace("A dog.", "Ein Hund.")


def test_a_no_break_space_between_words_is_part_of_their_text() -> None:
    assert Document("<p>10&nbsp;km</p>", "html").units == ["10\xa0km"]
