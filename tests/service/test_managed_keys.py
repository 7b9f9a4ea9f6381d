"""Managed keys against real services: two instances of ``python -m service`` on one PostgreSQL
database (MT_REQUIRE_KEYS), keys made with ``python -m service keys``. A key's monthly characters
and its requests a minute hold across both instances, and are refused in each API's shape."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import deepl
import httpx
import pytest
from cli_help import run_help
from live_server import ServiceProcess, StartService, assert_libretranslate_error
from postgres_server import PostgresServer, fresh_database, postgres  # noqa: F401 (the fixture)

TEXT = "A dog runs."  # 11 characters


def keys_command(url: str, data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MT_DATABASE_URL": url, "MT_DATA_DIR": str(data_dir)}
    return subprocess.run(
        [sys.executable, "-m", "service", "keys", *args], env=env, capture_output=True, text=True, timeout=60
    )


class Keys:
    """``python -m service keys`` on the services' database."""

    def __init__(self, url: str, data_dir: Path) -> None:
        self.url, self.data_dir = url, data_dir

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return keys_command(self.url, self.data_dir, *args)

    def id_of(self, name: str) -> str:
        """The id of the key named ``name``, as ``keys list`` shows it (id, then name)."""
        return next(line.split()[0] for line in self("list").stdout.splitlines() if line.split()[1] == name)

    def create(self, *args: str) -> str:
        done = self("create", *args)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def database(postgres: PostgresServer) -> str:  # noqa: F811
    return fresh_database(postgres)


@pytest.fixture(scope="module")
def keys(database: str, tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return Keys(database, tmp_path_factory.mktemp("keys_cli"))


@pytest.fixture(scope="module")
def replicas(start_service: StartService, database: str) -> tuple[ServiceProcess, ServiceProcess]:
    """Two services on one database, as two replicas behind a load balancer (each renewing its DeepL
    documents' leases, and looking for other replicas' run out, every third of a second)."""
    settings = {"database_url": database, "require_keys": "true", "max_wait_ms": 2, "document_lease_s": 1}
    return start_service(**settings), start_service(**settings)


@pytest.fixture(scope="module")
def clients(replicas: tuple[ServiceProcess, ServiceProcess]) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    with (
        httpx.Client(base_url=replicas[0].url, timeout=60) as a,
        httpx.Client(base_url=replicas[1].url, timeout=60) as b,
    ):
        yield a, b


def v1(client: httpx.Client, key: str | None, text: str = TEXT) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return client.post("/v1/translate", json={"text": text, "source_lang": "en", "target_lang": "de"}, headers=headers)


def test_keys_create_prints_the_key_last_and_list_shows_its_limits(keys: Keys) -> None:
    done = keys("create", "--name", "team-a", "--characters-per-month", "5000", "--requests-per-minute", "90")
    assert done.returncode == 0, done.stderr
    secret = done.stdout.strip().splitlines()[-1]
    assert secret.startswith("mt-") and " " not in secret
    listed = keys("list").stdout
    assert "team-a" in listed and "5,000" in listed and "90" in listed and secret not in listed


def test_a_request_needs_a_key_from_the_store(clients: tuple[httpx.Client, httpx.Client], keys: Keys) -> None:
    a, _ = clients
    assert v1(a, None).status_code == 401
    assert v1(a, "mt-not-a-key").status_code == 401
    assert v1(a, keys.create()).status_code == 200
    wrong = a.post("/translate", json={"q": TEXT, "source": "en", "target": "de", "api_key": "mt-not-a-key"})
    assert_libretranslate_error(wrong, 403, "Invalid API key")


def test_a_revoked_key_is_refused(clients: tuple[httpx.Client, httpx.Client], keys: Keys) -> None:
    a, b = clients
    secret = keys.create("--name", "to-revoke")
    assert v1(b, secret).status_code == 200
    key_id = keys.id_of("to-revoke")
    assert keys("revoke", key_id).returncode == 0
    assert v1(a, secret).status_code == 401  # read for the first time here: refused at once
    assert keys("revoke", key_id).returncode == 1


def test_the_quota_holds_across_replicas_and_is_refused_in_each_apis_shape(
    clients: tuple[httpx.Client, httpx.Client], replicas: tuple[ServiceProcess, ServiceProcess], keys: Keys
) -> None:
    a, b = clients
    secret = keys.create("--characters-per-month", str(3 * len(TEXT) + 5))
    assert v1(a, secret).status_code == 200
    assert v1(b, secret).status_code == 200
    deepl_client = deepl.Translator(secret, server_url=replicas[0].url)
    assert deepl_client.translate_text(TEXT, source_lang="EN", target_lang="DE").text
    usage = deepl.Translator(secret, server_url=replicas[1].url).get_usage().character
    assert (usage.count, usage.limit) == (3 * len(TEXT), 3 * len(TEXT) + 5)

    refused = v1(b, secret)
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["type"] == "quota_exceeded" and (error["limit"], error["used"]) == (38, 33)
    with pytest.raises(deepl.QuotaExceededException):
        deepl_client.translate_text(TEXT, source_lang="EN", target_lang="DE")
    libre = a.post("/translate", json={"q": TEXT, "source": "en", "target": "de", "api_key": secret})
    assert_libretranslate_error(libre, 403)
    assert v1(a, secret, "Hi.").status_code == 200  # what still fits
    assert deepl_client.get_usage().character.count == 3 * len(TEXT) + 3


def test_parallel_requests_on_two_replicas_never_pass_the_quota(
    clients: tuple[httpx.Client, httpx.Client], keys: Keys
) -> None:
    secret = keys.create("--characters-per-month", str(10 * len(TEXT)))
    with ThreadPoolExecutor(16) as threads:
        statuses = list(threads.map(lambda i: v1(clients[i % 2], secret).status_code, range(32)))
    assert statuses.count(200) == 10 and statuses.count(403) == 22


def test_the_rate_holds_across_replicas_with_retry_after(
    clients: tuple[httpx.Client, httpx.Client], keys: Keys
) -> None:
    a, b = clients
    secret = keys.create("--requests-per-minute", "4")
    statuses = [v1((a, b)[i % 2], secret).status_code for i in range(4)]
    assert statuses == [200] * 4
    refused = v1(a, secret)
    assert refused.status_code == 429 and refused.json()["error"]["type"] == "rate_limited"
    assert 1 <= int(refused.headers["Retry-After"]) <= 15
    libre = b.post("/translate", json={"q": TEXT, "source": "en", "target": "de", "api_key": secret})
    assert_libretranslate_error(libre, 429)
    assert libre.json()["error"].startswith("Slowdown:")


def test_a_failed_translation_counts_nothing(clients: tuple[httpx.Client, httpx.Client], keys: Keys) -> None:
    a, _ = clients
    secret = keys.create("--characters-per-month", "100")
    response = a.post(
        "/v1/translate",
        json={"text": TEXT, "source_lang": "en", "target_lang": "xx"},
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 400
    assert deepl.Translator(secret, server_url=str(a.base_url)).get_usage().character.count == 0


def test_limits_changed_by_the_command(keys: Keys) -> None:
    secret = keys.create("--name", "limited", "--characters-per-month", "10")
    key_id = keys.id_of("limited")
    done = keys("limits", key_id, "--requests-per-minute", "7")
    assert done.returncode == 0, done.stderr
    assert "characters a month: 10," in done.stdout and "requests a minute: 7" in done.stdout
    done = keys("limits", key_id, "--characters-per-month", "none")
    assert "characters a month: unlimited" in done.stdout and secret not in done.stdout
    assert keys("limits", key_id, "--characters-per-month", "0").returncode == 2


def test_files_take_a_managed_key_and_count_their_characters(
    clients: tuple[httpx.Client, httpx.Client], replicas: tuple[ServiceProcess, ServiceProcess], keys: Keys
) -> None:
    a, b = clients
    secret = keys.create("--characters-per-month", str(2 * len(TEXT)))
    file = {"file": ("a.txt", TEXT.encode())}
    # LibreTranslate's key as a form field, before the file, on a replica that has not read it yet.
    libre = b.post("/translate_file", files=file, data={"api_key": secret, "source": "en", "target": "de"})
    assert libre.status_code == 200, libre.text
    native = a.post(
        "/v1/translate_file",
        files=file,
        data={"source_lang": "en", "target_lang": "de"},
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert native.status_code == 200, native.text
    assert deepl.Translator(secret, server_url=replicas[0].url).get_usage().character.count == 2 * len(TEXT)
    refused = b.post("/translate_file", files=file, data={"api_key": secret, "source": "en", "target": "de"})
    assert_libretranslate_error(refused, 403)


def test_keys_on_the_default_sqlite_store(
    start_service: StartService, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Without MT_DATABASE_URL: the command and the service share SQLite in MT_DATA_DIR."""
    data = tmp_path_factory.mktemp("sqlite_state")
    keys = Keys("", data)
    secret = keys.create("--name", "solo", "--characters-per-month", str(len(TEXT)))
    service = start_service(require_keys="true", data_dir=str(data), max_wait_ms=2)
    with httpx.Client(base_url=service.url, timeout=60) as client:
        assert v1(client, secret).status_code == 200
        assert v1(client, secret).json()["error"]["type"] == "quota_exceeded"
        assert keys("revoke", keys.id_of("solo")).returncode == 0
        assert f"{len(TEXT)} characters this month" not in keys("list").stdout  # listed as revoked
        assert v1(client, "mt-" + "x" * 43).status_code == 401


def test_the_keys_command_is_found_from_the_services_help_and_documents_its_options() -> None:
    assert "python -m service keys" in run_help("service")
    for command in ("create", "limits"):
        text = keys_command("", Path("unused"), command, "--help").stdout
        assert "--characters-per-month" in text and "--requests-per-minute" in text and "none" in text
    listed = keys_command("", Path("unused"), "--help").stdout
    assert all(command in listed for command in ("create", "list", "revoke", "limits"))
