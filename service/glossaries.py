"""Glossaries (DeepL's API v2 ``/v2/glossaries``): a store of named term lists for one language pair.

Kept in one SQLite database, ``glossaries.sqlite3`` under MT_DATA_DIR (made on first use, so that a
service that never stores a glossary writes nothing). Every call opens its own connection, so that
the routes may call it from worker threads at once; a glossary and all its entries are written in
one transaction (``BEGIN IMMEDIATE``): a reader sees the whole glossary or none of it, and a
failed write leaves nothing. Writers wait for each other (SQLite's busy timeout); readers do not
wait for writers (write-ahead log).

Each glossary belongs to an owner (the routes pass a digest of the API key, or "" when the service
has no keys): an owner sees only its own. Entries are checked as DeepL checks them: every line a
source and a target term, neither empty, no source term twice, no control characters. Applying a
glossary while decoding is not done yet: the store only keeps them.
"""

from __future__ import annotations

import csv
import io
import sqlite3
import unicodedata
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

DATABASE_NAME = "glossaries.sqlite3"
BUSY_TIMEOUT_S = 30.0
MAX_TERM_CHARS = 1024
EntriesFormat = Literal["tsv", "csv"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS glossaries (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    name TEXT NOT NULL,
    source_lang TEXT NOT NULL,
    target_lang TEXT NOT NULL,
    creation_time TEXT NOT NULL,
    entry_count INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS glossaries_by_owner ON glossaries (owner, creation_time);
CREATE TABLE IF NOT EXISTS entries (
    glossary_id TEXT NOT NULL REFERENCES glossaries (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    PRIMARY KEY (glossary_id, position)
);
"""


class InvalidEntries(ValueError):
    """Entries that cannot make a glossary (DeepL answers 400)."""


@dataclass(frozen=True)
class Glossary:
    glossary_id: str
    name: str
    source_lang: str
    target_lang: str
    creation_time: str  # ISO 8601 in UTC with milliseconds, as DeepL writes it
    entry_count: int


def parse_entries(text: str, entries_format: EntriesFormat) -> dict[str, str]:
    """Source term -> target term, in order, from DeepL's TSV (``source<TAB>target`` a line) or
    CSV (``source,target`` a row, optionally with the languages after them, RFC 4180 quoting);
    blank lines are skipped and terms stripped. InvalidEntries says which line is wrong."""
    if entries_format == "tsv":
        rows = [(n, line.split("\t")) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    elif entries_format == "csv":
        try:
            rows = [(n, row) for n, row in enumerate(csv.reader(io.StringIO(text), strict=True), 1) if any(row)]
        except csv.Error as e:
            raise InvalidEntries(f"entries: malformed CSV: {e}") from None
    else:
        raise InvalidEntries(f"entries_format: must be tsv or csv, not {entries_format!r}")
    entries: dict[str, str] = {}
    for n, fields in rows:
        if len(fields) not in (2, 4) or (entries_format == "tsv" and len(fields) != 2):
            expected = "source<TAB>target" if entries_format == "tsv" else "source,target"
            raise InvalidEntries(f"entry {n}: expected {expected}, found {len(fields)} field(s)")
        source, target = (_term(n, field) for field in fields[:2])
        if source in entries:
            raise InvalidEntries(f"entry {n}: duplicate source term {source!r}")
        entries[source] = target
    if not entries:
        raise InvalidEntries("entries: a glossary needs at least one entry")
    return entries


def _term(line: int, value: str) -> str:
    term = value.strip()
    if not term:
        raise InvalidEntries(f"entry {line}: empty term")
    if len(term) > MAX_TERM_CHARS:
        raise InvalidEntries(f"entry {line}: a term has more than {MAX_TERM_CHARS} characters")
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in term):
        raise InvalidEntries(f"entry {line}: a term contains a control character or a line break")
    return term


def to_tsv(entries: dict[str, str]) -> str:
    """The entries as DeepL sends them back: ``source<TAB>target`` lines."""
    return "".join(f"{source}\t{target}\n" for source, target in entries.items())


class GlossaryStore:
    def __init__(self, directory: Path) -> None:
        self.path = directory / DATABASE_NAME
        self._ready = False

    def create(self, owner: str, name: str, source_lang: str, target_lang: str, entries: dict[str, str]) -> Glossary:
        """Store a new glossary with its entries, atomically."""
        if not name.strip():
            raise InvalidEntries("name: must not be empty")
        if not entries:
            raise InvalidEntries("entries: a glossary needs at least one entry")
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        glossary = Glossary(str(uuid.uuid4()), name, source_lang, target_lang, now, len(entries))
        with self._connection() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    "INSERT INTO glossaries VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (glossary.glossary_id, owner, name, source_lang, target_lang, now, len(entries)),
                )
                db.executemany(
                    "INSERT INTO entries VALUES (?, ?, ?, ?)",
                    [(glossary.glossary_id, i, s, t) for i, (s, t) in enumerate(entries.items())],
                )
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        return glossary

    def list(self, owner: str) -> list[Glossary]:
        """The owner's glossaries, oldest first."""
        with self._connection() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM glossaries WHERE owner = ? ORDER BY creation_time, id", (owner,)
            ).fetchall()
        return [Glossary(*row) for row in rows]

    def get(self, owner: str, glossary_id: str) -> Glossary | None:
        with self._connection() as db:
            row = db.execute(
                f"SELECT {_COLUMNS} FROM glossaries WHERE owner = ? AND id = ?", (owner, glossary_id)
            ).fetchone()
        return Glossary(*row) if row else None

    def entries(self, owner: str, glossary_id: str) -> dict[str, str] | None:
        """The glossary's entries in the order they were given; None if it does not exist."""
        with self._connection() as db:
            db.execute("BEGIN")  # one snapshot: the glossary and its entries together
            found = db.execute("SELECT 1 FROM glossaries WHERE owner = ? AND id = ?", (owner, glossary_id)).fetchone()
            rows = db.execute(
                "SELECT source, target FROM entries WHERE glossary_id = ? ORDER BY position", (glossary_id,)
            ).fetchall()
            db.execute("COMMIT")
        return dict(rows) if found else None

    def delete(self, owner: str, glossary_id: str) -> bool:
        """Delete the glossary and its entries; False if it did not exist."""
        with self._connection() as db:
            db.execute("BEGIN IMMEDIATE")
            deleted = db.execute("DELETE FROM glossaries WHERE owner = ? AND id = ?", (owner, glossary_id)).rowcount
            db.execute("COMMIT")
        return deleted > 0

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """A connection of its own (autocommit: transactions are begun explicitly), with the schema."""
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)) as db:
            db.execute("PRAGMA foreign_keys = ON")
            if not self._ready:
                db.execute("PRAGMA journal_mode = WAL")
                db.executescript(_SCHEMA)
                self._ready = True
            yield db


_COLUMNS = "id, name, source_lang, target_lang, creation_time, entry_count"
