"""``python -m benchmarks.composition`` at tiny size (run by run_all, see conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path


def test_sorted_and_arrival_batches_are_counted(tiny_results: Path) -> None:
    report = json.loads((tiny_results / "composition.json").read_text(encoding="utf-8"))
    results = {r["policy"]: r for r in report["results"]}
    assert set(results) == {"sorted 6", "arrival 6"}
    for r in results.values():
        assert r["sentences_per_s"] > 0 and r["source_padding"] >= 1
        # Every sentence is decoded for at least one step, on at least one row per step.
        assert r["steps_per_sentence"] > 0 and r["rows_per_step"] >= 1
        assert r["rows_per_sentence"] >= 1
    # Length-sorted batches of a fixed size pad the least of any cut into such batches.
    assert results["sorted 6"]["source_padding"] <= results["arrival 6"]["source_padding"]
    assert "| sorted 6 |" in report["markdown"] and "| arrival 6 |" in report["markdown"]
