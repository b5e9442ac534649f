#!/usr/bin/env bash
# Create (or refresh) the project venv at .venv, one layer at a time:
#
#   bash scripts/bootstrap.sh runtime   # what the demo and the jobs run: requirements.txt, then this package editable
#   bash scripts/bootstrap.sh [full]    # runtime + torch (requirements-torch.txt), the test tools
#                                       # (requirements-test.txt) and Airflow (requirements-airflow.txt): the tests' set
#
# scripts/demo.sh asks for `runtime`, so the first README command never downloads torch (PyPI's Linux wheel is a
# multi-GB CUDA build) or Airflow; scripts/test.sh asks for `full`. Both layers live in the one .venv: the full set
# is the runtime set plus packages, under the same pins. A stamp per layer (the hash of its files and pyproject.toml)
# makes a layer re-install only when one of its files changed; a full install stamps both layers.
set -euo pipefail
cd "$(dirname "$0")/.."
layer=${1:-full}
case "$layer" in
  runtime) reqs=(requirements.txt) ;;
  full) reqs=(requirements.txt requirements-torch.txt requirements-test.txt requirements-airflow.txt) ;;
  *) echo "bootstrap: unknown layer '$layer'; use 'runtime' (the demo's) or 'full' (the tests')." >&2; exit 2 ;;
esac
PY=${PYTHON:-python3}
hash_of() { cat "$@" pyproject.toml | sha256sum | cut -d' ' -f1; }
runtime_stamp=.venv/.ctcalc-stamp-runtime
full_stamp=.venv/.ctcalc-stamp  # the name earlier versions gave the one (full) stamp: such a venv stays valid
full_want=$(hash_of requirements.txt requirements-torch.txt requirements-test.txt requirements-airflow.txt)
runtime_want=$(hash_of requirements.txt)
up_to_date() {  # up_to_date STAMP HASH
  [ -x .venv/bin/python ] && [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]
}
if up_to_date "$full_stamp" "$full_want"; then
  exit 0  # the full set holds the runtime set
fi
if [ "$layer" = runtime ] && up_to_date "$runtime_stamp" "$runtime_want"; then
  exit 0
fi
if ! command -v java >/dev/null 2>&1; then
  echo "bootstrap: Java (OpenJDK 17) is required by Spark and was not found on PATH." >&2
  exit 1
fi
if [ "$layer" = runtime ]; then
  echo "bootstrap: installing the runtime set into .venv (pyspark, deltalake; no torch, no Airflow)" >&2
else
  echo "bootstrap: installing the full set into .venv (runtime + torch==2.13.0, Airflow, test tools;" \
       "the first time takes several minutes)" >&2
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# This machine's pip config lists local indexes that pip reports as missing for every package: drop that noise.
quiet() { grep -v "is ignored: it is neither a file nor a directory" || true; }
# pipefail: a failed pip fails the bootstrap, whatever the filter does.
.venv/bin/python -m pip install -q "${reqs[@]/#/--requirement=}" 2>&1 | quiet
.venv/bin/python -m pip install -q --no-deps -e . 2>&1 | quiet
# pyspark and pyspark-client share the pyspark/ folder: refuse a mismatched pair.
.venv/bin/python - <<'PYCHECK'
from importlib.metadata import version
a, b = version("pyspark"), version("pyspark-client")
if a != b:
    raise SystemExit(f"bootstrap: pyspark {a} and pyspark-client {b} differ; pin both to the same version.")
PYCHECK
echo "$runtime_want" > "$runtime_stamp"
if [ "$layer" = full ]; then
  echo "$full_want" > "$full_stamp"
fi
echo "bootstrap: .venv ready ($layer)" >&2
