"""The document process (``service.documents.DocumentProcess``) against real servers: a client that
hangs up stops the work of its document, in the document process as in the batcher; a document
process killed between requests costs no request, and one killed under a request fails that request
alone, with a 500 that says so."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import socket
import time
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import docx
import httpx
import pytest
from live_server import ServiceProcess, StartService, assert_error, metric, scrape, wait_for_metric
from test_app_engine_crash import document_pids, engine_pid

from service.documents import HEAVY_LANE_NICENESS

ROUTE = "/v1/translate_file"
MODEL = "mt-en-de"  # the tiny bundle's name: the model label of its metrics
# Paragraphs of a document that takes the document process seconds to read (2.3 s on a 2-core Xeon).
LONG = 60_000
PARAGRAPH = (
    b"<w:p><w:r><w:rPr><w:b/></w:rPr><w:t>A dog runs</w:t></w:r>"
    b'<w:r><w:t xml:space="preserve"> in the park.</w:t></w:r></w:p>'
)


@pytest.fixture(scope="module")
def lone(start_service: StartService) -> ServiceProcess:
    """A server of its own: its document process is killed."""
    return start_service(streams=1, cache_size=0)


@pytest.fixture(scope="module")
def client(lone: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=lone.url, timeout=120) as c:
        yield c


def word_file(paragraphs: int = 0) -> bytes:
    """A .docx of one sentence and ``paragraphs`` more, written straight into its XML: python-docx
    takes minutes to add tens of thousands."""
    document = docx.Document()
    document.add_paragraph("A cat sits on the red car.")
    out = io.BytesIO()
    document.save(out)
    if not paragraphs:
        return out.getvalue()
    original = zipfile.ZipFile(out)
    head, tail = original.read("word/document.xml").split(b"<w:body>")
    body = head + b"<w:body>" + PARAGRAPH * paragraphs + tail
    longer = io.BytesIO()
    with zipfile.ZipFile(longer, "w", zipfile.ZIP_DEFLATED) as z:
        for info in original.infolist():
            z.writestr(info, body if info.filename == "word/document.xml" else original.read(info))
    return longer.getvalue()


def paragraphs(response: httpx.Response) -> list[str]:
    """The translated .docx's paragraphs: its bytes differ from one second to the next (the zip's
    timestamps)."""
    assert response.status_code == 200, response.text
    return [p.text for p in docx.Document(io.BytesIO(response.content)).paragraphs]


def upload(client: httpx.Client, data: bytes) -> httpx.Response:
    return client.post(ROUTE, files={"file": ("report.docx", data)}, data={"source_lang": "en", "target_lang": "de"})


@contextmanager
def sent(server: ServiceProcess, data: bytes, filename: str = "report.docx") -> Iterator[None]:
    """An upload of ``data`` whose client hangs up (closes the connection) when the block ends."""
    form = {"source_lang": "en", "target_lang": "de"}
    request = httpx.Request("POST", server.url + ROUTE, files={"file": (filename, data)}, data=form)
    body = request.read()
    head = f"POST {ROUTE} HTTP/1.1\r\nHost: x\r\nContent-Type: {request.headers['content-type']}\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    with socket.create_connection((request.url.host, server.port)) as sock:
        sock.sendall(head.encode() + body)
        yield


def cpu_ticks(pid: int) -> int:
    """The process's user and system CPU time so far, in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def wait_until_busy(pid: int) -> None:
    """Poll until the process uses CPU: it has started on the document (a state, not a duration)."""
    idle = cpu_ticks(pid)
    for _ in range(1000):
        if cpu_ticks(pid) > idle + 1:
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never started on the document")


def wait_until_gone(pid: int) -> None:
    """Poll until the process has exited (a state, not a duration: bounded polls)."""
    for _ in range(300):
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return
        except FileNotFoundError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} still runs")


def document_pid(server: ServiceProcess) -> int:
    pids = document_pids(server.process.pid)
    assert len(pids) == 1, f"expected one document process, found {pids}"
    return pids[0]


def test_the_document_process_is_told_from_the_engine_process(lone: ServiceProcess, client: httpx.Client) -> None:
    assert upload(client, word_file()).status_code == 200
    assert document_pid(lone) != engine_pid(lone.process.pid)


def niceness(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def test_the_heavy_lanes_process_yields_the_cpu_to_the_rest_of_the_service(start_service: StartService) -> None:
    """On a full machine, reading one key's large files must not take the CPU that the HTTP process
    and the light lane (another key's one-line file) need."""
    server = start_service(streams=1, cache_size=0)
    with httpx.Client(base_url=server.url, timeout=120) as client:
        assert upload(client, word_file()).status_code == 200
        heavy = document_pid(server)
        light = client.post(ROUTE, files={"file": ("notes.txt", b"A dog runs.\n")}, data={"target_lang": "de"})
        assert light.status_code == 200, light.text
    [light_pid] = set(document_pids(server.process.pid)) - {heavy}
    service = niceness(server.process.pid)
    assert niceness(heavy) == service + HEAVY_LANE_NICENESS
    assert niceness(light_pid) == service


def test_a_client_that_hangs_up_while_its_document_is_read_stops_the_reading(
    lone: ServiceProcess, client: httpx.Client
) -> None:
    """The reading is stopped (its process killed), not left to run for seconds, holding up the
    next document; none of the document is translated."""
    expected = paragraphs(upload(client, word_file()))
    reading = document_pid(lone)
    before = scrape(client)
    with sent(lone, word_file(LONG)):
        wait_until_busy(reading)
    wait_until_gone(reading)
    wait_for_metric(client, "mt_requests_total", metric(before, "mt_requests_total", route=ROUTE, status="499") + 1,
                    route=ROUTE, status="499")  # fmt: skip
    tokens = metric(before, "mt_input_tokens_total", model=MODEL)
    assert metric(scrape(client), "mt_input_tokens_total", model=MODEL) == tokens
    assert paragraphs(upload(client, word_file())) == expected
    assert document_pid(lone) != reading


def test_a_client_that_hangs_up_while_its_document_is_translated_drops_its_queued_texts(
    held_server: ServiceProcess,
) -> None:
    """The held server starts a batch only when 8 texts are queued: the document's 3 wait for it."""
    with httpx.Client(base_url=held_server.url, timeout=60) as held:
        before = scrape(held)
        with sent(held_server, b"A dog runs.\nA cat sits.\nThe man walks.\n", "notes.txt"):
            wait_for_metric(held, "mt_queue_depth_sentences", 3, model=MODEL)
        wait_for_metric(held, "mt_queue_depth_sentences", 0, model=MODEL)
        after = scrape(held)
    # 499, not the 504 of its deadline: the texts were dropped because the client left.
    assert metric(after, "mt_requests_total", route=ROUTE, status="499") == (
        metric(before, "mt_requests_total", route=ROUTE, status="499") + 1
    )
    batches = "mt_batch_size_sentences_count"
    assert metric(after, batches, model=MODEL) == metric(before, batches, model=MODEL)


def test_a_document_process_killed_between_requests_costs_no_request(
    lone: ServiceProcess, client: httpx.Client
) -> None:
    expected = paragraphs(upload(client, word_file()))
    killed = document_pid(lone)
    os.kill(killed, signal.SIGKILL)
    wait_until_gone(killed)
    assert paragraphs(upload(client, word_file())) == expected
    assert document_pid(lone) != killed


def test_a_document_process_killed_under_a_request_fails_it_alone_with_a_500(
    lone: ServiceProcess, client: httpx.Client
) -> None:
    """That request's document may be what killed it (the kernel's out-of-memory killer): it is not
    tried again. A document sent meanwhile is read by the next process."""
    expected = paragraphs(upload(client, word_file()))
    killed = document_pid(lone)
    with ThreadPoolExecutor(2) as pool:
        long = pool.submit(upload, client, word_file(LONG))
        wait_until_busy(killed)
        waiting = pool.submit(upload, client, word_file())
        os.kill(killed, signal.SIGKILL)
        error = assert_error(long.result(), 500, "internal_error")
        assert paragraphs(waiting.result()) == expected
    assert error["message"].startswith("the document process stopped while it read or wrote the file")
    assert document_pid(lone) != killed


def test_a_stopped_document_process_is_replaced_at_once_and_its_call_run_again(start_service: StartService) -> None:
    """SIGSTOP held every document request for as long as the process stayed stopped, then until
    MT_DOCUMENT_TIMEOUT_S (a minute): now the process is killed as soon as it is seen stopped, and
    the call it held is read by its replacement."""
    server = start_service(streams=1, cache_size=0)
    with httpx.Client(base_url=server.url, timeout=30) as client:  # well within the deadline, 60 s
        expected = paragraphs(upload(client, word_file()))
        stopped = document_pid(server)
        os.kill(stopped, signal.SIGSTOP)
        try:
            assert paragraphs(upload(client, word_file())) == expected
            wait_until_gone(stopped)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGCONT)
        assert document_pid(server) != stopped


def test_a_document_process_that_does_not_answer_by_its_deadline_is_replaced(start_service: StartService) -> None:
    """A call the process has not answered within MT_DOCUMENT_TIMEOUT_S (a file that takes seconds to
    read, against a deadline of 1 s) is a 504, and the process is replaced."""
    server = start_service(streams=1, cache_size=0, document_timeout_s=1)
    with httpx.Client(base_url=server.url, timeout=120) as client:
        expected = paragraphs(upload(client, word_file()))
        slow = document_pid(server)
        error = assert_error(upload(client, word_file(2 * LONG)), 504, "timeout")
        assert "MT_DOCUMENT_TIMEOUT_S" in error["message"]
        wait_until_gone(slow)
        assert paragraphs(upload(client, word_file())) == expected
        assert document_pid(server) != slow


def test_a_small_file_is_not_held_behind_a_large_one(start_service: StartService) -> None:
    """A one-line .txt goes to a process of its own while a large .docx is read: it is answered
    while that reading still goes on, where it waited for it (and each one before it) to end."""
    server = start_service(streams=1, cache_size=0)
    with httpx.Client(base_url=server.url, timeout=120) as client:
        assert upload(client, word_file()).status_code == 200
        heavy = document_pid(server)
        with sent(server, word_file(2 * LONG)):
            wait_until_busy(heavy)
            small = client.post(ROUTE, files={"file": ("notes.txt", b"A dog runs.\n")}, data={"target_lang": "de"})
            assert small.status_code == 200, small.text
            wait_until_busy(heavy)  # still reading the large one
            assert set(document_pids(server.process.pid)) - {heavy}, "the .txt was read by another process"
