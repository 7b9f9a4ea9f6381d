"""Sentences written in capitals: read by the model in sentence case, their translation in capitals.

Models learn from text in ordinary case, where capitals mostly start sentences and names. A sentence
in capitals alone (a headline, a warning, a label) is a string of rare pieces to them, which they
translate as noise ("A MAN IS PLAYING A GUITAR ON THE STREET." gave "Ein SAALAARAARAAR…"). The model
reads it as "A man is playing a guitar on the street." and its translation is written in capitals.
Names lose their capitals on the way in; on the way out, everything has them.
"""

from __future__ import annotations

# Fewer cased letters than this are an initial, "I" or "OK": ordinary text, not a sentence in capitals.
MIN_CASED_LETTERS = 2


def sentence_case(text: str) -> str | None:
    """``text`` in sentence case if it is written in capitals (every cased letter upper case, at
    least ``MIN_CASED_LETTERS`` of them); None otherwise."""
    cased = [c for c in text if c.islower() or c.isupper()]
    if len(cased) < MIN_CASED_LETTERS or not all(c.isupper() for c in cased):
        return None
    lowered = text.lower()
    if len(lowered) != len(text):  # "İ" lowers to two characters: places in the text would move
        return None
    first = next(i for i, c in enumerate(lowered) if c.islower() or c.isupper())
    return lowered[:first] + lowered[first].upper() + lowered[first + 1 :]
