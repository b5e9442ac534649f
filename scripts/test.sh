#!/usr/bin/env bash
# Create the environment if needed (the full layer: runtime, torch, Airflow, test tools), then run the whole test
# suite (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh full
bash scripts/postgres_ensure.sh  # PostgreSQL server for the Airflow tests (apt-get, only when missing)
bash scripts/ensure_chromium.sh  # headless browser for tests/test_report_browser.py (apt-get, only when missing)
. scripts/env.sh
bash scripts/fetch_spark_packages.sh  # hadoop-aws and delta-spark into the Ivy cache, before tests start JVMs
export CTCALC_REQUIRE_BROWSER=1  # here a missing browser fails that test instead of skipping it
set +e
# Two workers (pytest-xdist), each test file on one of them, so a file's module fixtures start once; many tests
# wait on a JVM or a server, so a second file runs meanwhile. `-n 0` runs in one process.
.venv/bin/python -m pytest -q -n 2 --dist loadfile "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; that is a failure, not a pass." >&2
  exit 1
fi
exit "$rc"
