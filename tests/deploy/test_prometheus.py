"""The Prometheus configuration and alert rules, checked by promtool (Debian package `prometheus`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from repo_root import REPO

PROMETHEUS_DIR = REPO / "deploy" / "prometheus"


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool not installed (apt-get install prometheus): Prometheus config not checked")
    return path


def run_promtool(*args: str, cwd: Path = PROMETHEUS_DIR) -> None:
    result = subprocess.run([promtool(), *args], cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, f"promtool {' '.join(args)}:\n{result.stdout}{result.stderr}"


def test_prometheus_config_is_valid() -> None:
    """Also checks the rule files the config names."""
    run_promtool("check", "config", "prometheus.yml")


def test_alert_rules_fire_as_their_unit_tests_expect() -> None:
    run_promtool("test", "rules", "alerts_test.yml")


def test_every_alert_is_unit_tested() -> None:
    rules = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text(encoding="utf-8"))
    alerts = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    tests = yaml.safe_load((PROMETHEUS_DIR / "alerts_test.yml").read_text(encoding="utf-8"))
    firing = {case["alertname"] for test in tests["tests"] for case in test["alert_rule_test"] if case["exp_alerts"]}
    assert alerts == firing, "each alert needs a case where it fires"
