"""What every translated markup text must keep, read with lxml (a parser independent of ours)."""

from __future__ import annotations

from collections import Counter

from lxml import etree, html

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
