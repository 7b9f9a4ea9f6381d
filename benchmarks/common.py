"""What the benchmarks share: the test set, the record of how a result was made, and the output files."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = REPO.parent / "shared" / "data" / "multi30k"  # ../shared next to the repository
TEST_SRC = DATA_DIR / "test_2016_flickr.en"
TEST_REF = DATA_DIR / "test_2016_flickr.de"
RESULTS = REPO / "benchmarks" / "results"
RUNS = REPO / "runs" / "benchmarks"  # logs and converted models (ignored by git)
BUNDLE = REPO / "models" / "en-de" / "bundle"
CHECKPOINT = REPO / "models" / "en-de" / "checkpoint.pt"
PACKAGES = (
    "numpy",
    "onnxruntime",
    "onnxruntime-gpu",
    "ctranslate2",
    "torch",
    "sentencepiece",
    "sacrebleu",
    "fastapi",
    "uvicorn",
    "uvloop",
    "httptools",
    "httpx",
)
# /proc/cpuinfo flags that select onnxruntime's and CTranslate2's x86 kernels
VECTOR_EXTENSIONS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8")


def child_env() -> dict[str, str]:
    """This environment with the repository on ``PYTHONPATH``: ``python -m benchmarks...`` children
    import this checkout from any working directory."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def read_lines(path: Path, limit: int = 0) -> list[str]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (the Multi30K data lives in ../shared/data/multi30k)")
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines[:limit] if limit else lines


@dataclass(frozen=True)
class CpuTimes:
    """The machine's CPU time so far, all CPUs together, in seconds (the ``cpu`` line of /proc/stat)."""

    total: float
    idle: float
    steal: float  # time the VM's host gave to other guests: on a VM, it says when a run measured them

    @classmethod
    def now(cls) -> CpuTimes:
        first_line = Path("/proc/stat").read_text().split("\n", 1)[0]
        # user nice system idle iowait irq softirq steal; guest time is already inside user and nice
        ticks = [int(value) for value in first_line.split()[1:9]]
        tick_s = 1 / os.sysconf("SC_CLK_TCK")
        return cls(total=sum(ticks) * tick_s, idle=ticks[3] * tick_s, steal=ticks[7] * tick_s)


def steal_percent(before: CpuTimes, after: CpuTimes) -> float:
    """Steal as a share of all the CPU time between two readings, as vmstat's ``st`` column."""
    elapsed = after.total - before.total
    return 100 * (after.steal - before.steal) / elapsed if elapsed > 0 else 0.0


def cpu_identity() -> dict[str, str]:
    """The first CPU's ``model name``, ``vendor_id``, ``cpu family`` and ``model`` in /proc/cpuinfo
    ("unknown" where absent, as on ARM), and which of the vector extensions that decide kernel
    speed it has: a VM often names only "AMD EPYC", for Zen 3 (AVX2) and Zen 4 (AVX-512) alike."""
    found: dict[str, str] = {}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        name, _, value = line.partition(":")
        found.setdefault(name.strip(), value.strip())
    flags = set(found.get("flags", "").split())
    return {
        "cpu_model": found.get("model name", "unknown"),
        "cpu_vendor": found.get("vendor_id", "unknown"),
        "cpu_family": found.get("cpu family", "unknown"),
        "cpu_model_number": found.get("model", "unknown"),
        "vector_extensions": " ".join(f for f in VECTOR_EXTENSIONS if f in flags) or "none listed",
    }


def gpu_identity() -> str | None:
    """The GPUs nvidia-smi lists (name, driver, memory), or None on a machine without one."""
    try:
        listed = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return "; ".join(listed.splitlines()) or None


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False).stdout.strip()


def code_revision() -> str:
    """The measured commit, ``-dirty`` when files differ from it; result files do not count, since
    ``run_all`` rewrites them while it runs."""
    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return "unknown (not a git checkout)"
    changed = git("status", "--porcelain", "--", ".", f":!{RESULTS.relative_to(REPO)}")
    return commit + ("-dirty" if changed else "")


@dataclass(frozen=True)
class RunStart:
    """Taken when an entry point starts; ``run_record`` turns it into the result file's record."""

    module: str  # the entry point, e.g. ``benchmarks.engine``
    argv: list[str]  # its arguments
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    cpu: CpuTimes = field(default_factory=CpuTimes.now)

    @property
    def command(self) -> str:
        """The command that reproduces the result (run from the repository's root)."""
        return shlex.join(["python", "-m", self.module, *self.argv])


def start_run(module: str, argv: Sequence[str] | None) -> RunStart:
    """``argv`` as an entry point's ``main`` receives it: None for the command line's."""
    return RunStart(module, list(sys.argv[1:] if argv is None else argv))


def run_record(start: RunStart) -> dict:
    """How a result was made: the command, when, on what machine (and how much of it the VM's host
    took meanwhile), with which versions of the code and the libraries. Every result file has one."""
    return {
        "command": start.command,
        "started_utc": start.started.isoformat(timespec="seconds"),
        "finished_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "steal_percent": round(steal_percent(start.cpu, CpuTimes.now()), 1),
        "machine": {
            **cpu_identity(),
            "gpu": gpu_identity(),
            "cores_available": len(os.sched_getaffinity(0)),
            "cores_online": os.cpu_count(),
            "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "platform": platform.platform(),
        },
        "code": code_revision(),
        "versions": versions(),
    }


def measured_line(record: dict) -> str:
    """One sentence saying where a table comes from, for the Markdown reports."""
    machine = record["machine"]
    gpu = f", GPU {machine['gpu']}" if machine.get("gpu") else ""
    return (
        f"Measured {record['started_utc'][:16].replace('T', ' ')} UTC on {machine['cpu_model']} "
        f"({machine['cpu_vendor']}{cpu_generation(machine)}, {machine['cores_available']} cores available), CPU steal "
        f"{record['steal_percent']:g}% during the run{gpu}, code {record['code']}: `{record['command']}`"
    )


def cpu_generation(machine: dict) -> str:
    """ ", family 25 model 17, avx2 avx512f avx512_vnni" where the record has them (older ones do not)."""
    if "cpu_family" not in machine:
        return ""
    return f", family {machine['cpu_family']} model {machine['cpu_model_number']}, {machine['vector_extensions']}"


def streams_title(streams: int, threads: int) -> str:
    """How ``threads`` are used by ``streams`` batches decoded at once, e.g. "2 streams × 1 thread"."""
    per_stream = max(1, threads // streams)
    return f"{streams} stream{'s' * (streams > 1)} × {per_stream} thread{'s' * (per_stream > 1)}"


def streams_markdown(settings: Sequence[dict], threads: int) -> str:
    """One table per stream setting (``{"streams": S, "table": ...}``), each under its title."""
    return "\n\n".join(f"### {streams_title(s['streams'], threads)}\n\n{s['table']}" for s in settings)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def require_paths(parser: argparse.ArgumentParser, paths: Sequence[Path]) -> None:
    """Exit with the usage error "PATH not found" for the first of ``paths`` that does not exist."""
    for path in paths:
        if not path.exists():
            parser.error(f"{path} not found")


def add_setting_argument(parser: argparse.ArgumentParser) -> None:
    """``--setting MT_NAME=VALUE``, any number of times: settings of the service besides the
    benchmark's own (``given_settings``)."""
    parser.add_argument("--setting", action="append", default=[], type=_setting, metavar="MT_NAME=VALUE")


def _setting(text: str) -> str:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not MT_NAME=VALUE")
    return text


def given_settings(args: argparse.Namespace) -> dict[str, str]:
    """The ``--setting`` arguments as the service's environment."""
    return dict(setting.split("=", 1) for setting in args.setting)


def settings_record(args: argparse.Namespace) -> dict:
    """An entry point's parsed arguments as JSON values, for its result file."""
    return {name: str(value) if isinstance(value, Path) else value for name, value in vars(args).items()}


def write_report(start: RunStart, out: Path, report: dict) -> None:
    """Write an entry point's result file, ``report`` with the run's record, and print its tables."""
    out.parent.mkdir(parents=True, exist_ok=True)
    data = {"run": run_record(start), **report}
    out.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{report['markdown']}\n\nwrote {out}")
