"""A throwaway PostgreSQL server for the tests: a cluster made with ``initdb`` and run with
``pg_ctl`` (Debian's ``postgresql`` package; scripts/test.sh installs it), listening only on a Unix
socket in a temporary directory. PostgreSQL refuses to run as root, as the tests do here and in CI:
then the cluster is made and run as ``nobody``, in a directory it owns.

``PostgresServer.stop`` and ``start`` stop and start the same cluster, for the tests of a database
that goes away under the service."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

UNPRIVILEGED = "nobody"
PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found is None:
        found = next((str(d / name) for d in PG_BIN_DIRS if (d / name).exists()), None)
    return found


class PostgresServer:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.log = root / "server.log"
        self._as_user: list[str] = []
        if os.getuid() == 0:
            user = pwd.getpwnam(UNPRIVILEGED)
            os.chown(root, user.pw_uid, user.pw_gid)
            self._as_user = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
        self._run(
            [
                _tool("initdb") or "initdb",
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "--no-sync",
                "-E",
                "UTF8",
            ]
        )
        self.start()

    @property
    def url(self) -> str:
        """The database's URL, its socket directory as the host (libpq's form for a Unix socket)."""
        return f"postgresql://postgres@/postgres?host={self.root}"

    def start(self) -> None:
        # No TCP, fsync off (a throwaway cluster), and enough connections for several services' pools.
        options = f"-k {self.root} -c listen_addresses='' -c fsync=off -c max_connections=200"
        self._run(
            [_tool("pg_ctl") or "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "start"]
        )

    def stop(self, mode: str = "fast") -> None:
        self._run([_tool("pg_ctl") or "pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop"])

    def psql(self, sql: str) -> str:
        command = [_tool("psql") or "psql", "-h", str(self.root), "-U", "postgres", "-At", "-c", sql]
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout

    def _run(self, command: list[str]) -> None:
        done = subprocess.run([*self._as_user, *command], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {done.stderr or done.stdout}")


def postgres_missing() -> str | None:
    """Why a PostgreSQL server cannot be started here, None when it can."""
    if _tool("initdb") is None or _tool("pg_ctl") is None:
        return "PostgreSQL's initdb and pg_ctl are not installed (scripts/test.sh installs Debian's postgresql)"
    if os.getuid() == 0 and shutil.which("setpriv") is None:
        return "running as root without setpriv to run PostgreSQL as another user"
    return None


@contextmanager
def throwaway_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of its own, removed at the end; skipped, saying why, where none can be
    started."""
    if (missing := postgres_missing()) is not None:
        pytest.skip(missing)
    root = Path(tempfile.mkdtemp(prefix="mt-postgres-"))
    server = PostgresServer(root)
    try:
        yield server
    finally:
        with suppress(RuntimeError):  # stopped already by a test that stops it
            server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the session, each test module using databases of its own on it."""
    with throwaway_postgres() as server:
        yield server


_databases = iter(range(1, 1 << 30))


def fresh_database(server: PostgresServer) -> str:
    """A new, empty database on ``server``: its URL."""
    name = f"test_{next(_databases)}"
    server.psql(f"CREATE DATABASE {name}")
    return f"postgresql://postgres@/{name}?host={server.root}"
