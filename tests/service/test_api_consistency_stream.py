"""The stream's ``done`` text against /v1/translate's on a real server, for texts that mix CJK full
stops, closing brackets, emoji, numbers and addresses touching their neighbours: both translate the
same units (``engine.segmenter.split_units``: sentences, and the symbols at their edges apart) and
join them by the same code."""

from __future__ import annotations

import random
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse

BODY = {"source_lang": "en", "target_lang": "de"}
PIECES = [
    "A dog runs.", "Two men walk", "a cat sleeps", "Ein Hund.", "。", "！", "？", "」", "』", "「", "😀", "👍🏽", "✅",
    "42", "3.14", "(", ")", "«", "»", " ", " ", "\n", ".", "?", "https://example.org/a",
]  # fmt: skip


def done_text(client: httpx.Client, text: str) -> str:
    with connect_sse(client, "POST", "/v1/translate/stream", json={**BODY, "text": text}) as source:
        assert source.response.status_code == 200, source.response.read()
        *sentences, done = list(source.iter_sse())
    assert done.event == "done", done.data
    data: dict[str, Any] = done.json()
    assert "".join(s.json()["separator"] + s.json()["text"] for s in sentences) + data["separator"] == data["text"]
    return str(data["text"])


def translated(client: httpx.Client, text: str) -> str:
    response = client.post("/v1/translate", json={**BODY, "text": text})
    assert response.status_code == 200, response.text
    return str(response.json()["translations"][0]["text"])


@pytest.mark.parametrize(
    "text",
    [
        ")！😀👍🏽✅A cat sleeps",  # a sentence of symbols, then symbols at the next one's start
        "A dog runs.Two men walk。』Two men walk",  # "。』" closing a sentence that the stream splits alone
        "A dog runs。😀😀A cat sleeps.😀",
        "「A dog runs。」✅Two men walk！",
    ],
)
def test_the_stream_joins_symbols_as_v1_translate(client: httpx.Client, text: str) -> None:
    assert done_text(client, text) == translated(client, text)


def test_random_texts_stream_as_v1_translate_answers_them(client: httpx.Client) -> None:
    rng = random.Random(5)
    for _ in range(120):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 9)))
        if text.strip():
            assert done_text(client, text) == translated(client, text), repr(text)
