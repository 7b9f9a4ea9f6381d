"""The record every result file carries (benchmarks/common.py)."""

from __future__ import annotations

import subprocess

import pytest
from repo_root import REPO

from benchmarks.common import CpuTimes, code_revision, run_record, start_run, steal_percent, streams_title


def test_steal_is_a_share_of_all_cpu_time_between_two_readings() -> None:
    before = CpuTimes(total=100.0, idle=50.0, steal=1.0)
    assert steal_percent(before, CpuTimes(total=300.0, idle=90.0, steal=21.0)) == pytest.approx(10.0)
    assert steal_percent(before, before) == 0.0


def test_cpu_times_come_from_the_machine() -> None:
    first = CpuTimes.now()
    second = CpuTimes.now()
    assert 0 <= first.idle <= first.total and 0 <= first.steal <= first.total
    assert second.total >= first.total and second.steal >= first.steal


def test_the_command_reproduces_the_run_with_its_arguments_quoted() -> None:
    start = start_run("benchmarks.engine", ["--src", "a file.en", "--limit", "6"])
    record = run_record(start)
    assert record["command"] == "python -m benchmarks.engine --src 'a file.en' --limit 6"
    assert record["started_utc"] <= record["finished_utc"]


def test_streams_titles() -> None:
    assert streams_title(1, 2) == "1 stream × 2 threads"
    assert streams_title(2, 2) == "2 streams × 1 thread"
    assert streams_title(4, 2) == "4 streams × 1 thread"


def test_the_code_revision_is_the_checked_out_commit() -> None:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    assert code_revision().removesuffix("-dirty") == head.stdout.strip()
