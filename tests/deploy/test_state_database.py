"""Where a deployment keeps its state: compose's PostgreSQL override, and the Kubernetes Secret that
gives every replica MT_DATABASE_URL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from repo_root import REPO
from test_compose import COMPOSE, load, merged

POSTGRES_OVERRIDE = REPO / "docker-compose.postgres.yml"


def test_the_postgres_override_follows_the_compose_specification(tmp_path: Path) -> None:
    pytest.importorskip("check_jsonschema", reason="check-jsonschema not installed: compose schema not checked")
    combined = tmp_path / "docker-compose.postgres-merged.yml"
    combined.write_text(yaml.safe_dump(merged(load(COMPOSE), load(POSTGRES_OVERRIDE))), encoding="utf-8")
    command = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec"]
    result = subprocess.run([*command, str(POSTGRES_OVERRIDE), str(combined)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_translator_uses_the_postgres_service_once_it_is_healthy() -> None:
    override = load(POSTGRES_OVERRIDE)["services"]
    [url] = [e for e in override["translator"]["environment"] if e.startswith("MT_DATABASE_URL=")]
    assert "@postgres:5432/mt" in url and "${POSTGRES_PASSWORD:?" in url  # the password is required
    assert override["translator"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    postgres = override["postgres"]
    assert "ports" not in postgres, "the database is for the other services only"
    assert postgres["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    assert "postgres-data:/var/lib/postgresql/data" in postgres["volumes"]
    assert "postgres-data" in load(POSTGRES_OVERRIDE)["volumes"]
    assert postgres["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]


def test_kubernetes_pods_take_the_database_url_from_an_optional_secret() -> None:
    deployment: dict[str, Any] = yaml.safe_load((REPO / "deploy/k8s/base/deployment.yaml").read_text())
    (translator,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in translator["env"]}
    secret = env["MT_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    assert secret == {"name": "mt-service-database", "key": "url", "optional": True}
