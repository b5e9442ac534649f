#!/usr/bin/env bash
# Start a Spark standalone master and a worker; wait until the worker is registered.
#
#   scripts/cluster_start.sh                      master + worker in the background (PIDs, logs in
#                                                 $CTCALC_CLUSTER_DIR); what the tests and a laptop use
#   scripts/cluster_start.sh master --foreground  one daemon in the foreground (one per container:
#   scripts/cluster_start.sh worker --foreground  docker/compose.yaml runs exactly these)
#
# Settings: see scripts/cluster_env.sh. Stop with scripts/cluster_stop.sh.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=cluster_env.sh
. "$HERE/cluster_env.sh"

ROLE=${1:-all}
FOREGROUND=${2:-}

wait_for() {  # wait_for <what> <min alive workers>: poll the master's web UI JSON
  local what=$1 want=$2 deadline=$((SECONDS + CTCALC_CLUSTER_WAIT_S)) n
  while :; do
    n=$(alive_workers "$MASTER_JSON_URL")
    if [ -n "$n" ] && [ "$n" -ge "$want" ]; then return 0; fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "cluster_start: $what not ready after ${CTCALC_CLUSTER_WAIT_S}s ($MASTER_JSON_URL answered '${n}'); logs in $CTCALC_CLUSTER_DIR" >&2
      return 1
    fi
    sleep 0.5
  done
}

start_bg() {  # start_bg <name> <cmd...>: run a daemon in the background, record its PID
  local name=$1; shift
  local pidfile="$CTCALC_CLUSTER_DIR/$name.pid"
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "cluster_start: $name already running (PID $(cat "$pidfile")); run scripts/cluster_stop.sh first" >&2
    exit 1
  fi
  # The role command and then spark-class exec java, so $! is the daemon's own PID.
  nohup "$@" >"$CTCALC_CLUSTER_DIR/$name.log" 2>&1 &
  echo $! >"$pidfile"
}

case "$ROLE" in
  master|worker)
    if [ "$FOREGROUND" != "--foreground" ]; then
      echo "usage: $0 [all] | master --foreground | worker --foreground" >&2; exit 2
    fi
    if [ "$ROLE" = master ]; then exec "${MASTER_CMD[@]}"; fi
    wait_for "master $SPARK_MASTER_URL" 0
    exec "${WORKER_CMD[@]}"
    ;;
  all)
    mkdir -p "$CTCALC_CLUSTER_DIR"
    if [ -n "$(alive_workers "$MASTER_JSON_URL")" ] && [ ! -f "$CTCALC_CLUSTER_DIR/master.pid" ]; then
      echo "cluster_start: something already answers on $MASTER_JSON_URL; pick other ports (see scripts/cluster_env.sh)" >&2
      exit 1
    fi
    export SPARK_LOCAL_IP=${SPARK_LOCAL_IP:-$SPARK_MASTER_HOST}
    # The same role commands the containers run (docker/compose.yaml); each execs its java daemon.
    start_bg master "$HERE/cluster_start.sh" master --foreground
    wait_for "master" 0 || { "$HERE/cluster_stop.sh"; exit 1; }
    start_bg worker "$HERE/cluster_start.sh" worker --foreground
    wait_for "worker registration" 1 || { "$HERE/cluster_stop.sh"; exit 1; }
    echo "cluster_start: $SPARK_MASTER_URL up with 1 worker (${SPARK_WORKER_CORES} cores, ${SPARK_WORKER_MEMORY});" \
         "PIDs master=$(cat "$CTCALC_CLUSTER_DIR/master.pid") worker=$(cat "$CTCALC_CLUSTER_DIR/worker.pid"); UI $MASTER_JSON_URL"
    ;;
  *)
    echo "usage: $0 [all] | master --foreground | worker --foreground" >&2; exit 2
    ;;
esac
