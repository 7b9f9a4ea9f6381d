"""What a managed key costs a request: the key check, its rate and its monthly characters
(``service.access``), on SQLite in a directory and on PostgreSQL over a local socket.

Each request is what a translation route does before and after translating: ``Access.authorize``
(the key, read once and then kept ``KEY_RECHECK_S``; one write for its rate) and
``Access.metered`` (one write for its characters). Three callers: anonymous (keys not required:
only the characters are counted), a managed key without limits, and one with both limits (never
reached). Requests are made one at a time, then 16 at once (the per-request time then includes
waiting for the store's threads and the database's row lock: every request is the same key's).

    python -m benchmarks.key_metering [--requests 2000] [--database-url postgresql://...]

Without ``--database-url`` a throwaway PostgreSQL server is started (``tests/postgres_server.py``:
Debian's ``postgresql`` package). Writes ``results/key_metering.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS as RESULTS_DIR
from benchmarks.common import markdown_table, start_run, write_report
from service.access import Access, Caller
from service.database import migrate, open_database
from service.keys import KeyStore
from service.settings import Settings

RESULTS = RESULTS_DIR / "key_metering.json"
CHARACTERS = 60  # a short sentence's
# A benchmark's measurement on one backend: (MT_DATABASE_URL, "" for SQLite; its directory; requests) -> results.
Measure = Callable[[str, Path, int], dict[str, Any]]


async def _timed_requests(access: Access, key: str | None, requests: int, concurrency: int) -> list[float]:
    """Seconds each of ``requests`` took, ``concurrency`` at a time."""
    times: list[float] = []
    pending = iter(range(requests))

    async def client() -> None:
        for _ in pending:
            started = time.perf_counter()
            caller: Caller = await access.authorize(key)
            async with access.metered(caller, CHARACTERS):
                pass
            times.append(time.perf_counter() - started)

    await asyncio.gather(*(client() for _ in range(concurrency)))
    return times


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))] * 1000, 3),
    }


def measure(url: str, data_dir: Path, requests: int) -> dict[str, Any]:
    """Each caller's per-request times on the database at ``url`` ("" = SQLite in ``data_dir``)."""
    db = open_database(url, data_dir)
    migrate(db)
    store = KeyStore(db)
    _, plain = store.create("plain")
    _, limited = store.create("limited", characters_per_month=1 << 50, requests_per_minute=1 << 40)
    db.close()
    found: dict[str, Any] = {}
    callers = {"anonymous": (False, None), "managed key": (True, plain), "managed key with limits": (True, limited)}
    for name, (required, key) in callers.items():
        settings = Settings(require_keys=required, database_url=url, data_dir=data_dir)
        access = Access(settings, KeyStore(open_database(url, data_dir)))
        # The key read, the pool grown to its connections, the statements prepared on each.
        asyncio.run(_timed_requests(access, key, 200, 16))
        found[name] = {
            f"{concurrency} at once": summary(asyncio.run(_timed_requests(access, key, requests, concurrency)))
            for concurrency in (1, 16)
        }
        access.close()
    return found


def on_both_backends(measure: Measure, requests: int, database_url: str | None) -> dict[str, Any]:
    """``measure``'s results on SQLite in a temporary directory and on PostgreSQL: the database at
    ``database_url``, else a throwaway server's."""
    with tempfile.TemporaryDirectory() as sqlite_dir, tempfile.TemporaryDirectory() as unused:
        results = {"sqlite": measure("", Path(sqlite_dir), requests)}
        with _postgres(database_url) as url:
            results["postgresql"] = measure(url, Path(unused), requests)
    return results


@contextmanager
def _postgres(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from tests.postgres_server import fresh_database, throwaway_postgres

    with throwaway_postgres() as server:
        yield fresh_database(server)


def markdown(results: dict[str, Any]) -> str:
    """One row per caller and concurrency: each backend's median and p99, side by side."""
    rows = []
    for caller, by_concurrency in results["sqlite"].items():
        for concurrency, sqlite in by_concurrency.items():
            postgres = results["postgresql"][caller][concurrency]
            rows.append(
                [caller, concurrency, sqlite["median_ms"], postgres["median_ms"], sqlite["p99_ms"], postgres["p99_ms"]]
            )
    header = ["caller", "requests", "SQLite median ms", "PostgreSQL median ms", "SQLite p99 ms", "PostgreSQL p99 ms"]
    return markdown_table(header, rows)


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.key_metering", argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--database-url", help="a PostgreSQL database to use (default: a throwaway server)")
    args = parser.parse_args(start.argv)
    results = on_both_backends(measure, args.requests, args.database_url)
    report = {"requests": args.requests, "characters": CHARACTERS, "results": results, "markdown": markdown(results)}
    write_report(start, RESULTS, report)


if __name__ == "__main__":
    main()
