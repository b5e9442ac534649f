"""The evaluate job: one scan of a day's evaluation rows -> summaries and metrics partitions."""
from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ctcalc_spark.config import JobConfig
from ctcalc_spark.errors import ConfigError, DegenerateBiasError, InputError
from ctcalc_spark.core.finalize import (
    ALL,
    KEY_TYPES,
    check_row,
    METRIC_TYPES,
    SUMMARY_TYPES,
    metrics_from_summaries,
    spark_schema,
)
from ctcalc_spark.core.solvers import solve_temperature
from ctcalc_spark.spark.storage import pandas_to_spark, read_input, replace_partitions
from ctcalc_spark.spark.scan import (
    EXACT_COLUMNS,
    INVALID_REASONS,
    KNOWN_BIAS_COLUMN,
    group_columns,
    split_expr,
    summary_aggregation,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


@dataclass
class EvaluateResult:
    """What one evaluate run produced."""

    ds: str
    metrics: pd.DataFrame
    summaries: pd.DataFrame
    paths: dict[str, str] = field(default_factory=dict)
    exact: pd.DataFrame = field(default_factory=pd.DataFrame)
    """With a known bias: per (model, run) c, cal_weight, cal_loss accumulated exactly in the scan."""


def table_path(cfg: JobConfig, table: str) -> str:
    """Root folder of an output table ('metrics', 'summaries', 'rolling', ...)."""
    return f"{cfg.output.path.rstrip('/')}/{table}"


def validate_ds(ds: str) -> str:
    """Check a YYYY-MM-DD logical date."""
    try:
        dt.date.fromisoformat(ds)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"--ds must be a date like 2026-11-21, got {ds!r}.") from e
    return ds


def check_finite(frame: pd.DataFrame) -> None:
    """No inf in an output frame (None/NaN there means 'not computed'; rows were checked by check_row)."""
    numeric = frame.select_dtypes(include=[np.number]).to_numpy(dtype=np.float64, na_value=0.0)
    if np.isinf(numeric).any():
        raise AssertionError("An output metric is infinite; a bug, please report it with the input. Nothing was written.")


def _raise_invalid(invalid: pd.DataFrame, cfg: JobConfig, ds: str) -> None:
    by_reason = invalid.groupby("invalid")["count"].sum().sort_index()
    parts = [f"{int(n)} rows: {INVALID_REASONS[int(code)]}" for code, n in by_reason.items()]
    first = invalid.iloc[0]
    c = cfg.columns
    raise InputError(
        f"Invalid evaluation rows for ds={ds}: " + "; ".join(parts) + f" (e.g. model={first[c.model]!r}, "
        f"run={first[c.run]!r}). Binary labels must be 0/1 in '{c.label}', scores finite, probabilities in "
        f"[0, 1], weights >= 0. Fix the upstream table, or set on_invalid: drop to exclude and count them."
    )


def _invalid_counts(agg: pd.DataFrame, cfg: JobConfig, ds: str) -> pd.DataFrame:
    keys = group_columns(cfg)
    invalid = agg[agg["invalid"] != 0]
    if not invalid.empty and cfg.on_invalid == "error":
        _raise_invalid(invalid, cfg, ds)
    return invalid.groupby(keys, dropna=False)["count"].sum().rename("n_invalid").reset_index()


def _finish(spark: SparkSession, cfg: JobConfig, ds: str, metrics: pd.DataFrame, summaries: pd.DataFrame | None,
            write: bool, exact: pd.DataFrame | None = None) -> EvaluateResult:
    metrics.insert(0, "task", cfg.task)
    metrics.insert(0, "ds", ds)
    check_finite(metrics)
    result = EvaluateResult(ds, metrics, summaries if summaries is not None else pd.DataFrame())
    if exact is not None:
        result.exact = exact
    if not write:
        return result
    m_types = {k: v for k, v in {**KEY_TYPES, **METRIC_TYPES[cfg.task]}.items() if k != "ds"}
    writes: list[tuple[DataFrame, str, str]] = [
        (pandas_to_spark(spark, metrics, spark_schema(m_types)), table_path(cfg, "metrics"), ds)
    ]
    if summaries is not None:
        s_types = {k: "string" for k in group_columns(cfg)} | SUMMARY_TYPES[cfg.task]
        writes.append((pandas_to_spark(spark, summaries, spark_schema(s_types)), table_path(cfg, "summaries"), ds))
    if exact is not None:
        writes.append((pandas_to_spark(spark, exact, spark_schema(EXACT_TYPES)), table_path(cfg, "calibrated_exact"), ds))
    paths = replace_partitions(spark, writes)
    result.paths = dict(zip(["metrics", "summaries", "calibrated_exact"] if summaries is not None else ["metrics"], paths))
    return result


def evaluate(
    spark: SparkSession, cfg: JobConfig, ds: str, *, write: bool = True, known_bias: pd.DataFrame | None = None
) -> EvaluateResult:
    """Scan one day of the evaluation table once and write its summaries and metrics partitions.

    Metrics rows: one per (model, run, slice); see ``METRIC_TYPES`` for columns.
    Bad rows raise :class:`InputError` (``on_invalid: error``) or are excluded and
    counted in ``n_invalid`` (``on_invalid: drop``). Nothing is written unless
    every metric was computed; the partitions are replaced atomically.

    ``known_bias`` (optional; binary/regression): a frame of model, run, c (e.g. the
    previous window's bias, known before today's scan). The same scan then also
    accumulates the exact calibrated sums per (model, run), returned as
    ``result.exact`` and written to the ``calibrated_exact`` table; the summaries and
    metrics are the same as without it.
    """
    validate_ds(ds)
    df = read_input(spark, cfg, ds)
    if cfg.task == "multiclass":
        if known_bias is not None:
            raise ConfigError("A known bias is supported for binary and regression tasks, not multiclass.")
        return _evaluate_multiclass(spark, cfg, ds, df, write)
    agg = summary_aggregation(df, cfg, known_bias=_known_bias_frame(spark, cfg, known_bias)).toPandas()
    exact = None if known_bias is None else _exact_sums(agg, cfg, known_bias)
    agg = agg.drop(columns=[c for c in EXACT_COLUMNS if c in agg.columns])
    where = cfg.input.table or cfg.input.path
    if agg.empty:
        raise InputError(f"No evaluation rows for ds={ds} in {where!r}; check the date and the 'columns.ds' name.")
    invalid = _invalid_counts(agg, cfg, ds)
    summaries = agg[agg["invalid"] == 0].drop(columns=["invalid"]).copy()
    if summaries.empty:
        raise InputError(f"Every evaluation row for ds={ds} is invalid ({int(invalid['n_invalid'].sum())} rows).")
    summaries["split"] = np.where(summaries.pop("is_bias").astype(bool), "bias", "remain")
    numeric = [c for c in summaries.columns if c not in group_columns(cfg) and c not in ("split", "bin")]
    summaries[numeric] = summaries[numeric].fillna(0)
    for name, kind in SUMMARY_TYPES[cfg.task].items():  # invalid rows (null bins) may have widened the dtypes
        if kind == "long" and name in summaries:
            summaries[name] = summaries[name].astype(np.int64)
    if cfg.task == "binary":
        summaries["bin_width"] = cfg.histogram.bin_width
    metrics = metrics_from_summaries(
        summaries,
        cfg.task,
        keys=[cfg.columns.model, cfg.columns.run],
        slices=list(cfg.columns.slices),
        bin_width=cfg.histogram.bin_width,
        invalid_counts=invalid,
    ).rename(columns={cfg.columns.model: "model", cfg.columns.run: "run"})
    return _finish(spark, cfg, ds, metrics, summaries, write, exact)


EXACT_TYPES = {"model": "string", "run": "string", "c": "double", "n_rows": "long", "cal_weight": "double",
               "cal_loss": "double"}
"""The calibrated_exact table (partitioned by ds): exact Σw and Σw·loss at a known c per (model, run)."""


def _known_bias_frame(spark: SparkSession, cfg: JobConfig, known: pd.DataFrame | None) -> DataFrame | None:
    if known is None:
        return None
    if cfg.task not in ("binary", "regression"):
        raise ConfigError(f"A known bias is supported for binary and regression tasks, not {cfg.task!r}.")
    missing = [c for c in ("model", "run", "c") if c not in known.columns]
    if missing:
        raise ConfigError(f"known_bias lacks column(s) {missing}; present: {list(known.columns)}.")
    from pyspark.sql import types as T

    known = known[known["c"].notna()]
    schema = T.StructType([T.StructField(cfg.columns.model, T.StringType()), T.StructField(cfg.columns.run, T.StringType()),
                           T.StructField(KNOWN_BIAS_COLUMN, T.DoubleType())])
    rows = [(str(m), str(r), float(c)) for m, r, c in known[["model", "run", "c"]].itertuples(index=False)]
    return spark.createDataFrame(rows, schema)


def _exact_sums(agg: pd.DataFrame, cfg: JobConfig, known: pd.DataFrame) -> pd.DataFrame:
    m, r = cfg.columns.model, cfg.columns.run
    ok = agg[(agg["invalid"] == 0) & agg[EXACT_COLUMNS[0]].notna()]
    sums = ok.groupby([m, r], dropna=False).agg(
        n_rows=("count", "sum"), cal_weight=(EXACT_COLUMNS[0], "sum"), cal_loss=(EXACT_COLUMNS[1], "sum")
    ).reset_index().rename(columns={m: "model", r: "run"})
    c = known.assign(model=known["model"].astype(str), run=known["run"].astype(str))[["model", "run", "c"]]
    out = sums.merge(c, on=["model", "run"], how="inner")
    return out[list(EXACT_TYPES)]


# ---- multiclass: temperature needs the val-bias rows themselves ------------------------------

def _multiclass_invalid(cfg: JobConfig):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    c = cfg.columns
    z = F.col(c.logit)
    y = F.col(c.label)
    w = F.col(c.weight).cast("double") if c.weight else F.lit(1.0)
    bad_z = F.exists(z, lambda x: F.isnan(x) | (F.abs(x) == F.lit(float("inf"))) | x.isNull())
    split_key = F.col(c.split) if c.split else F.col(c.example_id)
    return (
        F.when(z.isNull() | y.isNull() | w.isNull() | split_key.isNull(), 1)
        .when(bad_z, 2)
        .when((y.cast("double") != y.cast("long").cast("double")) | (y < 0) | (y >= F.size(z)), 4)
        .when((w < 0) | F.isnan(w), 5)
        .otherwise(0)
    )


def _multiclass_ce(z, y, t):  # type: ignore[no-untyped-def]
    """Native cross-entropy of softmax(z / t) for an array column: logsumexp via higher-order functions."""
    from pyspark.sql import functions as F

    m = F.array_max(z)
    lse = m / t + F.log(F.aggregate(z, F.lit(0.0), lambda acc, x: acc + F.exp((x - m) / t)))
    return lse - F.element_at(z, (y + 1).cast("int")) / t


def _evaluate_multiclass(spark: SparkSession, cfg: JobConfig, ds: str, df: DataFrame, write: bool) -> EvaluateResult:
    from pyspark.sql import functions as F

    c = cfg.columns
    keys = group_columns(cfg)
    w = F.col(c.weight).cast("double") if c.weight else F.lit(1.0)
    rows = df.select(
        *[F.col(k).cast("string").alias(k) for k in keys],
        F.col(c.label).alias("_y"),
        F.col(c.logit).cast("array<double>").alias("_z"),
        w.alias("_w"),
        split_expr(cfg, dict(df.dtypes)).alias("is_bias"),
        _multiclass_invalid(cfg).alias("invalid"),
    )
    bias_rows = rows.where((F.col("invalid") == 0) & F.col("is_bias"))
    n_bias_total = bias_rows.count()
    if n_bias_total > cfg.max_bias_rows_multiclass:
        raise InputError(
            f"{n_bias_total} val-bias rows for ds={ds} exceed max_bias_rows_multiclass="
            f"{cfg.max_bias_rows_multiclass}; lower split.bias_fraction."
        )
    bias_pdf = bias_rows.select(*keys, "_y", "_z", "_w").toPandas()
    temps: list[dict[str, Any]] = []
    for key_vals, grp in bias_pdf.groupby(keys, sort=True):
        key_vals = key_vals if isinstance(key_vals, tuple) else (key_vals,)
        rec: dict[str, Any] = dict(zip(keys, key_vals))
        try:
            rec["temperature"] = solve_temperature(
                grp["_y"].to_numpy(np.int64), np.stack(grp["_z"].to_numpy()), sample_weight=grp["_w"].to_numpy()
            )
            rec["t_status"] = "ok"
        except DegenerateBiasError as e:
            rec["temperature"], rec["t_status"] = None, e.status
        temps.append(rec)
    from pyspark.sql import types as T

    t_schema = T.StructType(
        [T.StructField(k, T.StringType()) for k in keys]
        + [T.StructField("temperature", T.DoubleType()), T.StructField("t_status", T.StringType())]
    )
    t_df = spark.createDataFrame([tuple(r[f.name] for f in t_schema.fields) for r in temps], t_schema)
    ok = F.col("invalid") == 0
    remain = ok & ~F.col("is_bias")
    ce = _multiclass_ce(F.col("_z"), F.col("_y"), F.lit(1.0))
    cce = _multiclass_ce(F.col("_z"), F.col("_y"), F.col("temperature"))
    hit = (F.array_position(F.col("_z"), F.array_max(F.col("_z"))) - 1 == F.col("_y")).cast("double")
    agg = (
        rows.join(F.broadcast(t_df), on=keys, how="left")
        .groupBy(*keys)
        .agg(
            F.sum(F.when(ok, 1).otherwise(0)).alias("n_rows"),
            F.sum(F.when(ok & F.col("is_bias"), 1).otherwise(0)).alias("n_bias"),
            F.sum(F.when(remain, 1).otherwise(0)).alias("n_remain"),
            F.sum(F.when(~ok, 1).otherwise(0)).alias("n_invalid"),
            F.sum(F.when(ok, F.col("_w"))).alias("weight"),
            F.sum(F.when(ok, F.col("_w") * ce)).alias("ce_sum"),
            F.sum(F.when(remain, F.col("_w"))).alias("w_remain"),
            F.sum(F.when(remain, F.col("_w") * ce)).alias("ce_remain"),
            F.sum(F.when(remain & F.col("temperature").isNotNull(), F.col("_w") * cce)).alias("cce_remain"),
            F.sum(F.when(ok, F.col("_w") * hit)).alias("w_hit"),
            F.first("t_status", ignorenulls=True).alias("t_status"),
            F.first("temperature", ignorenulls=True).alias("temperature"),
        )
        .toPandas()
    )
    if agg.empty:
        raise InputError(f"No evaluation rows for ds={ds}; check the date and the 'columns.ds' name.")
    if int(agg["n_invalid"].sum()) and cfg.on_invalid == "error":
        bad = rows.where(~ok).groupBy("invalid").count().toPandas()
        _raise_invalid(bad.assign(**{k: agg.loc[agg["n_invalid"] > 0, k].iloc[0] for k in keys}), cfg, ds)
    out = []
    for _, r in agg.iterrows():
        rec = {k: r[k] for k in keys}
        rec.update(n_rows=int(r["n_rows"]), n_bias=int(r["n_bias"]), n_remain=int(r["n_remain"]),
                   n_invalid=int(r["n_invalid"]), weight=None, log_loss=None, log_loss_remain=None,
                   calibrated_log_loss=None, calibration_gain=None, temperature=None, accuracy=None)
        if not r["weight"] or r["weight"] <= 0:
            rec["status"] = "no_valid_rows"
        else:
            rec.update(weight=float(r["weight"]), log_loss=r["ce_sum"] / r["weight"], accuracy=r["w_hit"] / r["weight"])
            if not r["w_remain"] or r["w_remain"] <= 0:
                rec["status"] = "no_remain_rows"
            elif r["n_bias"] == 0:
                rec["status"] = "no_bias_rows"
                rec["log_loss_remain"] = r["ce_remain"] / r["w_remain"]
            elif r["t_status"] != "ok":
                rec["status"] = r["t_status"]
                rec["log_loss_remain"] = r["ce_remain"] / r["w_remain"]
            else:
                llr = r["ce_remain"] / r["w_remain"]
                cll = r["cce_remain"] / r["w_remain"]
                rec.update(status="ok", temperature=float(r["temperature"]), log_loss_remain=llr,
                           calibrated_log_loss=cll, calibration_gain=llr - cll)
        out.append(check_row(rec))
    metrics = pd.DataFrame(out).rename(columns={c.model: "model", c.run: "run"})
    metrics.insert(2, "slice_name", ALL)
    metrics.insert(3, "slice_value", ALL)
    metrics = metrics[["model", "run", "slice_name", "slice_value", *METRIC_TYPES["multiclass"]]]
    return _finish(spark, cfg, ds, metrics, None, write)
