"""Helpers shared by the benchmark scripts: the test set, the machine description, Markdown tables."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = REPO.parent / "shared" / "data" / "multi30k"  # ../shared next to the repository
TEST_SRC = DATA_DIR / "test_2016_flickr.en"
TEST_REF = DATA_DIR / "test_2016_flickr.de"
PACKAGES = (
    "onnxruntime",
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


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for ``python -m benchmarks...``/``python -m service`` children, from any cwd.

    ``MT_*`` variables of the calling shell are dropped: the service gets exactly ``extra``'s.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("MT_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return {**env, **(extra or {})}


def read_lines(path: Path, limit: int = 0) -> list[str]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (the Multi30K data lives in ../shared/data/multi30k)")
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines[:limit] if limit else lines


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict:
    """CPU, cores and library versions, recorded with every result."""
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "platform": platform.platform(), "versions": versions}


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def write_json(path: Path | None, data: dict) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
