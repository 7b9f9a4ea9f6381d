#!/usr/bin/env bash
# The one test command (README "Quick start", CI's .ci/run): installs everything, lints, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."

python -m pip install -q --disable-pip-version-check -e ".[train,import,dev,bench]"

# promtool checks /metrics and the Prometheus config; the tests that need it skip visibly without it.
if ! command -v promtool >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (timeout 300 apt-get update -qq && timeout 300 apt-get install -y -qq --no-install-recommends prometheus >/dev/null) \
    || echo "promtool could not be installed: the promtool checks will be skipped"
fi

ruff check .
ruff format --check .
python -m pytest "$@"
