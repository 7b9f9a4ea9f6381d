"""The state database going away under a real service, and a service started without it: a
PostgreSQL server of this module's own, stopped and started by the tests.

Keys a replica has read within MT_KEY_TRUST_S keep translating while the database is down; a key
it has not is a 503 in each API's shape, answered at once; everything works again once the
database is back; a service started without its database says so in one line and is unready."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from live_server import ServiceProcess, StartService
from postgres_server import PostgresServer, fresh_database, throwaway_postgres
from test_managed_keys import TEXT, Keys, v1

from service.access import RETRY_S
from service.launcher import LiveService

# A request answered "quickly": far under a client's timeout, and under the service's own waits
# for the database (a connection: 3 s), which ``service.access.RETRY_S`` spares most requests.
QUICK_S = 4.0


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[PostgresServer]:
    """A server these tests may stop and start without disturbing the others'."""
    with throwaway_postgres() as server:
        yield server


@pytest.fixture(scope="module")
def database(own_postgres: PostgresServer) -> str:
    return fresh_database(own_postgres)


@pytest.fixture(scope="module")
def keys(database: str, tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return Keys(database, tmp_path_factory.mktemp("keys_cli"))


@pytest.fixture(scope="module")
def service(start_service: StartService, database: str) -> ServiceProcess:
    return start_service(database_url=database, require_keys="true", max_wait_ms=2)


@pytest.fixture(scope="module")
def second(start_service: StartService, database: str) -> ServiceProcess:
    """Another replica on the same database."""
    return start_service(database_url=database, require_keys="true", max_wait_ms=2)


def timed(call: object) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = call()  # type: ignore[operator]
    return response, time.monotonic() - started


def test_a_database_outage_spares_trusted_keys_and_is_a_quick_503_for_others(
    service: ServiceProcess, own_postgres: PostgresServer, keys: Keys
) -> None:
    trusted, unread = keys.create("--characters-per-month", "1000"), keys.create()
    with httpx.Client(base_url=service.url, timeout=30) as client:
        assert v1(client, trusted).status_code == 200
        own_postgres.stop()
        try:
            for _ in range(3):
                response, took = timed(lambda: v1(client, trusted))
                assert response.status_code == 200, response.text
                assert took < QUICK_S
            response, took = timed(lambda: v1(client, unread))
            assert response.status_code == 503 and took < QUICK_S
            assert response.json()["error"]["type"] == "database_unavailable"
            assert str(own_postgres.root) not in response.text  # where the database is: for the logs only
            deepl, took = timed(
                lambda: client.post(
                    "/v2/translate",
                    json={"text": [TEXT], "target_lang": "DE"},
                    headers={"Authorization": f"DeepL-Auth-Key {unread}"},
                )
            )
            assert deepl.status_code == 503 and set(deepl.json()) == {"message"} and took < QUICK_S
            libre = client.post("/translate", json={"q": TEXT, "source": "en", "target": "de", "api_key": unread})
            assert libre.status_code == 503 and set(libre.json()) == {"error"}
            assert client.get("/readyz").status_code == 200  # translations that need no state go on
        finally:
            own_postgres.start()
        _once_reachable(lambda: v1(client, unread))
        assert v1(client, trusted).status_code == 200
    log = service.log(100_000)
    assert log.count("the state database cannot be used") == 1
    assert "the state database can be used again" in log


def test_documents_and_download_links_in_an_outage_are_quick_503s_and_whole_once_it_is_back(
    service: ServiceProcess, own_postgres: PostgresServer, keys: Keys, database: str
) -> None:
    """DeepL's documents and /translate_file's links live in the database: while it is away their
    routes answer 503 in their API's shape (an upload leaves nothing behind), /v1/translate_file,
    which keeps nothing, goes on; once it is back, a document finished before the outage is polled
    and downloaded, whole."""
    secret = keys.create()
    auth = {"Authorization": f"DeepL-Auth-Key {secret}"}
    text = b"A dog runs in the park.\n"
    with httpx.Client(base_url=service.url, timeout=30, headers=auth) as client:
        ids = client.post("/v2/document", files={"file": ("a.txt", text)}, data={"target_lang": "DE"}).json()
        poll = {"document_key": ids["document_key"]}
        for _ in range(200):  # a state, polled a bounded number of times
            if client.post(f"/v2/document/{ids['document_id']}", data=poll).json()["status"] == "done":
                break
            time.sleep(0.05)
        # Its upload is deleted just after it is done: before the outage, or it is left to expire.
        assert _rows_settle(database, (1, 1)), "a done document keeps its job and its translation only"
        own_postgres.stop()
        try:
            for call in (
                lambda: client.post(f"/v2/document/{ids['document_id']}", data=poll),
                lambda: client.post("/v2/document", files={"file": ("b.txt", text)}, data={"target_lang": "DE"}),
            ):
                response, took = timed(call)
                assert response.status_code == 503 and set(response.json()) == {"message"}, response.text
                assert took < QUICK_S
            form = {"source": "en", "target": "de", "api_key": secret}
            libre, took = timed(lambda: client.post("/translate_file", files={"file": ("c.txt", text)}, data=form))
            assert libre.status_code == 503 and set(libre.json()) == {"error"} and took < QUICK_S, libre.text
            files = {"file": ("d.txt", text)}
            bearer = {"Authorization": f"Bearer {secret}"}
            v1_file = client.post("/v1/translate_file", files=files, data={"target_lang": "de"}, headers=bearer)
            assert v1_file.status_code == 200 and v1_file.content.startswith(b"Ein")
        finally:
            own_postgres.start()
        status = _once_reachable(lambda: client.post(f"/v2/document/{ids['document_id']}", data=poll))
        assert status["status"] == "done"
        result = client.post(f"/v2/document/{ids['document_id']}/result", data=poll)
        assert result.status_code == 200 and result.content.startswith(b"Ein")
    # The download deletes its file once sent, just after the client has it all.
    assert _rows_settle(database, (0, 0)), "the upload refused in the outage left nothing; the download took its file"


def _rows_settle(database: str, expected: tuple[int, int]) -> bool:
    """Whether the document jobs and stored files come to ``expected`` within 10 s."""
    with psycopg.connect(database, autocommit=True) as db:
        for _ in range(100):
            counts = db.execute("SELECT (SELECT COUNT(*) FROM document_jobs), (SELECT COUNT(*) FROM stored_files)")
            if counts.fetchone() == expected:
                return True
            time.sleep(0.1)
    return False


def test_a_service_started_without_its_database_is_unready_until_it_is_reached(
    tmp_path: Path, tiny_bundle: Path
) -> None:
    root = Path(tempfile.mkdtemp(prefix="mt-postgres-late-"))  # where the server's socket will be
    settings = {
        "MT_MODEL_DIR": str(tiny_bundle),
        "MT_THREADS": "1",
        "MT_LOG_LEVEL": "warning",
        "MT_DATA_DIR": str(tmp_path / "data"),
        "MT_DATABASE_URL": f"postgresql://postgres@/postgres?host={root}",
        "MT_REQUIRE_KEYS": "true",
    }
    service = LiveService(settings, tmp_path / "service.log")
    server = None
    try:
        with httpx.Client(base_url=service.url, timeout=10) as client:
            reason = _unready_reason(client)  # the state database, and why: libpq's own words
            assert "cannot be reached" in reason and "No such file or directory" in reason, reason
            server = PostgresServer(root)
            service.wait_ready()
        assert service.log(100_000).count("the state database cannot be used") == 1
    finally:
        service.stop()
        if server is not None:
            server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


def _unready_reason(client: httpx.Client) -> str:
    """What /readyz says once the models are loaded and only the database keeps it unready."""
    for _ in range(600):
        try:
            response = client.get("/readyz")
        except httpx.TransportError:  # not listening yet
            response = None
        if response is not None and "state database" in response.text:
            assert response.status_code == 503
            return str(response.json()["error"]["message"])
        time.sleep(0.1)
    raise AssertionError("/readyz never named the state database")


def test_traffic_through_a_database_restart_is_answered_and_never_a_500(
    service: ServiceProcess, second: ServiceProcess, own_postgres: PostgresServer, keys: Keys
) -> None:
    """Four clients on two replicas translate with keys the replicas have read while the server is
    killed and started again: every answer a 200 (trusted keys) within ``QUICK_S``; afterwards they
    are counted again."""
    secrets = [keys.create("--characters-per-month", "1000000") for _ in range(4)]
    statuses: Counter[int] = Counter()
    slowest = 0.0
    done = threading.Event()

    def client(secret: str, replica: ServiceProcess) -> None:
        nonlocal slowest
        with httpx.Client(base_url=replica.url, timeout=30) as c:
            while not done.is_set():
                response, took = timed(lambda: v1(c, secret))
                statuses[response.status_code] += 1
                slowest = max(slowest, took)

    replicas = (service, second)
    threads = [threading.Thread(target=client, args=(secret, replicas[i % 2])) for i, secret in enumerate(secrets)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(1)
        own_postgres.stop("immediate")  # as a crash: connections cut, nothing flushed cleanly
        time.sleep(3)
        own_postgres.start()
        time.sleep(RETRY_S + 1)
    finally:
        done.set()
        for thread in threads:
            thread.join()
    assert set(statuses) == {200} and slowest < QUICK_S, (statuses, slowest)
    with httpx.Client(base_url=service.url, timeout=30) as c:
        headers = {"Authorization": f"DeepL-Auth-Key {secrets[0]}"}
        usage = _once_reachable(lambda: c.get("/v2/usage", headers=headers))
        assert v1(c, secrets[0]).status_code == 200
        after = c.get("/v2/usage", headers=headers).json()
    assert after["character_count"] == usage["character_count"] + len(TEXT)


def _once_reachable(call: Callable[[], httpx.Response]) -> dict[str, Any]:
    """``call``'s answer once it is not a 503: the pool reconnects in the background, backing off
    while the server was away (measured: 1-3 s after it is back)."""
    for _ in range(100):
        response = call()
        if response.status_code != 503:
            assert response.status_code == 200, response.text
            return dict(response.json())
        time.sleep(0.1)
    raise AssertionError(f"still 503 after 10 s: {response.text}")
