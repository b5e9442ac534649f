#!/usr/bin/env bash
# Make sure Debian's PostgreSQL server (initdb, pg_ctl) is there for the Airflow tests, which keep Airflow's metadata
# database on it (scripts/postgres_start.sh); idempotent and quiet. Unlike the browser it cannot be done without:
# when it cannot be installed, this fails (scripts/apt_ensure.sh).
set -euo pipefail
exec bash "$(dirname "$0")/apt_ensure.sh" postgresql "/usr/lib/postgresql/*/bin/pg_ctl" required tests/test_airflow.py
