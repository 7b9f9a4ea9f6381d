"""benchmarks.document_poll on a few requests: polls and downloads measured on both backends, one row each."""

from __future__ import annotations

from pathlib import Path

from postgres_server import PostgresServer, fresh_database, postgres  # noqa: F401 (the fixture)

from benchmarks.document_poll import markdown, measure


def test_polls_and_downloads_are_measured_on_both_backends(tmp_path: Path, postgres: PostgresServer) -> None:  # noqa: F811
    results = {
        "sqlite": measure("", tmp_path / "sqlite", 20),
        "postgresql": measure(fresh_database(postgres), tmp_path / "unused", 20),
    }
    for backend in results.values():
        assert set(backend) == {"poll, 1 at once", "poll, 16 at once", "download, one at a time"}
        for times in backend.values():
            assert 0 < times["median_ms"] <= times["p99_ms"]
    assert markdown(results).count("\n") == 2 + 3 - 1
