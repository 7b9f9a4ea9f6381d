"""Dynamic batching, overload, deadlines and disconnects on a real server.

The ``held_server`` starts a batch only when 8 texts are queued (its max wait is longer than any
test), so every queue state below is reached deterministically rather than by timing; its two engine
processes share each full batch.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import httpx
import pytest
from live_server import ServiceProcess, assert_error, metric, scrape, wait_for_metric

WORDS = ["man", "woman", "dog", "cat", "child", "girl", "boy"]
PLACES = ["park", "street", "house", "water", "tree"]
SENTENCES = [f"A {w} runs in the {p}." for w in WORDS for p in PLACES][:16]
ROUTE = "/v1/translate"
MODEL = "mt-en-de"  # the tiny bundle's name: the model label of its batcher's metrics


@pytest.fixture(scope="module")
def held(held_server: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=held_server.url, timeout=60) as c:  # no key: authentication is off by default
        yield c


def texts_body(texts: list[str], **options: object) -> dict[str, object]:
    return {"text": texts, "source_lang": "en", "target_lang": "de", **options}


async def concurrently(url: str, bodies: list[dict[str, object]]) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=url, timeout=60) as c:
        return await asyncio.gather(*(c.post(ROUTE, json=b) for b in bodies))


def test_concurrent_requests_are_merged_and_match_sequential_results(
    client: httpx.Client, held: httpx.Client, held_server: ServiceProcess
) -> None:
    sequential = [client.post(ROUTE, json=texts_body([s])).json()["translations"][0]["text"] for s in SENTENCES]
    before = scrape(held)
    merged = []
    for start in (0, 8):  # two rounds of 8 single-text requests: each fills one batch, shared by the 2 engines
        responses = asyncio.run(concurrently(held_server.url, [texts_body([s]) for s in SENTENCES[start : start + 8]]))
        assert [r.status_code for r in responses] == [200] * 8
        merged += [r.json()["translations"][0]["text"] for r in responses]
    assert merged == sequential
    after = scrape(held)
    batches, sentences = (
        metric(after, name, model=MODEL) - metric(before, name, model=MODEL)
        for name in ("mt_batch_size_sentences_count", "mt_batch_size_sentences_sum")
    )
    assert (batches, sentences) == (4, 16)  # mean batch size 4, from 16 requests


def test_overload_gives_429_at_once_and_the_deadline_504(held: httpx.Client, held_server: ServiceProcess) -> None:
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(httpx.post, f"{held_server.url}{ROUTE}", json=texts_body(SENTENCES[:6]), timeout=60)
        wait_for_metric(held, "mt_queue_depth_sentences", 6, model=MODEL)
        refused = held.post(ROUTE, json=texts_body(SENTENCES[6:13]))  # 6 + 7 > MT_MAX_QUEUE_SENTENCES=12
        assert_error(refused, 429, "overloaded")
        assert int(refused.headers["Retry-After"]) >= 1
        # The batch never fills, so the waiting request meets MT_REQUEST_TIMEOUT_S and its texts leave the queue.
        assert_error(waiting.result(), 504, "timeout")
    wait_for_metric(held, "mt_queue_depth_sentences", 0, model=MODEL)
    assert held.post(ROUTE, json=texts_body(SENTENCES[:7], timeout_s=1)).status_code == 504  # admitted again


def test_a_smaller_per_request_timeout_applies(held: httpx.Client) -> None:
    error = assert_error(held.post(ROUTE, json=texts_body(SENTENCES[:2], timeout_s=1)), 504, "timeout")
    assert "within 1 s" in error["message"]
    wait_for_metric(held, "mt_queue_depth_sentences", 0, model=MODEL)


def test_client_disconnect_drops_queued_work(held: httpx.Client) -> None:
    disconnects = metric(scrape(held), "mt_requests_total", route=ROUTE, status="499")
    with pytest.raises(httpx.ReadTimeout):
        held.post(ROUTE, json=texts_body(SENTENCES[:3]), timeout=0.5)
    # Counted as 499 (not 504): the server noticed the disconnect before the 3 s deadline.
    wait_for_metric(held, "mt_requests_total", disconnects + 1, route=ROUTE, status="499")
    assert metric(scrape(held), "mt_queue_depth_sentences", model=MODEL) == 0


def send_half_a_body(url: str, path: str, content_type: str, body: bytes) -> None:
    """A request whose client closes the connection halfway through sending its body."""
    parts = urlsplit(url)
    head = f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: {content_type}\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    with socket.create_connection((parts.hostname, parts.port)) as sock:
        sock.sendall(head.encode() + body[: len(body) // 2])


@pytest.mark.parametrize(
    ("path", "content_type", "body"),
    [
        (ROUTE, "application/json", b'{"text": "A dog runs in the park.", "target_lang": "de"}'),
        ("/translate", "application/json", b'{"q": "A dog runs in the park.", "target": "de"}'),
        ("/translate", "application/x-www-form-urlencoded", b"q=A+dog+runs+in+the+park.&target=de"),
        ("/v1/detect", "application/json", b'{"text": "A dog runs in the park."}'),
        ("/detect", "application/json", b'{"q": "A dog runs in the park."}'),
    ],
    ids=["translate", "libretranslate-json", "libretranslate-form", "detect", "libretranslate-detect"],
)
def test_a_client_gone_while_sending_its_body_is_a_499_not_a_crash(
    held: httpx.Client, held_server: ServiceProcess, path: str, content_type: str, body: bytes
) -> None:
    before = scrape(held)
    send_half_a_body(held_server.url, path, content_type, body)
    wait_for_metric(held, "mt_requests_total", metric(before, "mt_requests_total", route=path, status="499") + 1,
                    route=path, status="499")  # fmt: skip
    after = scrape(held)
    for status in ("400", "500"):  # FastAPI's own answer to an unreadable body is a 400
        assert metric(after, "mt_requests_total", route=path, status=status) == metric(
            before, "mt_requests_total", route=path, status=status
        )
    assert "Traceback" not in held_server.log()
