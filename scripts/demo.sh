#!/usr/bin/env bash
# Create the environment if needed (the runtime layer only: no torch, no Airflow), then run the evaluate job end to
# end on the generated demo table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh runtime
. scripts/env.sh
exec .venv/bin/ctcalc demo "$@"
