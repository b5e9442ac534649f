#!/usr/bin/env bash
# Runs every benchmark behind the table in docs/benchmarks.md, one after another, and prints each one's figures
# under a header with the commit (and whether the checkout has changes), the time and the load average: the
# whole current table in one go, to copy into the docs with the commit it was measured at.
#
#   bash bench/run_all.sh            # everything, at the sizes the table gives (hours on the 2-core VM)
#   bash bench/run_all.sh --quick    # only what takes minutes: evaluate at 5 M rows, slices, rolling, exit abort
#
# A benchmark that fails is named at the end and makes the exit code 1; the others still run. The comparison of
# two checkouts (bench_loop_versions.py) and the GPU check (device_check.py) need arguments of their own and are
# not run here.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -f scripts/env.sh ] && . scripts/env.sh
PY=${PYTHON:-.venv/bin/python}
quick=0
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "bench/run_all.sh: unknown argument '$a' (only --quick)" >&2; exit 2 ;;
  esac
done

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && commit="$commit+changes"
failed=()

run() {  # run NAME ARGS...: one benchmark, under its header
  local name=$1
  shift
  echo
  echo "=== $name ($*) at $commit, $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
  if ! "$PY" "bench/$name" "$@" 2>&1 | grep -v -E '^(WARNING: Using incubator modules|\s*$)'; then
    failed+=("$name")
  fi
  echo "--- end of $name, load $(cut -d' ' -f1-3 /proc/loadavg)"
}

if [ "$quick" = 1 ]; then
  run bench_evaluate.py --rows 5000000 --repeats 3
  run bench_slices.py --repeats 3
  run bench_rolling.py --no-jvm
  run bench_exit_abort.py --runs 50
else
  run bench_backfill.py
  run bench_evaluate.py --repeats 5
  run bench_scale.py
  run bench_slices.py
  run bench_rolling.py --no-jvm
  run bench_stream.py
  run bench_exit_abort.py --runs 200
  run bench_score_layout.py
fi

echo
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}"
  exit 1
fi
echo "all benchmarks ran (commit $commit)"
