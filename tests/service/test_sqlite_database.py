"""The embedded state database (``service.database.SqliteDatabase``) closed while another thread's
statement runs on it, as at a shutdown whose cancelled tasks leave their threads running: its
connections are shared between threads, and closing one under a running statement crashed the
process. ``close`` waits for the statement, and refuses new ones with a 503's error."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from service.database import SqliteDatabase
from service.errors import DatabaseUnavailable

ROWS = 10_000_000  # a statement SQLite takes about 1.2 s to count (AMD EPYC)
COUNT = f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {ROWS}) SELECT COUNT(*) FROM c"


def test_close_waits_for_a_statement_under_way_and_refuses_new_ones(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "state.sqlite3")
    counted: list = []
    starting = threading.Event()

    def count() -> None:
        starting.set()
        counted.extend(db.statement(COUNT))

    thread = threading.Thread(target=count)
    thread.start()
    starting.wait()
    time.sleep(0.3)  # well into the count
    db.close()
    assert counted == [(ROWS,)]  # the statement ended before its connection was closed
    thread.join()
    with pytest.raises(DatabaseUnavailable):
        db.statement("SELECT 1")
    with pytest.raises(DatabaseUnavailable), db.transaction():
        pass
