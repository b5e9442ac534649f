"""SparkSession construction with the settings this project relies on."""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from ctcalc_spark.config import SparkConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Partition folders like ds=2026-11-21 must stay strings, not become dates.
BASE_CONF = {
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
}
STATIC_CONF = {"spark.ui.showConsoleProgress": "false"}


def prepare_environment() -> None:
    """Bind to loopback and make workers use this interpreter (see shared/ENVIRONMENT.md)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def build_session(cfg: SparkConfig | None = None, *, app_name: str = "ctcalc", submitted: bool = False) -> SparkSession:
    """A session for the jobs. ``submitted``: launched by spark-submit, whose --master/--conf win."""
    prepare_environment()
    from pyspark.sql import SparkSession

    cfg = cfg or SparkConfig()
    builder = SparkSession.builder.appName(app_name)
    if not submitted:
        builder = (
            builder.master(cfg.master)
            .config("spark.driver.memory", cfg.driver_memory)
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", str(cfg.shuffle_partitions))
        )
    for key, value in {**BASE_CONF, **STATIC_CONF}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    for key, value in BASE_CONF.items():
        spark.conf.set(key, value)
    return spark
