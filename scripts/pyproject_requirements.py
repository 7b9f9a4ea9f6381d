"""Print the dependencies declared in pyproject.toml as a requirements file.

The Dockerfile installs the serving dependencies from this output *before* it copies the code, so a
code change does not invalidate the (slow) dependency layer, and pyproject.toml stays the only
place where dependencies are declared.

    python scripts/pyproject_requirements.py                                 # base (serving) deps
    python scripts/pyproject_requirements.py --extra gpu --exclude onnxruntime \
        --add "onnxruntime-gpu>=1.27"                                        # CUDA 13 image

Standard library only: it runs in a bare python image before anything is installed.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def canonical_name(requirement: str) -> str:
    """The PEP 503 normalised project name of a requirement string ("Foo_Bar>=1" -> "foo-bar")."""
    match = _NAME.match(requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def requirements(pyproject: dict, *, extras: list[str], exclude: list[str], add: list[str]) -> list[str]:
    """Base dependencies plus the named extras, minus the excluded project names, plus ``add`` (pip
    intersects the specifiers of repeated projects: ``add`` can narrow a declared range)."""
    project = pyproject["project"]
    optional = project.get("optional-dependencies", {})
    unknown = sorted(set(extras) - set(optional))
    if unknown:
        raise ValueError(f"unknown extra(s) {unknown}; pyproject.toml defines {sorted(optional)}")
    declared = list(project.get("dependencies", []))
    for extra in extras:
        declared += optional[extra]
    dropped = {canonical_name(name) for name in exclude}
    for requirement in add:
        canonical_name(requirement)  # fails early on a malformed one
    return [req for req in declared if canonical_name(req) not in dropped] + add


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pyproject", type=Path, default=Path("pyproject.toml"))
    parser.add_argument("--extra", action="append", default=[], help="optional-dependency group to add")
    parser.add_argument("--exclude", action="append", default=[], help="project name to leave out")
    parser.add_argument("--add", action="append", default=[], help="requirement to append")
    args = parser.parse_args(argv)
    with args.pyproject.open("rb") as file:
        pyproject = tomllib.load(file)
    try:
        lines = requirements(pyproject, extras=args.extra, exclude=args.exclude, add=args.add)
    except ValueError as error:
        parser.error(str(error))
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
