"""The evaluate job: one scan of the evaluation rows of one day or a range of days -> summaries and metrics.

``ds`` is a group key of the scan: a range of days costs one pass over its rows, and each day's partitions
are replaced by one commit per table (:mod:`ctcalc_spark.tables`).
"""
from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field
from functools import reduce
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from ctcalc_spark.config import JobConfig, fits_ds_format, guess_ds_formats, parse_days
from ctcalc_spark.core import findings
from ctcalc_spark.core.days import parse_day
from ctcalc_spark.core.finalize import (
    ALL,
    KEY_TYPES,
    METRIC_TYPES,
    apply_min_bias_rows,
    check_row,
    metrics_from_summaries,
)
from ctcalc_spark.core.state import MULTICLASS, STATES, arrow_schema
from ctcalc_spark.core.solvers import solve_temperature
from ctcalc_spark.core.windows import day_runs
from ctcalc_spark.errors import ConfigError, DegenerateBiasError, InputError, listed
from ctcalc_spark.filekind import own_encoding
from ctcalc_spark.spark.names import col, quoted
from ctcalc_spark.tables import OutputStore, Transaction
from ctcalc_spark.spark.scan import (
    EXACT_COLUMNS,
    KNOWN_BIAS_COLUMN,
    LABEL_NOT_ALLOWED,
    MALFORMED_RECORD,
    PROBABILITY_OUTSIDE,
    TEXT_NOT_NUMBER,
    UNATTRIBUTED_CODES,
    bad_weight,
    class_name_label,
    corrupt_record_column,
    decode_aggregate,
    first_checks,
    group_columns,
    invalid_code,
    label_column,
    not_finite,
    null_checks,
    number_column,
    split_expr,
    sql_double,
    state_sums,
    string_key,
    summary_aggregation,
)
from ctcalc_spark.spark.progress import long_step
from ctcalc_spark.spark.input_hints import input_read_errors, plain_file_path, stray_file_hint, unlisted_files_hint
from ctcalc_spark.spark.inputs import (
    DS,
    empty_day_folders,
    input_day_folders,
    input_name,
    load_input,
    read_input,
    unread_files,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


@dataclass
class EvaluateResult:
    """What one evaluate run produced (``ds``: the first day; ``days``: every day evaluated)."""

    ds: str
    metrics: pd.DataFrame
    summaries: pd.DataFrame
    paths: dict[str, str] = field(default_factory=dict)
    exact: pd.DataFrame = field(default_factory=pd.DataFrame)
    """With a known bias: per (model, run) c, cal_weight, cal_loss accumulated exactly in the scan."""
    days: list[str] = field(default_factory=list)
    run_id: str | None = None
    uncounted: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=UNCOUNTED_COLUMNS))
    """Rows that no metrics row counts: per ds (None: rows without a date) and reason, ``n_rows``."""
    duplicates: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=DUPLICATE_COLUMNS))
    """With ``input.duplicate_ids: count``: per (ds, model, run) with repeated example ids, the extra rows, the
    repeated ids and the ids seen with both labels (or several label values)."""
    skipped_files: list[str] = field(default_factory=list)
    """With ``input.skip_unreadable_files``: the input files that yielded no row."""
    probability_like: tuple[int, int] | None = None
    """Multiclass with logits given (an array or ``class_logits``): (valid rows, rows whose scores are all in
    [0, 1] and sum to 1), for :func:`ctcalc_spark.core.sanity.probability_like_class_logits`."""
    label_class_clipped: tuple[int, int, float] | None = None
    """Multiclass with ``class_probabilities``: (valid rows, rows giving their label's class a probability below
    ``clip_eps``, those rows' share of the weighted log loss), for
    :func:`ctcalc_spark.core.sanity.clipped_label_class`."""
    class_confusion: dict[str, np.ndarray] = field(default_factory=dict)
    """Multiclass, per model: val-bias rows by label class (row) and highest-scoring class (column), for
    :func:`ctcalc_spark.core.sanity.class_order`."""


UNCOUNTED_COLUMNS = ["ds", "reason", "n_rows"]
DUPLICATE_COLUMNS = ["ds", "model", "run", "n_duplicate_rows", "n_repeated_ids", "n_conflicting_ids"]
NO_DATE = "null date, or a date not written YYYY-MM-DD: the row belongs to no day and is never evaluated"
NO_DATE_IN_FORMAT = ("null date, or a date not written as columns.ds_format {!r}: the row belongs to no day and is "
                     "never evaluated")


def table_path(cfg: JobConfig, table: str) -> str:
    """Where an output table lives: its folder (path mode) or its catalog name."""
    return OutputStore(cfg).location(table)


def day_span(days: Sequence[str]) -> str:
    """'ds=D' for one day, 'ds=A..B (N days)' for several, 'ds=A, C..D (N days)' when they have gaps (A..D read
    as every day between): how progress and result lines name a run's days."""
    if len(days) == 1:
        return f"ds={days[0]}"
    return f"ds={day_runs(sorted(days), shown=5)} ({len(days)} days)"


def check_finite(frame: pd.DataFrame) -> None:
    """No inf in an output frame (None/NaN there means 'not computed'; rows were checked by check_row)."""
    numeric = frame.select_dtypes(include=[np.number]).to_numpy(dtype=np.float64, na_value=0.0)
    if np.isinf(numeric).any():
        raise AssertionError("An output metric is infinite; a bug, please report it with the input. Nothing was written.")


def _invalid_counts(tally: pd.DataFrame, cfg: JobConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(n_invalid per metrics group, rows no metrics row owns) of the invalid-row tally; raises in error mode.

    ``tally``: rows per (ds, model, run, slices, invalid code); ds is None for rows without a date, which are
    reported (never evaluated) but stop the run only when they are malformed records.
    """
    keys = ["ds", *group_columns(cfg)]
    no_date = tally["ds"].isna()
    stops = tally[~no_date | (tally["invalid"] == 8)]
    if not stops.empty and cfg.on_invalid == "error":
        c = cfg.columns
        raise InputError(findings.render(findings.invalid_rows(stops, model=c.model, run=c.run, task=cfg.task,
                                                               label=c.label)))
    stray = no_date | tally["invalid"].isin(UNATTRIBUTED_CODES)
    owned = tally[~stray].groupby(keys, dropna=False)["count"].sum().rename("n_invalid").reset_index()
    dateless = NO_DATE if cfg.columns.ds_format is None else NO_DATE_IN_FORMAT.format(cfg.columns.ds_format)
    other = tally[stray].assign(reason=[dateless if pd.isna(d) and code != 8 else findings.ROW_REASONS[int(code)][1]
                                        for d, code in zip(tally.loc[stray, "ds"], tally.loc[stray, "invalid"])])
    uncounted = other.groupby(["ds", "reason"], dropna=False)["count"].sum().rename("n_rows").reset_index()
    uncounted["ds"] = uncounted["ds"].astype(object).where(uncounted["ds"].notna(), None)
    for note in findings.uncounted_rows(uncounted):
        log.warning(findings.render(note))
    return owned, uncounted[UNCOUNTED_COLUMNS]


def _duplicate_ids(df: DataFrame, cfg: JobConfig) -> pd.DataFrame:
    """Rows per (ds, model, run) that repeat an example id (one more pass, grouped by id: opt-in)."""
    from pyspark.sql import functions as F

    c = cfg.columns
    y = F.expr(label_column(df, cfg)[0])
    per_id = (
        df.where(F.col(DS).isNotNull() & col(str(c.example_id)).isNotNull())
        .groupBy(F.col(DS).alias("ds"), col(c.model).alias("model"), col(c.run).alias("run"), col(str(c.example_id)))
        .agg(F.count(F.lit(1)).alias("n"), (F.min(y) != F.max(y)).cast("long").alias("both"))
        .where(F.col("n") > 1)
    )
    out = per_id.groupBy("ds", "model", "run").agg(
        F.sum(F.col("n") - 1).alias("n_duplicate_rows"), F.count(F.lit(1)).alias("n_repeated_ids"),
        F.sum(F.coalesce(F.col("both"), F.lit(0))).alias("n_conflicting_ids"),
    )
    with input_read_errors(cfg):
        found = out.select(F.col("ds").cast("string"), F.col("model").cast("string"), F.col("run").cast("string"),
                           *DUPLICATE_COLUMNS[3:]).toPandas()
    found = found.sort_values(["ds", "model", "run"]).reset_index(drop=True)
    for note in findings.repeated_ids(found):
        log.warning(findings.render(note))
    repeated = findings.duplicate_ids(found, str(c.example_id))
    if repeated is not None and cfg.input.duplicate_ids == "error":
        raise InputError(findings.render(repeated))
    return found[DUPLICATE_COLUMNS]


def _input_checks(spark: SparkSession, cfg: JobConfig, df: DataFrame, days: list[str], result: EvaluateResult) -> None:
    """Before a write: text keys that are not UTF-8; and the opt-in checks that cost a pass of their own: repeated
    ids, files Spark skipped."""
    _check_encoding(result.metrics, cfg)
    if cfg.input.duplicate_ids != "ignore":
        result.duplicates = _duplicate_ids(df, cfg)
    if cfg.input.skip_unreadable_files:
        result.skipped_files = unread_files(spark, cfg, days)
        if result.skipped_files:
            log.warning("%d input files were skipped as unreadable (input.skip_unreadable_files): %s",
                        len(result.skipped_files), result.skipped_files[:20])


def _check_encoding(metrics: pd.DataFrame, cfg: JobConfig) -> None:
    """InputError before a write when the model, run or slice values of a CSV or JSON input are not UTF-8
    (:func:`~ctcalc_spark.core.sanity.undecoded_values`). Free: the values are the metrics rows' keys. An
    ``encoding`` of the user's own is taken as meant."""
    from ctcalc_spark.core.sanity import not_utf8, undecoded_values

    if cfg.input.format not in ("csv", "json") or own_encoding(cfg.input.options):
        return
    found = undecoded_values(metrics, {"model": cfg.columns.model, "run": cfg.columns.run})
    slices = metrics[metrics["slice_name"] != ALL] if "slice_name" in metrics else metrics.iloc[:0]
    for name, part in slices.groupby("slice_name"):
        found.update(undecoded_values(part, {"slice_value": str(name)}))
    if found:
        raise InputError(findings.render(not_utf8(found, cfg.input.format, "input.options")))


def _check_days(days: Sequence[str], present: Sequence[str], cfg: JobConfig, allow_missing: bool) -> set[str]:
    found = findings.missing_days(days, present, where=input_name(cfg), allow_missing=allow_missing)
    if found is not None and found.severity == findings.ERROR:
        unlisted = "" if cfg.input.table else unlisted_files_hint(str(cfg.input.path), cfg.input.options)
        raise InputError(findings.render(found) + unlisted)
    if found is not None:
        log.warning(findings.render(found))
    return set(found.context["missing_days"]) if found else set()  # a set: its callers keep the days not in it


ISO_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}")


def _text_number_hint(df: DataFrame, cfg: JobConfig, *, skip_label: bool = False) -> str | None:
    """When a run stopped on text that is not a number: one such value and its column, and the fix for numbers
    written with a decimal comma (a query for one row per column, on this error path only)."""
    c = cfg.columns
    score = c.logit if cfg.task == "binary" and c.logit is not None else c.prediction
    types = dict(df.dtypes)
    for key, name in (("label", c.label), ("score", score), ("weight", c.weight)):
        if name is None or types.get(name) != "string" or (key == "label" and skip_label):
            continue
        bad = (label_column(df, cfg) if key == "label" else number_column(df, name))[1]
        try:
            rows = df.where(bad).select(col(name)).limit(1).collect()
        except Exception:  # noqa: BLE001 - a hint only: the error it adds to stands without it
            return None
        if not rows:
            continue
        return findings.render(findings.text_not_number(key, name, str(rows[0][0])))
    return None


def _row_hints(df: DataFrame, cfg: JobConfig, tally: pd.DataFrame, more_codes: Iterable[int] = ()) -> list[str]:
    """The sentences that show what invalid rows hold, for the reasons in ``tally`` (and ``more_codes``: those of
    rows without a date) that have one."""
    codes = set(tally["invalid"]) | set(more_codes)
    named = _class_label_hint(df, cfg, tally)  # text labels: what they are and the class_names that reads them
    hints = [named, _text_number_hint(df, cfg, skip_label=named is not None) if TEXT_NOT_NUMBER in codes else None,
             _label_hint(df, cfg) if LABEL_NOT_ALLOWED in codes and not cfg.columns.class_names else None,
             _probability_hint(df, cfg) if PROBABILITY_OUTSIDE in codes else None,
             _malformed_hint(df, cfg) if MALFORMED_RECORD in codes else None]
    return [h for h in hints if h]


MALFORMED_FILES_SHOWN = 5
"""Files a malformed-record hint names at most."""


def _malformed_hint(df: DataFrame, cfg: JobConfig) -> str | None:
    """When a run stopped on malformed records: the files that hold them (one pass over those rows, on this error
    path only), and for a local folder a file named unlike the others (a README.txt among JSON exports)."""
    from pyspark.sql import functions as F

    corrupt = corrupt_record_column(df, cfg)
    if corrupt is None:
        return None
    try:
        rows = (df.where(F.col(corrupt).isNotNull()).groupBy(F.input_file_name().alias("f")).count()
                .orderBy(F.desc("count"), "f").limit(MALFORMED_FILES_SHOWN + 1).collect())
    except Exception:  # noqa: BLE001 - a hint only: the error it adds to stands without it
        return None
    files = [(plain_file_path(r["f"]), int(r["count"])) for r in rows if r["f"]]
    if not files:
        return None
    shown = ", ".join(f"{f} ({n:,})" for f, n in files[:MALFORMED_FILES_SHOWN])
    more = " and more" if len(files) > MALFORMED_FILES_SHOWN else ""
    strays = [stray_file_hint(cfg, f) for f, _ in files[:MALFORMED_FILES_SHOWN]]
    return f"The malformed records are in {shown}{more}.{next((h for h in strays if h), '')}"


def _probability_hint(df: DataFrame, cfg: JobConfig) -> str | None:
    """When a run stopped on probabilities outside [0, 1]: what the column holds, and the likely cause, logits or
    percentages given as columns.prediction (binary) or columns.class_probabilities (multiclass; one aggregation
    of those rows, on this error path only)."""
    from pyspark.sql import functions as F

    c = cfg.columns
    if cfg.task == "binary" and c.logit is None and c.prediction is not None:
        names = [c.prediction]
    elif cfg.task == "multiclass" and c.class_probabilities:
        names = list(c.class_probabilities)
    else:
        return None
    values = [F.expr(number_column(df, n)[0]) for n in names]
    outside = [(p < 0.0) | (p > 1.0) for p in values]
    low_of = F.least(*values) if len(values) > 1 else values[0]
    high_of = F.greatest(*values) if len(values) > 1 else values[0]
    try:
        low, high = df.where(reduce(lambda a, b: a | b, outside)).agg(F.min(low_of), F.max(high_of)).first()
    except Exception:  # noqa: BLE001 - a hint only: the error it adds to stands without it
        return None
    found = findings.probabilities_outside(names, low=low, high=high)
    return None if found is None else findings.render(found)


def _class_label_hint(df: DataFrame, cfg: JobConfig, tally: pd.DataFrame) -> str | None:
    """When a binary or multiclass run stopped on its labels: the labels that are names, not class indices, with
    the columns.class_names that reads them, or those not in columns.class_names (a query of a few distinct
    labels, on this error path only)."""
    from pyspark.sql import functions as F

    c = cfg.columns
    codes = set(tally["invalid"])
    if c.class_names:
        if LABEL_NOT_ALLOWED not in codes:
            return None
        bad = F.expr(f"{class_name_label(df, cfg)} < 0.0D")
    elif TEXT_NOT_NUMBER in codes and dict(df.dtypes).get(c.label) == "string" and cfg.task != "regression":
        bad = F.expr(str(label_column(df, cfg)[1]))
    else:
        return None
    try:
        rows = df.where(bad).select(col(c.label).cast("string")).distinct().limit(findings.LABELS_SHOWN + 1).collect()
    except Exception:  # noqa: BLE001 - a hint only: the error it adds to stands without it
        return None
    found = findings.text_labels(c.label, [str(r[0]) for r in rows], task=cfg.task, class_names=c.class_names)
    return None if found is None else findings.render(found)


def _label_hint(df: DataFrame, cfg: JobConfig) -> str | None:
    """When a binary run stopped on labels other than 0/1: what they are, and what to do with them (one
    aggregation of those rows, on this error path only)."""
    from pyspark.sql import functions as F

    if cfg.task != "binary":
        return None
    y = F.expr(label_column(df, cfg)[0])
    other = ~y.isin(0.0, 1.0)
    try:  # over all rows: which of 0 and 1 are there as well tells a 1/2 coding from classes 0, 1, 2
        low, high, whole, zeros, ones = df.agg(
            F.min(F.when(other, y)), F.max(F.when(other, y)), F.min(F.when(other, (y == F.floor(y)).cast("int"))),
            F.count(F.when(y == 0.0, 1)), F.count(F.when(y == 1.0, 1))).first()
    except Exception:  # noqa: BLE001 - a hint only: the error it adds to stands without it
        return None
    found = findings.binary_labels(cfg.columns.label, low=low, high=high, whole=bool(whole), zeros=zeros, ones=ones)
    return None if found is None else findings.render(found)


def _absent_days_hints(spark: SparkSession, cfg: JobConfig, days: Sequence[str], present: pd.Series) -> list[str]:
    """Sentences for a job that found no rows for some of its days: how the date column writes its days (if not as
    the config expects) and, when none of the days was found in a ``<ds>=`` folder layout, which days its folders
    hold (one listing)."""
    hints = [_date_format_hint(spark, cfg)]
    found = set(present.dropna().astype(str))
    empty = empty_day_folders(cfg, sorted(set(days) - found))
    if empty:
        many = len(empty) > 1
        hints.append(f"The input's {listed(empty)} folder{'s hold' if many else ' holds'} no data file (made by a "
                     "writer that has not written yet, or wrote no rows).")
    if not set(days) & found:
        folders = input_day_folders(cfg)
        if folders:
            iso = all(parse_day(v) is not None for v in folders)
            held = day_runs(folders) if iso else f"{folders[0]} to {folders[-1]}"
            hints.append(f"The input's {cfg.columns.ds}= folders hold {len(folders):,} "
                         f"day{'s' if len(folders) != 1 else ''}: {held}.")
        elif hints[0] is None:
            hints.append(_days_held(spark, cfg))
    return [h for h in hints if h]


def _days_held(spark: SparkSession, cfg: JobConfig) -> str | None:
    """The days the input's rows hold, as runs (a sentence), for a job that found none of the days it was given
    in an input without ``<ds>=`` folders (a CSV, one Parquet file): one pass over the date column, on this error
    path only."""
    from pyspark.sql import functions as F

    if cfg.columns.ds is None:
        return None
    try:
        rows = read_input(spark, cfg).select(F.col(DS).cast("string").alias("d")).where("d IS NOT NULL") \
            .distinct().limit(100_000).collect()
    except Exception:  # noqa: BLE001 - a hint only: the error it adds to stands without it
        return None
    if not rows:  # no dated row: none at all, or only rows without a date (counted by the scan's checks)
        return "The table has no rows at all." if load_input(spark, cfg).limit(1).count() == 0 else None
    held = sorted(str(r["d"]) for r in rows if parse_day(str(r["d"])) is not None)
    if not held:
        return None
    return (f"The table's {cfg.columns.ds!r} column holds {len(held):,} day{'s' if len(held) != 1 else ''}: "
            f"{day_runs(held)}.")


def _date_format_hint(spark: SparkSession, cfg: JobConfig) -> str | None:
    """When a job found no rows for its days: a sentence on how the input's date column writes its days, if that
    is not what the config expects (200 values read from the whole input; only on this error path)."""
    name, fmt = cfg.columns.ds, cfg.columns.ds_format
    if name is None:
        return None
    try:
        df = load_input(spark, cfg)
        kind = dict(df.dtypes).get(name)
        if kind is None or kind in ("date", "timestamp", "timestamp_ntz"):
            return None
        text = col(name).cast("string")
        picked = df.where(text.isNotNull())
        iso = text.rlike(ISO_DAY.pattern)
        if fmt is None:  # the values that are not YYYY-MM-DD, wherever they are in the table
            picked = picked.where(~iso)
        rows = picked.select(text).limit(200).collect()
        iso_example = df.where(iso).select(text).limit(1).collect() if fmt is None and rows else []
    except Exception:  # noqa: BLE001 - a hint only: the error it adds to stands without it
        return None
    if not rows:  # nothing, or (without a format) YYYY-MM-DD throughout: the days asked for are not there
        return None
    values = [str(r[0]) for r in rows]
    value = values[0]
    if iso_example:  # YYYY-MM-DD values and others, wherever in the table each is
        return (f"The date column {name!r} writes its days in more than one layout, e.g. {iso_example[0][0]!r} and "
                f"{value!r}: a job reads one layout (YYYY-MM-DD, or columns.ds_format), so write the column one "
                "way upstream.")
    if fmt is not None and all(fits_ds_format(v, fmt) for v in values):
        return f"The date column {name!r} holds values like {value!r}; columns.ds_format is {fmt!r}."
    if fmt is not None and all(ISO_DAY.match(v) for v in values):
        return (f"The date column {name!r} holds values like {value!r}, not columns.ds_format {fmt!r}: remove "
                "columns.ds_format (YYYY-MM-DD text needs none).")
    guesses = guess_ds_formats(values)
    now = "not YYYY-MM-DD" if fmt is None else f"not columns.ds_format {fmt!r}"
    if len(guesses) == 1:
        return f"The date column {name!r} holds values like {value!r}, {now}: set columns.ds_format: {guesses[0]!r}."
    if guesses:
        listed = " or ".join(repr(g) for g in guesses)
        return (f"The date column {name!r} holds values like {value!r}, {now}: set columns.ds_format to {listed} "
                f"(the {len(values)} values read do not tell the day from the month).")
    return (f"The date column {name!r} holds values like {value!r}, {now}: set columns.ds_format to how it "
            "writes a day (e.g. 'yyyyMMdd', 'dd.MM.yyyy' or 'M/d/yyyy').")


def _metric_schema(task: str) -> pa.Schema:
    return arrow_schema({**KEY_TYPES, **METRIC_TYPES[task]})


def evaluate(
    spark: SparkSession,
    cfg: JobConfig,
    ds: str | Sequence[str],
    *,
    write: bool = True,
    known_bias: pd.DataFrame | None = None,
    allow_missing_days: bool = False,
    progress: Callable[[str], None] | None = None,
    replace_runs: bool = False,
    store: OutputStore | None = None,
) -> EvaluateResult:
    """Scan the evaluation rows of one day or several (``ds``: a day, 'START..END', or a list) once and
    write each day's summaries and metrics partitions.

    Metrics rows: one per (ds, model, run, slice); see ``METRIC_TYPES`` for columns. Bad rows raise
    :class:`InputError` (``on_invalid: error``) or are excluded and counted in ``n_invalid``
    (``on_invalid: drop``); rows no metrics row owns (no model, run or date) are in ``result.uncounted``
    (docs/bad-input.md lists what each bad input gets). Nothing is written unless every metric was computed; the partitions are
    replaced by one commit per table (:mod:`ctcalc_spark.tables`).

    ``known_bias`` (optional; binary/regression, one day): a frame of model, run, c (e.g. the previous
    window's bias, known before today's scan). The same scan then also accumulates the exact calibrated
    sums per (model, run), returned as ``result.exact`` and written to the ``calibrated_exact`` table
    (``window_spec`` from ``rolling``); the summaries and metrics are the same as without it.

    ``progress`` (optional) is called with a line as the scan starts and one as the writes start.

    ``store`` (optional): the command's output store, when it has one (else ``OutputStore(cfg, spark)``).
    """
    step = progress or (lambda _: None)
    days = parse_days(ds)
    if known_bias is not None and len(days) != 1:
        raise ConfigError("A known bias (in-scan exact sums) is for one day at a time: `ctcalc rolling --scan --ds "
                          "START..END` scans a range day by day, each day with its previous window's bias.")
    store = store or OutputStore(cfg, spark)
    tx = None
    if write:
        store.check_before_work("evaluate", days, task=cfg.task)
        tx = store.transaction("evaluate")
        # a run of the same days that commits from now on makes this one's first write fail
        tx.pin(*(("metrics",) if cfg.task == "multiclass" else ("summaries", "metrics", "calibrated_exact")))
    df = read_input(spark, cfg, days)
    step(f"scanning {day_span(days)} of {input_name(cfg)}")
    if cfg.task == "multiclass":
        if known_bias is not None:
            raise ConfigError("A known bias is supported for binary and regression tasks, not multiclass.")
        return _evaluate_multiclass(spark, cfg, days, df, tx, allow_missing_days, step, replace_runs)
    kb = _known_bias_frame(spark, cfg, known_bias)
    with input_read_errors(cfg), long_step("evaluate scan", spark):
        one_day = {DS: days[0]} if len(days) == 1 else None  # the rows' day is that one or null
        aggregated = summary_aggregation(df, cfg, extra_keys=[DS], known_bias=kb, single=one_day)
        agg = aggregated.toPandas().rename(columns={DS: "ds"})
    dated = agg[agg["ds"].notna()]
    present = sorted(dated["ds"].astype(str).unique())
    try:
        missing = _check_days(days, present, cfg, allow_missing_days)
    except InputError as e:
        hints = _absent_days_hints(spark, cfg, days, pd.Series(present, dtype=object))
        raise InputError(" ".join(filter(None, [str(e), *hints]))) from None
    exact = None if known_bias is None else _exact_sums(dated, cfg, known_bias)
    summaries, tally = decode_aggregate(dated, cfg, extra=["ds"])
    no_date = agg[agg["ds"].isna()].groupby("invalid", as_index=False)["count"].sum().assign(ds=None)
    try:
        invalid, uncounted = _invalid_counts(pd.concat([tally, no_date], ignore_index=True), cfg)
    except InputError as e:
        raise InputError(" ".join([str(e), *_row_hints(df, cfg, tally, no_date["invalid"])])) from None
    empty = sorted(set(present) - set(summaries["ds"]))
    if empty:
        raise InputError(" ".join([findings.render(findings.all_rows_invalid(empty, tally)),
                                   *_row_hints(df, cfg, tally)]))
    done = [d for d in days if d not in missing]
    metrics = metrics_from_summaries(
        summaries,
        cfg.task,
        keys=["ds", cfg.columns.model, cfg.columns.run],
        slices=list(cfg.columns.slices),
        bin_width=cfg.histogram.bin_width,
        invalid_counts=invalid,
        max_abs_logit=cfg.sanity.max_abs_logit,
        min_bias_rows=cfg.split.min_bias_rows,
    ).rename(columns={cfg.columns.model: "model", cfg.columns.run: "run"})
    metrics.insert(1, "task", cfg.task)
    check_finite(metrics)
    _check_extreme(metrics, cfg)
    result = EvaluateResult(done[0], metrics, summaries, days=done, uncounted=uncounted)
    _input_checks(spark, cfg, df, days, result)
    if exact is not None:
        result.exact = exact
    if tx is None:
        return result
    _check_dropped_runs(store, metrics, done, replace_runs)
    step(f"writing {len(metrics):,} metrics rows and {len(summaries):,} summary rows of {day_span(done)}")
    tables = [("summaries", summaries, STATES[cfg.task].arrow_schema(["ds", *group_columns(cfg)]))]
    if exact is not None:
        from ctcalc_spark.core.windows import WindowSpec

        spec = WindowSpec.from_config(cfg.rolling).label
        tables.append(("calibrated_exact", exact.assign(ds=done[0], window_spec=spec),
                       arrow_schema({**EXACT_TYPES, "window_spec": "string", "ds": "string"})))
    tables.append(("metrics", metrics, _metric_schema(cfg.task)))
    for (table, _, _), path in zip(tables, tx.write_all(tables)):
        result.paths[table] = path
    result.run_id = tx.run_id
    return result


def _check_dropped_runs(store: OutputStore, metrics: pd.DataFrame, days: Sequence[str], replace: bool) -> None:
    """Before a write: InputError when the metrics partitions of ``days`` hold (model, run)s this run has not got.

    A day's partitions are replaced whole, so an earlier run's models would vanish without a word: one pipeline
    evaluated as its scores land and then the other (``input.model_paths`` of one each), or a rerun after a run's
    scores were lost. ``replace`` (``--replace-runs``) lets them go, with a warning naming them. One listing of the
    metrics table; the earlier rows are read only for days it already holds.
    """
    held = sorted(set(store.days("metrics")) & set(days))
    if not held:
        return
    keys = ["ds", "model", "run"]
    old = store.read("metrics", days=held)
    if old.empty or not set(keys) <= set(old.columns):
        return
    old = old[keys].astype(str).drop_duplicates()
    new = metrics[keys].astype(str).drop_duplicates()
    gone = old.merge(new, how="left", on=keys, indicator=True)
    gone = gone[gone["_merge"] == "left_only"].drop(columns="_merge")
    if gone.empty:
        return
    parts = []
    for (ds, model), g in gone.groupby(["ds", "model"], sort=True):
        runs = sorted(g["run"], key=lambda r: (len(r), r))
        parts.append(f"ds={ds} {model!r} (run{'s' if len(runs) > 1 else ''} {listed(runs, 10)})")
    shown = listed(parts, 5, "; ")
    what = (f"The metrics table already holds model runs this run has not got: {shown}. A day's partitions are "
            "replaced whole, so writing would remove them")
    if replace:
        log.warning("%s: removed, as --replace-runs asks.", what)
        return
    raise InputError(f"{what}. Evaluate every model of a day in one run (input.model_paths reads one folder per "
                     "model), or pass --replace-runs to remove them. Nothing was written.")


def _check_extreme(metrics: pd.DataFrame, cfg: JobConfig) -> None:
    """``sanity.on_extreme: error``: stop before writing when a group has extreme logits or clipped probabilities."""
    if cfg.sanity.on_extreme != "error" or cfg.task != "binary":
        return
    from ctcalc_spark.core.sanity import effective_limit, raise_on_extreme

    whole = metrics[metrics["slice_name"] == ALL]
    raise_on_extreme(whole, ["ds", "model", "run"],
                     limit=effective_limit(cfg.sanity.max_abs_logit, cfg.histogram.bin_width))


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

def _multiclass_rows(df: DataFrame, cfg: JobConfig) -> DataFrame:
    """Keys as strings, _y, _z (array<double>), _w, is_bias, invalid (before the class-count check)."""
    c = cfg.columns
    y, y_text = label_column(df, cfg)
    w, w_text = number_column(df, c.weight) if c.weight else ("1.0D", None)
    split_key = quoted(c.split) if c.split else quoted(str(c.example_id))
    per_class = [number_column(df, n) for n in c.class_columns()]
    scores = [v for v, _ in per_class]
    if not per_class:
        z, score_checks = f"CAST({quoted(str(c.logit))} AS ARRAY<DOUBLE>)", []
    elif c.class_logits:
        z, score_checks = f"array({', '.join(scores)})", []
    else:  # probabilities: ln p, clipped so that a class given probability 0 costs ln(clip_eps), not inf
        eps = sql_double(cfg.clip_eps)
        z = "array(" + ", ".join(f"ln(greatest({p}, {eps}))" for p in scores) + ")"
        score_checks = [("(" + " OR ".join(f"NOT ({p} BETWEEN 0.0D AND 1.0D)" for p in scores) + ")", 3)]
    nulls = null_checks(y, z, w if c.weight else None, split_key)
    if scores:  # array(...) of a null is an array holding a null: a null class column is a null score
        nulls = [("(" + " OR ".join(f"{v} IS NULL" for v in scores) + ")", 12) if code == 12 else (cond, code)
                 for cond, code in nulls]
    checks = first_checks(df, cfg, [y_text, w_text, *(t for _, t in per_class)]) + [
        *nulls,
        (f"exists({z}, x -> {not_finite('x')} OR x IS NULL)", 2),
        *score_checks,
        (f"(rint({y}) != {y} OR {y} < 0.0D OR {y} >= size({z}))", 4),  # rint: no cast of a huge label to long
        (bad_weight(w), 5),
    ]
    from pyspark.sql import functions as F

    return df.select(
        *[string_key(k, c.slices) for k in [DS, *group_columns(cfg)]],  # a null slice value: NULL_SLICE
        F.expr(y).alias("_y"),
        F.expr(z).alias("_z"),
        F.expr(w).alias("_w"),
        F.expr(f"coalesce({split_expr(cfg, dict(df.dtypes))}, false)").alias("is_bias"),
        F.expr(invalid_code(checks, cfg)).alias("invalid"),
    )


def _class_confusion(bias_pdf: pd.DataFrame, model: str) -> dict[str, np.ndarray]:
    """Per model, its val-bias rows counted by label class and highest-scoring class (models whose rows hold
    one number of classes; the rows are on the driver already, for the temperature fit)."""
    out: dict[str, np.ndarray] = {}
    for name, grp in bias_pdf.groupby(model, sort=True):
        sizes = grp["_z"].map(len)
        if sizes.nunique() != 1:
            continue
        k = int(sizes.iloc[0])
        top = np.stack(grp["_z"].to_numpy()).argmax(axis=1)
        confusion = np.zeros((k, k), dtype=np.int64)
        np.add.at(confusion, (grp["_y"].to_numpy(np.int64), top), 1)
        out[str(name)] = confusion
    return out


def _class_counts(rows: DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per group: the number of classes (the most common logit-array length, the longer on a tie) and the
    valid val-bias rows that have it."""
    from pyspark.sql import functions as F

    ok = F.col("invalid") == 0
    sizes = rows.where(ok).groupBy(*[col(k) for k in keys], F.size("_z").alias("_n")).agg(
        F.count(F.lit(1)).alias("rows"), F.sum(F.col("is_bias").cast("long")).alias("bias_rows")).toPandas()
    sizes = sizes.sort_values([*keys, "rows", "_n"], ascending=[True] * len(keys) + [False, False])
    return sizes.drop_duplicates(keys, keep="first").rename(columns={"_n": "_k"})[[*keys, "_k", "bias_rows"]]


PROBABILITY_SUM_TOLERANCE = 1e-3
"""How far from 1 a row's class scores may sum and still look like probabilities (a CSV rounded to 4 digits
per class sums within 2e-4 of 1 for a handful of classes)."""


def _multiclass_ce(z, y, t):  # type: ignore[no-untyped-def]
    """Native cross-entropy of softmax(z / t) for an array column: logsumexp via higher-order functions."""
    from pyspark.sql import functions as F

    m = F.array_max(z)
    lse = m / t + F.log(F.aggregate(z, F.lit(0.0), lambda acc, x: acc + F.exp((x - m) / t)))
    return lse - F.element_at(z, (y + 1).cast("int")) / t


def _evaluate_multiclass(spark: SparkSession, cfg: JobConfig, days: list[str], df: DataFrame, tx: Transaction | None,
                         allow_missing: bool, step: Callable[[str], None], replace_runs: bool) -> EvaluateResult:
    from pyspark.sql import functions as F

    c = cfg.columns
    keys = [DS, *group_columns(cfg)]
    base = [DS, c.model, c.run]
    slices = list(c.slices)
    raw = _multiclass_rows(df, cfg)
    with input_read_errors(cfg):
        classes = _class_counts(raw, base)
    wrong_k = findings.class_count_mismatch(classes, c.class_names, base)  # an array's length: its classes
    if wrong_k is not None:
        raise InputError(findings.render(wrong_k))
    from pyspark.sql import types as T

    k_schema = T.StructType([T.StructField(k, T.StringType()) for k in base] + [T.StructField("_k", T.LongType())])
    k_df = spark.createDataFrame([(*(None if pd.isna(v) else v for v in r[:-1]), int(r[-1]))
                                  for r in classes[[*base, "_k"]].itertuples(index=False)], k_schema)
    # A row whose logit array is shorter or longer than its group's is not a problem with fewer classes.
    ragged = F.col("invalid").isin(0, 4) & (F.size("_z") != F.col("_k"))
    rows = raw.join(F.broadcast(k_df), on=base, how="left").withColumn(
        "invalid", F.when(ragged, F.lit(10)).otherwise(F.col("invalid"))).drop("_k")
    bias_rows = rows.where((F.col("invalid") == 0) & F.col("is_bias") & F.col(DS).isNotNull())
    too_many = findings.too_many_bias_rows(int(classes["bias_rows"].sum()) if not classes.empty else 0,
                                           cfg.max_bias_rows_multiclass, days)
    if too_many is not None:
        raise InputError(findings.render(too_many))
    with input_read_errors(cfg):
        bias_pdf = bias_rows.select(*[col(k) for k in keys], "_y", "_z", "_w").toPandas()
    # A temperature per view: the whole (slice '__all__') and each value of each slice column, each fitted on
    # its own val-bias rows, as the binary task fits a bias per view.
    views: list[tuple[str, str | None]] = [(ALL, None)] + [(name, name) for name in slices]
    vkeys = [*base, "slice_name", "slice_value"]
    temps: list[dict[str, Any]] = []
    for view, by_col in views:
        for key_vals, grp in bias_pdf.groupby(base + ([by_col] if by_col else []), sort=True):
            key_vals = key_vals if isinstance(key_vals, tuple) else (key_vals,)
            rec: dict[str, Any] = dict(zip(base, key_vals), slice_name=view,
                                       slice_value=ALL if by_col is None else key_vals[-1])
            try:
                rec["temperature"] = solve_temperature(
                    grp["_y"].to_numpy(np.int64), np.stack(grp["_z"].to_numpy()), sample_weight=grp["_w"].to_numpy()
                )
                rec["t_status"] = "ok"
            except DegenerateBiasError as e:
                rec["temperature"], rec["t_status"] = None, e.status
            temps.append(rec)
    t_schema = T.StructType(
        [T.StructField(k, T.StringType()) for k in vkeys]
        + [T.StructField("temperature", T.DoubleType()), T.StructField("t_status", T.StringType())]
    )
    t_df = spark.createDataFrame([tuple(r[f.name] for f in t_schema.fields) for r in temps], t_schema)
    ok = F.col("invalid") == 0
    remain = ok & ~F.col("is_bias")
    ce = _multiclass_ce(F.col("_z"), F.col("_y"), F.lit(1.0))
    cce = _multiclass_ce(F.col("_z"), F.col("_y"), F.col("temperature"))
    hit = (F.array_position(F.col("_z"), F.array_max(F.col("_z"))) - 1 == F.col("_y")).cast("double")
    # logits given: a row whose scores are all in [0, 1] and sum to 1 (to a CSV's rounding) looks like probabilities
    scores_given = not c.class_probabilities
    # probabilities given: a row whose label's class has p < clip_eps (a CSV's rounding to 0) costs ln(clip_eps)
    label_clipped = F.element_at(F.col("_z"), (F.col("_y") + 1).cast("int")) <= F.lit(math.log(cfg.clip_eps) + 1e-9)
    prob_like = (F.forall("_z", lambda x: (x >= 0.0) & (x <= 1.0))
                 & (F.abs(F.aggregate("_z", F.lit(0.0), lambda acc, x: acc + x) - 1.0) <= PROBABILITY_SUM_TOLERANCE))
    per_row = {  # the MULTICLASS statistics, per row
        "n_rows": F.when(ok, 1).otherwise(0), "n_bias": F.when(ok & F.col("is_bias"), 1).otherwise(0),
        "n_remain": F.when(remain, 1).otherwise(0), "n_invalid": F.when(~ok, 1).otherwise(0),
        "weight": F.when(ok, F.col("_w")), "ce_sum": F.when(ok, F.col("_w") * ce),
        "w_remain": F.when(remain, F.col("_w")), "ce_remain": F.when(remain, F.col("_w") * ce),
        "cce_remain": F.when(remain & F.col("temperature").isNotNull(), F.col("_w") * cce),
        "w_hit": F.when(ok, F.col("_w") * hit),
        **({"n_prob_like": F.when(ok & prob_like, 1).otherwise(0)} if scores_given else {
            "n_label_clipped": F.when(ok & label_clipped, 1).otherwise(0),
            "ce_label_clipped": F.when(ok & label_clipped, F.col("_w") * ce)}),
    }
    # every row once per view: '__all__' and, per slice column, that column's value
    fields = [*[col(k) for k in base], "_y", "_z", "_w", "is_bias", "invalid"]
    if slices:
        per_view = F.explode(F.array(
            F.struct(F.lit(ALL).alias("slice_name"), F.lit(ALL).alias("slice_value")),
            *[F.struct(F.lit(name).alias("slice_name"), col(name).alias("slice_value")) for name in slices]))
        viewed = rows.select(*fields, per_view.alias("_v")).select(*fields, "_v.slice_name", "_v.slice_value")
    else:
        viewed = rows.select(*fields, F.lit(ALL).alias("slice_name"), F.lit(ALL).alias("slice_value"))
    agg = (
        viewed.join(F.broadcast(t_df), on=vkeys, how="left")
        .groupBy(*[col(k) for k in vkeys])
        .agg(
            *state_sums(MULTICLASS, per_row),
            F.first("t_status", ignorenulls=True).alias("t_status"),
            F.first("temperature", ignorenulls=True).alias("temperature"),
        )
    )
    with input_read_errors(cfg):
        agg = agg.toPandas()
    agg = agg.rename(columns={DS: "ds"})
    keys = ["ds", *keys[1:]]
    stray = agg[["ds", c.model, c.run]].isna().any(axis=1)
    try:
        missing = _check_days(days, sorted(agg.loc[agg["ds"].notna(), "ds"].astype(str).unique()), cfg, allow_missing)
    except InputError as e:
        raise InputError(" ".join(filter(None, [str(e), *_absent_days_hints(spark, cfg, days, agg["ds"])]))) from None
    uncounted = pd.DataFrame(columns=UNCOUNTED_COLUMNS)
    if int(agg["n_invalid"].sum()) or stray.any():  # one more pass, over the rows that need telling apart
        with input_read_errors(cfg):
            tally = rows.where(~ok | F.col(DS).isNull()).groupBy(
                F.col(DS).alias("ds"), *[col(k) for k in keys[1:]], "invalid").count().toPandas()
        try:
            uncounted = _invalid_counts(tally, cfg)[1]
        except InputError as e:
            raise InputError(" ".join([str(e), *_row_hints(df, cfg, tally)])) from None
    agg = agg[~stray]
    out = []
    for _, r in agg.iterrows():
        rec = {k: r[k] for k in ["ds", c.model, c.run, "slice_name", "slice_value"]}
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
        out.append(check_row(apply_min_bias_rows(rec, "multiclass", cfg.split.min_bias_rows)))
    metrics = pd.DataFrame(out).rename(columns={c.model: "model", c.run: "run"})
    metrics["task"] = cfg.task
    rank = {view: i for i, (view, _) in enumerate(views)}
    metrics = metrics.assign(_view=metrics["slice_name"].map(rank)).sort_values(
        ["ds", "model", "run", "_view", "slice_value"]).drop(columns="_view")
    metrics = metrics[_metric_schema("multiclass").names].reset_index(drop=True)
    check_finite(metrics)
    done = [d for d in days if d not in missing]
    result = EvaluateResult(done[0], metrics, pd.DataFrame(), days=done, uncounted=uncounted)
    whole = agg[agg["slice_name"] == ALL]
    if scores_given:
        result.probability_like = (int(whole["n_rows"].sum()), int(whole["n_prob_like"].sum()))
    else:
        total = float(whole["ce_sum"].fillna(0).sum())
        clipped = float(whole["ce_label_clipped"].fillna(0).sum())
        result.label_class_clipped = (int(whole["n_rows"].sum()), int(whole["n_label_clipped"].sum()),
                                      clipped / total if total > 0 else 0.0)
    result.class_confusion = _class_confusion(bias_pdf, c.model)
    _input_checks(spark, cfg, df, days, result)
    if tx is not None:
        _check_dropped_runs(tx.store, metrics, done, replace_runs)
        step(f"writing {len(metrics):,} metrics rows of {day_span(done)}")
        result.paths["metrics"] = tx.write("metrics", metrics, _metric_schema("multiclass"))
        result.run_id = tx.run_id
    return result
