"""The service's state database: SQLite under MT_DATA_DIR by default, PostgreSQL where
MT_DATABASE_URL names one, behind one interface (``Database``: transactions, and single statements).

The key store (``service.keys``) writes the SQL both understand, with ``:name`` parameters
(PostgreSQL's driver is handed ``%(name)s``), and knows nothing of the backend it runs on; no route
does. (The glossary store keeps its own SQLite file, with its own upgrades and its recovery from a
deleted or damaged file, and runs the same SQL on this module's PostgreSQL connections.)

The schema is versioned: ``MIGRATIONS`` are applied in order when the database is opened,
in one transaction that replicas starting at once take in turn (SQLite's write lock; a PostgreSQL
advisory lock), and a database made by an earlier version is brought up to this one.

A database that cannot be reached is ``DatabaseUnavailable`` (a 503 in every API's shape), raised
within a few seconds: PostgreSQL's connections are made with ``CONNECT_TIMEOUT_S``, its statements
run under ``STATEMENT_TIMEOUT_MS``, and a request waits at most ``POOL_WAIT_S`` for a connection of
the pool. Connections are not checked as they are handed out (a round trip on every request):
after a statement fails on one, the pool's every idle connection is checked and the broken ones
replaced, so that a server restart fails one request per replica, not one per pooled connection.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Protocol

from service.errors import DatabaseUnavailable

log = logging.getLogger(__name__)


class _LastConnectionError(logging.Filter):
    """Keeps what the pool says of its last failed attempt to connect, rather than let it log a line
    every few seconds while the server is away: ``DatabaseUnavailable`` names it (a refused
    connection, a wrong password), and ``service.access`` logs that once, and once that the
    database can be used again."""

    message = ""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.getMessage().startswith("error connecting"):
            return True
        self.message = record.getMessage()
        return False


_POOL_ATTEMPTS = _LastConnectionError()
logging.getLogger("psycopg.pool").addFilter(_POOL_ATTEMPTS)

SQLITE_NAME = "state.sqlite3"
BUSY_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 3
STATEMENT_TIMEOUT_MS = 5000
POOL_WAIT_S = 3.0
# Connections per replica, made as they are needed: one for each thread that may hold one at once
# (``service.access.DB_THREADS``, the glossary store's reads and its writer), and one to spare.
POOL_SIZE = 10
# How long a PostgreSQL database found unusable is not tried again (``PostgresDatabase._unavailable``).
RETRY_S = 2.0
# Any number, the same in every replica: the lock that migrations hold in PostgreSQL.
_MIGRATION_LOCK = 50_050

# Glossaries (``service.glossaries``); IF NOT EXISTS: PostgreSQL databases of earlier versions have
# them. The SQLite backend keeps its glossaries in a file of their own (``glossaries.sqlite3``, made
# with these statements), so these tables stay empty in its state database.
GLOSSARY_TABLES = (
    """CREATE TABLE IF NOT EXISTS glossaries (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        name TEXT NOT NULL,
        source_lang TEXT NOT NULL,
        target_lang TEXT NOT NULL,
        creation_time TEXT NOT NULL,
        entry_count INTEGER NOT NULL,
        revision INTEGER NOT NULL DEFAULT 0,
        text_bytes INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX IF NOT EXISTS glossaries_by_owner ON glossaries (owner, creation_time)",
    """CREATE TABLE IF NOT EXISTS entries (
        glossary_id TEXT NOT NULL REFERENCES glossaries (id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        source TEXT NOT NULL,
        target TEXT NOT NULL,
        case_sensitive INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (glossary_id, position)
    )""",
)

# Each migration's statements, in order; the version of a database is the number applied. Types
# are written as both read them (SQLite takes BIGINT and DOUBLE PRECISION for its own).
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        # Managed API keys: only a digest of each key is stored (``service.keys``).
        """CREATE TABLE api_keys (
            digest TEXT PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            name TEXT NOT NULL,
            characters_per_month BIGINT,
            requests_per_minute BIGINT,
            created TEXT NOT NULL,
            revoked TEXT,
            rate_tat DOUBLE PRECISION NOT NULL DEFAULT 0
        )""",
        # Characters translated, per owner (a key's digest, "" for callers without one) and month.
        """CREATE TABLE key_usage (
            owner TEXT NOT NULL,
            month TEXT NOT NULL,
            characters BIGINT NOT NULL,
            PRIMARY KEY (owner, month)
        )""",
    ),
    # Glossaries, as PostgreSQL databases of earlier versions made them outside these migrations.
    GLOSSARY_TABLES,
    (
        # Files kept for download, and DeepL documents' uploads (``service.file_store``): their bytes
        # in ``data`` on PostgreSQL, in files under MT_DATA_DIR with SQLite (``data`` NULL). Times
        # are seconds since the epoch, which every replica's clock reads alike.
        """CREATE TABLE stored_files (
            name TEXT PRIMARY KEY,
            filename TEXT NOT NULL,
            media_type TEXT NOT NULL,
            owner TEXT,
            disk_bytes BIGINT NOT NULL,
            expires DOUBLE PRECISION NOT NULL,
            data BYTEA
        )""",
        "CREATE INDEX stored_files_by_expiry ON stored_files (expires)",
        # DeepL's document jobs (``service.document_jobs``); ``upload`` names the file to translate
        # (in stored_files) until the job ends, ``result`` the translated file.
        """CREATE TABLE document_jobs (
            id TEXT PRIMARY KEY,
            key_digest TEXT NOT NULL,
            owner TEXT NOT NULL,
            keyed INTEGER NOT NULL,
            filename TEXT NOT NULL,
            target_lang TEXT NOT NULL,
            source_lang TEXT,
            glossary_id TEXT,
            upload TEXT,
            status TEXT NOT NULL,
            characters BIGINT NOT NULL DEFAULT 0,
            error TEXT,
            result TEXT,
            expires DOUBLE PRECISION,
            holder TEXT,
            lease_expires DOUBLE PRECISION NOT NULL,
            takeovers INTEGER NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX document_jobs_by_status ON document_jobs (status, lease_expires)",
    ),
)

Row = tuple[Any, ...]
Params = Mapping[str, Any]


class Transaction(Protocol):
    def execute(self, sql: str, params: Params | None = None) -> list[Row]:
        """Run ``sql`` with ``params``; the rows it returns (SELECT, RETURNING), else none."""
        ...

    def lock(self, name: int) -> None:
        """Hold lock ``name`` (any number, the same in every replica) until the transaction ends:
        a read-then-write of rows that many replicas write (a sum checked, a row added) is atomic."""
        ...


class Database(Protocol):
    """What the stores use: transactions, committed if their block ends, rolled back if it raises;
    and single statements, each atomic alone, which cost a busy request's path the fewest round
    trips and hold a row's lock the shortest time."""

    description: str  # where it is, without a password, for log lines

    def transaction(self) -> Any:  # a context manager yielding a ``Transaction``
        ...

    def statement(self, sql: str, params: Params | None = None) -> list[Row]: ...

    def close(self) -> None: ...


def open_database(url: str, data_dir: Path) -> Database:
    """PostgreSQL at ``url`` (``postgresql://...``), else SQLite in ``data_dir``; not yet connected:
    ``migrate`` makes or upgrades its schema."""
    if url:
        return PostgresDatabase(url)
    return SqliteDatabase(data_dir / SQLITE_NAME)


def migrate(db: Database) -> int:
    """Apply the migrations ``db`` has not had, in one transaction; returns its version."""
    with db.transaction() as tx:
        tx.lock(_MIGRATION_LOCK)
        tx.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        rows = tx.execute("SELECT version FROM schema_version")
        version = rows[0][0] if rows else 0
        if not rows:
            tx.execute("INSERT INTO schema_version VALUES (0)")
        for statements in MIGRATIONS[version:]:
            for statement in statements:
                tx.execute(statement)
        if version != len(MIGRATIONS):
            tx.execute("UPDATE schema_version SET version = :v", {"v": len(MIGRATIONS)})
            log.info("state database %s: schema version %d -> %d", db.description, version, len(MIGRATIONS))
    _MIGRATED.add(db)
    return len(MIGRATIONS)


_MIGRATED: weakref.WeakSet[Any] = weakref.WeakSet()


def migrated(db: Database) -> Database:
    """``db``, migrated the first time this process asks for it: a store that may be used before
    start-up has reached the database (``service.access`` migrates it then) makes the schema itself."""
    if db not in _MIGRATED:
        migrate(db)
    return db


def use_write_ahead_log(db: sqlite3.Connection, timeout_s: float) -> None:
    """Switch the database to WAL, waiting for other connections up to ``timeout_s``. The switch
    needs the database to itself, and SQLite answers "locked" at once rather than call its busy
    handler when another connection holds a lock (as when several open a new database at once:
    without the wait, 6 fresh files in 100 with 8 threads), so the wait is ours."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


class _SqliteTransaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def execute(self, sql: str, params: Params | None = None) -> list[Row]:
        return self.db.execute(sql, params or {}).fetchall()

    def lock(self, name: int) -> None:
        """Held already: the transaction took the database's write lock as it began."""


class SqliteDatabase:
    """One database file; a connection per thread, kept (opening one costs more than a query).
    Transactions take the write lock as they begin (``BEGIN IMMEDIATE``): a read-then-write never
    fails on a lock another writer took in between; writers wait for each other up to
    ``BUSY_TIMEOUT_S``, readers for nobody (write-ahead log)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.description = str(path)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._using = 0  # statements and transactions under way, in any thread
        self._closed = False

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        with self._in_use():
            with self._unavailable():
                db = self._connection()
                db.execute("BEGIN IMMEDIATE")
            try:
                yield _SqliteTransaction(db)
            except BaseException:
                if db.in_transaction:  # SQLite rolls back on its own after some errors (a full disk)
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def statement(self, sql: str, params: Params | None = None) -> list[Row]:
        with self._in_use(), self._unavailable():
            return self._connection().execute(sql, params or {}).fetchall()

    @contextmanager
    def _in_use(self) -> Iterator[None]:
        """Counted while a thread uses a connection, which ``close`` must not close under it."""
        with self._idle:
            if self._closed:
                raise DatabaseUnavailable(f"the state database {self.path} is closed")
            self._using += 1
        try:
            yield
        finally:
            with self._idle:
                self._using -= 1
                if self._closed:  # close() waits for the last one
                    self._idle.notify_all()

    @contextmanager
    def _unavailable(self) -> Iterator[None]:
        """DatabaseUnavailable for a file that cannot be opened, or a lock held past the busy
        timeout (but a full disk stays SQLite's error: ``errors.storage_full``, 507)."""
        try:
            yield
        except sqlite3.OperationalError as e:
            if getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                raise
            raise DatabaseUnavailable(f"the state database {self.path} cannot be used: {e}") from None
        except OSError as e:
            raise DatabaseUnavailable(f"the state database {self.path} cannot be used: {e}") from None

    def _connection(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
            use_write_ahead_log(db, BUSY_TIMEOUT_S)
            # Durable at each checkpoint rather than each commit: a counter may lose its last
            # increments to a power cut (not to a crash of the process), for a write that costs
            # microseconds instead of an fsync.
            db.execute("PRAGMA synchronous = NORMAL")
            with self._lock:
                self._connections.append(db)
            self._local.db = db
        return db

    def close(self) -> None:
        """Refuse new statements, wait for those under way, close every connection. SQLite's
        connections are shared between threads here: one closed while another thread's statement
        runs on it crashes the process (a shutdown's cancelled task leaves its thread running)."""
        with self._idle:
            self._closed = True
            if not self._idle.wait_for(lambda: self._using == 0, timeout=BUSY_TIMEOUT_S + 1):
                log.warning("the state database %s is closed with statements still running", self.path)
                return  # its connections go with the process
            for db in self._connections:
                db.close()
            self._connections.clear()


_NAMED = re.compile(r"(?<![:\w]):([a-z_][a-z_0-9]*)")


class _PostgresTransaction:
    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def execute(self, sql: str, params: Params | None = None) -> list[Row]:
        cursor = self.connection.execute(_NAMED.sub(r"%(\1)s", sql), params or {}, prepare=True)
        return cursor.fetchall() if cursor.description is not None else []

    def lock(self, name: int) -> None:
        self.execute("SELECT pg_advisory_xact_lock(:name)", {"name": name})


class PostgresDatabase:
    """A pool of connections to one PostgreSQL database (psycopg 3, psycopg_pool)."""

    def __init__(self, url: str) -> None:
        from psycopg import conninfo
        from psycopg_pool import ConnectionPool

        info = conninfo.conninfo_to_dict(url)
        self.description = " ".join(f"{k}={v}" for k, v in info.items() if k != "password")
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=POOL_SIZE,
            timeout=POOL_WAIT_S,
            # Lost connections are made again in the background, a failed attempt retried within
            # seconds: ``reconnect_timeout`` is how long the pool tries before it gives up on one.
            reconnect_timeout=24 * 3600,
            kwargs={
                "autocommit": True,  # a statement alone is its own transaction; ``transaction`` begins one
                "connect_timeout": CONNECT_TIMEOUT_S,
                "options": f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
                "application_name": "mt-service",
            },
            open=False,
        )
        self.pool.open(wait=False)
        self._failed: tuple[float, str] | None = None  # when a call last failed (monotonic), and why

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        with self._unavailable(), self.pool.connection() as connection, connection.transaction():
            yield _PostgresTransaction(connection)

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A connection of the pool (autocommit), for a store that runs its own transactions."""
        with self._unavailable(), self.pool.connection() as connection:
            yield connection

    def statement(self, sql: str, params: Params | None = None) -> list[Row]:
        with self._unavailable(), self.pool.connection() as connection:
            return _PostgresTransaction(connection).execute(sql, params)

    @contextmanager
    def _unavailable(self) -> Iterator[None]:
        """DatabaseUnavailable for a server that cannot be reached or failed; at once, without
        trying, for ``RETRY_S`` after a call found it so: in an outage, each request that needs the
        database is answered 503 at once rather than after the pool's wait for a connection."""
        import psycopg
        import psycopg_pool

        failed = self._failed
        if failed is not None and time.monotonic() - failed[0] < RETRY_S:
            raise DatabaseUnavailable(failed[1])
        try:
            yield
        except psycopg_pool.PoolTimeout:
            why = _POOL_ATTEMPTS.message.partition(": ")[2].strip().splitlines()[0:1]
            self._failed = (
                time.monotonic(),
                f"the state database ({self.description}) cannot be reached{': ' + why[0] if why else ''}",
            )
            raise DatabaseUnavailable(self._failed[1]) from None
        except psycopg.OperationalError as e:  # the server went away, or a statement ran out of time
            # The pool's other connections are likely broken too (a restart): checked now, the
            # broken ones replaced, rather than each failing a request of its own later.
            with suppress(psycopg.Error, psycopg_pool.PoolTimeout):
                self.pool.check()
            self._failed = (time.monotonic(), f"the state database ({self.description}) failed: {_first_line(e)}")
            raise DatabaseUnavailable(self._failed[1]) from None
        self._failed = None

    def close(self) -> None:
        self.pool.close()


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
