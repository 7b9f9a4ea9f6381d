"""``POST /v1/translate/stream`` against /v1/translate on a real server: the done event's text is
what /v1/translate answers, also where sentences touch in the text (no whitespace between them, as
after Chinese and Japanese full stops), and the glossary terms' spans point into it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse

ROUTE = "/v1/translate/stream"
# Sentences that end with "。", "！" and "？" and the next one after it without a space.
TOUCHING = "A dog runs in the park.。A cat sleeps！Two men walk？A girl plays."
BODY = {"source_lang": "en", "target_lang": "de"}


def stream(client: httpx.Client, **body: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The sentence events' data and the done event's."""
    with connect_sse(client, "POST", ROUTE, json={**BODY, **body}) as source:
        assert source.response.status_code == 200, source.response.read()
        *sentences, done = list(source.iter_sse())
    assert [e.event for e in sentences] == ["sentence"] * len(sentences) and done.event == "done"
    return [e.json() for e in sentences], done.json()


def translated(client: httpx.Client, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/translate", json={**BODY, **body})
    assert response.status_code == 200, response.text
    return response.json()["translations"][0]


@pytest.mark.parametrize("options", [{}, {"max_length": 2}], ids=["sentences", "short translations"])
def test_sentences_that_touch_join_as_v1_translate_joins_them(client: httpx.Client, options: dict[str, Any]) -> None:
    sentences, done = stream(client, text=TOUCHING, **options)
    assert [s["source"] for s in sentences] == [
        "A dog runs in the park.。",
        "A cat sleeps！",
        "Two men walk？",
        "A girl plays.",
    ]
    assert "".join(s["separator"] + s["text"] for s in sentences) + done["separator"] == done["text"]
    assert done["text"] == translated(client, text=TOUCHING, **options)["text"]


def test_glossary_spans_point_into_the_joined_translation(client: httpx.Client) -> None:
    text = "A dog runs.。The dog sits！A dog sleeps."
    glossary = {"entries": [{"source": "dog", "target": "katze"}]}
    _, done = stream(client, text=text, glossary=glossary)
    assert done["text"] == translated(client, text=text, glossary=glossary)["text"]
    assert [term["source_span"] for term in done["glossary_terms"]] == [[2, 5], [16, 19], [27, 30]]
    for term in done["glossary_terms"]:
        start, end = term["source_span"]
        assert text[start:end] == "dog"
        if term["used"]:
            start, end = term["target_span"]
            assert done["text"][start:end] == "katze", done
