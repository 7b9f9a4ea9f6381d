#!/usr/bin/env bash
# The one test command (README "Quick start", CI's .ci/run): installs everything at the versions
# pinned in constraints.txt (scripts/lock.sh updates them), lints, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."

python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[train,import,dev,bench]"

# Debian packages that some tests need, installed when missing (as root, where apt-get exists); the
# tests that need them skip visibly without them. promtool checks /metrics and the Prometheus config;
# Chromium runs the web page's browser tests (driven by Playwright, whose own browser downloads are
# never used); PostgreSQL's server is what the state database's tests start clusters of
# (tests/postgres_server.py), its initdb in Debian's versioned directory.
install_missing() {  # COMMAND PACKAGE
  if ! command -v "$1" >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (timeout 300 apt-get update -qq && timeout 600 apt-get install -y -qq --no-install-recommends "$2" >/dev/null) \
      || echo "$2 could not be installed: the tests that need $1 will be skipped"
  fi
}
install_missing promtool prometheus
install_missing chromium chromium
command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
  || install_missing initdb postgresql

ruff check .
ruff format --check .
# One worker per CPU: most tests wait on servers and processes they start, so two workers on two
# CPUs take about 0.6x one worker's time. Each test file runs in one worker, so that the servers
# its module starts start once (tests/service/conftest.py). A later -n (-n 0 to debug) overrides it.
python -m pytest -n "$(nproc)" --dist loadfile "$@"
