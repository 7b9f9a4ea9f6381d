"""CPUs the engine may use (service/cpus.py): affinity and cgroup v1/v2 quotas, on fake cgroup trees."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from engine import cpus


def cgroup_v2(root: Path, cpu_max: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cpu.max").write_text(cpu_max + "\n")
    return root


def cgroup_v1(root: Path, quota_us: int, period_us: int = 100_000) -> Path:
    (root / "cpu").mkdir(parents=True, exist_ok=True)
    (root / "cpu" / "cpu.cfs_quota_us").write_text(f"{quota_us}\n")
    (root / "cpu" / "cpu.cfs_period_us").write_text(f"{period_us}\n")
    return root


@pytest.mark.parametrize(
    ("make", "quota"),
    [
        (lambda r: cgroup_v2(r, "max 100000"), None),
        (lambda r: cgroup_v2(r, "150000 100000"), 1.5),
        (lambda r: cgroup_v1(r, -1), None),
        (lambda r: cgroup_v1(r, 50_000), 0.5),
        (lambda r: r, None),  # no cgroup files at all
        (lambda r: cgroup_v2(r, "garbage"), None),
    ],
    ids=["v2-unlimited", "v2-1.5", "v1-unlimited", "v1-0.5", "none", "malformed"],
)
def test_cgroup_quota(tmp_path: Path, make: Callable[[Path], Path], quota: float | None) -> None:
    assert cpus.cgroup_cpu_quota(make(tmp_path)) == quota


def test_available_cpus_is_the_affinity_capped_by_the_quota_rounded_up(tmp_path: Path) -> None:
    affinity = len(os.sched_getaffinity(0))
    assert cpus.available_cpus(tmp_path) == affinity  # no quota
    assert cpus.available_cpus(cgroup_v2(tmp_path / "a", "150000 100000")) == min(affinity, 2)
    assert cpus.available_cpus(cgroup_v1(tmp_path / "b", 20_000)) == 1  # a fifth of a CPU: still one
    assert cpus.available_cpus(cgroup_v2(tmp_path / "c", f"{100_000 * (affinity + 4)} 100000")) == affinity


def test_default_threads_leave_the_choice_to_onnxruntime_unless_restricted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpus.os, "cpu_count", lambda: 16)
    monkeypatch.setattr(cpus, "available_cpus", lambda: 16)
    assert cpus.default_threads() == 0
    monkeypatch.setattr(cpus, "available_cpus", lambda: 2)  # e.g. docker run --cpus 2 on a 16-core host
    assert cpus.default_threads() == 2
