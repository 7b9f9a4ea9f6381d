"""The engine runs in child processes of the service (one per stream): killing one fails one batch,
not the service."""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from httpx_sse import connect_sse
from live_server import ServiceProcess, StartService, assert_error, wait_for_metric

ROUTE = "/v1/translate"
STREAM_ROUTE = "/v1/translate/stream"
BODY = {"text": ["A dog runs.", "The boy plays."], "target_lang": "de", "beam_size": 2}


def engine_pids(server_pid: int) -> list[int]:
    """The service's engine children (not multiprocessing's resource tracker)."""
    # Children are listed under the thread that started them, which need not be the main one.
    children = [
        pid for task in Path(f"/proc/{server_pid}/task").iterdir() for pid in (task / "children").read_text().split()
    ]
    return [int(pid) for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]


def engine_pid(server_pid: int) -> int:
    engines = engine_pids(server_pid)
    assert len(engines) == 1, f"expected one engine process, found {engines}"
    return engines[0]


def test_a_killed_engine_fails_one_batch_then_the_service_recovers(start_service: StartService) -> None:
    server = start_service(cache_size=0, streams=1)  # one engine process: the one killed
    with httpx.Client(base_url=server.url, timeout=60) as client:
        expected = client.post(ROUTE, json=BODY).json()
        first = engine_pid(server.process.pid)
        os.kill(first, signal.SIGKILL)
        assert_error(client.post(ROUTE, json=BODY), 500, "internal_error")
        assert client.get("/readyz").status_code == 200
        assert client.post(ROUTE, json=BODY).json() == expected
        assert engine_pid(server.process.pid) != first
    assert server.stop() == 0, server.log()


def test_a_killed_engine_ends_a_stream_with_an_error_event(start_service: StartService) -> None:
    """Batches start only when full (8 texts), and a streamed text has at most 8 sentences queued (MT_MAX_TEXTS):
    of 10 sentences, the first 8 are translated and the other 2 wait for 6 more texts, from another request."""
    held = {"max_batch_sentences": 8, "max_wait_ms": 600_000, "max_texts": 8, "max_queue_sentences": 12}
    server = start_service(cache_size=0, streams=1, **held)
    sentences = [f"A {w} runs in the {p}." for w in ("man", "dog", "cat", "boy") for p in ("park", "street")]
    text = " ".join(sentences[:8] + sentences[:2])
    with httpx.Client(base_url=server.url, timeout=60) as client, ThreadPoolExecutor(1) as pool:
        with connect_sse(client, "POST", STREAM_ROUTE, json={"text": text, "target_lang": "de"}) as source:
            events = source.iter_sse()
            assert [next(events).event for _ in range(8)] == ["sentence"] * 8
            wait_for_metric(client, "mt_queue_depth_sentences", 2, model="mt-en-de")
            os.kill(engine_pid(server.process.pid), signal.SIGKILL)
            other = pool.submit(client.post, ROUTE, json={"text": sentences[2:8], "target_lang": "de"})
            [error] = list(events)
        assert error.event == "error" and error.json()["error"]["type"] == "internal_error"
        assert_error(other.result(), 500, "internal_error")  # the same batch
    assert server.stop() == 0, server.log()


def test_by_default_a_multicore_cpu_gets_two_engine_processes(start_service: StartService) -> None:
    """``MT_STREAMS=0`` (the default): two streams on a CPU with 2 or more cores, one otherwise."""
    server = start_service(provider="cpu")
    assert len(engine_pids(server.process.pid)) == (2 if (os.cpu_count() or 1) >= 2 else 1)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        assert client.post(ROUTE, json=BODY).status_code == 200
    assert server.stop() == 0, server.log()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_a_service_pinned_to_one_cpu_gets_one_engine_process(tiny_bundle: Path, tmp_path: Path) -> None:
    """``MT_STREAMS=0`` counts the CPUs the process may use, not the machine's."""
    server = ServiceProcess(tiny_bundle, tmp_path / "service.log", cpus={0}, provider="cpu")
    try:
        assert len(engine_pids(server.process.pid)) == 1
    finally:
        assert server.stop() == 0, server.log()
