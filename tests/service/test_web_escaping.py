"""The web page in a real browser shows whatever a translation holds as text, never as markup.

A model can write anything, ``<script>`` and quotes included (and a glossary term is whatever its
author typed), so the page is given /v1/translate's real answer with every string that it shows
replaced by hostile markup: the translation, its alternatives, the alignment's words and the
glossary terms. None of it may become an element or run a script.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from live_server import ServiceProcess
from playwright.sync_api import Route, expect
from test_web_browser import TEXT, OpenPage, browser, open_page, service  # noqa: F401 (fixtures)

HOSTILE = '<img src=x onerror="window.hacked=1"><script>window.hacked=2</script>"\'&amp;'


def hostile(i: int) -> str:
    return f"{HOSTILE}{i}"


def poisoned(translation: dict[str, Any], *, with_terms: bool) -> dict[str, Any]:
    """``translation`` with every string the page shows as hostile markup; ``with_terms``: and a
    glossary term used over all of its text (the page marks terms up: another way to show it)."""
    alignment = translation["alignment"]
    for side in ("source", "target"):
        alignment[f"{side}_words"] = [hostile(i) for i, _ in enumerate(alignment[f"{side}_words"])]
        alignment[f"{side}_tokens"] = [hostile(i) for i, _ in enumerate(alignment[f"{side}_tokens"])]
    text = hostile(0)
    term = {"source": "dog", "target": text, "source_span": [2, 5], "target_span": [0, len(text)], "used": True}
    terms = {"glossary_terms": [term]} if with_terms else {}
    return {**translation, "text": text, "alternatives": [{"text": hostile(1), "score": -1.0}], **terms}


@pytest.mark.parametrize("with_terms", [False, True], ids=["plain", "glossary terms"])
def test_hostile_translations_are_shown_as_text(
    service: ServiceProcess,  # noqa: F811
    open_page: OpenPage,  # noqa: F811
    with_terms: bool,
) -> None:
    page = open_page(service.url)

    def answer(route: Route) -> None:
        body = route.fetch().json()
        body["translations"] = [poisoned(t, with_terms=with_terms) for t in body["translations"]]
        route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    page.page.route("**/v1/translate", answer)
    page.choose("en", "de")
    page.translate(TEXT)
    expect(page.output).to_have_text(hostile(0))
    expect(page.page.locator("#alternative-list button")).to_have_text([hostile(0), hostile(1)])
    expect(page.page.locator(".word.target").first).to_have_text(hostile(0))
    page.page.locator(".word.target").first.hover()
    assert page.page.locator("main img, main script, output *:not(mark)").count() == 0
    assert page.page.evaluate("window.hacked") is None
