"""How many CPUs the engine may use: the process's CPU affinity, capped by a cgroup CPU quota.

``os.cpu_count()`` and onnxruntime's default thread count see every core of the host, also in a
container limited to fewer (``docker run --cpus``, a Kubernetes CPU limit): threads beyond the
quota only wait for their turn and slow every kernel. The defaults (``MT_THREADS=0``,
``MT_STREAMS=0``) therefore size themselves by ``available_cpus``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def available_cpus(cgroup_root: Path = CGROUP_ROOT) -> int:
    """CPUs this process may run on (its affinity mask), at most its cgroup quota rounded up."""
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = cgroup_cpu_quota(cgroup_root)
    return max(1, min(count, math.ceil(quota))) if quota is not None else count


def cgroup_cpu_quota(root: Path = CGROUP_ROOT) -> float | None:
    """The CPU quota in CPUs (quota / period) of cgroup v2 (``cpu.max``) or v1
    (``cpu/cpu.cfs_quota_us`` and ``cpu.cfs_period_us``); None without a quota or a cgroup."""
    try:
        if (v2 := root / "cpu.max").is_file():
            quota, period = v2.read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        v1 = root / "cpu"
        if (v1 / "cpu.cfs_quota_us").is_file():
            quota_us = int((v1 / "cpu.cfs_quota_us").read_text())
            return None if quota_us < 0 else quota_us / int((v1 / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):  # unreadable or malformed: as if there were no quota
        return None
    return None


def default_threads() -> int:
    """onnxruntime's thread count for ``MT_THREADS=0``: 0 (its own default, one per physical core)
    unless this process may use fewer CPUs than the machine has, then that many."""
    available = available_cpus()
    return available if available < (os.cpu_count() or 1) else 0
