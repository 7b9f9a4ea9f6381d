"""The file store and DeepL's document jobs on both backends of the state database, for their tests:
SQLite with files in a directory, and a real PostgreSQL server with the bytes in it. ``Replicas``
opens stores on one database, each with its own connections, as replicas have them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from postgres_server import fresh_database

from service.database import Database, open_database
from service.file_store import MAX_BYTES, FileStore


class Replicas:
    def __init__(self, url: str, data_dir: Path) -> None:
        self.url, self.data_dir = url, data_dir
        self.databases: list[Database] = []

    @property
    def directory(self) -> Path | None:
        """Where the files' bytes are: None on PostgreSQL, which keeps them."""
        return None if self.url else self.data_dir / "files"

    def database(self) -> Database:
        self.databases.append(open_database(self.url, self.data_dir))
        return self.databases[-1]

    def files(
        self, expiry_s: float = 60.0, *, max_bytes: int = MAX_BYTES, clock: Callable[[], float] = time.time
    ) -> FileStore:
        """A file store of one more replica on the database."""
        return FileStore(self.database(), expiry_s, directory=self.directory, max_bytes=max_bytes, clock=clock)

    def close(self) -> None:
        for db in self.databases:
            db.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Replicas]:
    """Replicas on one empty database of each backend."""
    url = fresh_database(request.getfixturevalue("postgres")) if request.param == "postgresql" else ""
    opened = Replicas(url, tmp_path / "data")
    yield opened
    opened.close()
