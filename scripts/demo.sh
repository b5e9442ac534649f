#!/usr/bin/env bash
# Create the environment if needed, then run the evaluate job end to end on the generated demo table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
export SPARK_LOCAL_IP=127.0.0.1
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/ctcalc demo "$@"
