#!/usr/bin/env bash
# Resolve the Spark packages the tests load by configuration (hadoop-aws for s3a://, Delta's Spark reader) from
# Maven Central into the user's Ivy cache (ctcalc_spark.spark.session.ivy_cache), once: a second run finds them
# there and starts no JVM. About 720 MB the first time (mostly the AWS SDK bundle that hadoop-aws needs).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
.venv/bin/python - <<'PY'
import glob
import os
import sys

from ctcalc_spark.spark.session import DELTA_SPARK, hadoop_aws, ivy_cache, prepare_environment

packages = [hadoop_aws(), DELTA_SPARK]
jars = os.path.join(ivy_cache(), "jars")
missing = [p for p in packages if not glob.glob(os.path.join(jars, "%s_%s-%s.jar" % tuple(p.split(":"))))]
if not missing:
    sys.exit(0)
print(f"fetch_spark_packages: resolving {', '.join(missing)} into {ivy_cache()}", file=sys.stderr)
prepare_environment()
from pyspark.sql import SparkSession

spark = (SparkSession.builder.master("local[1]").config("spark.jars.packages", ",".join(missing))
         .config("spark.jars.ivy", ivy_cache()).config("spark.ui.enabled", "false").getOrCreate())
spark.stop()
PY
