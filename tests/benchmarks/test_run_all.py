"""``python -m benchmarks.run_all`` at tiny size (conftest.py): a result file per question, each with
the record of its run; the tables and the figure; and every entry point starts in a fresh process."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from repo_root import REPO

pytest.importorskip("ctranslate2", reason="the bench extra (ctranslate2) is not installed")

from benchmarks import run_all
from benchmarks.run_all import QUESTIONS, split_args

VERSIONS = ("python", "numpy", "onnxruntime", "ctranslate2")


def report(tiny_results: Path, name: str) -> dict:
    return json.loads((tiny_results / f"{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", QUESTIONS)
def test_every_result_file_records_machine_versions_and_command(tiny_results: Path, name: str) -> None:
    run = report(tiny_results, name)["run"]
    cpuinfo = Path("/proc/cpuinfo").read_text()
    machine = run["machine"]
    assert f"model name\t: {machine['cpu_model']}\n" in cpuinfo
    assert f"vendor_id\t: {machine['cpu_vendor']}\n" in cpuinfo
    assert f"cpu family\t: {machine['cpu_family']}\n" in cpuinfo
    assert f"model\t\t: {machine['cpu_model_number']}\n" in cpuinfo
    flags = next(line for line in cpuinfo.splitlines() if line.startswith("flags")).split()
    assert set(machine["vector_extensions"].split()) <= set(flags)
    assert ("avx2" in flags) == ("avx2" in machine["vector_extensions"].split())
    assert machine["cores_available"] == len(os.sched_getaffinity(0))
    assert 0 <= run["steal_percent"] <= 100
    assert set(VERSIONS) <= set(run["versions"])
    assert run["versions"]["onnxruntime"] == importlib.metadata.version("onnxruntime")
    assert datetime.fromisoformat(run["started_utc"]) <= datetime.fromisoformat(run["finished_utc"])
    assert run["command"].startswith(f"python -m benchmarks.{name} --")
    assert run["command"].endswith(f" --out {tiny_results / f'{name}.json'}")


def test_the_tables_quote_every_question_with_its_command(tiny_results: Path) -> None:
    tables = (tiny_results / "tables.md").read_text(encoding="utf-8")
    for name, (_, title) in QUESTIONS.items():
        question = report(tiny_results, name)
        assert f"## {title}\n" in tables
        assert question["markdown"] in tables and f"`{question['run']['command']}`" in tables


def test_the_service_figure_is_drawn(tiny_results: Path) -> None:
    assert (tiny_results / "service.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_arguments_go_to_the_entry_point_they_follow() -> None:
    own, groups = split_args(["--results", "out", "--service", "--rounds", "1", "--engine", "--limit", "6"])
    assert own == ["--results", "out"]
    assert groups == {
        "engine": ["--limit", "6"],
        "service": ["--rounds", "1"],
        "composition": [],
        "profile": [],
        "marian": [],
    }


def test_only_reruns_the_named_questions_and_rebuilds_the_tables(
    tiny_results: Path, tiny_bundle: Path, tiny_corpus: Path, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    shutil.copytree(tiny_results, results)
    (results / "tables.md").unlink()
    others = {name: (results / f"{name}.json").read_bytes() for name in QUESTIONS if name != "profile"}
    profile = ["--bundle", str(tiny_bundle), "--src", str(tiny_corpus / "val.en"), "--limit", "8"]
    run_all.main(["--results", str(results), "--only", "profile", "--profile", *profile, "--variants", "fp32"]
                 + ["--workdir", str(tmp_path / "prof")])  # fmt: skip
    assert {name: (results / f"{name}.json").read_bytes() for name in others} == others
    rerun = report(results, "profile")["run"]["command"]
    assert "--limit 8" in rerun and f"`{rerun}`" in (results / "tables.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("module", ["run_all", *QUESTIONS])
def test_every_entry_point_starts_in_a_fresh_process(module: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", "--help"], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: ")
