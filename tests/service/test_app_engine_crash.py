"""The engine runs in child processes of the service (one per stream): killing one fails no
request; it is replaced at once and its batch is tried again."""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from httpx_sse import connect_sse
from live_server import ServiceProcess, StartService, wait_for_metric

from service.documents import DOCUMENT_PROCESS_NAME

ROUTE = "/v1/translate"
STREAM_ROUTE = "/v1/translate/stream"
BODY = {"text": ["A dog runs.", "The boy plays."], "target_lang": "de", "beam_size": 2}


def engine_pids(server_pid: int) -> list[int]:
    """The service's engine children: not multiprocessing's resource tracker, nor the document
    process, which multiprocessing's spawn starts with the same command line (it has its own name)."""
    return [pid for pid in spawned_pids(server_pid) if process_name(pid) != DOCUMENT_PROCESS_NAME]


def document_pids(server_pid: int) -> list[int]:
    """The service's document process, once a document has started it."""
    return [pid for pid in spawned_pids(server_pid) if process_name(pid) == DOCUMENT_PROCESS_NAME]


def spawned_pids(server_pid: int) -> list[int]:
    # Children are listed under the thread that started them, which need not be the main one.
    children = [
        pid for task in Path(f"/proc/{server_pid}/task").iterdir() for pid in (task / "children").read_text().split()
    ]
    return [int(pid) for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]


def process_name(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def engine_pid(server_pid: int) -> int:
    engines = engine_pids(server_pid)
    assert len(engines) == 1, f"expected one engine process, found {engines}"
    return engines[0]


def test_a_killed_idle_engine_costs_no_request(start_service: StartService) -> None:
    server = start_service(cache_size=0, streams=1)  # one engine process: the one killed
    with httpx.Client(base_url=server.url, timeout=60) as client:
        expected = client.post(ROUTE, json=BODY).json()
        first = engine_pid(server.process.pid)
        os.kill(first, signal.SIGKILL)
        assert client.post(ROUTE, json=BODY).json() == expected
        assert client.get("/readyz").status_code == 200
        assert engine_pid(server.process.pid) != first
    assert server.stop() == 0, server.log()


def test_an_engine_killed_under_load_fails_no_request(start_service: StartService) -> None:
    """Two engine processes, four clients sending back to back; one engine is killed halfway: its
    batch is tried again on the other, and every request is answered 200 with its translation."""
    server = start_service(cache_size=0, streams=2)
    sentences = [f"A {w} runs in the {p}." for w in ("man", "dog", "cat", "boy") for p in ("park", "street")]
    with httpx.Client(base_url=server.url, timeout=60) as client:
        assert_killed_engine_loses_nothing(client, server, [{"text": s, "target_lang": "de"} for s in sentences] * 12)
    assert server.stop() == 0, server.log()


def assert_killed_engine_loses_nothing(client: httpx.Client, server: ServiceProcess, bodies: list[dict]) -> None:
    """``bodies`` sent to /v1/translate by four clients back to back while one engine process is
    killed: every one answered 200 with what it gets alone, and the process replaced."""
    expected = {repr(b): client.post(ROUTE, json=b).json()["translations"] for b in bodies}

    with ThreadPoolExecutor(4) as pool:
        answers = pool.map(lambda body: (body, client.post(ROUTE, json=body)), bodies)
        killed = engine_pids(server.process.pid)[0]
        os.kill(killed, signal.SIGKILL)
        answers = list(answers)
    assert [r.status_code for _, r in answers] == [200] * len(answers)
    assert all(r.json()["translations"] == expected[repr(b)] for b, r in answers)
    assert killed not in engine_pids(server.process.pid)


def test_an_engine_killed_under_a_stream_costs_it_no_sentence(start_service: StartService) -> None:
    """Batches start only when full (8 texts), and a streamed text has at most 8 sentences queued (MT_MAX_TEXTS):
    of 10 sentences, the first 8 are translated and the other 2 wait for 6 more texts, from another request,
    which arrive after the engine was killed."""
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
            assert [event.event for event in events] == ["sentence", "sentence", "done"]
        assert other.result().status_code == 200
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
