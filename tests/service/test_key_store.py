"""The managed keys' store (``service.keys``) on both backends of ``service.database``: SQLite in a
directory and a real PostgreSQL server. Limits are held under concurrency, by two "replicas" (two
``Database`` objects on one database) at once."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest
from postgres_server import fresh_database, postgres  # noqa: F401 (the fixture)

from service.database import MIGRATIONS, Database, migrate, migrated, open_database
from service.keys import KEY_PREFIX, Charge, KeyStore, OverQuota, could_be_managed, digest

NOW = datetime(2026, 11, 27, 12, tzinfo=UTC).timestamp()


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    """(MT_DATABASE_URL, MT_DATA_DIR) of an empty database of each backend."""
    url = fresh_database(request.getfixturevalue("postgres")) if request.param == "postgresql" else ""
    return url, tmp_path


def _open(location: tuple[str, Path]) -> Database:
    db = open_database(*location)
    migrate(db)
    return db


@pytest.fixture
def replicas(location: tuple[str, Path]) -> Iterator[tuple[KeyStore, KeyStore]]:
    """Two stores on one database, each with its own connections, as two replicas have."""
    first, second = _open(location), _open(location)
    yield KeyStore(first), KeyStore(second)
    first.close()
    second.close()


@pytest.fixture
def store(replicas: tuple[KeyStore, KeyStore]) -> KeyStore:
    return replicas[0]


def test_a_key_is_found_by_itself_and_only_its_digest_is_stored(store: KeyStore) -> None:
    key, secret = store.create("team a", characters_per_month=1000, requests_per_minute=60)
    assert secret.startswith(KEY_PREFIX) and len(secret) == len(KEY_PREFIX) + 43 and could_be_managed(secret)
    assert not could_be_managed(secret[:-1]) and not could_be_managed("key-" + secret[3:])
    assert store.find(digest(secret)) == key
    assert key.id == digest(secret)[:12] and key.name == "team a"
    with store.db.transaction() as tx:
        stored = tx.execute("SELECT * FROM api_keys")
    assert secret not in repr(stored)
    assert store.find(digest(secret + "x")) is None


def test_a_revoked_key_is_no_longer_found_and_is_listed_as_revoked(store: KeyStore) -> None:
    key, secret = store.create("old")
    kept, _ = store.create("new")
    assert store.revoke(key.id) is not None
    assert store.find(digest(secret)) is None
    assert store.revoke(key.id) is None  # revoked once
    listed = {k.id: k for k in store.list()}
    assert listed[key.id].revoked is not None and listed[kept.id].revoked is None


def test_limits_change_and_none_removes_one(store: KeyStore) -> None:
    key, secret = store.create(characters_per_month=10)
    changed = store.set_limits(key.id, characters_per_month=None, requests_per_minute=5)
    assert changed is not None and store.find(digest(secret)) == changed
    assert (changed.characters_per_month, changed.requests_per_minute) == (None, 5)
    assert store.set_limits("nosuchkey", characters_per_month=1, requests_per_minute=1) is None


def test_a_charge_that_would_pass_the_quota_is_refused_whole_and_counts_nothing(store: KeyStore) -> None:
    assert store.charge("owner", 600, limit=1000, now=NOW) == Charge("owner", "2026-11", 600)
    assert store.charge("owner", 401, limit=1000, now=NOW) == OverQuota(used=600, limit=1000)
    assert store.charge("other", 1001, limit=1000, now=NOW) == OverQuota(used=0, limit=1000)
    assert store.used("owner", NOW) == 600 and store.used("other", NOW) == 0
    assert isinstance(store.charge("owner", 400, limit=1000, now=NOW), Charge)
    assert store.used("owner", NOW) == 1000


def test_a_refund_takes_back_its_charge(store: KeyStore) -> None:
    charge = store.charge("owner", 300, limit=None, now=NOW)
    assert isinstance(charge, Charge)
    store.refund(charge)
    assert store.used("owner", NOW) == 0


def test_each_calendar_month_counts_from_zero(store: KeyStore) -> None:
    last_second = datetime(2026, 11, 30, 23, 59, 59, tzinfo=UTC).timestamp()
    assert isinstance(store.charge("owner", 1000, limit=1000, now=last_second), Charge)
    assert isinstance(store.charge("owner", 1000, limit=1000, now=last_second + 1), Charge)
    assert store.used("owner", last_second) == 1000 and store.used("owner", last_second + 1) == 1000


def test_concurrent_charges_on_two_replicas_never_pass_the_quota(replicas: tuple[KeyStore, KeyStore]) -> None:
    # 64 charges of 100 against 2,500, from 16 threads spread over two replicas: exactly 25 pass.
    def charge(i: int) -> Charge | OverQuota:
        return replicas[i % 2].charge("owner", 100, limit=2500, now=NOW)

    with ThreadPoolExecutor(16) as threads:
        results = list(threads.map(charge, range(64)))
    assert sum(isinstance(r, Charge) for r in results) == 25
    assert replicas[0].used("owner", NOW) == replicas[1].used("owner", NOW) == 2500


def test_the_rate_lets_a_minutes_requests_through_then_one_per_interval(store: KeyStore) -> None:
    key, _ = store.create(requests_per_minute=6)  # one every 10 s, six at once
    assert [store.take_request(key, NOW) for _ in range(6)] == [None] * 6
    wait = store.take_request(key, NOW)
    assert wait == pytest.approx(10.0)
    assert store.take_request(key, NOW + 9.9) is not None
    assert store.take_request(key, NOW + 10) is None
    assert store.take_request(key, NOW + 10) is not None


def test_a_key_without_a_rate_is_never_refused(store: KeyStore) -> None:
    key, _ = store.create()
    assert all(store.take_request(key, NOW) is None for _ in range(100))


def test_concurrent_requests_on_two_replicas_never_pass_the_rate(replicas: tuple[KeyStore, KeyStore]) -> None:
    key, _ = replicas[0].create(requests_per_minute=20)

    def take(i: int) -> float | None:
        return replicas[i % 2].take_request(key, NOW)

    with ThreadPoolExecutor(16) as threads:
        results = list(threads.map(take, range(80)))
    assert results.count(None) == 20


def test_migrations_run_once_however_many_replicas_start_at_once(location: tuple[str, Path]) -> None:
    databases = [open_database(*location) for _ in range(4)]
    try:
        with ThreadPoolExecutor(4) as threads:
            versions = list(threads.map(migrate, databases))
        assert versions == [len(MIGRATIONS)] * 4
        with databases[0].transaction() as tx:
            assert tx.execute("SELECT version FROM schema_version") == [(len(MIGRATIONS),)]
    finally:
        for db in databases:
            db.close()


def test_a_database_of_the_first_version_with_glossaries_made_outside_the_migrations_is_upgraded(
    location: tuple[str, Path],
) -> None:
    """Before they were a migration, PostgreSQL's glossary tables were made on first use: such a
    database, at version 1, keeps its glossaries and reaches the last version."""
    db = open_database(*location)
    try:
        with db.transaction() as tx:
            tx.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
            tx.execute("INSERT INTO schema_version VALUES (1)")
            for statement in (*MIGRATIONS[0], *MIGRATIONS[1]):
                tx.execute(statement)
            tx.execute(
                "INSERT INTO glossaries (id, owner, name, source_lang, target_lang, creation_time, entry_count)"
                " VALUES ('g', '', 'pets', 'en', 'de', 'now', 0)"
            )
        assert migrate(db) == len(MIGRATIONS)
        assert db.statement("SELECT name FROM glossaries") == [("pets",)]
        assert db.statement("SELECT COUNT(*) FROM document_jobs") == [(0,)]
    finally:
        db.close()


def test_threads_opening_a_new_sqlite_file_at_once_all_get_it(tmp_path: Path) -> None:
    """The first use of a new state database by many threads at once (the service's stores as it
    starts): each opens its own connection and every call succeeds. They raced to make the file a
    write-ahead log, and a loser got "database is locked" without waiting: an anonymous caller's
    key check was a 503 for the next 2 s (about 6 fresh files in 100)."""
    for trial in range(100):
        db = open_database("", tmp_path / str(trial))
        with ThreadPoolExecutor(8) as threads:
            calls = [threads.submit(migrate if i % 2 else _count_keys, db) for i in range(8)]
            for call in calls:
                call.result()  # DatabaseUnavailable, were it raised
        db.close()


def _count_keys(db: Database) -> int:
    return migrated(db).statement("SELECT COUNT(*) FROM api_keys")[0][0]
