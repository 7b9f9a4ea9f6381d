"""constraints.txt, the pinned versions every install of ours uses, read as name -> versions."""

from __future__ import annotations

from functools import cache

from packaging.requirements import Requirement
from repo_root import REPO

CONSTRAINTS = REPO / "constraints.txt"


@cache
def pinned() -> dict[str, list[str]]:
    """Canonical project name -> its pinned versions (more than one where markers split them, as
    numpy's by Python version)."""
    versions: dict[str, list[str]] = {}
    for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        requirement = Requirement(line)
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", line
        versions.setdefault(requirement.name.lower().replace("_", "-"), []).append(specifier.version)
    return versions
