"""Glossaries: a store of named term lists for one language pair, for our API (``/v1/glossaries``)
and DeepL's (``/v2/glossaries``), applied while decoding (``engine.glossary``: a sentence that says
a source term uses its target term).

Kept in one SQLite database, ``glossaries.sqlite3`` under MT_DATA_DIR (made on first use, so that a
service that never stores a glossary writes nothing). Every call opens its own connection, so that
the routes may call it from worker threads at once; a glossary and all its entries are written in
one transaction (``BEGIN IMMEDIATE``), an update included (its entries read, changed and written
back in that transaction): a reader sees the whole glossary or none of it, before an update or
after it, and a failed write leaves nothing. Writers wait for each other (SQLite's busy timeout);
readers do not wait for writers (write-ahead log). A database made before entries had their
``case_sensitive`` column gets it on first use (its entries are case-insensitive, as they matched).

With MT_DATABASE_URL the same tables live in that PostgreSQL database (``service.database``, made by
its versioned migrations), shared by every replica: the same SQL through a pooled connection,
writers taking turns at an advisory lock (as SQLite's writers at its lock), a glossary and its
entries read in one repeatable-read snapshot.

A translation naming a glossary gets it built for the engine (``glossary``): checked, indexed, and
kept (``engine.glossary.BuiltGlossaries``) under the revision it was built from, which every write
to the glossary raises. A request then costs one indexed read of that number while the glossary is
unchanged, and sees a change made by any process sharing the database at once.

Each glossary belongs to an owner (the routes pass a digest of the API key, or "" when the service
has no keys): an owner sees only its own. Entries are checked as DeepL checks them (every line a
source and a target term, neither empty, no control characters; a CSV row naming other languages
than the glossary's left out) and as the engine will use them
(``engine.glossary.Glossary``): no source term twice as it matches ("Dog" and "dog" are one
case-insensitive term), at most ``engine.glossary.MAX_TERM_WORDS`` words a term, and at most
``MAX_ENTRIES`` entries a glossary.
"""

from __future__ import annotations

import csv
import errno
import io
import logging
import re
import sqlite3
import unicodedata
import uuid
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from engine.glossary import BuiltGlossaries, Glossary, Term
from engine.languages import UnsupportedLanguage, primary_subtag
from engine.picklable import Picklable
from service.database import GLOSSARY_TABLES, migrated, use_write_ahead_log
from service.disk_reserve import Reserve, free_bytes
from service.errors import storage_full

if TYPE_CHECKING:
    from engine.repository import Router
    from service.database import PostgresDatabase

DATABASE_NAME = "glossaries.sqlite3"
DELETE_STEP = 200  # entries deleted at a time on a full disk: a few hundred pages of log at most
_WRITE_LOCK = 50_051  # PostgreSQL's advisory lock that glossary writes take turns at (any number, the same everywhere)
BUSY_TIMEOUT_S = 30.0
log = logging.getLogger(__name__)

MAX_TERM_CHARS = 1024
# Every listing of a key's glossaries carries their names: unbounded, 1,000 names of a request's
# megabyte each made one listing a gigabyte.
MAX_NAME_CHARS = 200
MAX_ID_CHARS = 36  # a glossary's id: a UUID
# A glossary's terms are looked up in every text it translates, and it is built (checked and
# indexed) once per change: 10,000 keep both within milliseconds.
MAX_ENTRIES = 10_000
# Glossaries one key may keep (as DeepL allows an account): with MAX_ENTRIES terms of up to
# MAX_TERM_CHARS each, what one key can make the store hold stays bounded.
MAX_GLOSSARIES = 1_000
# The text of a key's glossaries' terms (UTF-8), all together: 1,000 glossaries of 10,000 terms of
# 1,024 characters let one key store tens of GB, growing the store 12 MB a second.
MAX_KEY_TEXT_BYTES = 64 << 20
MAX_BUILT_MB = 64  # of the glossaries kept built for translation (engine.glossary.BuiltGlossaries)
# Every regional variant DeepL's codes name (developers.deepl.com, "Languages supported"): each
# is its language's, served by its language's model; any other (EN-XX) names no language. A
# glossary itself is for a language, never a variant (DeepL refuses EN-GB there).
DEEPL_VARIANTS = frozenset({"en-gb", "en-us", "pt-br", "pt-pt", "zh-hans", "zh-hant", "es-419"})
# Put into a translation, a term's bidirectional override or isolate would reorder the text that
# follows it on screen ("Trojan Source"); the marks (LRM, RLM) that right-to-left terms need are
# not among them.
# Characters of no width that spell nothing: soft hyphen, zero-width space, word joiner, BOM.
ZERO_WIDTH = re.compile("[\u00ad\u200b\u2060\ufeff]")
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
EntriesFormat = Literal["tsv", "csv"]
Side = Literal["source", "target"]


class InvalidEntries(Picklable, ValueError):
    """Entries that cannot make a glossary (DeepL answers 400); ``entry`` is the line or row of a
    TSV or CSV text that is wrong (from 1), where one is."""

    def __init__(self, message: str, *, entry: int | None = None) -> None:
        super().__init__(message)
        self.entry = entry


class StoreReplaced(Exception):
    """The database file was deleted or replaced during a call: the next call makes it again."""


class TooManyGlossaries(Exception):
    """The owner already keeps ``MAX_GLOSSARIES``."""


@dataclass(frozen=True)
class GlossaryInfo:
    glossary_id: str
    name: str
    source_lang: str
    target_lang: str
    creation_time: str  # ISO 8601 in UTC with milliseconds, as DeepL writes it
    entry_count: int


def parse_entries(text: str, entries_format: EntriesFormat, pair: tuple[str, str], served: Router) -> list[Term]:
    """Case-insensitive terms, in order, for the glossary of ``pair`` (source, target), from DeepL's
    TSV (``source<TAB>target`` a line) or CSV (``source,target`` a row, RFC 4180 quoting); blank
    lines are skipped and terms stripped. A CSV row may name its languages after its terms
    (``source,target,source_lang,target_lang``; further columns are ignored, as DeepL's glossary
    exports add one): as DeepL does, a row whose languages are not ``pair`` is left out, each
    language read as ``served`` reads a request's (any case, a model's own code), or a variant of
    ``DEEPL_VARIANTS`` (EN-GB) as its language. InvalidEntries says which line is wrong, or the
    first left out when all were; the terms themselves are checked by ``checked``."""
    terms: list[Term] = []
    left_out: tuple[int, list[str]] | None = None  # the first row for another pair
    for n, fields in _rows(text, entries_format):
        _check_width(n, fields, entries_format)
        if _for_pair(fields[2:4], pair, served):
            terms.append(Term(fields[0].strip(), fields[1].strip()))
        elif left_out is None:
            left_out = (n, fields[2:4])
    if not terms and left_out is not None:
        n, languages = left_out
        named = " to ".join(repr(name.strip()) for name in languages)
        raise InvalidEntries(
            f"entry {n}: its languages ({named}) are not the glossary's, {pair[0]} to {pair[1]}, "
            "and no entry is for them",
            entry=n,
        )
    return terms


def _rows(text: str, entries_format: EntriesFormat) -> list[tuple[int, list[str]]]:
    """The non-blank lines or rows of ``text``, numbered from 1, split into their fields."""
    if entries_format == "tsv":
        return [(n, line.split("\t")) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if entries_format == "csv":
        try:
            return [(n, row) for n, row in enumerate(csv.reader(io.StringIO(text), strict=True), 1) if any(row)]
        except csv.Error as e:
            raise InvalidEntries(f"entries: malformed CSV: {e}") from None
    raise InvalidEntries(f"entries_format: must be tsv or csv, not {entries_format!r}")


def _check_width(n: int, fields: list[str], entries_format: EntriesFormat) -> None:
    # A CSV row of three fields names one language (or has a term with an unquoted comma): which
    # pair it is for cannot be told, so it is refused rather than guessed at.
    if entries_format == "tsv" and len(fields) != 2:
        raise InvalidEntries(f"entry {n}: expected source<TAB>target, found {len(fields)} field(s)", entry=n)
    if entries_format == "csv" and len(fields) in (1, 3):
        raise InvalidEntries(
            f"entry {n}: expected source,target or source,target,source_lang,target_lang, found {len(fields)} field(s)",
            entry=n,
        )


def _for_pair(languages: Sequence[str], pair: tuple[str, str], served: Router) -> bool:
    """Whether a row's language columns, where it has them, name ``pair``; an empty one names none
    (a spreadsheet writes empty cells for a column some rows leave blank)."""
    sides: tuple[Side, Side] = ("source", "target")
    return all(
        _language(served, name, side) == code
        for name, side, code in zip(languages, sides, pair, strict=False)
        if name.strip()
    )


def _language(served: Router, name: str, side: Side) -> str | None:
    """The served language ``name`` means on ``side``, as the router resolves a request's; None if
    it names none. DeepL names a glossary's language by its base code, and its exports may name
    one of its variants (EN-GB): that is its language where the variant itself is not served. A
    regional code DeepL does not name (DE-DE, EN-XX) names none, as DeepL leaves such rows out,
    though a request's may be read as its language."""
    wanted = name.strip()
    for candidate in dict.fromkeys((wanted, variant_language(wanted) or wanted)):
        try:
            code = served.code(candidate, side)
        except UnsupportedLanguage:
            continue
        if "-" not in candidate or code.lower() == candidate.lower():
            return code
    return None


def variant_language(code: str) -> str | None:
    """The language a variant of ``DEEPL_VARIANTS`` names (EN-GB: en, in any case); None for any
    other code, a variant DeepL does not name (EN-XX) included."""
    wanted = code.strip().lower()
    return primary_subtag(wanted) if wanted in DEEPL_VARIANTS else None


def checked(terms: Sequence[Term]) -> Glossary:
    """``terms`` as the engine's glossary, stripped; InvalidEntries naming the first entry (from 0)
    that cannot be in one: an empty term, one too long or with a control character, a line break
    or a bidirectional override, more than ``MAX_TERM_WORDS`` words, a source term twice; or no entries, or too many."""
    if not terms:
        raise InvalidEntries("entries: a glossary needs at least one entry")
    if len(terms) > MAX_ENTRIES:
        raise InvalidEntries(f"entries: {len(terms)} entries; a glossary has at most {MAX_ENTRIES}")
    stripped = tuple(
        Term(_term(i, t.source, source=True), _term(i, t.target, source=False), t.case_sensitive)
        for i, t in enumerate(terms)
    )
    try:
        return Glossary(stripped)
    except ValueError as e:  # the engine names the term: "term 3: duplicate source term 'Dog' (as term 1)"
        raise InvalidEntries(f"entries: {e}") from None


def _term(index: int, value: str, *, source: bool) -> str:
    """A term stripped, its zero-width characters taken out (the text a term is found in has none:
    with one, the term never matched); InvalidEntries if it cannot be a term."""
    term = ZERO_WIDTH.sub("", value).strip()
    if not term:
        raise InvalidEntries(f"entries: term {index}: empty term")
    if len(term) > MAX_TERM_CHARS:
        raise InvalidEntries(f"entries: term {index}: a term has more than {MAX_TERM_CHARS} characters")
    _refuse_unprintable(f"entries: term {index}: a term", term)
    if source and not any(c.isalnum() for c in term):
        # "-" or "." would be found between any two words and put its target there
        raise InvalidEntries(f"entries: term {index}: a source term needs a letter or a digit, not only {term!r}")
    return term


def _refuse_unprintable(what: str, value: str) -> None:
    """InvalidEntries if ``value`` has a control character, a line break or a bidirectional
    embedding, override or isolate (which would turn the text around it in every listing)."""
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in value):
        raise InvalidEntries(f"{what} contains a control character or a line break")
    if any(c in BIDI_CONTROLS for c in value):
        raise InvalidEntries(f"{what} contains a bidirectional embedding, override or isolate")


def merged(current: Sequence[Term], changes: Sequence[Term], remove: Sequence[str] = ()) -> list[Term]:
    """``current`` without the entries whose source is one of ``remove`` (as written, stripped),
    then with ``changes``: one replaces the entry with its source term as the engine compares them
    (the same words, case-folded unless case-sensitive), or is added after the others."""
    removed = {source.strip() for source in remove}
    replaced = {t.key for t in changes}
    kept = [t for t in current if t.source not in removed and t.key not in replaced]
    return [*kept, *changes]


def to_tsv(terms: Sequence[Term]) -> str:
    """The entries as DeepL sends them back: ``source<TAB>target`` lines."""
    return "".join(f"{t.source}\t{t.target}\n" for t in terms)


class _Connection(Protocol):
    """What the store's SQL runs on: sqlite3's connection, or ``_Postgres``."""

    in_transaction: bool

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Any: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]], /) -> Any: ...


class GlossaryStore:
    def __init__(self, directory: Path, *, postgres: PostgresDatabase | None = None) -> None:
        """The store in ``directory`` (SQLite), or in the PostgreSQL database ``postgres`` (the
        state database, MT_DATABASE_URL), which every replica shares."""
        self.path = directory / DATABASE_NAME
        self.postgres = postgres
        self._ready = False
        self._problem: str | None = None  # what ``problem`` last found
        self._built = BuiltGlossaries(MAX_BUILT_MB * 1024 * 1024)
        self._reserve = Reserve(self.path.with_name(DATABASE_NAME + "-reserve"))

    def create(
        self, owner: str, name: str, source_lang: str, target_lang: str, entries: Sequence[Term]
    ) -> GlossaryInfo:
        """Store a new glossary with its entries (``checked``), atomically."""
        terms = checked(entries).terms
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        glossary = GlossaryInfo(str(uuid.uuid4()), _name(name), source_lang, target_lang, now, len(terms))
        with self._transaction() as db:
            (kept,) = db.execute("SELECT COUNT(*) FROM glossaries WHERE owner = ?", (owner,)).fetchone()
            if kept >= MAX_GLOSSARIES:
                raise TooManyGlossaries(f"at most {MAX_GLOSSARIES:,} glossaries are kept for a key: delete one first")
            _check_room(db, owner, glossary.glossary_id, terms)
            db.execute(
                "INSERT INTO glossaries (id, owner, name, source_lang, target_lang, creation_time, entry_count,"
                " text_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (glossary.glossary_id, owner, glossary.name, source_lang, target_lang, now, len(terms), _bytes(terms)),
            )
            _write_entries(db, glossary.glossary_id, terms)
        return glossary

    def update(
        self,
        owner: str,
        glossary_id: str,
        *,
        name: str | None = None,
        entries: Sequence[Term] | None = None,
        changes: Sequence[Term] = (),
        remove: Sequence[str] = (),
    ) -> GlossaryInfo | None:
        """Rename the glossary, replace its entries (``entries``) or change them (``merged``), in one
        transaction; None if it does not exist. InvalidEntries (and nothing changed) if the entries
        it would have cannot make a glossary."""
        with self._transaction() as db:
            info = self._get(db, owner, glossary_id)
            if info is None:
                return None
            if name is not None:
                info = replace(info, name=_name(name))
                db.execute(
                    "UPDATE glossaries SET name = ?, revision = revision + 1 WHERE id = ?", (info.name, glossary_id)
                )
            if entries is not None or changes or remove:
                current = _read_entries(db, glossary_id) if entries is None else entries
                terms = checked(merged(current, checked(changes).terms if changes else (), remove)).terms
                _check_room(db, owner, glossary_id, terms)
                db.execute("DELETE FROM entries WHERE glossary_id = ?", (glossary_id,))
                _write_entries(db, glossary_id, terms)
                db.execute(
                    "UPDATE glossaries SET entry_count = ?, text_bytes = ?, revision = revision + 1 WHERE id = ?",
                    (len(terms), _bytes(terms), glossary_id),
                )
                info = replace(info, entry_count=len(terms))
        return info

    def list(self, owner: str) -> list[GlossaryInfo]:
        """The owner's glossaries, oldest first."""
        with self._connection() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM glossaries WHERE owner = ? ORDER BY creation_time, id", (owner,)
            ).fetchall()
        return [GlossaryInfo(*row) for row in rows]

    def get(self, owner: str, glossary_id: str) -> GlossaryInfo | None:
        with self._connection() as db:
            return self._get(db, owner, glossary_id)

    def entries(self, owner: str, glossary_id: str) -> list[Term] | None:
        """The glossary's entries in the order they were given; None if it does not exist."""
        found = self.with_entries(owner, glossary_id)
        return None if found is None else found[1]

    def with_entries(self, owner: str, glossary_id: str) -> tuple[GlossaryInfo, list[Term]] | None:
        """The glossary and its entries, read together; None if it does not exist."""
        found = self._snapshot(owner, glossary_id)
        return None if found is None else found[:2]

    def glossary(self, owner: str, glossary_id: str) -> tuple[GlossaryInfo, Glossary] | None:
        """The glossary, as the engine uses it (``checked``); None if it does not exist. Built
        once per revision: a request costs one indexed read while the glossary is unchanged."""
        with self._connection() as db:
            found = self._revision(db, owner, glossary_id)
        if found is None:
            return None
        info, revision = found
        built = self._built.get((glossary_id, revision))
        if built is None:
            snapshot = self._snapshot(owner, glossary_id)
            if snapshot is None:
                return None
            info, terms, revision = snapshot
            built = checked(terms)
            self._built.put((glossary_id, revision), built)
        return info, built

    def _snapshot(self, owner: str, glossary_id: str) -> tuple[GlossaryInfo, list[Term], int] | None:
        with self._connection() as db:
            # One snapshot: the glossary and its entries together (PostgreSQL's default isolation
            # would give each statement its own).
            db.execute("BEGIN" if self.postgres is None else "BEGIN ISOLATION LEVEL REPEATABLE READ")
            found = self._revision(db, owner, glossary_id)
            terms = _read_entries(db, glossary_id)
            db.execute("COMMIT")
        return None if found is None else (found[0], terms, found[1])

    def delete(self, owner: str, glossary_id: str) -> bool:
        """Delete the glossary and its entries; False if it did not exist. On a full disk too
        (``_delete_on_full_disk``)."""
        try:
            with self._transaction() as db:
                deleted = db.execute("DELETE FROM glossaries WHERE owner = ? AND id = ?", (owner, glossary_id)).rowcount
        except (sqlite3.OperationalError, OSError) as e:
            if self.postgres is not None or not storage_full(e):
                raise
            deleted = self._delete_on_full_disk(owner, glossary_id)
        self._reserve.keep()
        return deleted > 0

    def _delete_on_full_disk(self, owner: str, glossary_id: str) -> int:
        """Delete on a full disk: with the reserve's room, the log emptied first, the glossary in one
        small transaction (its entries left for the steps after: what each step writes to the log
        is bounded), then its entries ``DELETE_STEP`` at a time, the log emptied after each. Entries
        a step could not delete are taken out when the store is next opened."""
        self._reserve.release()
        with self._connection() as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.execute("PRAGMA foreign_keys = OFF")
            deleted: int = db.execute(
                "DELETE FROM glossaries WHERE owner = ? AND id = ?", (owner, glossary_id)
            ).rowcount
            step = "DELETE FROM entries WHERE rowid IN (SELECT rowid FROM entries WHERE glossary_id = ? LIMIT ?)"
            try:
                while db.execute(step, (glossary_id, DELETE_STEP)).rowcount:
                    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.OperationalError as e:
                log.warning("entries of deleted glossary %s left for the next start: %s", glossary_id, e)
        return deleted

    @classmethod
    def _get(cls, db: _Connection, owner: str, glossary_id: str) -> GlossaryInfo | None:
        found = cls._revision(db, owner, glossary_id)
        return None if found is None else found[0]

    @staticmethod
    def _revision(db: _Connection, owner: str, glossary_id: str) -> tuple[GlossaryInfo, int] | None:
        """The glossary, and the revision of it that the database holds."""
        row = db.execute(
            f"SELECT {_COLUMNS}, revision FROM glossaries WHERE owner = ? AND id = ?", (owner, glossary_id)
        ).fetchone()
        return None if row is None else (GlossaryInfo(*row[:-1]), row[-1])

    @contextmanager
    def _transaction(self) -> Iterator[_Connection]:
        """A write transaction: committed if the block ends, rolled back if it raises. Writers
        take turns, as SQLite has them (every replica's, on PostgreSQL): an update reads a
        glossary's entries and writes them back, and a key's count and room are checked first."""
        try:
            with self._connection() as db:
                if self.postgres is None:
                    db.execute("BEGIN IMMEDIATE")
                else:
                    db.execute("BEGIN")
                    db.execute("SELECT pg_advisory_xact_lock(?)", (_WRITE_LOCK,))
                try:
                    yield db
                except BaseException:
                    if db.in_transaction:  # SQLite has rolled it back itself after some errors (a full disk)
                        db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
        except sqlite3.OperationalError as e:
            # On a full disk SQLite says SQLITE_FULL, except where its log or shared index could not
            # grow: then an I/O error. Said as the file system would say it.
            if self.postgres is None and _io_error(e) and free_bytes(self.path.parent) == 0:
                raise OSError(errno.ENOSPC, f"no space left for the glossary store: {e}") from e
            raise

    def problem(self) -> str | None:
        """Why the store cannot be used (a damaged database file), None while it can: a deleted
        one is made again, empty, by the check itself. One short read, waiting for no writer; a
        change of state is logged once. On PostgreSQL, None: an outage is the state database's,
        answered 503 by the routes that need it (``service.database``)."""
        if self.postgres is not None:
            return None
        found = None
        try:
            with self._connection(busy_timeout_s=0.1) as db:
                db.execute("SELECT 1 FROM glossaries LIMIT 1").fetchall()
        except sqlite3.Error as e:
            found = str(e) if damaged(e) else None  # busy or locked is in use, not damaged
        if found != self._problem:
            if found is None:
                log.warning("the glossary store %s can be used again", self.path)
            else:
                log.error("the glossary store %s cannot be used: %s", self.path, found)
            self._problem = found
        return found

    @contextmanager
    def _connection(self, busy_timeout_s: float = BUSY_TIMEOUT_S) -> Iterator[_Connection]:
        """A connection of its own (autocommit: transactions are begun explicitly), with the schema.
        A database deleted under the service is made again, empty, and said so."""
        if self.postgres is not None:
            migrated(self.postgres)  # the schema is the state database's (``service.database.MIGRATIONS``)
            with self.postgres.connection() as connection:
                yield _Postgres(connection)
            return
        if self._ready and not _has_data(self.path):
            log.error("the glossary store %s was deleted or emptied: made again, empty", self.path)
            self._ready = False
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None)) as db:
            db.execute("PRAGMA foreign_keys = ON")
            if not self._ready:
                use_write_ahead_log(db, BUSY_TIMEOUT_S)
                _create_or_migrate(db)
                self._reserve.keep()
                self._ready = True
            try:
                yield db
            except sqlite3.OperationalError as e:
                if "no such table" not in str(e):
                    raise
                # Deleted after the check above, or replaced by another database: made again at the
                # next use. Left "ready", every call answered "no such table" until a restart.
                log.error("the glossary store %s was replaced while in use: made again at its next use", self.path)
                self._ready = False
                raise StoreReplaced(f"the glossary store (MT_DATA_DIR) was replaced while in use: {e}") from None


def damaged(error: sqlite3.Error) -> bool:
    """Whether ``error`` says the database file is not a usable database (not one, or malformed)."""
    if not isinstance(error, sqlite3.DatabaseError):
        return False
    return not isinstance(error, sqlite3.OperationalError) or "malformed" in str(error)


def _io_error(e: sqlite3.Error) -> bool:
    """One of SQLite's I/O errors (SQLITE_IOERR and its extended codes)."""
    return (getattr(e, "sqlite_errorcode", 0) & 0xFF) == sqlite3.SQLITE_IOERR


def _has_data(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False


class _Postgres:
    """A psycopg connection (autocommit) as the store's SQL uses one: sqlite3's methods, ``?``
    placeholders."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.connection.execute(sql.replace("?", "%s"), params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.connection.cursor() as cursor:
            cursor.executemany(sql.replace("?", "%s"), rows)

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        return bool(self.connection.info.transaction_status != TransactionStatus.IDLE)


def _create_or_migrate(db: sqlite3.Connection) -> None:
    """Make the schema, or bring a database made by an earlier version up to it, in one write
    transaction: connections that open the database at once do not both alter it."""
    db.execute("BEGIN IMMEDIATE")
    for statement in GLOSSARY_TABLES:
        db.execute(statement)
    for table, column in (("entries", "case_sensitive"), ("glossaries", "revision"), ("glossaries", "text_bytes")):
        if column not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0")
            if column == "text_bytes":  # the glossaries an earlier version stored, counted once
                db.execute(
                    "UPDATE glossaries SET text_bytes = (SELECT COALESCE(SUM(LENGTH(CAST(source AS BLOB))"
                    " + LENGTH(CAST(target AS BLOB))), 0) FROM entries WHERE glossary_id = glossaries.id)"
                )
    # What a deletion on a full disk left (``GlossaryStore._delete_on_full_disk``).
    db.execute("DELETE FROM entries WHERE glossary_id NOT IN (SELECT id FROM glossaries)")
    db.execute("COMMIT")


def _name(name: str) -> str:
    if not name.strip():
        raise InvalidEntries("name: must not be empty")
    _refuse_unprintable("name:", name)
    return name


def quoted_id(glossary_id: str) -> str:
    """``glossary_id`` as an error message names it: quoted, or by its length when it is longer
    than any id this service makes (an id of 500 KB came back in a 500 KB answer)."""
    return repr(glossary_id) if len(glossary_id) <= MAX_ID_CHARS else f"of {len(glossary_id)} characters"


def _bytes(terms: Sequence[Term]) -> int:
    """The text of ``terms``, in UTF-8 bytes: what a key's glossaries are bounded by."""
    return sum(len(t.source.encode()) + len(t.target.encode()) for t in terms)


def _check_room(db: _Connection, owner: str, glossary_id: str, terms: Sequence[Term]) -> None:
    """TooManyGlossaries if the owner's glossaries, ``glossary_id``'s as ``terms``, would hold
    more text than ``MAX_KEY_TEXT_BYTES``."""
    (others,) = db.execute(
        "SELECT COALESCE(SUM(text_bytes), 0) FROM glossaries WHERE owner = ? AND id != ?", (owner, glossary_id)
    ).fetchone()
    if others + _bytes(terms) > MAX_KEY_TEXT_BYTES:
        raise TooManyGlossaries(
            f"a key's glossaries hold at most {MAX_KEY_TEXT_BYTES >> 20} MiB of terms; these would make "
            f"{(others + _bytes(terms)) / 2**20:.1f} MiB: delete or shorten some first"
        )


def _write_entries(db: _Connection, glossary_id: str, terms: Sequence[Term]) -> None:
    db.executemany(
        # PostgreSQL takes a bool as a boolean, which its integer column must be cast from
        "INSERT INTO entries VALUES (?, ?, ?, ?, CAST(? AS INTEGER))",
        [(glossary_id, i, t.source, t.target, t.case_sensitive) for i, t in enumerate(terms)],
    )


def _read_entries(db: _Connection, glossary_id: str) -> list[Term]:
    rows = db.execute(
        "SELECT source, target, case_sensitive FROM entries WHERE glossary_id = ? ORDER BY position", (glossary_id,)
    )
    return [Term(source, target, bool(case_sensitive)) for source, target, case_sensitive in rows]


_COLUMNS = "id, name, source_lang, target_lang, creation_time, entry_count"
