#!/usr/bin/env bash
# An S3-compatible server for the tests on loopback (moto's server mode, from requirements-test.txt).
#   scripts/s3_server.sh start STATE_DIR   starts it on a free 127.0.0.1 port; prints the endpoint URL
#   scripts/s3_server.sh stop STATE_DIR    stops the server that `start` started there
# Requests must be signed: the server enforces IAM after its first few calls, which tests/_s3.py spends on
# making the test user and its access key (so a wrong secret is refused, as on S3).
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:?usage: s3_server.sh start|stop STATE_DIR}
state=${2:?usage: s3_server.sh start|stop STATE_DIR}
mkdir -p "$state"
case "$cmd" in
  start)
    port=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # The first calls (the IAM user, its policy and access key) go unsigned; every later one is checked.
    INITIAL_NO_AUTH_ACTION_COUNT=${S3_UNSIGNED_CALLS:-4} setsid .venv/bin/moto_server -H 127.0.0.1 -p "$port" \
      >"$state/moto.log" 2>&1 &
    echo $! >"$state/moto.pid"
    for _ in $(seq 1 150); do
      if .venv/bin/python -c "import socket,sys; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null; then
        echo "http://127.0.0.1:$port"
        exit 0
      fi
      if ! kill -0 "$(cat "$state/moto.pid")" 2>/dev/null; then break; fi
      sleep 0.2
    done
    echo "s3_server.sh: moto_server did not start on 127.0.0.1:$port; its log ($state/moto.log) ends:" >&2
    tail -n 5 "$state/moto.log" >&2 || true
    exit 1
    ;;
  stop)
    if [ -f "$state/moto.pid" ]; then
      pid=$(cat "$state/moto.pid")
      kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
      rm -f "$state/moto.pid"
    fi
    ;;
  *) echo "usage: s3_server.sh start|stop STATE_DIR" >&2; exit 2 ;;
esac
