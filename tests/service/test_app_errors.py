"""Every error path of the API, and strange input that must never produce a 5xx."""

from __future__ import annotations

import json
import random

import httpx
import pytest
from live_server import API_KEYS, assert_error, assert_libretranslate_error

OK = {"text": "A dog runs.", "target_lang": "de"}


@pytest.mark.parametrize(
    "body",
    [
        {"text": "A dog."},  # no target_lang
        {"target_lang": "de"},  # no text
        {**OK, "text": 5},
        {**OK, "text": ["ok", 5]},
        {**OK, "text": {"a": "b"}},
        {**OK, "text": []},
        {**OK, "text": None},
        {**OK, "beam_size": 0},
        {**OK, "beam_size": 17},
        {**OK, "beam_size": "many"},
        {**OK, "beam_size": "4"},  # types are JSON's (as the OpenAPI schema says): no coercion
        {**OK, "beam_size": True},
        {**OK, "beam_size": 2.5},
        {**OK, "return_scores": 1},
        {**OK, "beam_size": 2, "num_hypotheses": 3},
        {**OK, "num_hypotheses": 0},
        {**OK, "length_penalty": -1},
        {**OK, "max_length": 0},
        {**OK, "max_length": 10**9},
        {**OK, "timeout_s": -1},
        {**OK, "timeout_s": 0.99},
        {**OK, "timeout_s": 5e-324},
        {**OK, "return_scores": "perhaps"},
        {**OK, "target_lang": ""},
        {**OK, "target_lang": "x" * 100},
        {**OK, "unknown_field": 1},
        ["not", "an", "object"],
        "just a string",
    ],
)
def test_invalid_fields_give_422(client: httpx.Client, body: object) -> None:
    assert_error(client.post("/v1/translate", json=body), 422, "invalid_request")


@pytest.mark.parametrize(
    "raw",
    [
        b'{"text": "a", "target_lang": "de"',  # truncated
        b"{'text': 'a'}",
        b"",
        b'{"text": "a", "target_lang": "de", "length_penalty": NaN}',  # Python's json accepts NaN
        b'{"text": "\\ud800", "target_lang": "de"}',  # lone surrogate
        b'{"text": "\xff\xfe", "target_lang": "de"}',  # not UTF-8
        b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",  # too deep for any parser
    ],
)
def test_malformed_json_gives_422(client: httpx.Client, raw: bytes) -> None:
    response = client.post("/v1/translate", content=raw, headers={"Content-Type": "application/json"})
    error = assert_error(response, 422, "invalid_request")
    assert len(error["message"]) < 200, "the message names the problem without echoing the input"


def test_malformed_json_message_says_where(client: httpx.Client) -> None:
    response = client.post("/v1/translate", content=b'{"text": "a", "target_lang": "de"')
    error = assert_error(response, 422, "invalid_request")
    assert error["message"].startswith("malformed JSON: ") and "line 1 column 33" in error["message"]


def test_non_json_body_gives_422(client: httpx.Client) -> None:
    assert_error(client.post("/v1/translate", data={"text": "a", "target_lang": "de"}), 422, "invalid_request")


def test_too_many_texts_or_characters_give_413(client: httpx.Client) -> None:
    error = assert_error(client.post("/v1/translate", json={**OK, "text": ["a"] * 17}), 413, "payload_too_large")
    assert "17 texts" in error["message"]
    error = assert_error(client.post("/v1/translate", json={**OK, "text": "a" * 3001}), 413, "payload_too_large")
    assert "3001 characters" in error["message"]
    assert client.post("/v1/translate", json={**OK, "text": ["a"] * 16}).status_code == 200


def test_oversized_body_gives_413_before_it_is_read(client: httpx.Client) -> None:
    big = json.dumps({**OK, "text": "a" * (2 << 20)}).encode()
    assert_error(client.post("/v1/translate", content=big), 413, "payload_too_large")

    def chunks():  # no Content-Length: the limit applies while the body streams in
        for i in range(0, len(big), 1 << 16):
            yield big[i : i + (1 << 16)]

    response = client.post("/v1/translate", content=chunks(), headers={"Content-Type": "application/json"})
    assert_error(response, 413, "payload_too_large")

    def form():  # LibreTranslate's form body, streamed: 413 too, not a malformed form
        yield b"target=de&q="
        for _ in range(40):
            yield b"a" * (1 << 16)

    form_type = {"Content-Type": "application/x-www-form-urlencoded"}
    assert_libretranslate_error(client.post("/translate", content=form(), headers=form_type), 413)


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        ("en", "fr", "unsupported target language 'fr'; served: de"),
        ("de", "de", "unsupported source language 'de'; served: en"),
        ("fr", "de", "unsupported source language 'fr'; served: en"),
        (None, "fr", "unsupported target language 'fr'; served: de"),  # identified as English
    ],
)
def test_unsupported_language_pair_gives_400(
    client: httpx.Client, source: str | None, target: str, message: str
) -> None:
    body = {"text": "A dog.", "target_lang": target} | ({"source_lang": source} if source else {})
    error = assert_error(client.post("/v1/translate", json=body), 400, "unsupported_language")
    assert error["message"] == message
    assert error["supported_pairs"] == ["en-de"]


@pytest.mark.parametrize("source", [None, "en", "de"])
def test_languages_are_checked_when_no_text_needs_a_model(client: httpx.Client, source: str | None) -> None:
    body = {"text": ["", "42 %"], "target_lang": "fr"} | ({"source_lang": source} if source else {})
    assert_error(client.post("/v1/translate", json=body), 400, "unsupported_language")


def test_an_integral_number_is_an_integer(client: httpx.Client) -> None:
    response = client.post("/v1/translate", json={**OK, "beam_size": 2.0, "num_hypotheses": 2.0})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {API_KEYS[0]}"}, {"Authorization": "Bearer"}],
)
def test_missing_or_wrong_key_gives_401(anonymous: httpx.Client, headers: dict[str, str]) -> None:
    paths = ("/v1/translate", OK), ("/v1/detect", {"text": "A dog runs."}), ("/v1/translate/stream", OK)
    for path, body in paths:
        # an invalid body too: what is wrong with it is said only to those with a key
        for sent in (body, {**body, "beam_size": "many"}):
            response = anonymous.post(path, json=sent, headers=headers)
            assert_error(response, 401, "unauthorized")
            assert response.headers["WWW-Authenticate"] == "Bearer"


def test_detection_works_with_a_key(client: httpx.Client) -> None:
    assert client.post("/v1/detect", json={"text": "A dog runs in the park."}).json()["language"] == "en"


def test_every_configured_key_works_and_operations_stay_open(anonymous: httpx.Client) -> None:
    for key in API_KEYS:
        response = anonymous.post("/v1/translate", json=OK, headers={"Authorization": f"Bearer {key}"})
        assert response.status_code == 200
    for path in ("/healthz", "/readyz", "/metrics", "/v1/models", "/languages", "/openapi.json"):
        assert anonymous.get(path).status_code == 200, path


def test_head_is_get_without_the_body(client: httpx.Client) -> None:
    for path in ("/healthz", "/readyz", "/metrics", "/languages", "/v1/models", "/"):
        got, head = client.get(path), client.head(path)
        assert head.status_code == got.status_code == 200, path
        assert head.content == b"" and head.headers["content-type"] == got.headers["content-type"], path
    assert client.head("/v1/translate").status_code == 405  # POST only, as for GET
    assert client.head("/nowhere").status_code == 404


def test_unknown_route_and_method_use_the_error_shape(client: httpx.Client) -> None:
    assert_error(client.get("/nowhere"), 404, "not_found")
    assert_error(client.get("/v1/translate"), 405, "method_not_allowed")


WEIRD_TEXTS = {
    "control": "\x00\x01\x02 control \x7f chars \x1b[31m",
    "cr-tab": "tab\tseparated\tand\rcarriage\r\nreturns",
    "invisible": "\u200b\u200d\ufeff zero-width \u2028 line \u2029 separators",
    "emoji": "😀" * 500,
    "cjk": "漢字かなカナ한국어" * 60,
    "combining": "e\u0301" * 400,
    "rtl": "مرحبا بالعالم " * 10 + "שלום",
    "long-word": "a" * 800,
    "punctuation": ". . . ! ? ; , :" * 10,
    "newlines": "\n\n\n",
    "many-lines": "A dog.\n" * 40,
    "compatibility": "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕄𝕒𝕥𝕙 ﬁ ﬂ Ⅻ ㎒",
}


@pytest.mark.parametrize("text", WEIRD_TEXTS.values(), ids=WEIRD_TEXTS.keys())
def test_weird_text_is_translated_not_crashed(client: httpx.Client, text: str) -> None:
    greedy = {
        **OK,
        "source_lang": "en",
        "beam_size": 1,
    }  # greedy keeps the long inputs quick; beam search is covered elsewhere
    response = client.post("/v1/translate", json={**greedy, "text": [text, "A cat sits."], "return_alignments": True})
    assert response.status_code == 200, response.text
    translations = response.json()["translations"]
    assert len(translations) == 2
    alone = client.post("/v1/translate", json={**greedy, "text": "A cat sits."}).json()["translations"][0]["text"]
    assert translations[1]["text"] == alone  # a strange neighbour does not change another text's translation


def random_value(rng: random.Random, depth: int = 0) -> object:
    choices = [
        None,
        True,
        rng.randint(-(10**12), 10**12),
        rng.random() * 10 ** rng.randint(-5, 5),
        "".join(chr(rng.randint(0, 0x2FFFF)) for _ in range(rng.randint(0, 12))),  # surrogates included
        "de",
        "en",
    ]
    if depth < 2:
        choices += [
            [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))],
            {"k": random_value(rng, depth + 1)},
        ]
    return rng.choice(choices)


def test_fuzzed_requests_never_produce_5xx(client: httpx.Client) -> None:
    rng = random.Random(7)
    fields = ["text", "source_lang", "target_lang", "beam_size", "num_hypotheses", "length_penalty", "max_length"]
    fields += ["return_scores", "return_alignments", "timeout_s"]
    statuses = set()
    for _ in range(80):
        body = {f: random_value(rng) for f in rng.sample(fields, rng.randint(0, len(fields)))}
        if rng.random() < 0.5:
            body |= {"text": random_value(rng), "target_lang": "de"}
        response = client.post("/v1/translate", content=json.dumps(body), headers={"Content-Type": "application/json"})
        assert response.status_code < 500, (body, response.text)
        statuses.add(response.status_code)
    assert 422 in statuses
    assert client.get("/healthz").status_code == 200
