"""The dashboard and the alert rules against what the service's metrics mean, beyond their names
(test_grafana.py checks those on a live /metrics): which routes a latency may include, which
processes ``process_*`` describe, and that losing every target alerts."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml
from promql import reads
from test_grafana import ALERTS, alert_queries, dashboard_queries, load_dashboard
from test_prometheus import promtool

from service.middleware import TRANSLATION_PATHS
from service.settings import Settings

# Routes whose requests last as long as their text (a whole file, a stream to its last event): a
# few of them put every latency percentile at the histogram's top bucket.
LONG_ROUTES = {"/v1/translate/stream", "/v1/translate_file", "/translate_file"}
SHORT_ROUTES = {"/v1/translate", "/translate", "/v2/translate"}
LATENCY = "mt_request_duration_seconds_bucket"


def excluded_routes(expr: str) -> list[set[str]]:
    """For each selector of the latency histogram in ``expr``: the routes of interest it leaves out."""
    found = []
    for selector in reads(expr).selectors:
        if selector.metric != LATENCY:
            continue
        left_out: set[str] = set()
        for matcher in selector.matchers:
            if matcher.label == "route" and matcher.op == "!~":
                # Prometheus anchors label regexes at both ends.
                left_out |= {r for r in LONG_ROUTES | SHORT_ROUTES if re.fullmatch(matcher.value, r)}
        found.append(left_out)
    return found


def test_long_routes_are_translation_routes() -> None:
    """The routes named here are the service's: a renamed route fails this, not the panels."""
    assert LONG_ROUTES | (SHORT_ROUTES - {"/v2/translate"}) <= TRANSLATION_PATHS


def test_latency_percentiles_leave_out_streams_and_files() -> None:
    """The alert left them out; the dashboard did not, and showed the 30 s bucket as p99 as soon as a
    document was translated, while the alert said all was well."""
    queries = [(s, e) for s, e in [*dashboard_queries(), *alert_queries()] if LATENCY in e]
    assert queries
    for source, expr in queries:
        for left_out in excluded_routes(expr):
            assert left_out == LONG_ROUTES, f"{source}: leaves out {sorted(left_out)}, not {sorted(LONG_ROUTES)}"


def test_process_panels_say_they_show_the_http_process_only() -> None:
    """``process_*`` are the HTTP process's own: the engine processes (MT_ENGINE_PROCESS) and the
    document process hold most of the memory and do most of the work. A panel that calls them the
    replica's misleads whoever sizes the pod's limit by it."""
    assert Settings().engine_process, "with the engine in the HTTP process, process_* would be the replica's"
    panels = load_dashboard()["panels"]
    for panel in panels:
        if any(name.startswith("process_") for t in panel["targets"] for name in _metrics(t["expr"])):
            assert "http process" in panel["title"].lower(), panel["title"]
            assert "engine processes" in panel["description"], panel["title"]


def _metrics(expr: str) -> set[str]:
    return {selector.metric for selector in reads(expr).selectors}


def test_losing_every_target_alerts(tmp_path: Path) -> None:
    """``up == 0`` needs a target: with Kubernetes' pod discovery, no pod left means no ``up``
    series at all. Some alert must fire with nothing of the job scraped."""
    rules = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    fired = []
    for rule in (rule for group in rules["groups"] for rule in group["rules"]):
        case = {
            "interval": "1m",
            "input_series": [{"series": 'up{job="prometheus", instance="localhost:9090"}', "values": "1x30"}],
            "alert_rule_test": [{"eval_time": "20m", "alertname": rule["alert"], "exp_alerts": []}],
        }
        path = tmp_path / f"{rule['alert']}.yml"
        document = {"rule_files": [str(ALERTS)], "evaluation_interval": "1m", "tests": [case]}
        path.write_text(yaml.safe_dump(document), encoding="utf-8")
        result = subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True, text=True)
        # Expecting no alert, promtool fails exactly when one fired, and lists it under got.
        if result.returncode != 0:
            assert re.search(r"got:\[\s*0:", result.stdout + result.stderr), result.stdout + result.stderr
            fired.append(rule["alert"])
    assert fired, "no alert fires when the mt-service job has no target"


def test_alerts_read_only_the_scrape_jobs_name() -> None:
    """The alerts select ``job="mt-service"``, the job of deploy/prometheus and of the guide's
    Kubernetes scrape config; another name would leave them silent."""
    config = yaml.safe_load((ALERTS.parent / "prometheus.yml").read_text(encoding="utf-8"))
    jobs = {job["job_name"] for job in config["scrape_configs"]}
    guide = (ALERTS.parents[2] / "docs" / "deployment.md").read_text(encoding="utf-8")
    jobs_in_guide = set(re.findall(r"job_name:\s*([\w-]+)", guide))
    for source, expr in alert_queries():
        for selector in reads(expr).selectors:
            for matcher in selector.matchers:
                if matcher.label == "job":
                    assert matcher.value in jobs & jobs_in_guide, f"{source}: job {matcher.value!r}"
