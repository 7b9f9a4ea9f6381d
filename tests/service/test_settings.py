"""Settings from MT_* environment variables, and the service's --help that lists them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cli_help import assert_documents_every_option, compact, run_help
from pydantic import ValidationError
from repo_root import REPO

from service.__main__ import build_parser, main
from service.launcher import LiveService
from service.settings import DEFAULT_MODELS_DIR, Settings


def test_defaults_serve_the_shipped_models_without_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(Settings.model_fields):
        monkeypatch.delenv(f"MT_{name.upper()}", raising=False)
    settings = Settings()
    assert settings.models_dir == DEFAULT_MODELS_DIR == REPO / "models" and settings.model_dir is None
    assert settings.pivot and settings.preload_names is None and settings.max_loaded_models == 0
    assert settings.api_key_set == frozenset()
    assert settings.cache_size > 0


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MT_MODEL_DIR", "/somewhere/else")
    monkeypatch.setenv("MT_MAX_WAIT_MS", "0")
    monkeypatch.setenv("MT_API_KEYS", " alpha, beta ,,")
    monkeypatch.setenv("MT_PROVIDER", "cuda")
    monkeypatch.setenv("MT_PRELOAD", "a, b,")
    monkeypatch.setenv("MT_ROOT_PATH", "/translate/")
    settings = Settings()
    assert settings.root_path == "/translate"
    assert settings.preload_names == {"a", "b"}
    assert settings.model_dir == Path("/somewhere/else")
    assert settings.max_wait_ms == 0
    assert settings.api_key_set == {"alpha", "beta"}
    assert settings.provider == "cuda"


@pytest.mark.parametrize(
    "env",
    [
        {"MT_PROVIDER": "tpu"},
        {"MT_MAX_BATCH_SENTENCES": "0"},
        {"MT_REQUEST_TIMEOUT_S": "nan"},
        {"MT_CACHE_SIZE": "-1"},
        {"MT_MAX_TEXTS": "100", "MT_MAX_QUEUE_SENTENCES": "10"},
        {"MT_ROOT_PATH": "mt"},
        {"MT_IDLE_TIMEOUT_S": "0"},
        {"MT_PUBLIC_URL": "mt.example.com"},
        {"MT_PUBLIC_URL": "ftp://mt.example.com"},
        {"MT_PUBLIC_URL": "https://mt.example.com/mt?lang=de"},
        {"MT_PUBLIC_URL": "https://mt.example.com", "MT_ROOT_PATH": "/mt"},  # links would miss the prefix
    ],
)
def test_invalid_values_are_refused(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ValidationError):
        Settings()


@pytest.mark.parametrize("value", [" , ", ",", " ", ",,, ,"])
def test_api_keys_naming_no_key_refuse_to_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """A value that names no key once split and stripped is a mistake, not "no authentication"."""
    monkeypatch.setenv("MT_API_KEYS", value)
    with pytest.raises(ValidationError, match="names no key"):
        Settings()
    assert main([]) == 2
    assert f"invalid configuration: MT_API_KEYS: names no key ({value!r})" in capsys.readouterr().err


def test_an_empty_or_unset_api_keys_means_no_authentication(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MT_API_KEYS", raising=False)
    assert Settings().api_key_set == frozenset()
    monkeypatch.setenv("MT_API_KEYS", "")
    assert Settings().api_key_set == frozenset()


def test_the_service_refuses_to_start_with_keys_naming_none(tiny_bundle: Path, tmp_path: Path) -> None:
    """The real process: it exits 2 with the reason, rather than serving without authentication."""
    service = LiveService({"MT_MODEL_DIR": str(tiny_bundle), "MT_API_KEYS": " , "}, tmp_path / "service.log")
    with pytest.raises(RuntimeError, match="exited with 2 while starting"):
        service.wait_ready()
    assert "MT_API_KEYS: names no key (' , ')" in service.log()


def test_the_service_refuses_to_start_when_preload_names_no_model(tiny_bundle: Path, tmp_path: Path) -> None:
    settings = {"MT_MODEL_DIR": str(tiny_bundle), "MT_PRELOAD": "all-the-models"}
    service = LiveService(settings, tmp_path / "service.log")
    with pytest.raises(RuntimeError, match="exited with 1 while starting"):
        service.wait_ready()
    assert "MT_PRELOAD names no model of the repository: all-the-models" in service.log()


def test_the_public_url_is_kept_without_its_trailing_slash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MT_PUBLIC_URL", "https://mt.example.com/mt/")
    monkeypatch.setenv("MT_ROOT_PATH", "/mt")
    assert Settings().public_url == "https://mt.example.com/mt"


def as_environment(value: object) -> str:
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_help_documents_every_option_and_every_setting() -> None:
    text = run_help("service")
    assert_documents_every_option(build_parser("python -m service"), text)
    lines = text.splitlines()
    for name, info in Settings.model_fields.items():
        assert f"  MT_{name.upper()}={as_environment(info.default)}" in lines
        assert info.description, f"{name} has no description"
        assert compact(info.description) in compact(text), name


def test_help_names_the_installed_script(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", ["/usr/local/bin/mt-service", "--help"])
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("usage: mt-service ")
