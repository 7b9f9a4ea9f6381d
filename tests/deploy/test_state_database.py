"""Where a deployment keeps its state: compose's PostgreSQL override, and the Kubernetes Secret that
gives every replica MT_DATABASE_URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from repo_root import REPO
from test_compose import assert_override_follows_the_specification, load

POSTGRES_OVERRIDE = REPO / "docker-compose.postgres.yml"


def test_the_postgres_override_follows_the_compose_specification(tmp_path: Path) -> None:
    assert_override_follows_the_specification(POSTGRES_OVERRIDE, tmp_path)


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
