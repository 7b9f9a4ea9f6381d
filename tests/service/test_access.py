"""``service.access`` without HTTP: a translation's characters counted around it and taken back if
it fails, and what a database outage leaves of a key (MT_KEY_TRUST_S), on a real PostgreSQL server
that the tests stop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from postgres_server import PostgresServer, fresh_database, throwaway_postgres

from service.access import ANONYMOUS, COUNT_EVERY_S, RETRY_S, Access
from service.database import PostgresDatabase, SqliteDatabase, migrate
from service.errors import DatabaseUnavailable, QuotaExceeded
from service.keys import KeyStore
from service.settings import Settings


@pytest.fixture
def server() -> Iterator[PostgresServer]:
    with throwaway_postgres() as started:
        yield started


def _access(url: str, tmp_path: Path, **settings: object) -> Access:
    db = PostgresDatabase(url)
    migrate(db)
    return Access(Settings(require_keys=True, database_url=url, data_dir=tmp_path, **settings), KeyStore(db))


def test_characters_are_counted_within_the_quota_and_taken_back_when_the_translation_fails(
    server: PostgresServer, tmp_path: Path
) -> None:
    access = _access(fresh_database(server), tmp_path)
    _, secret = access.keys.create(characters_per_month=100)  # type: ignore[union-attr]

    async def scenario() -> None:
        caller = await access.authorize(secret)
        async with access.metered(caller, 60):
            pass
        with pytest.raises(RuntimeError):
            async with access.metered(caller, 30):
                raise RuntimeError("the translation failed")
        with pytest.raises(QuotaExceeded) as refused:
            async with access.metered(caller, 41):
                pytest.fail("a request past the quota is not translated")
        assert refused.value.details == {"limit": 100, "used": 60, "requested": 41}
        assert await access.usage(caller) == (60, 100)

    asyncio.run(scenario())
    access.close()


def test_callers_without_a_quota_are_counted_in_the_process_then_written_together(
    server: PostgresServer, tmp_path: Path
) -> None:
    """An open service's callers have no quota to keep: their characters are added up and written
    once a second (or when /v2/usage asks), not once per request; a failed translation's are taken
    back, and counts the database cannot take are kept for the next time."""
    url = fresh_database(server)
    db = PostgresDatabase(url)
    migrate(db)
    access, store = Access(Settings(database_url=url, data_dir=tmp_path), KeyStore(db)), KeyStore(db)

    async def translate(characters: int, *, fails: bool = False) -> None:
        with contextlib.suppress(RuntimeError):
            async with access.metered(ANONYMOUS, characters):
                if fails:
                    raise RuntimeError("the translation failed")

    async def scenario() -> None:
        for characters in (10, 20, 30):
            await translate(characters)
        await translate(40, fails=True)
        assert store.used("", access.clock()) == 0  # nothing written per request
        await asyncio.sleep(COUNT_EVERY_S + 0.5)
        assert store.used("", access.clock()) == 60
        await translate(5)
        assert await access.usage(ANONYMOUS) == (65, None)  # what the process added up, written first
        server.stop()
        await translate(7)
        await access.count()  # the database is away: kept
        server.start()
        await asyncio.sleep(RETRY_S)
        await access.count()
        assert store.used("", access.clock()) == 72

    asyncio.run(scenario())
    access.close()


@pytest.mark.parametrize(("trust_s", "served"), [(60.0, True), (0.0, False)])
def test_an_outage_serves_a_key_read_within_mt_key_trust_s_only(
    server: PostgresServer, tmp_path: Path, trust_s: float, served: bool
) -> None:
    access = _access(fresh_database(server), tmp_path, key_trust_s=trust_s)
    _, secret = access.keys.create(characters_per_month=1000, requests_per_minute=100)  # type: ignore[union-attr]

    async def scenario() -> None:
        caller = await access.authorize(secret)  # read: trusted from now on, for trust_s
        server.stop()
        try:
            if served:
                async with access.metered(await access.authorize(secret), 10):
                    pass
            else:
                with pytest.raises(DatabaseUnavailable):
                    async with access.metered(caller, 10):
                        pass
        finally:
            server.start()

    asyncio.run(scenario())
    access.close()


@pytest.mark.parametrize("require_keys", [False, True])
def test_a_state_database_that_cannot_be_made_keeps_only_a_service_that_needs_it_unready(
    tmp_path: Path, require_keys: bool
) -> None:
    (tmp_path / "file").write_text("in the way of the database's directory")
    database = SqliteDatabase(tmp_path / "file" / "state.sqlite3")
    access = Access(Settings(require_keys=require_keys, data_dir=tmp_path), KeyStore(database))
    reason = asyncio.run(access.unready())
    if require_keys:  # its keys are there: not ready, saying why
        assert reason is not None and "state.sqlite3" in reason
    else:  # open: it only counts characters there, and translates without
        assert reason is None
    access.close()
