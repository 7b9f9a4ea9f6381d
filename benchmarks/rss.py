"""Resident memory of a service's process tree over a run, and how much it grew after warm-up.

The tree is the service's HTTP process and its children (the engine processes, the document process
and multiprocessing's resource tracker); each is followed by its pid, so that a process that exits
or appears midway (an engine restarted after a crash) shows as one that did not live throughout. RSS is read from /proc
by ``service.memory.resident_bytes``, as the service measures its models.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

import psutil

from service.documents import DOCUMENT_PROCESS_NAME
from service.memory import resident_bytes

MB = 1e6  # as the service reports memory (/v1/models)


@dataclass
class Process:
    """One process and its RSS samples: (seconds since the start, MB)."""

    pid: int
    role: str  # http, engine, documents, resource tracker; all: the tree's sum
    samples: list[tuple[float, float]] = field(default_factory=list)


def role(process: psutil.Process, root_pid: int) -> str:
    if process.pid == root_pid:
        return "http"
    command = " ".join(process.cmdline())
    if "resource_tracker" in command:
        return "resource tracker"
    if "spawn_main" not in command:
        return command
    # The service spawns engine processes and a document process alike; the latter names itself.
    try:
        return "documents" if process.name() == DOCUMENT_PROCESS_NAME else "engine"
    except psutil.NoSuchProcess:
        return "engine"


@dataclass
class ProcessTree:
    """RSS samples of ``root_pid`` and its descendants."""

    root_pid: int
    processes: dict[int, Process] = field(default_factory=dict)

    def sample(self, at_s: float) -> None:
        root = psutil.Process(self.root_pid)
        for process in [root, *root.children(recursive=True)]:
            rss = resident_bytes(process.pid)
            if not rss:  # exited since it was listed
                continue
            try:
                named = role(process, self.root_pid)
            except psutil.NoSuchProcess:
                continue
            known = self.processes.setdefault(process.pid, Process(process.pid, named))
            # The document process names itself once started: until then it reads as an engine.
            known.role = named
            known.samples.append((round(at_s, 1), round(rss / MB, 1)))

    def total(self) -> Process:
        """The tree as one process: at each sample time, the sum of its processes' RSS."""
        totals: dict[float, float] = {}
        for process in self.processes.values():
            for at, mb in process.samples:
                totals[at] = totals.get(at, 0.0) + mb
        return Process(0, "all", sorted((at, round(mb, 1)) for at, mb in totals.items()))

    def line(self) -> str:
        """The latest sample of each process, for progress output."""
        return ", ".join(f"{p.role} {p.samples[-1][1]:.0f} MB" for p in self.processes.values() if p.samples)


@dataclass(frozen=True)
class Windows:
    """Where warm-up ends and how long the run was; RSS is compared over a window at each end."""

    warmup_s: float
    window_s: float
    duration_s: float

    @property
    def judged(self) -> bool:
        """Long enough for the two windows to lie after warm-up without overlapping."""
        return self.duration_s >= self.warmup_s + 2 * self.window_s


def summary(process: Process, windows: Windows) -> dict:
    """RSS at the start, at its peak and, when judged, at warm-up and at the end (each the median
    of a window's samples: one taken in a burst of work does not decide) and the growth between."""
    warm = [mb for at, mb in process.samples if windows.warmup_s <= at < windows.warmup_s + windows.window_s]
    final = [mb for at, mb in process.samples if at >= windows.duration_s - windows.window_s]
    judged = windows.judged and bool(warm) and bool(final)
    warmup_mb = statistics.median(warm) if judged else None
    final_mb = statistics.median(final) if judged else None
    return {
        "pid": process.pid,
        "role": process.role,
        "first_s": process.samples[0][0],
        "last_s": process.samples[-1][0],
        "start_mb": process.samples[0][1],
        "peak_mb": max(mb for _, mb in process.samples),
        "warmup_mb": warmup_mb,
        "final_mb": final_mb,
        "growth": final_mb / warmup_mb - 1 if warmup_mb and final_mb else None,
        "series": process.samples,
    }


def summaries(tree: ProcessTree, windows: Windows) -> list[dict]:
    """``summary`` of each process that was sampled, then of the whole tree."""
    processes: Iterable[Process] = [p for p in tree.processes.values() if p.samples]
    return [summary(p, windows) for p in [*processes, tree.total()]]
