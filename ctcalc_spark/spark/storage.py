"""Reading the evaluation table and writing output partitions atomically.

A partition is written to a staging folder first and moved into place with
Hadoop FileSystem renames, so readers never see a half-written ``ds=`` folder
and a rerun replaces exactly that partition.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Iterable

from ctcalc_spark.config import JobConfig
from ctcalc_spark.errors import InputError

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def read_input(spark: SparkSession, cfg: JobConfig, ds: str | Iterable[str] | None = None) -> DataFrame:
    """The evaluation rows (of one ds, several, or all), after checking the configured columns exist."""
    from pyspark.sql import functions as F

    try:
        if cfg.input.table:
            df = spark.table(cfg.input.table)
        else:
            df = spark.read.format(cfg.input.format).load(cfg.input.path)
    except Exception as e:  # AnalysisException: path or table missing
        where = cfg.input.table or cfg.input.path
        raise InputError(f"Cannot read the evaluation table {where!r}: {str(e).splitlines()[0]}") from e
    check_columns(df.columns, required_columns(cfg))
    if ds is None:
        return df
    days = [ds] if isinstance(ds, str) else list(ds)
    return df.where(F.col(cfg.columns.ds).cast("string").isin(days))


def required_columns(cfg: JobConfig) -> list[str]:
    """Every column the configuration names."""
    c = cfg.columns
    names = [c.model, c.run, c.ds, c.label, c.logit, c.prediction, c.weight, c.split, *c.slices]
    if c.split is None:
        names.append(c.example_id)
    return [n for n in names if n is not None]


def check_columns(present: Iterable[str], required: Iterable[str]) -> None:
    """Raise InputError listing the missing and the present columns."""
    have = list(present)
    missing = [r for r in required if r not in have]
    if missing:
        raise InputError(
            f"The evaluation table lacks column(s) {missing}; present columns: {sorted(have)}. "
            "Rename them in the data or map them under 'columns:' in the config."
        )


def _jvm_fs(spark: SparkSession, path: str):  # type: ignore[no-untyped-def]
    jvm = spark.sparkContext._jvm
    jpath = jvm.org.apache.hadoop.fs.Path(path)
    return jpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), jpath, jvm


def path_exists(spark: SparkSession, path: str) -> bool:
    """Whether a file or folder exists on the output file system."""
    fs, jpath, _ = _jvm_fs(spark, path)
    return bool(fs.exists(jpath))


def replace_partitions(spark: SparkSession, writes: list[tuple[DataFrame, str, str]]) -> list[str]:
    """Write each (frame, table root, ds) to staging, then swap every partition into place.

    All frames are written before any partition is touched, so a failure while
    writing leaves the previous partitions intact.
    """
    staged = []
    token = uuid.uuid4().hex[:12]
    for frame, root, ds in writes:
        staging = f"{root}/_staging/ds={ds}.{token}"
        frame.coalesce(1).write.mode("overwrite").parquet(staging)
        staged.append((staging, f"{root}/ds={ds}"))
    final_paths = []
    for staging, final in staged:
        fs, jfinal, jvm = _jvm_fs(spark, final)
        jstaging = jvm.org.apache.hadoop.fs.Path(staging)
        trash = jvm.org.apache.hadoop.fs.Path(f"{final}.old.{token}")
        had_old = fs.exists(jfinal)
        if had_old and not fs.rename(jfinal, trash):
            raise OSError(f"Could not move {final} aside before replacing it.")
        if not fs.rename(jstaging, jfinal):
            if had_old:
                fs.rename(trash, jfinal)
            raise OSError(f"Could not move staged output {staging} to {final}.")
        if had_old:
            fs.delete(trash, True)
        final_paths.append(final)
    return final_paths


def pandas_to_spark(spark: SparkSession, pdf: pd.DataFrame, schema: StructType) -> DataFrame:
    """A driver-side frame as a Spark frame with an explicit schema, through Arrow; None becomes null.

    Callers guarantee there is no NaN (finalizers use None for undefined values),
    since Arrow would also turn NaN into null.
    """
    import pandas as pd
    from pyspark.sql import types as T

    cols = {}
    for f in schema.fields:
        col = pdf[f.name] if f.name in pdf else pd.Series([None] * len(pdf), dtype=object)
        if isinstance(f.dataType, T.DoubleType):
            col = pd.to_numeric(col, errors="raise").astype("float64")
        elif isinstance(f.dataType, T.LongType):
            col = pd.to_numeric(col, errors="raise").astype("Int64")
        else:
            col = col.astype(object).where(col.notna(), None)
        cols[f.name] = col.reset_index(drop=True)
    return spark.createDataFrame(pd.DataFrame(cols), schema)
