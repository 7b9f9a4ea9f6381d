"""``python -m benchmarks.marian`` at tiny size (run by run_all, see conftest.py): a MarianMT
checkpoint converted by us and by CTranslate2, every system at one stream, ours and CTranslate2 at
two, outputs compared with transformers' ``generate``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("ctranslate2", reason="the bench extra (ctranslate2) is not installed")

from benchmarks.marian import MARIAN_SYSTEMS, REFERENCE


def results_by_streams(tiny_results: Path) -> dict[int, dict[str, dict]]:
    report = json.loads((tiny_results / "marian.json").read_text(encoding="utf-8"))
    return {s["streams"]: {r["system"]: r for r in s["results"]} for s in report["streams"]}


def test_every_system_runs_and_the_reference_is_measured_once(tiny_results: Path) -> None:
    settings = results_by_streams(tiny_results)
    assert set(settings[1]) == set(settings[2]) == set(MARIAN_SYSTEMS)
    assert settings[1][REFERENCE] == settings[2][REFERENCE]  # one stream only, quoted in both tables
    for results in settings.values():
        for r in results.values():
            assert r["sentences"] == 6 and r["target_tokens"] > 0 and r["peak_rss_mb"] > 0
            assert r["deterministic"] and r["beam_size"] == 4


def test_outputs_end_by_themselves_and_match_transformers_in_fp32(tiny_results: Path) -> None:
    for streams, results in results_by_streams(tiny_results).items():
        assert all(r["ended_rate"] >= 0.8 for r in results.values())
        assert results["ours-fp32"]["identical_rate"] == 1, streams
        assert all("identical_rate" in r for name, r in results.items() if name != REFERENCE)


def test_the_report_has_a_table_per_stream_setting(tiny_results: Path) -> None:
    markdown = json.loads((tiny_results / "marian.json").read_text(encoding="utf-8"))["markdown"]
    one, two = markdown.split("### 2 streams × 1 thread")
    assert one.startswith("### 1 stream × 2 threads")
    for table in (one, two):
        assert all(f"| {name} |" in table for name in MARIAN_SYSTEMS)
