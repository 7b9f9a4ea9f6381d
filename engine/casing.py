"""Sentences written in capitals: read by the model in ordinary case, their translation in capitals.

Models learn from text in ordinary case, where capitals mostly start sentences, names and (in
German) nouns. A sentence in capitals alone (a headline, a warning, a label) is a string of rare
pieces to them, which they translate as noise ("A MAN IS PLAYING A GUITAR ON THE STREET." gave "Ein
SAALAARAARAAR…"). The model reads it in ordinary case, and its translation is written in capitals.
Which words keep a capital is the model's own vocabulary's call: each word is written in lower
case or with a capital, whichever its tokenizer finds likelier (the form seen more often in
training has longer, likelier pieces: "ZWEI MÄNNER SPIELEN" reads "Zwei Männer spielen", "BOSTON
TERRIER" "Boston Terrier").
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Fewer cased letters than this are an initial, "I" or "OK": ordinary text, not a sentence in capitals.
MIN_CASED_LETTERS = 2
WORD = re.compile(r"\w+")
# How much likelier (in nats) a word's form with a capital must be. A unigram tokenizer counts the
# capitals that start sentences too, and a vocabulary shared by two languages the other's nouns
# ("Person", "Hand" from German in English text): chosen on Multi30K val, where it writes 99.5% of
# the lower-case words of English and German as they were, and 80% of German's capitals (at 0:
# 97.6%, 95% and 87%).
CAPITAL_MARGIN = 1.5


def ordinary_case(text: str, score: Callable[[str], float]) -> str | None:
    """``text`` in ordinary case if it is written in capitals (every cased letter upper case, at
    least ``MIN_CASED_LETTERS`` of them): the first word with a capital, each other in lower case
    unless ``score`` finds it likelier with one by ``CAPITAL_MARGIN``; None otherwise."""
    cased = [c for c in text if c.islower() or c.isupper()]
    if len(cased) < MIN_CASED_LETTERS or not all(c.isupper() for c in cased):
        return None
    lowered = text.lower()
    if len(lowered) != len(text):  # "İ" lowers to two characters: places in the text would move
        return None
    words = list(WORD.finditer(lowered))
    out = list(lowered)
    for i, word in enumerate(words):
        capital = word.group().capitalize()
        if len(capital) != len(word.group()):  # "ß" would become "Ss"
            continue
        if i == 0 or (len(word.group()) > 1 and score(capital) > score(word.group()) + CAPITAL_MARGIN):
            out[word.start() : word.end()] = capital
    return "".join(out)
