"""What every translated markup text must keep, read with lxml (a parser independent of ours), and
stand-in translations whose alignment is known (upper-casing, word reversal)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from lxml import etree, html

from engine.markup import Document, Translation, WordAlignment

TRANSLATED_ATTRIBUTES = {"alt", "title"}


def elements(markup: str, kind: str) -> Counter[tuple[str, str, tuple[tuple[str, str], ...]]]:
    """Each element as (parent's tag, tag, attributes but the values of alt and title), counted."""
    if kind == "html":
        root = html.fragment_fromstring(markup, create_parent="fragment-root")
    else:
        root = etree.fromstring(f"<fragment-root>{markup}</fragment-root>")
    found: Counter[tuple[str, str, tuple[tuple[str, str], ...]]] = Counter()
    for element in root.iter():
        if not isinstance(element.tag, str) or element is root:
            continue
        attributes = tuple(sorted((k, "" if k in TRANSLATED_ATTRIBUTES else v) for k, v in element.attrib.items()))
        found[(element.getparent().tag, element.tag, attributes)] += 1
    return found


def assert_same_elements(source: str, translation: str, kind: str = "html") -> None:
    """Well formed, with the same elements under the same parents with the same attributes."""
    assert elements(translation, kind) == elements(source, kind), f"{source!r}\n-> {translation!r}"


Translate = Callable[[str], tuple[str, list[tuple[int, int]] | None]]


def upper(text: str) -> tuple[str, None]:
    """A stand-in translation, word for word: each word upper-cased, in place."""
    return text.upper(), None


def reverse(text: str) -> tuple[str, list[tuple[int, int]]]:
    """A stand-in translation: the words in reverse order, each aligned to itself."""
    words = text.split()
    return " ".join(reversed(words)), [(i, len(words) - 1 - i) for i in range(len(words))]


def given(target: str, pairs: list[tuple[int, int]]) -> Translate:
    """A stand-in translation: ``target`` for any text, with this word alignment."""
    return lambda _text: (target, pairs)


def translate(markup: str, kind: str = "html", by: Translate = upper) -> str:
    """``markup`` rendered with each unit translated by the stand-in ``by``."""
    document = Document(markup, kind)  # type: ignore[arg-type]
    translations = []
    for unit in document.units:
        target, pairs = by(unit)
        alignment = WordAlignment()
        alignment.add(unit, 0, target, 0, pairs)
        translations.append(Translation(target, alignment))
    return document.render(translations)
