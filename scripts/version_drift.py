"""Print the installed projects whose version differs from constraints.txt, one per line:
``name pinned installed``. scripts/test-latest.sh reads it to say which upgrade broke a test.

    python scripts/version_drift.py [--constraints constraints.txt]
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version


def drift(constraints: Path) -> list[tuple[str, str, str]]:
    """(name, pinned, installed) for each pinned project installed here at another version, among the
    pins whose markers hold for this interpreter."""
    found = []
    for line in constraints.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        (pin,) = requirement.specifier
        try:
            installed = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            continue
        if Version(installed).public != Version(pin.version).public:
            found.append((requirement.name, pin.version, installed))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--constraints", type=Path, default=Path(__file__).parents[1] / "constraints.txt")
    args = parser.parse_args(argv)
    for name, pinned, installed in drift(args.constraints):
        sys.stdout.write(f"{name} {pinned} {installed}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
