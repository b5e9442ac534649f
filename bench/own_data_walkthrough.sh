#!/usr/bin/env bash
# Times each step of docs/your-own-data.md (README "Your own data") on its example data, with the load average.
#   bash bench/own_data_walkthrough.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
ctcalc() { .venv/bin/ctcalc "$@"; }
TIMEFORMAT='  -> %R s'
step() { echo "== $*  (load $(cut -d' ' -f1 /proc/loadavg))"; time "$@" > /tmp/ctcalc_walkthrough.log 2>&1 || { cat /tmp/ctcalc_walkthrough.log; exit 1; }; }
C=conf/own_data.yaml
echo "machine: $(uname -m), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
step .venv/bin/python scripts/own_data_example.py
step ctcalc evaluate --config $C --ds 2026-01-01..2026-03-31
step ctcalc rolling --config $C --ds 2026-01-01..2026-03-31
step ctcalc report --config $C --ds 2026-01-01..2026-03-31
step ctcalc compare --config $C --a candidate --b baseline --ds 2026-02-10
step ctcalc compare --config $C --a candidate --b baseline --ds 2026-01-01..2026-03-31 --rolling --window day
step ctcalc compare --config $C --a candidate --b baseline --ds 2026-01-01..2026-03-31 --rolling --window week
