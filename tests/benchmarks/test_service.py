"""``python -m benchmarks.service`` at tiny size (run by run_all, see conftest.py): each measurement
between two offline runs, the medians over rounds; and the summary's arithmetic."""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path

import pytest

from benchmarks.loadgen import CPU_SPLIT
from benchmarks.service import summarize
from service.settings import Settings


def load_report(tiny_results: Path) -> dict:
    return json.loads((tiny_results / "service.json").read_text(encoding="utf-8"))


def setups(tiny_results: Path) -> dict[tuple[int, str], dict]:
    return {(setup["streams"], setup["batching"]): setup for setup in load_report(tiny_results)["setups"]}


def test_it_measures_the_decoder_the_service_runs_by_default(tiny_results: Path) -> None:
    """Run without ``--row-pool`` or ``--cuda-graphs``, it measures what ``python -m service``
    serves unless told otherwise."""
    settings = load_report(tiny_results)["settings"]
    defaults = Settings()
    assert settings["row_pool"] == ("on" if defaults.row_pool else "off")
    assert settings["cuda_graphs"] == ("on" if defaults.cuda_graphs else "off")


def test_each_measurement_lies_between_two_offline_runs(tiny_results: Path) -> None:
    settings = load_report(tiny_results)["settings"]
    assert settings["rounds"] > 1, "the tiny run must have rounds to take medians of"
    measured = setups(tiny_results)
    assert set(measured) == {(2, "on"), (2, "off")}
    for setup in measured.values():
        cells = setup["levels"]
        assert [(c["round"], c["concurrency"]) for c in cells] == [
            (round_, concurrency) for round_ in range(settings["rounds"]) for concurrency in settings["concurrency"]
        ]
        for previous, cell in itertools.pairwise(cells):
            assert cell["offline_before"] == previous["offline_after"]  # one offline run between two levels
        for cell in cells:
            reference = (cell["offline_before"]["throughput"] + cell["offline_after"]["throughput"]) / 2
            assert cell["offline"] == pytest.approx(reference)
            assert cell["ratio"] == pytest.approx(cell["throughput"] / reference)


def test_every_request_succeeds_and_the_cpu_is_accounted_for(tiny_results: Path) -> None:
    for setup in setups(tiny_results).values():
        for cell in setup["levels"]:
            assert cell["errors"] == 0 and cell["requests"] > 0
            assert cell["p50_s"] <= cell["p95_s"] <= cell["p99_s"]
            # The clients' share can round to 0: the raw client uses ~0.13 ms per request, under one
            # 10 ms CPU-accounting tick in a 1 s window; the engine's cannot.
            assert set(cell["cpu_percent"]) == set(CPU_SPLIT) and min(cell["cpu_percent"].values()) >= 0
            assert cell["cpu_percent"]["engine"] > 0, cell["cpu_percent"]
    assert all(cell["mean_batch_sentences"] == 1 for cell in setups(tiny_results)[2, "off"]["levels"])


def test_the_table_gives_each_concurrency_over_all_rounds(tiny_results: Path) -> None:
    report = load_report(tiny_results)
    concurrency = report["settings"]["concurrency"]
    for setup in report["setups"]:
        assert [row["concurrency"] for row in setup["summary"]] == concurrency
        for row in setup["summary"]:
            cells = [c for c in setup["levels"] if c["concurrency"] == row["concurrency"]]
            assert row["rounds"] == report["settings"]["rounds"]
            assert row["throughput"] == pytest.approx(statistics.median(c["throughput"] for c in cells))
    assert report["markdown"].startswith("### 2 streams × 1 thread")
    assert report["markdown"].count("\n| on |") == report["markdown"].count("\n| off |") == len(concurrency)


def cell(round_: int, throughput: float, ratio: float, p99_s: float | None, errors: int) -> dict:
    cpu = dict.fromkeys(CPU_SPLIT, 10.0 * (round_ + 1))
    return {"concurrency": 4, "round": round_, "throughput": throughput, "offline": 100.0, "ratio": ratio,
            "p50_s": p99_s, "p95_s": p99_s, "p99_s": p99_s, "mean_batch_sentences": None, "errors": errors,
            "cpu_percent": cpu}  # fmt: skip


def test_summary_medians_skip_missing_latencies_and_errors_add_up() -> None:
    (row,) = summarize([cell(0, 50.0, 0.5, None, 3), cell(1, 70.0, 0.7, 0.2, 0), cell(2, 90.0, 0.9, 0.4, 1)])
    assert row["rounds"] == 3 and row["throughput"] == 70.0 and row["ratio"] == 0.7
    assert row["ratio_range"] == [0.5, 0.9]
    assert row["p99_s"] == pytest.approx(0.3)  # the median of the two rounds that had a latency
    assert row["mean_batch_sentences"] is None and row["errors"] == 4
    assert row["cpu_percent"] == dict.fromkeys(CPU_SPLIT, 20.0)
