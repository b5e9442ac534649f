#!/usr/bin/env bash
# Stop the daemons started by scripts/cluster_start.sh, by the PIDs it recorded (worker first).
set -euo pipefail
CTCALC_CLUSTER_DIR=${CTCALC_CLUSTER_DIR:-/tmp/ctcalc-cluster}

for name in worker master; do
  pidfile="$CTCALC_CLUSTER_DIR/$name.pid"
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "cluster_stop: $name (PID $pid) ignored TERM for 10 s; sending KILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    echo "cluster_stop: stopped $name (PID $pid)"
  fi
  rm -f "$pidfile"
done
