#!/usr/bin/env bash
# Create (or refresh) the project venv at .venv with the pinned dependency set: runtime (requirements.txt),
# torch (requirements-torch.txt), tests (requirements-test.txt), Airflow (requirements-airflow.txt), then this
# package editable. Re-installs only when one of those files or pyproject.toml changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
stamp=.venv/.ctcalc-stamp
reqs=(requirements.txt requirements-torch.txt requirements-test.txt requirements-airflow.txt)
want=$(cat "${reqs[@]}" pyproject.toml | sha256sum | cut -d' ' -f1)
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
if ! command -v java >/dev/null 2>&1; then
  echo "bootstrap: Java (OpenJDK 17) is required by Spark and was not found on PATH." >&2
  exit 1
fi
echo "bootstrap: creating .venv (pyspark, torch==2.13.0 CPU, airflow; first time takes a few minutes)" >&2
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# This machine's pip config lists local indexes that pip reports as missing for every package: drop that noise.
quiet() { grep -v "is ignored: it is neither a file nor a directory" || true; }
.venv/bin/python -m pip install -q "${reqs[@]/#/--requirement=}" 2>&1 | quiet
.venv/bin/python -m pip install -q --no-deps -e . 2>&1 | quiet
# pyspark and pyspark-client share the pyspark/ folder: refuse a mismatched pair.
.venv/bin/python - <<'PYCHECK'
from importlib.metadata import version
a, b = version("pyspark"), version("pyspark-client")
if a != b:
    raise SystemExit(f"bootstrap: pyspark {a} and pyspark-client {b} differ; pin both to the same version.")
PYCHECK
echo "$want" > "$stamp"
echo "bootstrap: .venv ready" >&2
