#!/usr/bin/env bash
# Stop the broker scripts/kafka_start.sh started from $CTCALC_KAFKA_DIR (SIGTERM: a clean shutdown, then SIGKILL
# after 30 s). Its data stays: kafka_start.sh starts it again with its topics and offsets.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=kafka_env.sh
. "$HERE/kafka_env.sh"
pidfile=$CTCALC_KAFKA_DIR/kafka.pid
[ -f "$pidfile" ] || { echo "kafka_stop: no broker PID in $pidfile" >&2; exit 0; }
pid=$(cat "$pidfile")
if kill "$pid" 2>/dev/null; then
  for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && { echo "kafka_stop: PID $pid still running after 30 s: SIGKILL" >&2; kill -9 "$pid"; }
fi
rm -f "$pidfile"
