"""Start-up failures that the configuration explains end the process with one clear line, not a
traceback (exit 1, as before; a host name that does not resolve is a bad setting: exit 2). A
failure that nothing explains, a bug, keeps its traceback."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from repo_root import REPO

from service.__main__ import main
from service.app import _load
from service.launcher import LiveService, service_env


def _start_failure(settings: dict[str, str], log_path: Path) -> tuple[int, str]:
    service = LiveService({"MT_THREADS": "1", "MT_LOG_LEVEL": "warning", **settings}, log_path)
    service.wait(120)
    return service.stop(), service.log()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("preload", "MT_PRELOAD names no model of the repository: nosuch"),
        ("missing", "bundle directory does not exist"),
        ("file", "bundle directory does not exist"),
        ("variant", "no variant 'int4'"),
    ],
)
def test_an_expected_start_up_failure_is_one_line(
    tiny_bundle: Path, tmp_path: Path, setting: str, message: str
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    settings = {
        "preload": {"MT_MODEL_DIR": str(tiny_bundle), "MT_PRELOAD": "nosuch"},
        "missing": {"MT_MODEL_DIR": str(tmp_path / "no-such-bundle")},
        "file": {"MT_MODEL_DIR": str(blocker)},
        "variant": {"MT_MODEL_DIR": str(tiny_bundle), "MT_VARIANT": "int4"},
    }[setting]
    status, log = _start_failure({**settings, "MT_DATA_DIR": str(tmp_path / "data")}, tmp_path / "service.log")
    assert status == 1, log
    assert "Traceback" not in log, log
    [line] = [line for line in log.splitlines() if "service.app" in line]
    assert "ERROR service.app: no model could be loaded: " in line and message in line


def test_an_unexpected_start_up_failure_keeps_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        load_error: str | None = None

        async def load(self) -> None:
            raise ZeroDivisionError("a bug")

    failed: list[bool] = []
    with caplog.at_level(logging.ERROR, logger="service.app"):
        asyncio.run(_load(Broken(), lambda: failed.append(True)))  # type: ignore[arg-type]
    [record] = caplog.records
    assert record.exc_info is not None and record.exc_info[0] is ZeroDivisionError
    assert failed == [True]


def test_a_host_that_does_not_resolve_refuses_to_start_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tiny_bundle: Path, tmp_path: Path
) -> None:
    """uvicorn failed to bind with ``[Errno -2] Name or service not known`` and exit 3."""
    # The program's name comes from argv[0], which differs under pytest-xdist's workers.
    monkeypatch.setattr(sys, "argv", [str(REPO / "service" / "__main__.py")])
    monkeypatch.setenv("MT_HOST", "nonexistent.invalid")
    assert main([]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("python -m service: invalid configuration: MT_HOST: 'nonexistent.invalid' ")
    monkeypatch.delenv("MT_HOST")
    assert main(["--host", "nonexistent.invalid"]) == 2
    assert "invalid configuration: --host: 'nonexistent.invalid' " in capsys.readouterr().err

    # The real process, as a container starts it: the variable alone.
    env = {
        **service_env({"MT_MODEL_DIR": str(tiny_bundle), "MT_HOST": "nonexistent.invalid"}),
        "MT_DATA_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "-m", "service"], env=env, cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("python -m service: invalid configuration: MT_HOST: 'nonexistent.invalid' ")
