#!/usr/bin/env bash
# The tests against the newest releases pyproject.toml admits instead of the pinned ones, so that an
# upstream release that breaks us is found here first, with its cause named. Not the default test
# command (scripts/test.sh is): run it before scripts/lock.sh --upgrade, or on a schedule.
#   scripts/test-latest.sh [pytest arguments]
# In its own virtualenv ($VENV, default .venv-latest, made anew): lists each upgraded project
# against its pin, runs the tests, and on failure re-runs the failed tests with one upgraded project
# at a time put back to its pin, naming each one whose pin makes them pass.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv-latest}
rm -rf "$VENV"
python -m venv "$VENV"
PY="$VENV/bin/python"
"$PY" -m pip install -q --disable-pip-version-check --upgrade pip
"$PY" -m pip install -q --disable-pip-version-check --upgrade -e ".[train,import,dev,bench]"

DRIFT=$("$PY" scripts/version_drift.py)
echo "Newer than constraints.txt (project, pinned, installed):"
echo "${DRIFT:-  none}"

export MT_TEST_UNPINNED=1
if PATH="$VENV/bin:$PATH" "$PY" -m pytest "$@"; then
  echo "Green on the newest releases: scripts/lock.sh --upgrade can take them."
  exit 0
fi
echo "Failed on the newest releases; putting one project back to its pin at a time:"
while read -r name pinned installed; do
  [ -n "$name" ] || continue
  "$PY" -m pip install -q --disable-pip-version-check --no-deps "$name==$pinned"
  if PATH="$VENV/bin:$PATH" "$PY" -m pytest -q --last-failed >/dev/null 2>&1; then
    echo "CAUSE: $name $installed (the failed tests pass with $pinned)"
  fi
  "$PY" -m pip install -q --disable-pip-version-check --no-deps "$name==$installed"
done <<< "$DRIFT"
exit 1
