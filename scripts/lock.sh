#!/usr/bin/env bash
# Regenerates constraints.txt, the one pinned set of versions that scripts/test.sh, CI and both
# Docker images install from (pyproject.toml keeps compatible ranges for everyone else).
#   scripts/lock.sh                              add what pyproject.toml gained, keep every other pin
#   scripts/lock.sh --upgrade                    move every pin to the newest release in range
#   scripts/lock.sh --upgrade-package fastapi    move one
# Then run scripts/test.sh, and commit constraints.txt with the change that needed it.
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.9
python -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
# Universal: one file for Python 3.11 (CI, the CPU image) and 3.12 (the CUDA image's Ubuntu), with
# markers where they differ. PyPI only, so no machine's local wheels leak into the pins.
exec uv pip compile pyproject.toml --all-extras --universal --python-version 3.11 \
  --index-url https://pypi.org/simple --custom-compile-command "scripts/lock.sh" \
  --quiet -o constraints.txt "$@"
