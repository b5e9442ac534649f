#!/usr/bin/env bash
# Stop a server that scripts/postgres_start.sh started, and remove its folder.
# Usage: bash scripts/postgres_stop.sh PG_DIR
set -euo pipefail
dir=${1:?usage: bash scripts/postgres_stop.sh PG_DIR}
case "$(basename "$dir")" in
  ctcalc-pg.*) ;;
  *) echo "postgres_stop.sh: $dir is not a folder of postgres_start.sh" >&2; exit 2 ;;
esac
bin=$(find /usr/lib/postgresql -path '*/bin/pg_ctl' 2>/dev/null | sort -V | tail -n 1 | xargs -r dirname)
as_pg=()
if [ "$(id -u)" -eq 0 ]; then
  as_pg=(runuser -u postgres --)
fi
if [ -n "$bin" ] && [ -f "$dir/data/postmaster.pid" ]; then
  "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 \
    || "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
fi
rm -rf "$dir"
