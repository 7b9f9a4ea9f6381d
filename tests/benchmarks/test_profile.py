"""``python -m benchmarks.profile`` at tiny size (run by run_all, see conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def test_the_wall_time_and_the_graph_time_are_split(tiny_results: Path) -> None:
    report = json.loads((tiny_results / "profile.json").read_text(encoding="utf-8"))
    (result,) = report["results"]
    assert result["variant"] == "fp32" and result["sentences_per_s"] > 0
    shares = result["share"]
    assert set(shares) == {"encoder", "decoder graph", "cache reordering", "search and text"}
    assert sum(shares.values()) == pytest.approx(1.0)
    assert all(0 < shares[part] < 1 for part in ("encoder", "decoder graph", "search and text"))
    operators = result["operators"]
    assert operators and all(0 < share <= 1 for share in operators.values())
    assert sum(operators.values()) <= 1 + 1e-9
    assert list(operators.values()) == sorted(operators.values(), reverse=True)
    costliest = next(iter(operators))
    assert "| fp32 |" in report["markdown"] and f"| {costliest} |" in report["markdown"]
