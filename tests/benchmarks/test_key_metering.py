"""benchmarks.key_metering on a few requests: every caller measured on both backends, one row each."""

from __future__ import annotations

from pathlib import Path

from postgres_server import PostgresServer, fresh_database, postgres  # noqa: F401 (the fixture)

from benchmarks.key_metering import markdown, measure


def test_every_caller_is_measured_on_both_backends(tmp_path: Path, postgres: PostgresServer) -> None:  # noqa: F811
    results = {
        "sqlite": measure("", tmp_path / "sqlite", 20),
        "postgresql": measure(fresh_database(postgres), tmp_path / "unused", 20),
    }
    for backend in results.values():
        assert set(backend) == {"anonymous", "managed key", "managed key with limits"}
        for by_concurrency in backend.values():
            for times in by_concurrency.values():
                assert 0 < times["median_ms"] <= times["p99_ms"]
    assert markdown(results).count("\n") == 2 + 3 * 2 - 1
