"""The rolling job: previous-window calibration from stored daily summaries -> the rolling table partition.

For ``--ds D`` it reads the summaries partitions of the window containing D (days
up to D) and of the window before it, sums them per window (no rescan of the
evaluation rows), finalises each (model, run, slice view) with
:func:`ctcalc_spark.core.windows.rolling_metrics` and replaces
``<output.path>/rolling/ds=D`` atomically. Rerunning is idempotent; after late
data for an old day, :func:`affected_days` lists the partitions to recompute.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

import pandas as pd

from ctcalc_spark.config import JobConfig
from ctcalc_spark.errors import ConfigError, InputError
from ctcalc_spark.jobs.evaluate import table_path, validate_ds
from ctcalc_spark.core.finalize import spark_schema
from ctcalc_spark.core.windows import (
    ROLLING_TYPES,
    Window,
    WindowSpec,
    attach_exact,
    previous_window,
    rolling_metrics,
    window_of,
    window_summaries,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass
class RollingResult:
    """What one rolling run produced."""

    ds: str
    window: Window
    previous: Window
    table: pd.DataFrame
    path: str | None = None
    seconds: float = 0.0
    days_read: list[str] = field(default_factory=list)


# ---- reading partitions (pyarrow for local folders, Spark otherwise) --------------------------------

def local_path(root: str) -> str | None:
    """The local folder of a table root, or None for a remote file system (hdfs://, s3a://, ...)."""
    if root.startswith("file://"):
        return root[len("file://"):]
    if root.startswith("file:"):
        return root[len("file:"):]
    return None if "://" in root else root


def list_days(root: str, spark: SparkSession | None = None) -> list[str]:
    """The ds values that have a partition folder under a table root (sorted)."""
    local = local_path(root)
    if local is not None:
        if not os.path.isdir(local):
            return []
        names = os.listdir(local)
    else:
        if spark is None:
            raise ConfigError(f"Reading {root!r} needs a Spark session (not a local folder).")
        from ctcalc_spark.spark.storage import _jvm_fs, path_exists

        if not path_exists(spark, root):
            return []
        fs, jpath, _ = _jvm_fs(spark, root)
        names = [str(st.getPath().getName()) for st in fs.listStatus(jpath)]
    return sorted(n[3:] for n in names if n.startswith("ds=") and "." not in n[3:])


def read_days(root: str, days: Iterable[str], spark: SparkSession | None = None) -> pd.DataFrame:
    """Rows of the given ds partitions of a table, with a string 'ds' column (missing days are skipped)."""
    present = set(list_days(root, spark))
    wanted = [d for d in sorted(set(days)) if d in present]
    if not wanted:
        return pd.DataFrame()
    local = local_path(root)
    if local is not None:
        import pyarrow.parquet as pq

        frames = [pq.read_table(f"{local}/ds={d}").to_pandas().assign(ds=d) for d in wanted]
        return pd.concat(frames, ignore_index=True)
    assert spark is not None
    df = spark.read.option("basePath", root).parquet(*[f"{root}/ds={d}" for d in wanted]).toPandas()
    df["ds"] = df["ds"].astype(str)
    return df


# ---- the job ---------------------------------------------------------------------------------------

def affected_days(changed: str, spec: WindowSpec, days: Iterable[str]) -> list[str]:
    """Rolling partitions (among ``days``) whose numbers depend on day ``changed``: its window as of
    each later day, and the next window (whose bias comes from it)."""
    out = []
    for d in sorted(days):
        w = window_of(d, spec)
        if d >= changed and (w.start <= changed or previous_window(w, spec).contains(changed)):
            out.append(d)
    return out


def previous_window_bias(cfg: JobConfig, ds: str, spark: SparkSession | None = None) -> pd.DataFrame:
    """(model, run, c): c* fitted on all of the window before the one containing ``ds``.

    Known before ``ds`` is scanned for day/week/month windows, so the evaluate scan
    can accumulate the exact calibrated sum in the same pass (``evaluate(known_bias=...)``).
    Groups whose previous window is missing or degenerate are left out.
    """
    spec = WindowSpec.from_config(cfg.rolling)
    if spec.kind == "rolling":
        raise ConfigError("In-scan exact sums need day/week/month windows: a rolling window's previous window "
                          "moves every day, so its days are not scanned with one known bias.")
    prev = previous_window(window_of(ds, spec), spec)
    rows = read_days(table_path(cfg, "summaries"), prev.days(), spark)
    if rows.empty:
        return pd.DataFrame(columns=["model", "run", "c"])
    groups = window_summaries(rows, cfg.task, prev, by=[cfg.columns.model, cfg.columns.run],
                              bin_width=cfg.histogram.bin_width)
    out = []
    for (m, r), s in groups.items():
        try:
            out.append({"model": str(m), "run": str(r), "c": float(s.solve_bias())})
        except Exception as e:  # DegenerateBiasError: no finite bias, no exact sum
            log.info("no known bias for model=%s run=%s: %s", m, r, e)
    return pd.DataFrame(out, columns=["model", "run", "c"])


def compute_rolling(cfg: JobConfig, ds: str, spark: SparkSession | None = None) -> RollingResult:
    """The rolling rows of the window containing ``ds`` (days up to ``ds``), without writing."""
    t0 = time.perf_counter()
    validate_ds(ds)
    if cfg.task not in ("binary", "regression"):
        raise ConfigError(f"The rolling job supports binary and regression tasks, got {cfg.task!r}.")
    spec = WindowSpec.from_config(cfg.rolling)
    cur = window_of(ds, spec)
    prev = previous_window(cur, spec)
    root = table_path(cfg, "summaries")
    available = list_days(root, spark)
    if ds not in available:
        raise InputError(f"No summaries partition for ds={ds} under {root!r}; run `ctcalc evaluate --ds {ds}` first "
                         f"(available: {available[0] + '..' + available[-1] if available else 'none'}).")
    days = [d for d in prev.days() + cur.days(until=ds) if d in available]
    rows = read_days(root, days, spark)
    table = rolling_metrics(rows, cfg.task, [cur], spec, model=cfg.columns.model, run=cfg.columns.run,
                            slices=cfg.columns.slices, bin_width=cfg.histogram.bin_width,
                            first_ds=available[0], until=ds)
    exact = read_days(table_path(cfg, "calibrated_exact"), cur.days(until=ds), spark)
    table = attach_exact(table, exact)
    return RollingResult(ds, cur, prev, table, seconds=time.perf_counter() - t0, days_read=days)


def run_rolling(spark: SparkSession, cfg: JobConfig, ds: str, *, write: bool = True) -> RollingResult:
    """Compute the rolling rows for ``ds`` and replace ``<output.path>/rolling/ds=<ds>`` atomically."""
    from ctcalc_spark.spark.storage import pandas_to_spark, replace_partitions

    result = compute_rolling(cfg, ds, spark)
    if write:
        frame = pandas_to_spark(spark, result.table, spark_schema(ROLLING_TYPES))
        result.path = replace_partitions(spark, [(frame, table_path(cfg, "rolling"), ds)])[0]
    return result
