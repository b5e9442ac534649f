#!/usr/bin/env bash
# Start a throwaway PostgreSQL server on 127.0.0.1 for the tests (Airflow's metadata database): a new cluster
# (initdb) in a folder of its own under $TMPDIR, the user 'ctcalc' with a random password (scram-sha-256 over TCP),
# and the empty database 'airflow'. Prints two lines for the caller:
#
#   PG_DIR=<the folder>                       (give it to scripts/postgres_stop.sh)
#   PG_URL=postgresql+psycopg2://ctcalc:<password>@127.0.0.1:<port>/airflow
#
# Usage: bash scripts/postgres_start.sh PORT        (scripts/postgres_ensure.sh installs the server)
set -euo pipefail
port=${1:?usage: bash scripts/postgres_start.sh PORT}
bin=$(find /usr/lib/postgresql -path '*/bin/pg_ctl' 2>/dev/null | sort -V | tail -n 1 | xargs -r dirname)
if [ -z "$bin" ]; then
  echo "postgres_start.sh: no PostgreSQL server (/usr/lib/postgresql/*/bin/pg_ctl); install it with:" \
       "bash scripts/postgres_ensure.sh" >&2
  exit 1
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/ctcalc-pg.XXXXXX")
password=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
printf '%s\n' "$password" > "$dir/pwfile"
# PostgreSQL refuses to run as root: then the cluster belongs to the Debian package's user 'postgres'.
as_pg=()
if [ "$(id -u)" -eq 0 ]; then
  chown -R postgres: "$dir"
  as_pg=(runuser -u postgres --)
fi
fail() {
  echo "postgres_start.sh: $1 failed:" >&2
  tail -n 20 "$2" >&2
  exit 1
}
"${as_pg[@]}" "$bin/initdb" -D "$dir/data" -U ctcalc --pwfile="$dir/pwfile" --auth=scram-sha-256 -E UTF8 \
  --locale=C >"$dir/initdb.log" 2>&1 || fail initdb "$dir/initdb.log"
rm -f "$dir/pwfile"
# Loopback only, the socket in the cluster's folder. fsync and synchronous_commit off: a test cluster thrown away
# at the end, on a shared 2-core machine; transactions and locking, what the tests exercise, are unchanged.
opts="-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200 -c fsync=off -c synchronous_commit=off"
"${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 120 -o "$opts" start >/dev/null 2>&1 \
  || fail "pg_ctl start" "$dir/server.log"
PGPASSWORD=$password "$bin/psql" -q -h 127.0.0.1 -p "$port" -U ctcalc -d postgres -v ON_ERROR_STOP=1 \
  -c "CREATE DATABASE airflow" >"$dir/psql.log" 2>&1 || fail "CREATE DATABASE" "$dir/psql.log"
echo "PG_DIR=$dir"
echo "PG_URL=postgresql+psycopg2://ctcalc:$password@127.0.0.1:$port/airflow"
