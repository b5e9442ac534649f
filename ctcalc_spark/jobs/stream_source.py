"""The stream's source: what it reads (files landing in a folder, or Kafka), with which schema and reader
options, and the checks of its settings. The micro-batches themselves are :mod:`ctcalc_spark.jobs.stream`.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Iterator

from ctcalc_spark.config import JobConfig, StreamConfig
from ctcalc_spark.errors import ConfigError
from ctcalc_spark.filekind import in_plain_folder, input_glob, recursive_lookup
from ctcalc_spark.storage import FileStore, is_local, literal_path, local_path
from ctcalc_spark.spark.input_hints import csv_sep
from ctcalc_spark.spark.inputs import check_columns, column_keys, source_columns, stack_model_scores

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)


KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
"""The connector matching our Spark (4.2.0, Scala 2.13): spark-submit --packages <this>."""


CORRUPT_RECORD = "_corrupt_record"


RECORD_FORMATS = ("json", "csv")  # text formats read line by line: a line that does not parse is a malformed record


FILE_COLUMN = "_file"


FILE_LIST_SCHEMA = "path STRING, modificationTime TIMESTAMP, length LONG, content BINARY"
"""Spark's binaryFile source: the stream of landed files (``content`` is never selected, so never read)."""


def check_stream_task(cfg: JobConfig) -> None:
    """ConfigError for a task the stream does not support (before Spark starts, from the CLI)."""
    if cfg.task not in ("binary", "regression"):
        raise ConfigError(f"The stream supports task binary/regression, got {cfg.task!r} (multiclass needs its "
                          "val-bias rows, not mergeable summaries; use the batch evaluate job).")


def check_stream_folders(cfg: JobConfig) -> None:
    """ConfigError before Spark starts when a local folder the stream writes cannot be written: the output (its
    the batch log lives there with catalog tables too) and the checkpoint. Spark said so as `mkdir of
    file:/… failed` from its start."""
    from ctcalc_spark.pathsafe import unwritable_reason

    root = str(cfg.output.path)
    for key, path, what in (("output.path", root, "the stream's tables and state"),
                            ("stream.checkpoint", cfg.stream.checkpoint or f"{root}/_stream/checkpoint",
                             "Spark's stream checkpoint")):
        why = unwritable_reason(local_path(path)) if is_local(path) else None
        if why is not None:
            raise ConfigError(f"{key} {path!r} cannot hold {what}: {why}. Set {key} to a folder this job can "
                              "create and write to.")


def default_schema(cfg: JobConfig) -> str:
    """DDL of the rows when the source cannot tell (JSON files, Kafka values): keys as strings, scores as doubles."""
    c = cfg.columns
    label = "STRING" if c.class_names else "DOUBLE"  # class names are read as text
    cols = [(c.model, "STRING"), (None if c.one_run else c.run, "STRING"), (c.label, label), (c.logit, "DOUBLE"),
            (c.prediction, "DOUBLE"), (c.weight, "DOUBLE"), (c.example_id, "STRING"), (c.split, "STRING"),
            *[(s, "STRING") for s in c.slices], (cfg.stream.event_time, "TIMESTAMP")]
    if cfg.task == "multiclass":
        cols[3] = (c.logit, "ARRAY<DOUBLE>")
    if c.model_scores:  # the score columns stand in for the model, score (and run) columns
        drop = {c.model, c.score_target()} | ({c.run} if all(len(v) > 1 for v in c.model_scores.values()) else set())
        score = "ARRAY<DOUBLE>" if cfg.task == "multiclass" else "DOUBLE"
        cols = [x for x in cols if x[0] not in drop] + [(n, score) for n in c.model_score_columns()]
    seen: set[str] = set()
    parts = []
    for name, kind in cols:
        if name is not None and name not in seen:
            seen.add(name)
            parts.append(f"`{name}` {kind}")
    return ", ".join(parts)


def needed_columns(cfg: JobConfig) -> list[str]:
    """The columns a landed row must have: those the batch job's table must (with ``columns.model_scores``, its
    score columns in place of the model and score columns), the event time instead of the date."""
    return [n for n in source_columns(cfg) if n != cfg.columns.ds] + [cfg.stream.event_time]


def reader_options(s: StreamConfig) -> dict[str, str]:
    """Reader options for the landed files: ``stream.options``, a CSV's header line read unless they say not."""
    options = {str(k): str(v) for k, v in dict(s.options).items()}
    if s.format == "csv":
        options.setdefault("header", "true")
    return options


def base_path(s: StreamConfig) -> str | None:
    """The stream's folder as Spark's ``basePath`` option (a folder, named as it is), None when
    ``stream.path`` is a glob pattern."""
    path = str(s.path)
    return None if literal_path(path) == path and any(c in path for c in "{}[]*?") else path


def has_csv_header(s: StreamConfig) -> bool:
    return reader_options(s)["header"].strip().lower() == "true"


def source_csv_sep(s: StreamConfig) -> str:
    return csv_sep(reader_options(s))


def _csv_schema(spark: SparkSession, cfg: JobConfig) -> StructType:
    """The schema of a CSV stream's rows, in the files' column order: Spark's CSV type inference on the first
    landed file (by name) with a header and a row, as the batch job reads the same files with ``inferSchema``;
    integers widened to BIGINT and floats to DOUBLE, so a later file's larger values still fit. The label, score
    and weight columns are DOUBLE (the label STRING with ``columns.class_names``) and the event time a TIMESTAMP
    whatever the file holds, so a line with text there is a malformed record rather than a reason to read the
    whole column as text."""
    from pyspark.sql.types import (
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        ShortType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    s = cfg.stream
    example = default_schema(cfg)
    if not has_csv_header(s):
        raise ConfigError(f"A CSV stream without header lines needs 'stream.schema': the files' columns in their "
                          f"order as DDL, e.g. {example!r}.")
    files = FileStore(str(s.path))
    wide = {IntegerType: LongType(), ShortType: LongType(), FloatType: DoubleType()}
    c = cfg.columns
    fixed = {**{n: DoubleType() for n in (c.label, c.logit, c.prediction, c.weight, *c.model_score_columns()) if n},
             s.event_time: TimestampType()}
    if c.class_names:  # labels named by columns.class_names are matched as text
        fixed[c.label] = StringType()
    for path in _landed_files(files, str(s.path)):
        try:
            head, rows = files.csv_head(path, source_csv_sep(s))
            if not (head and all(head) and rows):
                continue
            reader = spark.read.options(**reader_options(s)).option("inferSchema", "true")
            inferred = reader.csv(literal_path(path)).schema
        except Exception:  # noqa: BLE001 - an unreadable file: the handler quarantines it; try the next one
            continue
        return StructType([StructField(f.name, fixed.get(f.name, wide.get(type(f.dataType), f.dataType)), True)
                           for f in inferred])
    raise ConfigError(f"No CSV file with a header line in {s.path!r} yet to take the column order from; set "
                      f"'stream.schema' to the files' columns in their order (DDL), e.g. {example!r}.")


def _landed_files(files: FileStore, root: str) -> Iterator[str]:
    """The files below a stream's folder as Spark lists them, by name, those at the top first, then each
    folder's in turn (``dt=2026-01-05/``, ``2026/01/05/``); names starting with '.' or '_' are left out."""
    entries = [e for e in files.list(root) if not e.name.startswith((".", "_"))]
    yield from (f"{root.rstrip('/')}/{e.name}" for e in entries if not e.is_dir)
    for e in entries:
        if e.is_dir:
            yield from _landed_files(files, f"{root.rstrip('/')}/{e.name}")


UNLISTED_LOOKED_AT = 10_000
"""Files below a stream's folder that :func:`_warn_unlisted` looks at, at most."""


def _warn_unlisted(s: StreamConfig) -> None:
    """Warn of files in folders below the stream's that are not ``key=value`` folders (``2026/01/05/a.csv``):
    Spark's file source lists only the folder's own files and those of key=value folders, so without
    ``recursiveFileLookup`` the stream never reads them, and said only 'nothing landed'."""
    from itertools import islice

    root = str(s.path).rstrip("/")
    try:
        below = list(islice(_landed_files(FileStore(root), root), UNLISTED_LOOKED_AT))
    except (ConfigError, OSError) as e:  # a file system pyarrow cannot reach: Spark lists it, this cannot
        log.debug("not listing %s: %s", root, e)
        return
    unlisted = [p[len(root) + 1:] for p in below if in_plain_folder(p[len(root) + 1:])]
    if unlisted:
        log.warning("%d file(s) below the stream's folder %s lie in folders that are not key=value folders "
                    "(%s): Spark's file source lists only the folder's own files and those of key=value folders "
                    "(dt=2026-01-05/), so the stream does not read them. Set stream.options: {recursiveFileLookup: "
                    "'true'} to read every file below the folder.", len(unlisted), root,
                    ", ".join(unlisted[:3]) + (", …" if len(unlisted) > 3 else ""))


def _row_schema(spark: SparkSession, cfg: JobConfig) -> StructType:
    """The schema the handler reads landed files with: ``stream.schema``, else the Parquet files already there
    (unreadable ones skipped) or a CSV file's header, else the default; JSON and CSV get the malformed-record
    column."""
    s = cfg.stream
    schema: Any = s.schema
    if schema is None and s.format == "csv":
        schema = _csv_schema(spark, cfg)
    if schema is None and s.format == "parquet":
        try:
            schema = spark.read.option("ignoreCorruptFiles", "true").parquet(literal_path(str(s.path))).schema
        except Exception as e:  # no (readable) files yet: nothing to infer from
            raise ConfigError(f"No readable Parquet files in {s.path!r} to take the schema from; set "
                              f"'stream.schema' (DDL), e.g. {default_schema(cfg)!r}.") from e
    if schema is None:
        schema = default_schema(cfg)
    if isinstance(schema, str):
        try:  # resolved by Spark (no files read), classic or Connect alike
            schema = spark.readStream.schema(schema).format(s.format).load(literal_path(str(s.path))).schema
        except Exception as e:  # noqa: BLE001 - a bad DDL string: say which setting
            raise ConfigError(f"'stream.schema' is not a valid DDL schema: {str(e).splitlines()[0][:300]}") from e
    elif s.format == "csv":  # one file's columns, and those of the key=value folders files land in (dt=…/)
        schema = spark.readStream.schema(schema).format(s.format).load(literal_path(str(s.path))).schema
    check_columns(schema.fieldNames(), needed_columns(cfg), what="The stream's schema", options="stream.options",
                  keys=column_keys(cfg))
    if s.format in RECORD_FORMATS and CORRUPT_RECORD not in schema.fieldNames():
        schema = schema.add(CORRUPT_RECORD, "string")
    return schema


def read_stream(spark: SparkSession, cfg: JobConfig) -> tuple[DataFrame, StructType | str]:
    """(the streaming frame, the rows' schema): a file source streams the names of landed files (their rows
    are read by the handler), Kafka streams the messages (their values parsed by the handler with the DDL)."""
    check_stream_task(cfg)
    s = cfg.stream
    if s.source == "file":
        if not s.path:
            raise ConfigError("A file stream needs 'stream.path' (the folder where Parquet, JSON or CSV files land).")
        try:
            FileStore(s.path).mkdirs(s.path)
        except ConfigError as e:  # a file system pyarrow cannot reach: Spark may still read it
            log.info("not creating %s: %s", s.path, e)
        schema = _row_schema(spark, cfg)
        if not recursive_lookup(s.options):
            _warn_unlisted(s)
        if cfg.columns.model_scores:  # the mapping's mistakes (a model column beside it, types) before any batch
            stack_model_scores(spark.createDataFrame([], schema), cfg)
        reader = spark.readStream.format("binaryFile").schema(FILE_LIST_SCHEMA)
        if base_path(s) is not None and literal_path(str(s.path)) != str(s.path):  # 'landing [v2]', escaped
            reader = reader.option("basePath", base_path(s))  # which key=value folders are partitions
        glob = input_glob(s.options)
        if glob:  # the files' names the stream lists at all (the rows' reader gets it too)
            reader = reader.option("pathGlobFilter", glob)
        if recursive_lookup(s.options):  # every file below, in any folder
            reader = reader.option("recursiveFileLookup", "true")
        if s.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", s.max_files_per_trigger)
        return reader.load(literal_path(str(s.path))).select("path", "length"), schema
    return read_kafka(spark, cfg)


KAFKA_COLUMNS = ("topic", "partition", "offset", "value")
"""The columns of Spark's Kafka source the handler reads: where a message is, and its value (the key only decides
the partition; the row is in the value)."""


def kafka_schema(cfg: JobConfig) -> str:
    """DDL a message value is parsed with: ``stream.schema`` (or the default), plus the malformed-record column."""
    return f"{cfg.stream.schema or default_schema(cfg)}, `{CORRUPT_RECORD}` STRING"


def kafka_required(cfg: JobConfig) -> list[str]:
    """The fields a message must give a value to; one without is malformed (slices may be null, as in a table)."""
    slices = set(cfg.columns.slices)
    return [n for n in needed_columns(cfg) if n not in slices]


def read_kafka(spark: SparkSession, cfg: JobConfig) -> tuple[DataFrame, str]:
    """(the messages' frame: topic, partition, offset, value; the DDL their values are parsed with). The
    values are parsed in the handler, where a message that does not give a row is quarantined by its offset."""
    from pyspark.sql import functions as F

    s = cfg.stream
    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", s.kafka_bootstrap_servers)
              .option("subscribe", s.kafka_topic).option("startingOffsets", s.kafka_starting_offsets)
              .option("failOnDataLoss", "true"))
    if s.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", s.max_offsets_per_trigger)
    for k, v in dict(s.kafka_options).items():
        reader = reader.option(k, str(v))
    try:
        raw = reader.load()
    except Exception as e:
        if "kafka" in str(e).lower():
            raise ConfigError(f"The Kafka source is not available: {str(e).splitlines()[0]} Start the job with "
                              f"spark-submit --packages {KAFKA_PACKAGE} (ctcalc stream adds it to "
                              "spark.jars.packages itself).") from e
        raise
    ddl = kafka_schema(cfg)
    try:
        parse = F.from_csv if s.kafka_format == "csv" else F.from_json
        fields = raw.select(parse(F.col("value").cast("string"), ddl).alias("_r")).select("_r.*").columns
    except Exception as e:  # noqa: BLE001 - a bad DDL string: say which setting
        raise ConfigError(f"'stream.schema' is not a valid DDL schema: {str(e).splitlines()[0][:300]}") from e
    check_columns(fields, needed_columns(cfg), what="The stream's schema", keys=column_keys(cfg))
    if cfg.columns.model_scores:
        stack_model_scores(spark.createDataFrame([], ddl), cfg)
    return raw.select(*KAFKA_COLUMNS), ddl


def kafka_checkpoint_offsets(checkpoint: str, batch_id: int) -> dict[str, int] | None:
    """The Kafka offsets batch ``batch_id`` reads up to (exclusive), per ``<topic>:<partition>``, from Spark's
    offset log in the checkpoint (``offsets/<batch_id>``: a version line, the batch's metadata, then the source's
    offsets as JSON, ``{"topic": {"0": 540}}``; Spark writes it before the batch runs). None when the log has no
    such file or no Kafka offsets in it."""
    import json

    path = f"{checkpoint.rstrip('/')}/offsets/{batch_id}"
    try:
        lines = FileStore(checkpoint).read_text(path).splitlines()
    except (OSError, ValueError, ConfigError):  # not written, removed with old batches, or not reachable from here
        return None
    for line in lines[2:]:
        try:
            source = json.loads(line)
        except ValueError:  # "-": a source with no offsets yet
            continue
        if isinstance(source, dict) and source and all(isinstance(v, dict) for v in source.values()):
            return {f"{topic}:{int(p)}": int(o) for topic, parts in source.items() for p, o in parts.items()}
    return None


def with_kafka_package(cfg: JobConfig) -> JobConfig:
    """The config with Spark's Kafka source in ``spark.jars.packages`` when the stream reads Kafka and the
    packages do not name it (a launch setting: it applies when ``ctcalc stream`` starts Spark itself)."""
    import dataclasses

    conf = dict(cfg.spark.conf)
    packages = [p.strip() for p in str(conf.get("spark.jars.packages", "")).split(",") if p.strip()]
    if cfg.stream.source != "kafka" or any(":spark-sql-kafka-0-10_" in p for p in packages):
        return cfg
    conf["spark.jars.packages"] = ",".join([*packages, KAFKA_PACKAGE])
    return dataclasses.replace(cfg, spark=dataclasses.replace(cfg.spark, conf=conf))
