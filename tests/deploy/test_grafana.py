"""The Grafana provisioning and dashboard, and the promise behind them: every metric, label and label
value that the dashboard and the alert rules query exists on a live /metrics of the real service."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from promql import reads, substitute_grafana_variables
from repo_root import REPO
from service_process import running_service

GRAFANA_DIR = REPO / "deploy" / "grafana"
DASHBOARD = GRAFANA_DIR / "dashboards" / "mt-service.json"
DATASOURCES = GRAFANA_DIR / "provisioning" / "datasources" / "prometheus.yml"
ALERTS = REPO / "deploy" / "prometheus" / "alerts.yml"
# The user-facing guides that list the metrics (the deployment guide may be merged into the README).
GUIDES = (REPO / "docs" / "deployment.md", REPO / "README.md")
# Added by Prometheus, not exported by the service.
TARGET_LABELS = {"job", "instance"}
PROMETHEUS_SERIES = {"up"}
# The list of panels, as fragments of panel titles.
REQUIRED_PANELS = (
    "request rate by status",
    "latency percentiles",
    "queue wait",
    "batch size (sentences)",
    "batch size (tokens)",
    "tokens/s",
    "errors by type",
    "cache hit ratio",
    "in-flight requests",
)
# How users write a family's name: counters with _total, info metrics with _info.
WRITTEN_SUFFIX = {"counter": "_total", "info": "_info"}
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
}


def load_dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, expression) of every query, template variables included."""
    dashboard = load_dashboard()
    queries = [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        definition = variable["definition"]  # label_values(METRIC, LABEL)
        metric, label = definition.removeprefix("label_values(").removesuffix(")").split(",")
        queries.append((f"${variable['name']}", f"count by ({label.strip()}) ({metric.strip()})"))
    return queries


def alert_queries() -> list[tuple[str, str]]:
    rules = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    return [(rule["alert"], rule["expr"]) for group in rules["groups"] for rule in group["rules"]]


def test_dashboard_has_the_panels_operators_need() -> None:
    titles = [panel["title"].lower() for panel in load_dashboard()["panels"]]
    missing = [want for want in REQUIRED_PANELS if not any(want in title for title in titles)]
    assert not missing, f"panels missing from the dashboard: {missing}"


def test_dashboard_uses_the_provisioned_datasource_and_a_valid_layout() -> None:
    (datasource,) = yaml.safe_load(DATASOURCES.read_text(encoding="utf-8"))["datasources"]
    dashboard = load_dashboard()
    panels = dashboard["panels"]
    users = panels + [t for p in panels for t in p["targets"]] + dashboard["templating"]["list"]
    assert {(u["datasource"]["type"], u["datasource"]["uid"]) for u in users} == {("prometheus", datasource["uid"])}
    assert len({p["id"] for p in panels}) == len(panels), "panel ids must be unique"
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
    assert dashboard["uid"] and dashboard["title"]


def test_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    """promtool parses each query as a recording rule (Grafana's variables substituted first)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (apt-get install prometheus): dashboard PromQL not parsed")
    rules = [
        {"record": f"dashboard:query_{i}", "expr": substitute_grafana_variables(expr)}
        for i, (_, expr) in enumerate(dashboard_queries())
    ]
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}), encoding="utf-8")
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@dataclass
class Exposition:
    """What a /metrics page exports: series names, and the label names and values seen on them."""

    series: set[str] = field(default_factory=set)
    families: dict[str, str] = field(default_factory=dict)  # name as users write it -> type
    labels: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    values: dict[tuple[str, str], set[str]] = field(default_factory=lambda: defaultdict(set))

    @classmethod
    def parse(cls, text: str) -> Exposition:
        exposition = cls()
        for family in text_string_to_metric_families(text):
            if not family.name.endswith("_created"):  # the text format shows counters' _created apart
                exposition.families[family.name + WRITTEN_SUFFIX.get(family.type, "")] = family.type
            # Declared series count even before they have samples.
            exposition.series.update(family.name + s for s in SUFFIXES.get(family.type, ("",)))
            for sample in family.samples:
                exposition.series.add(sample.name)
                for label, value in sample.labels.items():
                    exposition.labels[sample.name].add(label)
                    exposition.values[sample.name, label].add(value)
        return exposition


@pytest.fixture(scope="module")
def live_metrics(tiny_bundle: Path) -> Exposition:
    """/metrics of the real service after traffic on every route the queries filter on."""
    env = {"MT_THREADS": "1", "MT_CACHE_SIZE": "16"}
    with running_service(tiny_bundle, env=env) as url, httpx.Client(base_url=url, timeout=60) as client:
        for _ in range(2):  # the second one is a cache hit
            response = client.post("/v1/translate", json={"text": "A man runs.", "target_lang": "de"})
            assert response.status_code == 200, response.text
        response = client.post("/translate", json={"q": "A dog sits.", "source": "en", "target": "de"})
        assert response.status_code == 200, response.text
        assert client.post("/v1/translate", json={"text": "no target"}).status_code == 422
        for path in ("/healthz", "/readyz", "/v1/models", "/metrics"):
            assert client.get(path).status_code == 200
        text = client.get("/metrics").text
    return Exposition.parse(text)


def problems_with(source: str, expr: str, live: Exposition) -> list[str]:
    """Every metric, label and literal label value ``expr`` reads that ``live`` does not export."""
    found, read = [], reads(expr)
    labels_in_expr = set(TARGET_LABELS)
    for selector in read.selectors:
        metric = selector.metric
        if metric in PROMETHEUS_SERIES:
            continue
        if metric not in live.series:
            close = sorted(s for s in live.series if s.startswith(metric.rsplit("_", 1)[0]))
            found.append(f"{source}: no series {metric} on /metrics (similar: {close})")
            continue
        labels_in_expr |= live.labels[metric]
        for matcher in selector.matchers:
            if matcher.label in TARGET_LABELS:
                continue
            if matcher.label not in live.labels[metric]:
                found.append(f"{source}: {metric} has no label {matcher.label!r} ({sorted(live.labels[metric])})")
            elif matcher.label == "status":  # values come and go with traffic: check their form only
                found += [f"{source}: bad status {v!r}" for v in matcher.literal_values() or [] if not v.isdigit()]
            else:
                seen = live.values[metric, matcher.label]
                unseen = [v for v in matcher.literal_values() or [] if v not in seen]
                found += [f"{source}: {metric}{{{matcher.label}={v!r}}} not exported ({sorted(seen)})" for v in unseen]
    for label in sorted(read.grouping_labels - labels_in_expr):
        found.append(f"{source}: groups by {label!r}, which none of its series has")
    return found


def test_dashboard_and_alerts_query_only_what_the_service_exports(live_metrics: Exposition) -> None:
    found = []
    for source, expr in [*dashboard_queries(), *alert_queries()]:
        found += problems_with(source, expr, live_metrics)
    assert not found, "\n".join(found)


def test_the_check_catches_a_misspelt_metric_label_and_value(live_metrics: Exposition) -> None:
    """The check above would fail on the usual dashboard mistakes."""
    assert problems_with("x", "rate(mt_request_total[5m])", live_metrics)
    assert problems_with("x", 'rate(mt_requests_total{path="/v1/translate"}[5m])', live_metrics)
    assert problems_with("x", 'rate(mt_requests_total{route="/v2/translate"}[5m])', live_metrics)
    assert problems_with("x", "sum by (model) (rate(mt_requests_total[5m]))", live_metrics)
    assert not problems_with("x", 'sum by (status) (rate(mt_requests_total{route="/v1/translate"}[5m]))', live_metrics)


def test_the_guide_lists_exactly_the_exported_metrics(live_metrics: Exposition) -> None:
    text = "\n".join(path.read_text(encoding="utf-8") for path in GUIDES if path.exists())
    documented = set(re.findall(r"`(mt_[a-z0-9_]+)`", text))
    exported = {name for name in live_metrics.families if name.startswith("mt_")}
    assert documented == exported, f"undocumented: {exported - documented}; not exported: {documented - exported}"
