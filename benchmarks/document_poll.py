"""What the state database costs a DeepL document's status poll and its download, on SQLite in a
directory and on PostgreSQL over a local socket (``service.document_jobs``, ``service.file_store``).

A poll is ``DocumentJobs.find`` (one indexed read of the job's row), what ``POST /v2/document/<id>``
asks of the database; made one at a time, then 16 at once (each then includes waiting for the
threads). A download is ``take_result`` (the job's row deleted, the file and its bytes read; a
translated file of ``RESULT_BYTES``), made one at a time; the file is deleted after it, as the
route does. The route's HTTP and DeepL-shape work is the same on both backends and not measured.

    python -m benchmarks.document_poll [--requests 2000] [--database-url postgresql://...]

Without ``--database-url`` a throwaway PostgreSQL server is started (``tests/postgres_server.py``:
Debian's ``postgresql`` package). Writes ``results/document_poll.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS as RESULTS_DIR
from benchmarks.common import markdown_table, start_run, write_report
from benchmarks.key_metering import on_both_backends, summary
from service.database import open_database
from service.document_jobs import Document, DocumentJobs
from service.documents import FileJob, ReadDocument
from service.file_store import FileStore

RESULTS = RESULTS_DIR / "document_poll.json"
RESULT_BYTES = 100_000
JOB = FileJob(b"A dog runs.\n" * 100, "note.txt", "de", "en")


async def _translated(job: FileJob) -> tuple[bytes, ReadDocument]:
    return b"x" * RESULT_BYTES, ReadDocument(["A dog runs."], "txt", "text/plain", 11)  # type: ignore[arg-type]


async def _done(jobs: DocumentJobs) -> Document:
    document = await jobs.submit(JOB, owner="", keys_required=False)
    await asyncio.gather(*jobs.tasks)
    return document


async def _polls(jobs: DocumentJobs, document: Document, requests: int, concurrency: int) -> list[float]:
    times: list[float] = []
    pending = iter(range(requests))

    async def client() -> None:
        for _ in pending:
            started = time.perf_counter()
            await jobs.find(document.document_id, owner="", document_key=document.key)
            times.append(time.perf_counter() - started)

    await asyncio.gather(*(client() for _ in range(concurrency)))
    return times


async def _downloads(jobs: DocumentJobs, requests: int) -> list[float]:
    times: list[float] = []
    for _ in range(requests):
        document = await _done(jobs)
        started = time.perf_counter()
        found = await jobs.find(document.document_id, owner="", document_key=document.key)
        stored = await jobs.take_result(found)
        times.append(time.perf_counter() - started)
        await jobs.files.delete(stored.name)
    return times


async def _measure(jobs: DocumentJobs, requests: int) -> dict[str, Any]:
    document = await _done(jobs)
    await _polls(jobs, document, 200, 16)  # the pool grown to its connections, the statements prepared
    found = {f"poll, {n} at once": summary(await _polls(jobs, document, requests, n)) for n in (1, 16)}
    found["download, one at a time"] = summary(await _downloads(jobs, max(10, requests // 20)))
    return found


def measure(url: str, data_dir: Path, requests: int) -> dict[str, Any]:
    """Per-request times on the database at ``url`` ("" = SQLite, and files, in ``data_dir``)."""
    db = open_database(url, data_dir)
    files = FileStore(db, 600, directory=None if url else data_dir / "files")
    jobs = DocumentJobs(db, files, translate=_translated, expiry_s=600)
    try:
        return asyncio.run(_measure(jobs, requests))
    finally:
        db.close()


def markdown(results: dict[str, Any]) -> str:
    """One row per request kind: each backend's median and p99, side by side."""
    rows = [
        [kind, sqlite["median_ms"], results["postgresql"][kind]["median_ms"], sqlite["p99_ms"]]
        + [results["postgresql"][kind]["p99_ms"]]
        for kind, sqlite in results["sqlite"].items()
    ]
    header = ["request", "SQLite median ms", "PostgreSQL median ms", "SQLite p99 ms", "PostgreSQL p99 ms"]
    return markdown_table(header, rows)


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.document_poll", argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--database-url", help="a PostgreSQL database to use (default: a throwaway server)")
    args = parser.parse_args(start.argv)
    results = on_both_backends(measure, args.requests, args.database_url)
    report = {
        "requests": args.requests,
        "result_bytes": RESULT_BYTES,
        "results": results,
        "markdown": markdown(results),
    }
    write_report(start, RESULTS, report)


if __name__ == "__main__":
    main()
