"""Delta Lake evaluation tables read by Spark, with or without Delta's own Spark reader.

A Delta table's folder keeps the Parquet files of every version until a vacuum: reading the folder as Parquet
counts the rows of replaced and deleted files too. Two routes read only the current version:

* the session has Delta's reader (``delta-spark``: its SQL extension is set): ``spark.read.format("delta")``;
* otherwise the current snapshot's file list, from ``deltalake`` (no JVM), is given to Spark's Parquet reader,
  so the scan stays in Spark's native reader and no file of an earlier version is read. Partition values come
  from the files' ``<column>=<value>`` folders, as Delta writers lay them out. Tables whose rows the file list
  does not describe alone (deletion vectors, column mapping) are refused with the fix: Delta's reader.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING
from urllib.parse import unquote

from ctcalc_spark.errors import InputError
from ctcalc_spark.storage import is_local, local_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameReader, SparkSession

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
HADOOP_SCHEMES = {"s3a": "s3", "s3n": "s3", "abfss": "abfss", "gs": "gs"}
"""Hadoop's scheme of an object store -> the one ``deltalake`` reads the same objects with."""


def is_delta_table(root: str, storage_options: Mapping[str, str] | None = None) -> bool:
    """Whether ``root`` is a Delta table (holds ``_delta_log/``): a local folder's listing, else one request."""
    if is_local(root):
        return os.path.isdir(os.path.join(local_path(root), "_delta_log"))
    from deltalake import DeltaTable

    try:
        return DeltaTable.is_deltatable(deltalake_uri(root), dict(storage_options or {}) or None)
    except Exception:  # noqa: BLE001 - a store deltalake cannot reach: Spark's reader reports it
        return False


def reads_log(fmt: str, root: str, storage_options: Mapping[str, str] | None = None) -> bool:
    """Whether an input of format ``fmt`` at ``root`` is read through a Delta log: ``delta``, or ``parquet`` on a
    Delta table's folder (its data files are Parquet; the log says which of them are the current version)."""
    return fmt == "delta" or (fmt == "parquet" and is_delta_table(root, storage_options))


def session_has_delta(spark: SparkSession) -> bool:
    """Whether Delta's Spark reader is configured on the session (its SQL extension is set)."""
    try:
        extensions = spark.conf.get("spark.sql.extensions", "") or ""
    except Exception:  # noqa: BLE001 - a setting that cannot be read is not set
        return False
    return DELTA_EXTENSION in extensions


def deltalake_uri(root: str) -> str:
    """``root`` as ``deltalake`` names it: a local path, or an object store URI in its own scheme (s3a -> s3)."""
    if is_local(root):
        return local_path(root)
    scheme, rest = root.split("://", 1)
    return f"{HADOOP_SCHEMES.get(scheme, scheme)}://{rest}"


def spark_uri(uri: str, root: str) -> str:
    """A file URI from ``deltalake`` in the scheme Spark was given the table with (s3 -> s3a)."""
    if is_local(root):
        return local_path(uri)
    scheme, rest = uri.split("://", 1)
    given = root.split("://", 1)[0]
    return f"{given}://{rest}" if HADOOP_SCHEMES.get(given) == scheme else uri


def snapshot_files(root: str, storage_options: Mapping[str, str] | None = None,
                   partition_filters: Sequence[tuple[str, str, object]] | None = None) -> tuple[list[str], object]:
    """(the current version's data file URIs in Spark's scheme, the table's Arrow schema), only the partitions
    ``partition_filters`` select; InputError naming the table when it cannot be read this way."""
    from deltalake import DeltaTable

    where = deltalake_uri(root)
    if not is_delta_table(root, storage_options):
        raise InputError(f"input.format is delta, but {root!r} is not a Delta table (it has no _delta_log/): set "
                         "input.format to the format of its files (parquet, csv, json, ...), or point input.path at "
                         "the folder of a Delta table.")
    try:
        table = DeltaTable(where, storage_options=dict(storage_options or {}) or None)
    except Exception as e:  # noqa: BLE001 - TableNotFoundError, an object store error: one line
        raise InputError(f"Cannot open the Delta table {root!r}: {str(e).splitlines()[0]}") from None
    _check_plain_files(table, root)
    uris = table.file_uris(file_pruning_predicate=list(partition_filters) if partition_filters else None)
    return [spark_uri(u, root) for u in uris], table.schema().to_arrow()


def _check_plain_files(table: object, root: str) -> None:
    """InputError for a table whose rows its Parquet files do not give alone."""
    config = table.metadata().configuration  # type: ignore[attr-defined]
    mapping = str(config.get("delta.columnMapping.mode", "none")).lower()
    features = set(getattr(table.protocol(), "reader_features", None) or [])  # type: ignore[attr-defined]
    why = ("it maps column names (delta.columnMapping.mode: " + mapping + ")" if mapping != "none" else
           "it marks deleted rows in deletion vectors" if "deletionVectors" in features and _has_deletion_vectors(table)
           else None)
    if why:
        raise InputError(f"The Delta table {root!r} cannot be read from its file list: {why}. Read it with Delta's "
                         "Spark reader: spark.conf: {spark.jars.packages: 'io.delta:delta-spark_4.2_2.13:4.4.0', "
                         "spark.sql.extensions: io.delta.sql.DeltaSparkSessionExtension}.")


def _has_deletion_vectors(table: object) -> bool:
    actions = table.get_add_actions(flatten=True)  # type: ignore[attr-defined]
    names = [n for n in actions.schema.names if n.startswith("deletionVector")]
    return any(actions.column(n).null_count < len(actions) for n in names)


def read_delta(spark: SparkSession, reader: DataFrameReader, root: str, *, ds_column: str | None = None,
               day_values: Sequence[str] | None = None,
               storage_options: Mapping[str, str] | None = None) -> DataFrame:
    """The current version of the Delta table at ``root`` (only the partitions of ``day_values`` when it is
    partitioned by ``ds_column``): by Delta's reader when the session has it, else by the file list."""
    if session_has_delta(spark):
        return reader.format("delta").load(root)
    from deltalake import DeltaTable

    partitions: list[str] = []
    try:
        partitions = DeltaTable(deltalake_uri(root),
                                storage_options=dict(storage_options or {}) or None).metadata().partition_columns
    except Exception:  # noqa: BLE001 - snapshot_files reports the table that cannot be opened
        pass
    # '' selects the null partition: its rows belong to no day and are counted as the folder reader counts them
    filters = ([(ds_column, "in", [*day_values, ""])] if ds_column and day_values is not None
               and ds_column in partitions else None)
    files, schema = snapshot_files(root, storage_options, filters)
    _check_partition_folders(files, partitions, root)
    if not files:  # no file in the days: the table's columns, no rows
        from pyspark.sql.pandas.types import from_arrow_schema

        return spark.createDataFrame([], from_arrow_schema(schema))
    base = root if not is_local(root) else local_path(root)
    return reader.format("parquet").option("basePath", base).load(files)


def _check_partition_folders(files: Sequence[str], partitions: Sequence[str], root: str) -> None:
    """InputError when a file of a partitioned table is not under ``<column>=<value>`` folders: Spark would not
    know its partition values."""
    for f in files:
        parts = [unquote(p).split("=", 1)[0] for p in f.split("/") if "=" in p]
        if not set(partitions) <= set(parts):
            raise InputError(f"The Delta table {root!r} keeps a file outside its partition folders ({f}); read it "
                             "with Delta's Spark reader (spark.conf: {spark.jars.packages: "
                             "'io.delta:delta-spark_4.2_2.13:4.4.0', spark.sql.extensions: "
                             "io.delta.sql.DeltaSparkSessionExtension}).")
