#!/usr/bin/env bash
# Rebuild ctcalc_spark/localfs/ctcalc-localfs.jar from NioLocalFileSystem.java (needs a JDK 17+ javac and the
# venv's pyspark, whose Hadoop client jar it compiles against). The jar is checked in so that no install step
# needs a JDK; tests/test_localfs.py checks that it holds what this script builds from the source.
#   bash scripts/build_localfs_jar.sh [OUT_JAR]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-ctcalc_spark/localfs/ctcalc-localfs.jar}"
python="${PYTHON:-.venv/bin/python}"
jars="$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
hadoop="$(ls "$jars"/hadoop-client-api-*.jar | head -n 1)"
classes="$(mktemp -d)"
trap 'rm -rf "$classes"' EXIT
javac --release 17 -nowarn -cp "$hadoop" -d "$classes" ctcalc_spark/localfs/NioLocalFileSystem.java
# A fixed date and no manifest: the same source and javac give the same bytes.
jar --create --no-manifest --date=2026-01-01T00:00:00Z --file "$out" -C "$classes" .
echo "built $out from ctcalc_spark/localfs/NioLocalFileSystem.java ($(javac -version 2>&1), against $(basename "$hadoop"))"
