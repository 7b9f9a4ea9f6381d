"""Writing a bundle: a staging directory filled by the pipeline, then moved into place at once.

The target is never half-written: everything goes into a sibling staging directory, and only a
complete, validated bundle replaces the target. An existing bundle is replaced only with ``force``,
and a non-empty directory that is not a bundle is never deleted, ``force`` or not.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from engine.bundle import MANIFEST, Manifest, load_bundle, sha256_file
from export import ExportError


def prepare_output(out: Path, *, force: bool) -> Path:
    """Check that ``out`` may be written and return a fresh, empty staging directory beside it."""
    if out.exists():
        if not out.is_dir():
            raise ExportError(f"{out}: exists and is not a directory")
        if any(out.iterdir()):
            if not (out / MANIFEST).is_file():
                raise ExportError(f"{out}: exists, is not empty and holds no bundle; refusing to replace it")
            if not force:
                raise ExportError(f"{out}: a bundle already exists; pass --force to replace it")
    staging = out.parent / f".{out.name}.staging-{os.getpid()}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
    except OSError as e:  # checked before the export's minutes of work, not after
        raise ExportError(f"{out}: cannot write a bundle there: {e.strerror or e}") from e
    return staging


def checksums(staging: Path, names: list[str]) -> dict[str, str]:
    return {name: sha256_file(staging / name) for name in sorted(names)}


def write_manifest(staging: Path, manifest: Manifest) -> None:
    text = json.dumps(manifest.model_dump(mode="json", exclude_none=True), indent=2, ensure_ascii=False)
    (staging / MANIFEST).write_text(text + "\n", encoding="utf-8")


def commit(staging: Path, out: Path) -> None:
    """Validate the staged bundle, then swap it in for ``out``."""
    load_bundle(staging)
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        out.rename(old)
        staging.rename(out)
        shutil.rmtree(old)
    else:
        staging.rename(out)
