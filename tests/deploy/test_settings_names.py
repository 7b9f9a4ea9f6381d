"""Every MT_* variable the deployment files and guides name is a real setting of the service, so a
typo cannot configure nothing silently."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from repo_root import REPO

from service.settings import Settings

_MT_NAME = re.compile(r"\bMT_[A-Z0-9_]*[A-Z0-9]\b")


def files_naming_settings() -> list[Path]:
    deploy = [p for p in (REPO / "deploy").rglob("*") if p.suffix in {".yaml", ".yml", ".env", ".json"}]
    compose = sorted(p.name for p in REPO.glob("docker-compose*.yml"))  # the file and its overrides
    fixed = ["Dockerfile", *compose, "docs/deployment.md", "README.md"]
    return [REPO / name for name in fixed if (REPO / name).exists()] + deploy


def test_every_mt_variable_named_is_a_setting() -> None:
    settings = {f"MT_{name.upper()}" for name in Settings.model_fields}
    unknown = {}
    for path in files_naming_settings():
        names = set(_MT_NAME.findall(path.read_text(encoding="utf-8")))
        if names - settings:
            unknown[path.relative_to(REPO).as_posix()] = sorted(names - settings)
    assert not unknown, f"not settings of service/settings.py: {unknown}"


def test_compose_passes_through_every_tunable_setting() -> None:
    """docker-compose.yml forwards every setting but those the image fixes (models, provider) and
    those the command line sets (host, port)."""
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text(encoding="utf-8"))
    forwarded = set(compose["services"]["translator"]["environment"])
    fixed = {"MT_HOST", "MT_PORT", "MT_MODELS_DIR", "MT_MODEL_DIR", "MT_PROVIDER"}
    assert forwarded == {f"MT_{name.upper()}" for name in Settings.model_fields} - fixed
