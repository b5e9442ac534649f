#!/usr/bin/env bash
# Create the environment if needed, then run the evaluate job end to end on the generated demo table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
. scripts/env.sh
exec .venv/bin/ctcalc demo "$@"
