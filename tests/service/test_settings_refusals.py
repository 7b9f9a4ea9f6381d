"""MT_* values that used to start a service that misbehaves, or to crash with a traceback: each
now refuses to start with one line naming the variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from service.__main__ import main
from service.launcher import LiveService
from service.settings import Settings

REFUSED = [
    # inf passed validation: a traceback (OverflowError) at start, or batches waiting for ever
    ("MT_DRAIN_TIMEOUT_S", "inf", "finite number"),
    ("MT_MAX_LOADED_MB", "inf", "finite number"),
    ("MT_CACHE_MB", "inf", "finite number"),
    ("MT_MAX_WAIT_MS", "inf", "finite number"),
    # an empty host listened on every interface instead of the loopback
    ("MT_HOST", "", "must be an address or host name"),
    ("MT_HOST", " 127.0.0.1", "must be an address or host name"),
    # empty values were read as "auto", "none", "the default" or the working directory
    ("MT_VARIANT", " ", "must name a variant"),
    ("MT_PRELOAD", "", "names no model"),
    ("MT_PRELOAD", " , ", "names no model"),
    ("MT_DETECT_LANGUAGES", " , ", "names no language"),
    ("MT_DATA_DIR", "", "names no directory"),
    ("MT_MODELS_DIR", " ", "names no directory"),
    # a traceback from language identification once the models had loaded
    ("MT_DETECT_LANGUAGES", "en,xx", "language identification does not know xx"),
    # onnxruntime started threads (or the service engine processes) until the machine ran out
    ("MT_THREADS", "1000000", "less than or equal to 1024"),
    ("MT_STREAMS", "100000", "less than or equal to 256"),
]


@pytest.mark.parametrize(("name", "value", "reason"), REFUSED)
def test_a_value_that_cannot_work_refuses_to_start_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, value: str, reason: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match=reason):
        Settings()
    assert main([]) == 2
    err = capsys.readouterr().err
    assert f"invalid configuration: {name}: " in err and reason in err
    assert len(err.splitlines()) == 1, err


def test_a_data_dir_that_is_a_file_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """It used to start and report ready, then answer every glossary request 500."""
    blocker = tmp_path / "data"
    blocker.write_text("")
    for data_dir in (blocker, blocker / "below"):
        monkeypatch.setenv("MT_DATA_DIR", str(data_dir))
        with pytest.raises(ValidationError):  # before main, which would serve if it were accepted
            Settings()
        assert main([]) == 2
        assert f"MT_DATA_DIR: {blocker} is a file, not a directory" in capsys.readouterr().err


def test_valid_values_are_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MT_DETECT_LANGUAGES", "EN, de")
    monkeypatch.setenv("MT_VARIANT", " int8")
    monkeypatch.setenv("MT_PRELOAD", "none")
    monkeypatch.setenv("MT_DATA_DIR", str(tmp_path / "not" / "yet" / "made"))
    settings = Settings()
    assert settings.variant == "int8" and settings.preload_names == frozenset()
    assert settings.detect_languages == "EN, de"


def test_the_real_process_exits_2_with_one_line(tiny_bundle: Path, tmp_path: Path) -> None:
    """MT_DRAIN_TIMEOUT_S=inf used to end the process in an OverflowError traceback."""
    settings = {"MT_MODEL_DIR": str(tiny_bundle), "MT_DRAIN_TIMEOUT_S": "inf"}
    service = LiveService(settings, tmp_path / "service.log")
    with pytest.raises(RuntimeError, match="exited with 2 while starting"):
        service.wait_ready()
    assert service.log().strip().splitlines() == [
        "python -m service: invalid configuration: MT_DRAIN_TIMEOUT_S: Input should be a finite number"
    ]
