"""``POST /v1/translate/stream`` on a real server, read with a real SSE client (httpx-sse).

The tiny model translates into nonsense, so these check structure, order and agreement with
/v1/translate, not quality. The ``held_long`` server starts a batch only when 8 texts are queued, and a
stream keeps at most MT_MAX_TEXTS (8 there) of its sentences in flight: a text of 8 + k sentences has
its first 8 translated at once and the other k held, a state reached without timing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from httpx_sse import ServerSentEvent, connect_sse
from live_server import ServiceProcess, StartService, assert_error, metric, scrape, wait_for_metric

from engine.segmenter import split_sentences

ROUTE = "/v1/translate/stream"
MODEL = "mt-en-de"  # the tiny bundle's name: the model label of its batcher's metrics
# Leading and trailing whitespace, blank lines, \r\n, a sentence with nothing to translate, two spaces after one.
TEXT = "  A dog runs in the park. The cat sits under the tree!\n\nA man walks.\r\n2.  A girl plays with a ball.  \n"
WORDS = ["man", "woman", "dog", "cat", "child", "girl", "boy"]
SENTENCES = [f"A {w} runs in the {p}." for w in WORDS for p in ["park", "street", "house"]]


def stream(client: httpx.Client, **body: Any) -> list[ServerSentEvent]:
    """Every event of a stream that starts (200)."""
    with connect_sse(client, "POST", ROUTE, json=body) as source:
        assert source.response.status_code == 200, source.response.read()
        assert source.response.headers["cache-control"] == "no-cache"
        assert source.response.headers["x-accel-buffering"] == "no"  # nginx passes each event on at once
        return list(source.iter_sse())


def translated(client: httpx.Client, **body: Any) -> dict[str, Any]:
    """/v1/translate's translation of the same body."""
    response = client.post("/v1/translate", json=body)
    assert response.status_code == 200, response.text
    return response.json()["translations"][0]


def sentences_and_done(events: list[ServerSentEvent]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    *sentences, done = events
    assert [e.event for e in sentences] == ["sentence"] * len(sentences) and done.event == "done", events
    return [e.json() for e in sentences], done.json()


def test_each_sentence_comes_in_order_then_done_with_what_v1_translate_answers(client: httpx.Client) -> None:
    before = scrape(client)
    sentences, done = sentences_and_done(stream(client, text=TEXT, target_lang="de"))
    parts = split_sentences(TEXT)
    assert [s["index"] for s in sentences] == list(range(len(parts.segments))) == list(range(5))
    assert [s["source"] for s in sentences] == [p.text for p in parts.segments]
    assert [s["separator"] for s in sentences] == parts.separators[:-1]
    assert done["separator"] == parts.separators[-1] == "  \n"
    assert "".join(s["separator"] + s["text"] for s in sentences) + done["separator"] == done["text"]
    assert done["sentences"] == len(sentences)
    whole = translated(client, text=TEXT, target_lang="de")
    assert done["text"] == whole["text"] and done["model"] == whole["model"]
    assert done["detected_language"] == whole["detected_language"] and done["detected_language"]["language"] == "en"
    assert all(s["detected_language"] == done["detected_language"] for s in sentences), "identified once, for all"
    assert all(s["model"] == done["model"] for s in sentences if s["index"] != 3)
    assert sentences[3]["text"] == "2." and "model" not in sentences[3], "nothing to translate: passed through"
    # Counted once the response has ended, which the client may see first.
    for name, labels in [("mt_requests_total", {"status": "200"}), ("mt_request_duration_seconds_count", {})]:
        wait_for_metric(client, name, metric(before, name, route=ROUTE, **labels) + 1, route=ROUTE, **labels)


def test_a_text_of_one_sentence_is_one_event_then_done(client: httpx.Client) -> None:
    [sentence], done = sentences_and_done(stream(client, text="A dog runs.", source_lang="en", target_lang="de"))
    assert (sentence["index"], sentence["source"], sentence["separator"]) == (0, "A dog runs.", "")
    assert done == {"text": sentence["text"], "separator": "", "sentences": 1, "model": sentence["model"]}


@pytest.mark.parametrize("text", ["", " ", "\n\n", " \t\r\n "])
def test_an_empty_or_blank_text_is_done_at_once_and_kept_as_it_is(client: httpx.Client, text: str) -> None:
    [done] = stream(client, text=text, target_lang="de")
    assert done.event == "done"
    assert done.json() == {"text": text, "separator": text, "sentences": 0}
    assert translated(client, text=text, target_lang="de")["text"] == text


def test_scores_alternatives_and_alignments_are_each_sentences(client: httpx.Client) -> None:
    options = {"source_lang": "en", "target_lang": "de", "beam_size": 3, "num_hypotheses": 2}
    options |= {"return_scores": True, "return_alignments": True}
    sentences, done = sentences_and_done(stream(client, text="A dog runs. A cat sits.", **options))
    for s in sentences:
        # The same fields and values as /v1/translate gives the sentence as a text (from the cache the stream filled).
        alone = translated(client, text=s["source"], **options)
        assert {k: s[k] for k in alone} == alone and {"score", "alternatives", "alignment"} <= set(alone)
    assert set(done) == {"text", "separator", "sentences", "model"}


@pytest.mark.parametrize(
    ("body", "status", "error_type"),
    [
        ({"text": "A dog.", "target_lang": "xx"}, 400, "unsupported_language"),
        ({"text": "Le chien dort sous l'arbre du jardin.", "target_lang": "de"}, 400, "unsupported_language"),
        ({"text": "A dog. " * 500, "target_lang": "de"}, 413, "payload_too_large"),  # MT_MAX_CHARS=3000
        ({"text": ["A dog.", "A cat."], "target_lang": "de"}, 422, "invalid_request"),  # one text per stream
        ({"text": "A dog."}, 422, "invalid_request"),
        ({"text": "A dog.", "target_lang": "de", "beam_size": 2, "num_hypotheses": 3}, 422, "invalid_request"),
        ({"text": "A dog.", "target_lang": "de", "timeout_s": 0.5}, 422, "invalid_request"),
        ({"text": "<p>A dog.</p>", "target_lang": "de", "format": "html"}, 422, "invalid_request"),  # whole only
    ],
    ids=["language", "identified-language", "too-long", "list", "no-target", "hypotheses", "timeout", "markup"],
)
def test_a_bad_request_is_an_http_error_not_a_stream(
    client: httpx.Client, body: dict[str, Any], status: int, error_type: str
) -> None:
    assert_error(client.post(ROUTE, json=body), status, error_type)


def test_a_body_of_lone_surrogates_or_bad_json_is_invalid(client: httpx.Client) -> None:
    assert_error(client.post(ROUTE, content=b'{"text": "\\ud800", "target_lang": "de"}'), 422, "invalid_request")
    assert_error(client.post(ROUTE, content=b'{"text": '), 422, "invalid_request")


def test_a_missing_or_wrong_key_is_401(anonymous: httpx.Client) -> None:
    body = {"text": "A dog.", "target_lang": "de"}
    assert_error(anonymous.post(ROUTE, json=body), 401, "unauthorized")
    assert_error(anonymous.post(ROUTE, json=body, headers={"Authorization": "Bearer wrong"}), 401, "unauthorized")


@pytest.fixture(scope="module")
def held_long(start_service: StartService) -> ServiceProcess:
    """conftest's ``held_server`` with the default deadline (30 s), longer than any wait below: a queue
    that drains within the test was drained by a cancellation, not by the deadline. Two engine processes
    on any machine, as there: a full batch is shared between them."""
    return start_service(
        streams=2, max_batch_sentences=8, max_wait_ms=600_000, max_queue_sentences=12, max_texts=8, cache_size=0
    )


@pytest.fixture(scope="module")
def held(held_long: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=held_long.url, timeout=60) as c:  # no key: authentication is off by default
        yield c


def held_text(n: int) -> str:
    return " ".join(SENTENCES[:n])


def test_a_text_of_more_sentences_than_the_queue_holds_goes_through_a_window_at_a_time(held: httpx.Client) -> None:
    before = scrape(held)
    sentences, done = sentences_and_done(stream(held, text=held_text(16), target_lang="de"))  # 16 > 12 queued
    assert [s["index"] for s in sentences] == list(range(16)) and done["sentences"] == 16
    after = scrape(held)
    batches, texts = (
        metric(after, name, model=MODEL) - metric(before, name, model=MODEL)
        for name in ("mt_batch_size_sentences_count", "mt_batch_size_sentences_sum")
    )
    assert (batches, texts) == (4, 16), "two full batches, each shared by the two engine processes"


def test_a_client_that_disconnects_cancels_the_sentences_left(held: httpx.Client) -> None:
    before = scrape(held)
    with connect_sse(held, "POST", ROUTE, json={"text": held_text(11), "target_lang": "de"}) as source:
        events = source.iter_sse()
        assert [next(events).json()["index"] for _ in range(8)] == list(range(8))
        wait_for_metric(held, "mt_queue_depth_sentences", 3, model=MODEL)  # the window's next 3, held
    # Closing the response closed the connection: the server saw it go and cancelled the 3, long before
    # their deadline; the stream counts as a 499.
    wait_for_metric(held, "mt_requests_total", metric(before, "mt_requests_total", route=ROUTE, status="499") + 1,
                    route=ROUTE, status="499")  # fmt: skip
    after = scrape(held)
    assert metric(after, "mt_queue_depth_sentences", model=MODEL) == 0
    assert metric(after, "mt_errors_total", type="timeout") == metric(before, "mt_errors_total", type="timeout")
    assert metric(after, "mt_requests_in_flight") == 0


def test_a_deadline_mid_stream_ends_it_with_an_error_event(held: httpx.Client) -> None:
    before = scrape(held)
    events = stream(held, text=held_text(10), target_lang="de", timeout_s=2)  # time enough for the first 8
    assert [e.event for e in events] == ["sentence"] * 8 + ["error"]
    error = events[-1].json()["error"]
    assert error["type"] == "timeout" and "within 2 s" in error["message"]
    # The 2 queued sentences are cancelled once the response has ended, which the client may see first.
    wait_for_metric(held, "mt_queue_depth_sentences", 0, model=MODEL)
    wait_for_metric(held, "mt_requests_total", metric(before, "mt_requests_total", route=ROUTE, status="200") + 1,
                    route=ROUTE, status="200")  # fmt: skip
    timeouts = metric(scrape(held), "mt_errors_total", type="timeout")
    assert timeouts == metric(before, "mt_errors_total", type="timeout") + 1


def test_a_deadline_before_the_first_sentence_is_a_504(held: httpx.Client) -> None:
    response = held.post(ROUTE, json={"text": held_text(2), "target_lang": "de", "timeout_s": 1})
    assert "within 1 s" in assert_error(response, 504, "timeout")["message"]
    wait_for_metric(held, "mt_queue_depth_sentences", 0, model=MODEL)


def test_a_full_queue_before_the_first_sentence_is_a_429(held: httpx.Client, held_long: ServiceProcess) -> None:
    with ThreadPoolExecutor(1) as pool:
        body = {"text": SENTENCES[:6], "source_lang": "en", "target_lang": "de"}
        waiting = pool.submit(httpx.post, f"{held_long.url}/v1/translate", json=body, timeout=60)
        wait_for_metric(held, "mt_queue_depth_sentences", 6, model=MODEL)
        # 6 + 8 > MT_MAX_QUEUE_SENTENCES=12: the stream's 7th and 8th sentences are refused at once.
        refused = held.post(ROUTE, json={"text": held_text(8), "target_lang": "de"})
        assert_error(refused, 429, "overloaded")
        assert int(refused.headers["Retry-After"]) >= 1
        # Its first 6 filled the queue to 12, so a batch ran: the waiting request's 6 and the stream's first 2.
        assert waiting.result().status_code == 200
    # The refused stream took its other 4 back from the queue.
    wait_for_metric(held, "mt_queue_depth_sentences", 0, model=MODEL)


def test_the_wire_format_is_one_event_and_one_line_of_json_data_each(client: httpx.Client) -> None:
    body = {"text": "A dog runs.\nA cat sits.", "source_lang": "en", "target_lang": "de"}
    with client.stream("POST", ROUTE, json=body) as response:
        raw = response.read().decode()
    blocks = [block for block in raw.split("\n\n") if block and not block.startswith(":")]
    assert [block.splitlines()[0] for block in blocks] == ["event: sentence", "event: sentence", "event: done"]
    assert all(len(block.splitlines()) == 2 for block in blocks)
    assert json.loads(blocks[1].splitlines()[1].removeprefix("data: "))["separator"] == "\n"
