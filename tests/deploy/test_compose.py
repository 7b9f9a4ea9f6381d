"""docker-compose.yml and its GPU override: the Compose Specification schema (offline, vendored by
check-jsonschema) and the wiring between translator, Prometheus and Grafana."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from repo_root import REPO
from service_process import CONTAINER_PORT

from service.settings import Settings

COMPOSE = REPO / "docker-compose.yml"
GPU_OVERRIDE = REPO / "docker-compose.gpu.yml"
LOCAL_ONLY = "${PUBLISH_ADDRESS:-127.0.0.1}"  # every published port's address, unless the user sets another


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Compose's merge for what the override uses: mappings merge key by key, the rest replaces."""
    result = dict(base)
    for key, value in override.items():
        both_maps = isinstance(value, dict) and isinstance(base.get(key), dict)
        result[key] = merged(base[key], value) if both_maps else value
    return result


def bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> host path of the service's bind mounts (short syntax, relative host paths)."""
    mounts = {}
    for volume in service.get("volumes", []):
        host, container = volume.split(":")[:2]
        if host.startswith("."):
            mounts[container] = (REPO / host).resolve()
    return mounts


def assert_override_follows_the_specification(override: Path, tmp_path: Path) -> None:
    """``override`` alone, and merged over docker-compose.yml, valid by the Compose Specification."""
    pytest.importorskip("check_jsonschema", reason="check-jsonschema not installed: compose schema not checked")
    both = tmp_path / f"{override.stem}-merged.yml"
    both.write_text(yaml.safe_dump(merged(load(COMPOSE), load(override))), encoding="utf-8")
    command = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec"]
    result = subprocess.run([*command, str(override), str(both)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def seconds(duration: str) -> float:
    match = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert match and any(match.groups()), f"unsupported duration {duration!r}"
    minutes, secs = (int(g or 0) for g in match.groups())
    return 60 * minutes + secs


def test_compose_files_follow_the_compose_specification(tmp_path: Path) -> None:
    pytest.importorskip("check_jsonschema", reason="check-jsonschema not installed: compose schema not checked")
    gpu = tmp_path / "docker-compose.gpu-merged.yml"
    gpu.write_text(yaml.safe_dump(merged(load(COMPOSE), load(GPU_OVERRIDE))), encoding="utf-8")
    command = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec"]
    result = subprocess.run([*command, str(COMPOSE), str(GPU_OVERRIDE), str(gpu)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_translator_runs_the_image_as_built() -> None:
    translator = load(COMPOSE)["services"]["translator"]
    assert translator["build"]["context"] == "." and (REPO / "Dockerfile").is_file()
    assert "command" not in translator and "entrypoint" not in translator, "the image's CMD is the tested command"
    assert "healthcheck" not in translator, "the image's HEALTHCHECK on /healthz applies"
    assert f"{LOCAL_ONLY}:{CONTAINER_PORT}:{CONTAINER_PORT}" in translator["ports"]
    drain = Settings().drain_timeout_s
    assert seconds(translator["stop_grace_period"]) > drain, "SIGKILL must not cut the drain short"


def test_every_service_restarts_and_the_monitoring_ones_have_health_checks() -> None:
    services = load(COMPOSE)["services"]
    assert {name: s.get("restart") for name, s in services.items()} == dict.fromkeys(services, "unless-stopped")
    for name in ("prometheus", "grafana"):
        assert services[name]["healthcheck"]["test"][0] == "CMD", name
    assert services["grafana"]["depends_on"]["prometheus"]["condition"] == "service_healthy"


def test_prometheus_scrapes_the_translator_with_the_mounted_config() -> None:
    prometheus = load(COMPOSE)["services"]["prometheus"]
    mounts = bind_mounts(prometheus)
    config_flag = next(arg for arg in prometheus["command"] if arg.startswith("--config.file="))
    config_path = Path(config_flag.split("=", 1)[1])
    host_config = mounts[str(config_path.parent)] / config_path.name
    assert host_config.is_file()
    config = yaml.safe_load(host_config.read_text(encoding="utf-8"))
    targets = [t for job in config["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    assert f"translator:{CONTAINER_PORT}" in targets
    for rule_file in config["rule_files"]:
        assert (host_config.parent / rule_file).is_file()


def test_grafana_provisioning_is_mounted_and_points_at_prometheus() -> None:
    grafana = load(COMPOSE)["services"]["grafana"]
    mounts = bind_mounts(grafana)
    provisioning = mounts["/etc/grafana/provisioning"]
    (datasource,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())["datasources"]
    assert datasource["url"] == "http://prometheus:9090"
    assert f"{LOCAL_ONLY}:9090:9090" in load(COMPOSE)["services"]["prometheus"]["ports"]
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "mt-service.yml").read_text())["providers"]
    dashboards = mounts[provider["options"]["path"]]
    assert sorted(p.name for p in dashboards.glob("*.json")) == ["mt-service.json"]
    home = Path(grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"])
    assert (mounts[str(home.parent)] / home.name).is_file()


def test_every_port_is_published_on_this_machine_only_unless_the_user_opens_it() -> None:
    """Published on every interface, with Grafana's admin/admin and anonymous viewing, a copy of the
    file exposed the service and its dashboards to the network."""
    services = load(COMPOSE)["services"]
    published = [port for service in services.values() for port in service.get("ports", [])]
    assert published and all(port.startswith(f"{LOCAL_ONLY}:") for port in published), published
    grafana = services["grafana"]["environment"]
    assert grafana["GF_AUTH_ANONYMOUS_ENABLED"] == "false" and "GF_AUTH_ANONYMOUS_ORG_ROLE" not in grafana
    assert grafana["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?"), "required, no default"


def test_gpu_override_builds_the_cuda_image_and_reserves_a_gpu() -> None:
    translator = merged(load(COMPOSE), load(GPU_OVERRIDE))["services"]["translator"]
    assert translator["build"]["args"]["DEVICE"] == "cuda"
    assert translator["build"]["context"] == "."
    assert translator["image"].endswith("-cuda")
    (device,) = translator["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
