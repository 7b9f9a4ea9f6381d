"""The service with its engine processes decoding in row pools (``MT_ROW_POOL=true``), on a real
server: concurrent requests merged into shared pools get what the rectangle engine gives them, a
request cut off by its deadline leaves the pool serving the next, and a killed engine process is
replaced with its requests tried again."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from live_server import ServiceProcess, StartService
from test_app_batching import concurrently, texts_body
from test_app_engine_crash import assert_killed_engine_loses_nothing

SENTENCES = [
    f"A {w} runs in the {p} with a {o}." for w in ("man", "dog", "girl") for p in ("park", "street") for o in "ab"
]
ROUTE = "/v1/translate"  # as test_app_batching's helpers send


@pytest.fixture(scope="module")
def pooled_server(start_service: StartService) -> ServiceProcess:
    return start_service(row_pool=True, streams=2, max_wait_ms=2)


@pytest.fixture(scope="module")
def pooled(pooled_server: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=pooled_server.url, timeout=60) as c:
        yield c


def test_concurrent_requests_in_the_pools_get_the_rectangle_engines_translations(
    client: httpx.Client, pooled_server: ServiceProcess
) -> None:
    expected = [client.post(ROUTE, json=texts_body([s])).json()["translations"][0]["text"] for s in SENTENCES]
    bodies = [texts_body([s], beam_size=4) for s in SENTENCES] + [texts_body(SENTENCES, num_hypotheses=2, beam_size=4)]
    responses = asyncio.run(concurrently(pooled_server.url, bodies))
    assert [r.status_code for r in responses] == [200] * len(bodies)
    assert [r.json()["translations"][0]["text"] for r in responses[:-1]] == expected
    assert [t["text"] for t in responses[-1].json()["translations"]] == expected


def test_a_request_past_its_deadline_leaves_the_pool_serving(start_service: StartService) -> None:
    """A deadline of 0.1 s: a request of 16 long texts at beam 8 (0.2 s of decoding alone) is cut
    off with its rows, and the pool goes on serving short requests."""
    server = start_service(row_pool=True, streams=1, request_timeout_s=0.1)
    long = " ".join(["a man runs in the park with a dog and a cat and a red ball"] * 19)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        slow = client.post(ROUTE, json=texts_body([long] * 16, beam_size=8, max_consecutive_repeats=0))
        assert slow.status_code == 504, slow.text
        answered = [client.post(ROUTE, json=texts_body([SENTENCES[0]])).status_code for _ in range(10)]
    assert 200 in answered, answered


def test_an_engine_process_killed_under_load_fails_no_request(
    pooled: httpx.Client, pooled_server: ServiceProcess
) -> None:
    """Killed while its pool decodes: its batches are tried again on the other, none is lost."""
    assert_killed_engine_loses_nothing(pooled, pooled_server, [texts_body([s]) for s in SENTENCES] * 6)


def test_the_pool_at_fixed_shapes_serves_the_rectangle_engines_translations(
    client: httpx.Client, start_service: StartService
) -> None:
    """``MT_CUDA_GRAPHS`` (on the CPU: the pool's step at fixed shapes, nothing to capture):
    concurrent requests get what the rectangle engine gives them."""
    server = start_service(row_pool=True, cuda_graphs=True, streams=1, max_wait_ms=2)
    expected = [client.post(ROUTE, json=texts_body([s])).json()["translations"][0]["text"] for s in SENTENCES]
    responses = asyncio.run(concurrently(server.url, [texts_body([s], beam_size=4) for s in SENTENCES]))
    assert [r.status_code for r in responses] == [200] * len(SENTENCES)
    assert [r.json()["translations"][0]["text"] for r in responses] == expected
