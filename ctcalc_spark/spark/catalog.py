"""Catalog output tables (``output.database`` / ``output.tables``), written with Spark's own writers."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from ctcalc_spark.config import OutputConfig


def write_catalog(spark: SparkSession, name: str, data: pa.Table, parts: Sequence[str], output: OutputConfig) -> None:
    """Replace the partitions of catalog table ``name`` that ``data`` holds: the table is created when missing
    (partitioned, ``output.format``, external under ``output.location`` and with ``output.table_properties`` when
    set), new columns are added, then Spark's own partition overwrite."""
    from ctcalc_spark.config import codec_options
    from ctcalc_spark.spark.names import quoted, sql_string

    frame = spark.createDataFrame(data)
    if not spark.catalog.tableExists(name):  # external under output.location when set
        where = {"path": f"{output.location.rstrip('/')}/{name.split('.')[-1]}"} if output.location else {}
        (frame.limit(0).write.partitionBy(*parts).format(output.format).options(**codec_options(output), **where)
         .saveAsTable(name))
        if output.table_properties:
            props = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in output.table_properties.items())
            spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ({props})")
    have = spark.table(name).columns
    new = [f for f in frame.schema.fields if f.name not in have]
    if new:
        cols = ", ".join(f"{quoted(f.name)} {f.dataType.simpleString()}" for f in new)
        spark.sql(f"ALTER TABLE {name} ADD COLUMNS ({cols})")
        have = spark.table(name).columns
    _overwrite_partitions(spark, name, frame, have)


def _overwrite_partitions(spark: SparkSession, name: str, frame: DataFrame, have: Sequence[str]) -> None:
    """Spark's own partition overwrite of a catalog table: overwritePartitions() for v2 tables (Delta,
    Iceberg: atomic), insertInto(overwrite=True) in dynamic mode for file-based tables elsewhere."""
    from pyspark.sql import functions as F

    from ctcalc_spark.spark.names import col

    aligned = frame.select(*[col(c) if c in frame.columns else F.lit(None).alias(c) for c in have])
    try:
        aligned.writeTo(name).overwritePartitions()
        return
    except Exception as e:  # noqa: BLE001 - v1 (Hive/Parquet) tables take the insertInto path
        if "v1 table" not in str(e):
            raise
    key = "spark.sql.sources.partitionOverwriteMode"
    before = spark.conf.get(key, "static")
    spark.conf.set(key, "dynamic")
    try:
        aligned.write.insertInto(name, overwrite=True)
    finally:
        spark.conf.set(key, before)
