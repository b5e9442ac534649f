# Shared settings of the Spark standalone scripts (sourced, not run). Every value can be set
# from the environment; the defaults give a one-host cluster on loopback.
#
#   CTCALC_PYTHON            python that has pyspark installed (default: python3 on PATH)
#   CTCALC_CLUSTER_DIR       run dir for PIDs and logs (default /tmp/ctcalc-cluster)
#   SPARK_MASTER_HOST        master bind host (default 127.0.0.1)
#   SPARK_MASTER_PORT        master port (default 7077)
#   SPARK_MASTER_WEBUI_PORT  master web UI port (default 8080)
#   SPARK_MASTER_URL         what the worker joins (default spark://$SPARK_MASTER_HOST:$SPARK_MASTER_PORT)
#   SPARK_WORKER_HOST        worker bind host (default 127.0.0.1)
#   SPARK_WORKER_WEBUI_PORT  worker web UI port (default 8081)
#   SPARK_WORKER_CORES / SPARK_WORKER_MEMORY   worker resources (default 2 / 4g)
#   CTCALC_CLUSTER_WAIT_S    how long to wait for the master / the worker registration (default 60)

CTCALC_PYTHON=${CTCALC_PYTHON:-$(command -v python3)}
CTCALC_CLUSTER_DIR=${CTCALC_CLUSTER_DIR:-/tmp/ctcalc-cluster}
SPARK_MASTER_HOST=${SPARK_MASTER_HOST:-127.0.0.1}
SPARK_MASTER_PORT=${SPARK_MASTER_PORT:-7077}
SPARK_MASTER_WEBUI_PORT=${SPARK_MASTER_WEBUI_PORT:-8080}
SPARK_MASTER_URL=${SPARK_MASTER_URL:-spark://${SPARK_MASTER_HOST}:${SPARK_MASTER_PORT}}
SPARK_WORKER_HOST=${SPARK_WORKER_HOST:-127.0.0.1}
SPARK_WORKER_WEBUI_PORT=${SPARK_WORKER_WEBUI_PORT:-8081}
SPARK_WORKER_CORES=${SPARK_WORKER_CORES:-2}
SPARK_WORKER_MEMORY=${SPARK_WORKER_MEMORY:-4g}
CTCALC_CLUSTER_WAIT_S=${CTCALC_CLUSTER_WAIT_S:-60}

# pip's pyspark has no sbin/start-master.sh: run the daemons with spark-class from its folder.
if [ -z "${SPARK_HOME:-}" ]; then
  SPARK_HOME=$("$CTCALC_PYTHON" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
fi
# Executors start the driver's PYSPARK_PYTHON; the daemons themselves need none, but keep one default.
export SPARK_HOME PYSPARK_PYTHON=${PYSPARK_PYTHON:-$CTCALC_PYTHON}

MASTER_CMD=("$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master
  --host "$SPARK_MASTER_HOST" --port "$SPARK_MASTER_PORT" --webui-port "$SPARK_MASTER_WEBUI_PORT")
WORKER_CMD=("$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker
  --host "$SPARK_WORKER_HOST" --webui-port "$SPARK_WORKER_WEBUI_PORT"
  --cores "$SPARK_WORKER_CORES" --memory "$SPARK_WORKER_MEMORY" "$SPARK_MASTER_URL")
MASTER_JSON_URL=${MASTER_JSON_URL:-http://${SPARK_MASTER_HOST}:${SPARK_MASTER_WEBUI_PORT}/json/}

# Alive workers registered at the master, from its web UI JSON ("" while the UI is not up).
alive_workers() {
  "$CTCALC_PYTHON" - "$1" <<'PY' 2>/dev/null || true
import json, sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
        print(json.load(r).get("aliveworkers", 0))
except Exception:
    pass
PY
}
