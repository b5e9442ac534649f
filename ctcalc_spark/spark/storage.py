"""The storage layer: every read of the evaluation rows and every read and write of the output tables.

Outputs are folders under ``output.path`` (Parquet by default, partitioned) or catalog tables
(``output.database`` / ``output.tables``), written with Spark's own writers and **dynamic partition
overwrite**: a run replaces exactly the partitions it computed (``DataFrameWriterV2.overwritePartitions()``
for v2 tables such as Delta or Iceberg; ``insertInto(overwrite=True)`` in dynamic mode for Hive/Parquet
tables; a partitioned ``save`` for folders). No JVM handle is used, so every job runs on Spark Connect.

One run = one :class:`Transaction`:

1. it takes a **lease** (``<output.path>/_runs/<run_id>.json``, heartbeat while it runs, naming its job and
   days); if another live run of the same job holds a lease on any of those days, it gives its lease back
   and stops (:class:`ConcurrentRunError`): two runs of one day would swap their partitions in turn, and
   the day's metrics and summaries could come from different runs. Of two runs that start together at least
   one stops (each writes its lease before it looks), never neither. A range run that opens its transaction
   before its scan narrows its lease to the days found to have rows (:meth:`Transaction.narrow`);
2. when no other live run holds the same output, it clears what killed runs left (see :func:`recover_root`);
3. it writes its tables, each row carrying the run's ``run_id``;
4. it writes its **commit record** last: ``<output.path>/_commits/<run_id>.json`` lists every partition it
   wrote (moved into place whole, like Spark's ``_SUCCESS``). A partition's data whose ``run_id`` is not
   the latest committed one was written by a run that did not finish: :meth:`OutputStore.check_days`
   reports it, and downstream schedulers can wait on the commit record of a day.

What readers can see. Spark stages a write under ``.spark-staging-<id>/`` (hidden) and, at job commit,
replaces each partition folder by a delete followed by a rename. A run killed at any other moment leaves
every partition either old or new and complete. A run killed between those two calls (a window of well
under a millisecond per partition here) leaves that partition absent until the next run of the same
output, which rolls the complete staged copy forward (Spark writes ``_SUCCESS`` into the staging folder
only once every task's files are in it). Transactional table formats (Delta, Iceberg) have no such window.
"""
from __future__ import annotations

import datetime as dt
import itertools
import json
import logging
import os
import re
import socket
import threading
import time
import uuid
import warnings
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

from ctcalc_spark.config import (
    EPOCH_FORMATS,
    ONE_RUN,
    JobConfig,
    OutputConfig,
    codec_options,
    input_day,
    require_input,
    undated_day,
    validate_ds,
)
from ctcalc_spark.errors import ConcurrentRunError, ConfigError, CtcalcError, InputError, java_root_cause, listed
from ctcalc_spark.pathsafe import unwritable_reason
from ctcalc_spark.spark import interrupt
from ctcalc_spark.spark.filekind import (
    TABLE_FORMAT_MARKS,
    compression,
    data_files,
    has_data_files,
    in_plain_folder,
    input_glob,
    kind_hint,
    name_kind,
    names_glob,
    recursive_lookup,
    table_format,
    temporary_suffix,
)
from ctcalc_spark.spark.files import (
    FileStore,
    absolute,
    connector_error,
    csv_first_record,
    is_local,
    literal_path,
    local_path,
    supports_exchange,
)
from ctcalc_spark.spark.names import col, excel_sep_line, header_slips, quoted, sep_line_fix, sql_string

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

PARTITIONS: dict[str, tuple[str, ...]] = {
    "metrics": ("ds",),
    "summaries": ("ds",),
    "rolling": ("window_spec", "ds"),
    "calibrated_exact": ("window_spec", "ds"),
    "stream_summaries": ("window", "batch_id"),
    "stream_counts": ("window", "batch_id"),
    "stream_metrics": ("window",),
    "stream_rolling": ("window",),
}
"""Partition columns of each output table, outermost first."""

RUN_ID = "run_id"
STAGING_PREFIX = ".ctcalc-staging-"
"""A run's staged partitions: ``<table root>/.ctcalc-staging-<run id>-<table>/`` (hidden from readers)."""
COMMIT_COLUMNS = ["table", "partition", "ds", RUN_ID, "job", "committed_at", "n_rows"]
COMPACT_AT = 200
"""Commit records beyond this many are folded into one (each partition keeps its own run, job and time)."""
_PARTITION_VALUE = re.compile(r"^[A-Za-z0-9_.:+-]+$")
_LEGACY_ASIDE = re.compile(r"^ds=\d{4}-\d\d-\d\d\.old\.[0-9a-f]+$")


def new_run_id() -> str:
    """A run id that sorts by start time: ``20261123T041512Z-1a2b3c4d``."""
    return f"{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


def _utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


# ---- the evaluation rows ----------------------------------------------------------------------------

DS = "_ds"
"""Normalised date column the scans group on: 'YYYY-MM-DD' strings."""


def required_columns(cfg: JobConfig) -> list[str]:
    """Every input column the configuration names."""
    c = cfg.columns
    scores = list(c.class_columns()) or [c.logit]
    names = [c.model, None if c.one_run else c.run, c.ds, c.label, *scores, c.prediction, c.weight, c.split,
             *c.slices]
    if c.split is None:
        names.append(c.example_id)
    return list(dict.fromkeys(n for n in names if n is not None))


def source_columns(cfg: JobConfig) -> list[str]:
    """The columns the input table itself must have: :func:`required_columns`, except that with
    ``columns.model_scores`` its score columns stand in for the model and score columns (and for the run column
    when no model takes its run from it)."""
    c = cfg.columns
    names = required_columns(cfg)
    if not c.model_scores:
        return names
    drop = {c.model, c.score_target()}
    if all(len(v) > 1 for v in c.model_scores.values()):
        drop.add(c.run)
    return list(dict.fromkeys([n for n in names if n not in drop] + c.model_score_columns()))


def stack_model_scores(df: DataFrame, cfg: JobConfig) -> DataFrame:
    """The rows of a table with one score column per model (``columns.model_scores``) once per column: the model
    column holds the model, the run column the run (the list position, or the table's run column for a model of
    one column), and the score column that ``columns.logit``/``prediction`` names the column's value. One
    generator (``inline``) in the scan's own plan: no extra pass."""
    from pyspark.sql import functions as F

    c = cfg.columns
    target, every = c.score_target(), c.model_score_columns()
    assert target is not None  # validation refuses it
    missing = [n for n in every if n not in df.columns]
    if missing:
        raise InputError(f"The evaluation table lacks the column(s) {missing} that columns.model_scores names; present "
                         f"columns: {sorted(df.columns)}. Name each model's score column as the table spells it.")
    taken = [n for n in (c.model, target) if n in df.columns]
    lists = [m for m, names in c.model_scores.items() if len(names) > 1]
    if lists and c.run in df.columns and not c.one_run:
        taken.append(c.run)
    if taken:
        raise InputError(f"The evaluation table has the column(s) {taken} besides those columns.model_scores names, "
                         f"while the stacked rows take those names for their model{', run' if c.run in taken else ''} "
                         "and score: read a table of one row per model and run without columns.model_scores, or "
                         "name the stacked columns another way under 'columns:' (columns.model, columns.run, "
                         "columns.logit / columns.prediction).")
    types = {n: t for n, t in df.dtypes if n in every}
    kinds = set(types.values())
    numeric = {k for k in kinds if k in NUMERIC_TYPES or k.startswith("decimal")}
    if len(kinds) == 1:
        kind = next(iter(kinds))
    elif numeric == kinds:
        kind = "string" if "string" in kinds else "double"  # text holding numbers is parsed per row by the scan
    elif all(k.startswith("array") for k in kinds):
        kind = "array<double>"
    else:
        raise InputError("The score columns of columns.model_scores have types that do not combine: "
                         + ", ".join(f"{n} {t}" for n, t in types.items()) + ". Write them as numbers in each.")
    def run(names: Sequence[str], i: int) -> Column:
        """The table's run column for a model of one column (unless it has none: ONE_RUN); else the position."""
        if len(names) == 1:
            return F.lit(ONE_RUN) if c.one_run else F.col(c.run).cast("string")
        return F.lit(str(i))

    stacked = [F.struct(F.lit(m).alias(c.model), run(names, i).alias(c.run), col(n).cast(kind).alias(target))
               for m, names in c.model_scores.items() for i, n in enumerate(names)]
    keep = [n for n in df.columns if n not in set(every) | {c.run}]
    return df.select(*[col(n) for n in keep], F.inline(F.array(*stacked)))


def column_keys(cfg: JobConfig) -> dict[str, str]:
    """Column name -> the ``columns.`` key that names it, for the one-column keys a guess can fill."""
    c = cfg.columns
    keys = {key: getattr(c, key) for key in COLUMN_HINTS}
    if c.split is not None:
        keys.pop("example_id")
    return {name: key for key, name in reversed(keys.items()) if isinstance(name, str)}


COLUMN_HINTS: dict[str, tuple[str, ...]] = {
    "model": ("model", "model_name", "model_id", "pipeline", "variant", "arm"),
    "run": ("run", "run_id", "seed", "trial", "replica", "replicate"),
    "ds": ("ds", "date", "day", "dt", "event_date", "partition_date", "event_day"),
    "label": ("label", "target", "y", "click", "clicked", "is_click", "converted", "conversion", "outcome", "actual",
              "y_true", "truth", "ground_truth"),
    "logit": ("logit", "logits", "margin", "raw_score", "log_odds"),
    "prediction": ("prediction", "pred", "prob", "probability", "proba", "pctr", "p_ctr", "ctr", "p_click", "forecast",
                   "yhat", "y_hat", "y_pred", "predicted"),
    "weight": ("weight", "sample_weight", "w"),
    "example_id": ("example_id", "id", "row_id", "rid", "request_id", "impression_id", "uid", "uuid", "key"),
}
"""Column names the usual exports give each ``columns.`` key, for :func:`guess_columns`'s hint."""


def guess_columns(have: Sequence[str], missing: Mapping[str, str], used: Iterable[str] = ()) -> dict[str, list[str]]:
    """For missing columns (name -> ``columns.`` key), the present columns whose names suggest that key.

    A name that is one of the key's usual names (``COLUMN_HINTS``; letter case and separators ignored) wins;
    else one holding such a name as a word of 3 letters or more (``model_id`` for the model). Columns the
    config already uses (``used``), or that suggest two keys equally, are left out: a guess is only shown, never
    applied.
    """
    def words(name: str) -> list[str]:
        return [w for w in re.split(r"[^0-9a-z]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()) if w]

    free = [h for h in have if h not in set(used)]
    exact: dict[str, list[str]] = {}
    partial: dict[str, list[str]] = {}
    for key in dict.fromkeys(missing.values()):
        hints = COLUMN_HINTS.get(key, ())
        exact[key] = [h for h in free if "_".join(words(h)) in hints]
        partial[key] = [h for h in free if h not in exact[key]
                        and any(w in hints and len(w) >= 3 for w in words(h))]
    found = {k: (exact[k] or partial[k]) for k in exact}
    claimed: dict[str, int] = {}
    for cols in found.values():
        for h in cols:
            claimed[h] = claimed.get(h, 0) + 1
    return {k: cols for k, v in found.items() if (cols := [h for h in v if claimed[h] == 1])}


def check_columns(present: Iterable[str], required: Iterable[str], structs: Mapping[str, Sequence[str]] | None = None,
                  *, what: str = "The evaluation table", options: str = "input.options",
                  keys: Mapping[str, str] | None = None, reader_sep: str = ",") -> None:
    """Raise InputError listing the missing and the present columns (``structs``: the fields of struct columns,
    named when a missing name is one of them with a field it lacks); ``what`` starts the message and ``options``
    is the config key of the reader options a fix names (the stream's landed files: 'stream.options'); ``keys``
    (column name -> ``columns.`` key, :func:`column_keys`) lets the message name the keys and guess columns;
    ``reader_sep`` is a CSV reader's delimiter (:func:`csv_sep`)."""
    have, required = list(present), list(required)
    missing = [r for r in required if r not in have]
    if missing:
        nested = {m: m.split(".", 1)[0] for m in missing if m.split(".", 1)[0] in (structs or {})}
        headerless = bool(have) and all(re.fullmatch(r"_c\d+", c) for c in have)
        sep, cased = header_slips(have, missing)
        excel = excel_sep_line(have, reader_sep)
        copies = {m: [h for h in have if re.fullmatch(re.escape(m) + r"\d+", h)] for m in missing}
        copies = {m: c for m, c in copies.items() if len(c) >= 2}
        values = [c for c in have if _VALUE_LIKE.fullmatch(c.strip())]
        if excel is not None:
            fix = sep_line_fix(excel, reader_sep, f"{options}: {{sep: {excel!r}}}")
        elif have == ["_corrupt_record"]:  # Spark's JSON reader parsed no line as a record
            fix = (f"Spark parsed no line of the JSON as a record on its own. A JSON document over several lines (a "
                   f"pretty-printed array, pandas' to_json(indent=...)) needs {options}: {{multiLine: 'true'}}; JSON "
                   "Lines (one record per line, to_json(orient='records', lines=True)) needs nothing.")
        elif headerless:
            fix = (f"Columns named _c0, _c1, ... come from a CSV read without its header row: set {options}: "
                   "{header: 'true'} (and inferSchema: 'true' for numeric ids).")
        elif values and 2 * len(values) >= len(have):
            fix = (f"Column names such as {values[:3]} look like values: a CSV without a header row had its first "
                   f"line read as one (a CSV's first line is its header unless {options} say header: 'false'). Add "
                   f"a header line to the files, or set {options}: {{header: 'false'}} and name the columns _c0, "
                   "_c1, ... (by position) under 'columns:'.")
        elif sep is not None:
            fix = (f"The one column's name holds {sep!r} between the names: the file is delimited by {sep!r}, "
                   f"not by commas: set {options}: {{sep: {sep!r}}}.")
        elif nested:
            fix = "; ".join(f"{m!r} reads field {m.split('.', 1)[1]!r} of the struct column {s!r}, whose fields are "
                            f"{list((structs or {})[s])}" for m, s in nested.items()) + "."
        elif copies:
            fix = "; ".join(f"{m!r} names {len(c)} columns of the CSV header, which Spark keeps apart by adding each "
                            f"one's position: {c}" for m, c in copies.items()) + (
                ". Keep one column of each name in the files, or name the one to read under 'columns:'.")
        elif cased:
            pairs = ", ".join(f"{m!r} is {h!r}" for m, h in cased.items())
            spaced = any(h != h.strip() for h in cased.values())
            fix = (f"Column names are matched exactly, letter case {'and spaces ' if spaced else ''}included, and "
                   f"{pairs} in the data: set those names under 'columns:' in the config, or rename them in the "
                   "data.")
            trim = {k: v for k, v in (("ignoreLeadingWhiteSpace", any(h != h.lstrip() for h in cased.values())),
                                      ("ignoreTrailingWhiteSpace", any(h != h.rstrip() for h in cased.values()))) if v}
            if trim:  # a CSV written with ', ' between fields: Spark can drop the spaces of names and values alike
                fix += (" For a CSV written with spaces around its commas, set " + f"{options}: {{"
                        + ", ".join(f"{k}: 'true'" for k in trim) + "} instead: Spark then drops those spaces from "
                        "the header's names and from every value.")
        else:
            fix = "Rename them in the data or map them under 'columns:' in the config."
            named = {m: (keys or {})[m] for m in missing if m in (keys or {})}
            if named:
                fix += " " + _guess_line(have, named, [r for r in required if r in have])
        raise InputError(f"{what} lacks column(s) {missing}; present columns: {sorted(have)}. {fix}")


def csv_sep(options: Mapping[str, Any]) -> str:
    """The delimiter a CSV reader with ``options`` splits fields at (its ``sep`` or ``delimiter``, else ',')."""
    return next((str(v) for k, v in options.items() if str(k).lower() in ("sep", "delimiter")), ",")


_PROBABILITY_STEMS = frozenset({"p", "prob", "proba", "probability", "probabilities", "pred", "prediction", "score",
                                "class"})
"""Last words of the names of a pair of class-probability columns (``p0``/``p1``, ``prob_0``/``prob_1``)."""


def _probability_guess(have: Sequence[str], used: Sequence[str]) -> str:
    """For a missing logit column: a present column that reads as a probability (``columns.prediction``'s usual
    names, or the positive class's of a pair ``p0``/``p1`` as a binary predict_proba writes), as a sentence."""
    free = [h for h in have if h not in set(used)]
    pairs = [h for h in free if h[-1:] == "1" and h[:-1] + "0" in free
             and re.split(r"[^0-9a-z]+", h[:-1].lower().rstrip("_-"))[-1] in _PROBABILITY_STEMS]
    cols = pairs or guess_columns(free, {"logit": "prediction"}).get("prediction", [])
    if len(cols) != 1:
        return ""
    what = (f"If {cols[0][:-1]}0/{cols[0]} are a binary model's two class probabilities (predict_proba's), read the "
            "positive class's" if pairs else f"If {cols[0]!r} holds probabilities, not logits")
    return (f" {what}: set columns.logit: null and columns.prediction: {cols[0]} (as options: --set columns.logit=null "
            f"--set columns.prediction={cols[0]}).")


_SCORE_STEMS = ("score", "logit", "pred", "prob", "ctr", "margin", "yhat", "forecast", "output")
"""Parts of a column name that mark it as a model's score, for :func:`_model_scores_guess`."""


def _model_scores_guess(have: Sequence[str], used: Sequence[str]) -> str:
    """For a missing model column: two or more present columns that read as scores (``score_baseline``,
    ``p_candidate``) suggest a table of one score column per model, as a sentence with the mapping to set."""
    free = [h for h in have if h not in set(used)]
    scores = [h for h in free if any(stem in h.lower() for stem in _SCORE_STEMS)]
    if len(scores) < 2:
        return ""
    words = [re.split(r"[_\-. ]+", h) for h in scores]  # common leading and trailing words are not the model
    head = len(os.path.commonprefix(words))
    tail = len(os.path.commonprefix([w[::-1] for w in words]))
    names = ["_".join(w[head:len(w) - tail]) for w in words]
    if not all(names) or len(set(names)) < len(names):
        names = scores
    mapping = "{" + ", ".join(f"{n}: {h}" for n, h in zip(names, scores)) + "}"
    return (f" {scores} look like one score column per model on the same rows: set columns.model_scores: {mapping} "
            "(each column is read as its model's rows; as logits, unless you set columns.logit: null and "
            "columns.prediction: score, the stacked column's name, for probabilities).")


def _guess_line(have: Sequence[str], named: Mapping[str, str], used: Sequence[str]) -> str:
    """The keys of the missing columns, and the columns their names suggest, ready to pass as --set."""
    guesses = guess_columns(have, named, used)
    line = "They are named by " + ", ".join(f"columns.{k} ({m!r})" for m, k in named.items()) + "."
    once = (" A table of models trained once each, without a run column: set columns.run: null (every row run "
            "'0').") if "run" in named.values() and "run" not in guesses else ""
    if "logit" in named.values() and "logit" not in guesses:
        once += _probability_guess(have, used)
    if "model" in named.values() and "model" not in guesses:
        once += _model_scores_guess(have, used)
    if not guesses:
        return line + once
    sure = {k: cols[0] for k, cols in guesses.items() if len(cols) == 1}
    line += " Guessed from the names present, so check them: " + "; ".join(
        f"columns.{k}: {cols[0]!r}" if len(cols) == 1 else f"columns.{k}: one of {cols}" for k, cols in guesses.items())
    if sure:
        line += " (as options: " + " ".join(f"--set columns.{k}={c}" for k, c in sure.items()) + ")"
    unguessed = [k for k in dict.fromkeys(named.values()) if k not in guesses]
    if unguessed:
        line += "; no guess for " + ", ".join(f"columns.{k}" for k in unguessed)
    return line + "." + once


_VALUE_LIKE = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|\d{4}-\d{2}-\d{2}([ T][\d:.]+)?|true|false",
                         re.IGNORECASE)
"""A column name that reads as a number, a date or a boolean: a CSV's data line taken for its header."""

NUMERIC_TYPES = ("tinyint", "smallint", "int", "bigint", "float", "double", "boolean", "string")
"""Spark types a label, score or weight column may have (text is parsed per row; unparsable text is invalid)."""


def check_column_types(dtypes: Mapping[str, str], cfg: JobConfig) -> None:
    """Raise InputError for a label, score or weight column whose type holds no numbers (a date, a struct)."""
    c = cfg.columns
    arrays = {c.logit} if cfg.task == "multiclass" and not c.class_columns() else set()
    kind_of = "class_logits" if c.class_logits else "class_probabilities"
    named = [(key, getattr(c, key)) for key in ("label", "logit", "prediction", "weight")
             if not (key == "logit" and c.class_columns())] + [(kind_of, n) for n in c.class_columns()]
    for key, name in named:
        if name is None or name not in dtypes:
            continue
        kind = dtypes[name]
        if name in arrays:
            inner = kind[len("array<"):-1] if kind.startswith("array<") else ""
            ok = inner.startswith("decimal") or inner in NUMERIC_TYPES[:-2]
            want = "an array of numbers (array<double>), one logit per class"
        else:
            ok = kind.startswith("decimal") or kind in NUMERIC_TYPES
            want = "numbers (or text holding numbers)"
        if not ok:
            raise InputError(f"Column {name!r} ('columns.{key}') has Spark type {kind}; expected {want}. Cast it "
                             f"upstream or point 'columns.{key}' at another column.")


def input_name(cfg: JobConfig) -> str:
    """The evaluation input as messages name it: the table, the path, or each model's path."""
    if cfg.input.model_paths:
        return "input.model_paths (" + ", ".join(f"{k}: {v}" for k, v in cfg.input.model_paths.items()) + ")"
    return str(cfg.input.table or cfg.input.path)


def path_inputs(cfg: JobConfig) -> list[tuple[str | None, JobConfig]]:
    """(model, config) for each path the input reads: one per ``input.model_paths`` entry, its path as
    ``input.path``; else (None, ``cfg``)."""
    if not cfg.input.model_paths:
        return [(None, cfg)]
    from dataclasses import replace

    return [(name, replace(cfg, input=replace(cfg.input, path=path, model_paths={})))
            for name, path in cfg.input.model_paths.items()]


def _model_tables(spark: SparkSession, cfg: JobConfig, days: Sequence[str] | None) -> DataFrame:
    """The tables of ``input.model_paths`` as one: each path's columns the config names, and the model column
    holding its key. A path whose table lacks a column, or has a model column of its own, is named."""
    from functools import reduce

    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    model = cfg.columns.model
    wanted = [n for n in required_columns(cfg) if n != model]
    frames = []
    for name, sub in path_inputs(cfg):
        df = load_input(spark, sub, days)
        what = f"The table of model {name!r} (input.model_paths: {sub.input.path})"
        if model in df.columns:
            raise InputError(f"{what} has a column {model!r}, the model column, while input.model_paths names its "
                             f"model: read a table that holds several models' rows with input.path, or drop the "
                             f"column from this one (or name another column by columns.model).")
        structs = {f.name: f.dataType.fieldNames() for f in df.schema.fields if isinstance(f.dataType, StructType)}
        check_columns(df.columns, wanted, structs, what=what, keys=column_keys(cfg),
                      reader_sep=csv_sep(cfg.input.options))
        corrupt = dict(cfg.input.options).get("columnNameOfCorruptRecord", "_corrupt_record")  # JSON's, kept
        extra = [corrupt] if corrupt in df.columns else []
        frames.append(df.select(*[col(n) for n in wanted + extra]).withColumn(model, F.lit(str(name))))
    # A column that is text in one table and numbers or dates in another is read as text in all: Spark's union
    # would cast the text to the other type and fail on the first value that is not one ('yes' as a label).
    kinds = {n: {dict(f.dtypes)[n] for f in frames} for n in wanted}
    text = [n for n, k in kinds.items() if len(k) > 1 and "string" in k]
    frames = [f.withColumns({n: col(n).cast("string") for n in text}) if text else f for f in frames]
    try:
        out = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
        out.columns  # resolves the union: columns of types that do not combine fail here
    except Exception as e:  # noqa: BLE001 - AnalysisException: one line naming each path's types
        types = "; ".join(f"{name}: " + ", ".join(f"{n} {t}" for n, t in f.dtypes if n in wanted)
                          for (name, _), f in zip(path_inputs(cfg), frames))
        raise InputError(f"The tables of input.model_paths cannot be read as one: {_first_line(e).rstrip('.')}. "
                         f"Their column types: {types}. Write the same types in each (e.g. the label as an integer "
                         "everywhere).") from None
    return out


def load_input(spark: SparkSession, cfg: JobConfig, days: Sequence[str] | None = None) -> DataFrame:
    """The input table or folder as the reader sees it (only the folders of ``days`` in a ``<ds>=<day>``
    layout); one-line InputError if it cannot be opened."""
    require_input(cfg)
    if cfg.input.model_paths:
        return _model_tables(spark, cfg, days)
    try:
        if cfg.input.table:
            df = spark.table(cfg.input.table)
        else:
            reader = spark.read.format(cfg.input.format)
            options = cfg.input.reader_options()
            if options:
                reader = reader.options(**options)
            if csv_header_checked(cfg.input.format, options):
                reader = reader.option("enforceSchema", "false")
            if cfg.input.skip_unreadable_files:
                reader = reader.option("ignoreCorruptFiles", "true")
            root = absolute(str(cfg.input.path))
            day_paths = _day_folders(root, cfg.columns.ds, days, cfg.columns.ds_format)
            if day_paths is None:
                _check_output_outside(root, cfg)
            _check_table_format(root, cfg)
            _check_temporary_files(day_paths or [root], cfg)
            _check_csv_quoting(cfg)
            with _listing_on_driver(spark, is_local(root)):
                literal = [literal_path(p) for p in day_paths or []]
                df = reader.option("basePath", root).load(literal) if day_paths else reader.load(literal_path(root))
                df.columns  # resolves the schema (and lists the files) here
        df.columns  # resolves the schema: a missing path or table fails here
    except CtcalcError:
        raise
    except Exception as e:  # noqa: BLE001 - AnalysisException and friends: one line, no Java stack
        where = input_name(cfg)
        connector = None if cfg.input.table else connector_error(e, str(cfg.input.path))
        if connector is not None:
            raise ConfigError(connector) from None
        hint = NANOS_HINT if "TIMESTAMP(NANOS" in str(e) else missing_source_hint(e, cfg.input.format)
        if "INVALID_PARAMETER_VALUE.CHARSET" in str(e):
            from ctcalc_spark.core.sanity import LEGACY_CHARSETS_HINT

            hint = f" For {LEGACY_CHARSETS_HINT[4:]}."
        if "FLOAT16" in str(e):
            hint = _float16_hint(cfg)
        if "UNABLE_TO_INFER_SCHEMA" in str(e) and not cfg.input.table:
            hint = _no_data_files_hint(str(cfg.input.path)) or hint
        java = java_root_cause(e)
        cause = java[0] if java is not None else _first_line(e)
        line = f"Cannot read the evaluation table {where!r}: {cause.rstrip('.')}.{hint}"
        raise (unreadable_file_error(e, cfg) or InputError(line)) from None
    return nested_columns(df, source_columns(cfg))


def local_input_files(cfg: JobConfig, limit: int) -> tuple[str, list[str]] | None:
    """(the local ``input.path``, up to ``limit`` of the files Spark reads there: the path itself when it is a
    file) for the messages that look at a local input's files; None for any other input (a table, an object
    store, ``input.model_paths``)."""
    root = cfg.input.path
    if not root or not is_local(str(root)):
        return None
    where = local_path(absolute(str(root)))
    if os.path.isfile(where):
        return where, [where]
    return where, list(itertools.islice(data_files(where, input_glob(cfg.input.options)), limit))


def _columns_in_some_files(cfg: JobConfig, missing: Sequence[str]) -> str:
    """For a local Parquet input that lacks columns: which of its files have them, when some do (a column added
    on a later day; Spark takes the columns from one file unless told to merge them), read from the files'
    footers on this error path only; '' when none has them or the input is not such."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    local = local_input_files(cfg, MAX_HEADER_FILES) if cfg.input.format == "parquet" and missing else None
    if local is None:
        return ""
    where, files = local
    have: list[str] = []
    lack: list[str] = []
    for f in files:
        try:
            names = set(pq.read_schema(f).names)
        except (OSError, pa.ArrowInvalid):
            continue
        (have if any(m in names for m in missing) else lack).append(os.path.relpath(f, where))
    if not have or not lack:
        return ""
    return (f"{len(have):,} of the {len(have) + len(lack):,} files {'has' if len(have) == 1 else 'have'} "
            f"{list(missing)} (first: {have[0]}), {'the other' if len(lack) == 1 else 'the others'} not (first: "
            f"{lack[0]}): Spark took the columns from one of those. Set input.options: "
            "{mergeSchema: 'true'} to read every file's columns (rows of files without them are then invalid rows, "
            "counted, with null there), or evaluate only the days whose files have them.")


SNIFFED_FILES = 20
"""Files of a local input folder whose first bytes :func:`foreign_file_error` reads at most."""


def foreign_file_error(cfg: JobConfig) -> InputError | None:
    """When a local text input (CSV, JSON) lacks columns: the error that says a file is of another type (a
    Feather file read as CSV, a CSV read as JSON, a gzip file not named .gz), from its first bytes; None when
    the files are the text ``input.format`` says, or the input is not local."""
    local = local_input_files(cfg, SNIFFED_FILES) if cfg.input.format in ("csv", "json") else None
    hint = next((h for h in (kind_hint(f, cfg.input.format) for f in local[1]) if h), "") if local else ""
    if not hint:
        return None
    return InputError(f"Cannot read the evaluation table {str(cfg.input.path)!r} as input.format "
                      f"{cfg.input.format}:{hint}")


def _no_data_files_hint(path: str) -> str:
    """For Spark's 'Unable to infer schema' on a local folder: that it is empty, or that its files lie in
    folders that are not ``key=value`` folders (:func:`unlisted_files_hint`); '' for any other path."""
    if not is_local(path) or not os.path.isdir(local_path(absolute(path))):
        return ""
    if not has_data_files(absolute(path)):
        return " The folder is empty: there are no files to read the table's columns and rows from."
    return unlisted_files_hint(path)


def unlisted_files_hint(path: str, options: Mapping[str, Any] | None = None) -> str:
    """A sentence when files below a local input folder lie in folders that are not ``key=value`` folders
    (``2026/01/05/a.csv``), which Spark does not read unless ``options`` set ``recursiveFileLookup``; else ''."""
    if recursive_lookup(options or {}):
        return ""
    if not is_local(path) or not os.path.isdir(local_path(absolute(path))):
        return ""
    root = local_path(absolute(path)).rstrip("/")
    below = (os.path.relpath(f, root) for f in itertools.islice(data_files(root), MAX_HEADER_FILES))
    unlisted = [f for f in below if in_plain_folder(f)]
    if not unlisted:
        return ""
    return (f" Files of the folder lie in folders that are not key=value folders ({', '.join(unlisted[:3])}"
            f"{', …' if len(unlisted) > 3 else ''}), and Spark reads a table's own files and those of key=value "
            "folders (ds=2026-01-05/) only: set input.options: {recursiveFileLookup: 'true'} to read every file "
            "below it.")


def nested_columns(df: DataFrame, names: Iterable[str]) -> DataFrame:
    """``df`` with a column for each of ``names`` that is no column of its own but a field inside a struct column,
    written with dots (``scores.p`` of a JSON record ``{"scores": {"p": 0.3}}``, as BigQuery and nested JSON
    exports give them): a column of that very name, so every later step reads it like any other. A column whose
    own name has a dot comes first."""
    from pyspark.sql.types import StructType

    have = set(df.columns)
    fields = {f.name: f.dataType for f in df.schema.fields}
    for name in names:
        if name in have or "." not in name:
            continue
        parts = name.split(".")
        kind = fields.get(parts[0])
        for part in parts[1:]:
            kind = kind[part].dataType if isinstance(kind, StructType) and part in kind.fieldNames() else None
        if kind is not None:
            value = col(parts[0])
            for part in parts[1:]:
                value = value.getField(part)
            df = df.withColumn(name, value)
            have.add(name)
    return df


def _check_output_outside(root: str, cfg: JobConfig) -> None:
    """ConfigError when the outputs are inside an input folder that is read whole: the read would take the
    metrics and summaries for evaluation rows. (An input of ``<ds>=<day>`` folders reads only those.)"""
    out = absolute(str(cfg.output.path)).rstrip("/")
    if out == root.rstrip("/") or out.startswith(root.rstrip("/") + "/"):
        raise ConfigError(f"'output.path' {cfg.output.path!r} is inside 'input.path' {cfg.input.path!r}, which is "
                          "read whole (it has no <ds>=<day> folders): the job would read its own metrics and "
                          "summaries as evaluation rows. Write the outputs beside the input (e.g. output.path: a "
                          "sibling folder).")


NANOS_HINT = (
    " A column holds timestamps in nanoseconds, which Spark does not read (pandas and pyarrow write them so by "
    "default): write microseconds (pandas: df.to_parquet(path, coerce_timestamps='us', "
    "allow_truncated_timestamps=True); pyarrow: pq.write_table(table, path, coerce_timestamps='us')), or read "
    "them as numbers of nanoseconds as they are: set spark.conf: {spark.sql.legacy.parquet.nanosAsLong: true}, "
    "and, when the date column is one of them, columns.ds_format: epoch_ns.")


def _float16_hint(cfg: JobConfig) -> str:
    """For Spark's 'Illegal Parquet type: FIXED_LEN_BYTE_ARRAY (FLOAT16)': the columns of 16-bit floats (from the
    first local Parquet file's schema) and how to write them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names: list[str] = []
    for _, sub in path_inputs(cfg):
        local = local_input_files(sub, MAX_HEADER_FILES)
        first = next((f for f in local[1] if f.endswith(".parquet") or f == local[0]), None) if local else None
        try:
            schema = pq.read_schema(first) if first else None
        except (OSError, pa.ArrowInvalid):
            schema = None
        names += [f.name for f in schema or [] if pa.types.is_float16(f.type) and f.name not in names]
    which = f"The column(s) {names} hold" if names else "A column holds"
    cast = ", ".join(f"{n!r}: 'float32'" for n in names) or "'score': 'float32'"
    return (f" {which} 16-bit floats (numpy float16), which Spark does not read: write them as float32 or float64 "
            f"(pandas: df.astype({{{cast}}}).to_parquet(path)).")


PARALLEL_LISTING = "spark.sql.sources.parallelPartitionDiscovery.threshold"


@contextmanager
def _listing_on_driver(spark: SparkSession, local: bool) -> Iterator[None]:
    """Local folders are listed by the driver itself: Spark lists more than 32 paths with a distributed job,
    which costs far more than listing a year of day folders on local disk. Other file systems keep Spark's
    setting; the session's value is restored after."""
    if not local:
        yield
        return
    old = spark.conf.get(PARALLEL_LISTING, None)
    spark.conf.set(PARALLEL_LISTING, str(2**31 - 1))
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(PARALLEL_LISTING)
        else:
            spark.conf.set(PARALLEL_LISTING, old)


def _day_sql(df: DataFrame, cfg: JobConfig) -> str:
    """The date column as a date when the input's is a date or timestamp, else as text (null where null), as
    Spark SQL text.

    A date stays a date in the scan: it is grouped as an int and made 'YYYY-MM-DD' text on the small
    aggregated result instead of being formatted row by row. A timestamp's day is its day in the session's time
    zone (UTC unless spark.conf sets spark.sql.session.timeZone). Text is the day as written: its first ten
    characters, so '2026-11-21 13:45:00' and '2026-11-21T23:30:00-08:00' are rows of 2026-11-21 (an exact
    comparison found no rows in such a column).
    """
    name = str(cfg.columns.ds)
    kind = dict(df.dtypes)[name]
    if kind == "date":
        return quoted(name)
    if kind in ("timestamp", "timestamp_ntz"):
        return f"CAST({quoted(name)} AS DATE)"
    fmt = cfg.columns.ds_format
    if fmt in EPOCH_FORMATS:  # the instant's day, as for a timestamp column
        number = f"try_cast({quoted(name)} AS BIGINT)"
        instant = {"epoch_s": f"timestamp_seconds({number})", "epoch_ms": f"timestamp_millis({number})",
                   "epoch_us": f"timestamp_micros({number})", "epoch_ns": f"timestamp_micros({number} div 1000)"}[fmt]
        return f"date_format({instant}, 'yyyy-MM-dd')"
    if fmt is not None:  # validated: yyyy, MM/M, dd/d and separators, nothing SQL could misread
        text = f"CAST({quoted(name)} AS STRING)"
        if " " not in fmt:  # a time after the date ('1/5/2026 13:45') is ignored, as config.date_part does
            text = f"substring_index({text}, ' ', 1)"
        return f"date_format(try_to_date({text}, '{fmt}'), 'yyyy-MM-dd')"
    # left() copies the text of every row: 1.18x -> 1.45x the plain aggregation's executor CPU on the
    # benchmark, whose day is a text partition column; the length test keeps 'YYYY-MM-DD' rows uncopied.
    text = f"CAST({quoted(name)} AS STRING)"
    return f"IF(octet_length({text}) > 10, left({text}, 10), {text})"


def _in_days(day_sql: str, df: DataFrame, cfg: JobConfig, days: Sequence[str]) -> Column:
    """``day_sql`` (:func:`_day_sql`, or the column holding it) is one of ``days`` or null; days compared as
    dates when the column is one.

    One SQL expression, so a year of days costs one call to the JVM instead of one per day (0.17 s of a range
    job's driver time under cProfile as ``Column.isin``); on a partitioned input it is a partition filter of
    the scan, as ``isin`` was. Days are checked by :func:`validate_ds` before they become SQL text.
    """
    from pyspark.sql import functions as F

    typed = dict(df.dtypes)[str(cfg.columns.ds)] in ("date", "timestamp", "timestamp_ntz")
    for d in days:
        validate_ds(d)
    if not days:
        return F.expr(f"{day_sql} IS NULL")
    values = ", ".join(f"DATE'{d}'" if typed else f"'{d}'" for d in days)
    return F.expr(f"({day_sql} IN ({values}) OR {day_sql} IS NULL)")


def read_input(spark: SparkSession, cfg: JobConfig, days: Sequence[str] | None = None) -> DataFrame:
    """The evaluation rows of ``days`` (all days if None) with a ``_ds`` column: the date as text, or as a
    date where the input's is a date or timestamp (the scan makes it text after aggregating).

    Rows whose date is null are kept as well (``_ds`` null) so that the scan counts them; they belong to no
    day. Without a date column (``columns.ds: null``, a fixed evaluation set) every row belongs to the one
    day given, which labels the output partitions.
    """
    from pyspark.sql import functions as F

    from pyspark.sql.types import StructType

    df = load_input(spark, cfg, days)
    if any(n not in df.columns for n in source_columns(cfg)):
        foreign = foreign_file_error(cfg)
        if foreign is not None:
            raise foreign
    if cfg.columns.model_scores:  # one score column per model (and run): a row per column
        df = stack_model_scores(df, cfg)
    elif cfg.columns.one_run:  # columns.run: null, each model trained once
        df = df.withColumn(cfg.columns.run, F.lit(ONE_RUN))
    structs = {f.name: f.dataType.fieldNames() for f in df.schema.fields if isinstance(f.dataType, StructType)}
    try:
        check_columns(df.columns, required_columns(cfg), structs, keys=column_keys(cfg),
                      reader_sep=csv_sep(cfg.input.options))
    except InputError as e:
        spread = _columns_in_some_files(cfg, [n for n in required_columns(cfg) if n not in df.columns])
        raise (InputError(f"{e} {spread}") if spread else e) from None
    check_column_types(dict(df.dtypes), cfg)
    if cfg.columns.ds is None:
        return df.withColumn(DS, F.lit(undated_day(cfg, days)))
    out = df.withColumn(DS, F.expr(_day_sql(df, cfg)))
    return out if days is None else out.where(_in_days(quoted(DS), df, cfg, days))


def input_day_folders(cfg: JobConfig) -> list[str]:
    """The values of a local path input's ``<columns.ds>=<value>`` folders that hold data, sorted (the null
    partition left out); empty for any other input. One listing of the input's root (of each model's path)."""
    return sorted(v for v, has_data in _input_day_folders(cfg).items() if has_data and v != NULL_PARTITION)


def empty_day_folders(cfg: JobConfig, days: Sequence[str]) -> list[str]:
    """The ``<columns.ds>=<day>`` folders of ``days`` that a local path input has but that hold no data file (a
    writer that made the folder and has not written, or wrote no rows)."""
    found = _input_day_folders(cfg)
    return [f"{cfg.columns.ds}={v}" for v in sorted({input_day(cfg.columns.ds_format, d) for d in days})
            if found.get(v) is False]


def _input_day_folders(cfg: JobConfig) -> dict[str, bool]:
    """Each ``<columns.ds>=<value>`` folder value of a local path input (of any of ``input.model_paths``), and
    whether it holds a data file (in any of them); empty for any other input."""
    from urllib.parse import unquote

    name, prefix = cfg.columns.ds, f"{cfg.columns.ds}="
    found: dict[str, bool] = {}
    for _, sub in path_inputs(cfg):
        root = sub.input.path
        if sub.input.table or not root or name is None or not is_local(str(root)):
            continue
        where = absolute(str(root))
        for n in _folder_names(where) or ():
            if n.startswith(prefix):
                value = unquote(n[len(prefix):])
                found[value] = found.get(value, False) or has_data_files(f"{where}/{n}",
                                                                         input_glob(sub.input.options))
    return found


def _folder_names(root: str) -> set[str] | None:
    """The names of the folders directly under a local ``root``; None when it cannot be listed."""
    try:
        return {e.name for e in FileStore(root).list(root) if e.is_dir}
    except (OSError, ConfigError):
        return None


def _day_folders(root: str, ds_column: str | None, days: Sequence[str] | None,
                 ds_format: str | None = None) -> list[str] | None:
    """The ``<root>/<ds>=<day>`` folders of ``days`` (written in ``ds_format``) when the input is partitioned by
    its date column, so a job lists only the days it reads (a year-long table costs a single day's job
    nothing); None to read the root."""
    if not days or ds_column is None or not is_local(root):
        return None
    names = _folder_names(root)
    if names is None or not any(n.startswith(f"{ds_column}=") for n in names):
        return None
    values = [input_day(ds_format, d) for d in days]
    found = [f"{root}/{ds_column}={d}" for d in [*values, NULL_PARTITION] if f"{ds_column}={d}" in names]
    # a day's folder without a data file yet (a writer that made it and has not written, or wrote no rows) is no
    # day of the table: Spark could not read its columns from it ('Unable to infer schema ... specified manually')
    found = [f for f in found if has_data_files(f)]
    return found or None


TEMPORARY_SHOWN = 5
"""Files under a temporary name an error names at most."""


_TABLE_READERS = {  # format: what its reader needs
    "delta": "Delta Lake's reader on Spark's class path (spark.conf: {spark.jars.packages: "
             "'io.delta:delta-spark_2.13:<version>', spark.sql.extensions: io.delta.sql.DeltaSparkSessionExtension})",
    "hudi": "Apache Hudi's Spark bundle on Spark's class path",
    "iceberg": "the Iceberg runtime on Spark's class path and an Iceberg catalog",
}


def _check_table_format(root: str, cfg: JobConfig) -> None:
    """InputError when a local input folder is a Delta Lake, Apache Hudi or Iceberg table read as plain files
    (:func:`table_format`): Spark would read the rows of earlier versions too, or (Iceberg's data/ folder) say
    it finds no table, where recursiveFileLookup would read every version."""
    if cfg.input.format in _TABLE_READERS or not is_local(root) or not os.path.isdir(local_path(root)):
        return
    fmt = table_format(local_path(root))
    if fmt is None:
        return
    name = {"delta": "a Delta Lake", "hudi": "an Apache Hudi", "iceberg": "an Iceberg"}[fmt]
    raise InputError(
        f"The evaluation table {str(cfg.input.path)!r} is {name} table (it holds {TABLE_FORMAT_MARKS[fmt]}/), read "
        f"as plain {cfg.input.format} files: its folder keeps the files of earlier versions, rows since deleted or "
        f"replaced, until a clean-up, and Spark would read those rows too. Read it as a table: input.format: {fmt} "
        f"with {_TABLE_READERS[fmt]}, or by name from the catalog: input.table.")


CSV_SAMPLE_BYTES = 1 << 18
"""Bytes of a CSV file's start that :func:`_check_csv_quoting` reads."""
CSV_SAMPLED_FILES = 3
"""Files of a local CSV input that :func:`_check_csv_quoting` reads the start of."""


def _quoting_checks(options: Mapping[str, Any]) -> tuple[bool, bool]:
    """(whether to look for doubled quotes, for line breaks inside quoted fields): reader ``options`` without
    their own ``escape``, without ``multiLine: 'true'``."""
    lowered = {str(k).lower(): str(v).strip().lower() for k, v in options.items()}
    return "escape" not in lowered, lowered.get("multiline", "false") != "true"


def csv_quoting_problems(data: bytes, options: Mapping[str, Any], option_key: str = "input.options",
                         cut: bool = False) -> list[str]:
    """What Spark's CSV reader, with ``options``, would read into wrong values without a word, in a CSV file whose
    start is ``data`` (``cut``: more of the file follows, so its last record may be cut short), as phrases:

    * a quote inside a quoted field written twice (``"Blue ""XL"" shoe"``, RFC 4180, as pandas, Excel and
      Python's csv module write it), where Spark takes a backslash before a quote: the value is read with its
      quotes, or split at a comma inside it; ``escape: '"'`` reads it;
    * a line break inside a quoted field, where Spark reads each line as a record: the rest of the value
      becomes a record of its own (a row without a date); ``multiLine: 'true'`` reads it.
    """
    import codecs
    import csv
    import io

    lowered = {str(k).lower(): str(v) for k, v in options.items()}
    check_escape, check_lines = _quoting_checks(options)
    if not (check_escape or check_lines):
        return []
    quote = lowered.get("quote", '"')[:1] or '"'
    sep = csv_sep(options).replace("\\t", "\t")[:1] or ","
    try:
        encoding = codecs.lookup(lowered.get("encoding", lowered.get("charset", "utf-8"))).name
    except LookupError:  # a Java name Python does not know: read as UTF-8, which ASCII quotes and commas are
        encoding = "utf-8"
    text = data.decode(encoding, "replace")
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=sep, quotechar=quote, strict=False))
    rows = rows[:-1] if cut else rows
    names = rows[0] if lowered.get("header", "true").strip().lower() == "true" and rows else []

    def first(test: Callable[[str], bool]) -> str | None:
        hit = next(((r, i) for r in rows for i, v in enumerate(r) if test(v)), None)
        return None if hit is None else repr(hit[0][hit[1]]) + (
            f" in column {names[hit[1]]!r}" if hit[1] < len(names) else "")

    found = []
    inside = re.compile(f"(?<![{re.escape(sep)}\n\r]){re.escape(quote * 2)}(?![{re.escape(sep)}\n\r])")
    if check_escape and inside.search(text) and "\\" + quote not in text:
        value = first(lambda v: quote in v)
        if value is not None:
            found.append(f"a quote inside a quoted field written twice ({value}, as pandas, Excel and Python's csv "
                         "module write it), where Spark's reader takes a backslash before a quote: it would read "
                         f"the value with its quotes, or split it at a {'comma' if sep == ',' else repr(sep)} "
                         f"inside; {option_key}: "
                         f"{{escape: '{quote}'}} reads it")
    if check_lines:
        value = first(lambda v: "\n" in v or "\r" in v)
        if value is not None:
            found.append(f"a line break inside a quoted field ({value}), where Spark's reader takes each line for "
                         "a record: the rest of the value would be a record of its own (a row without a date); "
                         f"{option_key}: {{multiLine: 'true'}} reads it (each file whole, in one task)")
    return found


def _check_csv_quoting(cfg: JobConfig) -> None:
    """InputError when the start of a local CSV input's first ``CSV_SAMPLED_FILES`` files shows quoting that
    Spark's reader would read into wrong values (:func:`csv_quoting_problems`)."""
    if cfg.input.format != "csv" or not any(_quoting_checks(cfg.input.options)):
        return
    local = local_input_files(cfg, CSV_SAMPLED_FILES)
    if local is None:
        return
    root, files = local
    for f in files:
        try:  # decompressed by its extension; a codec pyarrow lacks (Hadoop's lz4) or a corrupt file: Spark's to say
            data = FileStore(f).head(f, CSV_SAMPLE_BYTES + 1)
        except Exception:  # noqa: BLE001 - OSError, ArrowInvalid
            continue
        found = csv_quoting_problems(data[:CSV_SAMPLE_BYTES], cfg.input.options, cut=len(data) > CSV_SAMPLE_BYTES)
        if found:
            where = os.path.relpath(f, root) if os.path.isdir(root) else f
            raise InputError(f"The CSV file {where} of the evaluation table has " + "; and ".join(found)
                             + ". Nothing was read.")


def _check_temporary_files(paths: Sequence[str], cfg: JobConfig) -> None:
    """InputError when a local input holds a data file under a temporary name (a writer still writing, which
    renames it when done): Spark would read its rows with the rest, partial, and the same rows again once it is
    renamed. Files the reader's ``pathGlobFilter`` leaves out are not looked at."""
    if not all(is_local(p) for p in paths):
        return
    glob = input_glob(cfg.input.options)
    found: list[str] = []
    for p in paths:
        where = local_path(p)
        files = [where] if os.path.isfile(where) else data_files(p, glob)
        found += [f for f in files if temporary_suffix(os.path.basename(f))][:TEMPORARY_SHOWN - len(found)]
        if len(found) >= TEMPORARY_SHOWN:
            break
    if not found:
        return
    root = local_path(absolute(str(cfg.input.path)))
    shown = [os.path.relpath(f, root) if os.path.isdir(root) else f for f in found]
    kind = name_kind(found[0][:len(found[0]) - len(temporary_suffix(found[0]) or "")])
    others = [os.path.basename(f) for p in paths if os.path.isdir(local_path(p))
              for f in itertools.islice(data_files(p, glob), MAX_HEADER_FILES)
              if not temporary_suffix(f) and name_kind(f) == kind]
    pattern = names_glob(others) if others else f"*{kind or '.' + cfg.input.format}"
    raise InputError(f"The evaluation table {str(cfg.input.path)!r} holds file(s) under a temporary name, still being "
                     f"written: {shown}{' and more' if len(found) >= TEMPORARY_SHOWN else ''}. Spark would read their "
                     "rows with the rest: part of them now, and the same rows again once the writer renames the file. "
                     f"Run again when the writer is done, or set input.options: {{pathGlobFilter: '{pattern}'}} to "
                     "read only the files named so.")


def stray_file_hint(cfg: JobConfig, path: str) -> str:
    """For a file of a local input folder that Spark could not read as the table's: when its name ends unlike
    most of the folder's files (a README.txt among .csv files), that it may not belong there and how to read
    only the table's files; '' otherwise."""
    local = local_input_files(cfg, MAX_HEADER_FILES)
    if local is None or not os.path.isdir(local[0]):
        return ""
    names = [os.path.basename(f) for f in local[1]]
    kinds: dict[str, list[str]] = {}
    for n in names:
        kinds.setdefault(name_kind(n), []).append(n)
    top = max(kinds, key=lambda k: len(kinds[k]), default="")
    if not top or name_kind(os.path.basename(path)) == top or len(kinds[top]) < 2:
        return ""
    endings = [os.path.splitext(n[:len(n) - len(compression(n))])[1] for n in kinds[top]]
    spelled = max(set(endings), key=endings.count)  # as the files spell it: the filter tells case apart
    return (f" {os.path.basename(path)} is not named like the folder's other files ({len(kinds[top]):,} end in "
            f"{spelled}): if it is not part of the table, move it out of {str(cfg.input.path)!r}, or set "
            f"input.options: {{pathGlobFilter: '{names_glob(kinds[top])}'}} so Spark reads only the files named so.")


NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
"""Spark's folder for the rows whose partition value is null: read with the days, so such rows are counted."""


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:400] if text else type(e).__name__


def csv_header_checked(fmt: str, options: Mapping[str, Any]) -> bool:
    """Whether the reader is to check each CSV file's header against the table's columns: a CSV read with its
    header row and without an ``enforceSchema`` of the user's.

    Spark reads CSV columns by position and takes their names from one file's header; with its default
    ``enforceSchema: true`` a file whose columns come in another order (two exports, one with ``run`` and
    ``row_id`` swapped) is read into the wrong columns with only a log warning. ``enforceSchema: false`` makes
    that file a read failure, which :func:`unreadable_file_error` reports with its header and the fix."""
    if fmt != "csv":
        return False
    keys = {str(k).lower(): str(v).strip().lower() for k, v in options.items()}
    return keys.get("header") == "true" and "enforceschema" not in keys


_READ_FAILURE = re.compile(r"while reading file (\S+?)\.?(?:\s|$)(.*)")
_CSV_HEADER = re.compile(r"Expected: (.+?) but found: (.+?)\s*$")
_CSV_HEADER_COUNT = re.compile(r"Number of column in CSV header is not equal to number of fields in the schema:?"
                               r"\s*(.*)$")


def unreadable_file_error(error: BaseException, cfg: JobConfig) -> InputError | None:
    """One line naming the file Spark could not read and why (its FAILED_READ_FILE error), or None when
    ``error`` is about something else."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    m = next((m for m in map(_READ_FAILURE.search, lines) if m), None)
    if m is None:
        return None
    path = plain_file_path(m.group(1))
    cause = re.sub(r"\s*SQLSTATE: \w+\s*$", "", m.group(2)).strip()
    if not cause:  # the reason is on the Java side: the next 'Caused by' line, without the exception's class
        at = next(i for i, ln in enumerate(lines) if m.group(0) in ln)
        line = next((ln for ln in lines[at + 1:] if ln.startswith("Caused by:") and "FAILED_READ_FILE" not in ln), "")
        cause = re.sub(r"^Caused by:\s*([\w.$]+(Exception|Error):\s*)?", "", line)
        cause = " ".join("the file" if plain_file_path(w) == path else w for w in cause.split()) or "no reason given"
    fix = "fix or replace the file" if cfg.input.skip_unreadable_files else (
        "fix or remove the file, or set input.skip_unreadable_files: true to skip unreadable files (they are listed)")
    if "CSV header does not conform to the schema" in str(error) or _CSV_HEADER_COUNT.search(cause):
        return InputError(csv_header_message(path, lines, cfg))
    stray = stray_file_hint(cfg, path)
    told = "" if stray else _kind_told(path, cfg.input.format)
    return InputError(f"Cannot read file {path} of the evaluation table: {cause.rstrip('.')[:300]}.{told} "
                      f"{fix[0].upper()}{fix[1:]}.{stray}")


def _kind_told(path: str, fmt: str) -> str:
    """What a file Spark could not read as ``fmt`` is: from its first bytes when local, else from its name."""
    if is_local(path) and os.path.isfile(local_path(path)):  # a file named as the format says is corrupt, not other
        return "" if name_kind(path) == f".{fmt}" else kind_hint(local_path(path), fmt)
    ext = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
    other = {"csv": "csv", "json": "json", "jsonl": "json", "parquet": "parquet", "orc": "orc", "avro": "avro"}.get(ext)
    return (f" input.format is {fmt!r}, and the file's name ends in .{ext}: if the files are "
            f"{other.upper()}, set input.format: {other}.") if other and other != fmt else ""


def missing_source_hint(error: BaseException, fmt: str) -> str:
    """For an input format whose reader is not on Spark's class path (Delta Lake, Iceberg, Avro): the package to
    add; '' for any other failure."""
    text = str(error)
    if not ("ClassNotFoundException" in text or "Failed to find data source" in text
            or "DATA_SOURCE_NOT_FOUND" in text):
        return ""
    import pyspark

    version = pyspark.__version__.split("+")[0]
    minor = ".".join(version.split(".")[:2])
    needs = {  # format: (package, where its version comes from, what else to set)
        "avro": (f"org.apache.spark:spark-avro_2.13:{version}", "Spark's own module, this Spark's version", ""),
        "delta": ("io.delta:delta-spark_2.13:<version>", f"the Delta Lake release for Spark {minor}, from Delta's "
                  "compatibility table", " and set spark.sql.extensions: io.delta.sql.DeltaSparkSessionExtension"),
        "iceberg": (f"org.apache.iceberg:iceberg-spark-runtime-{minor}_2.13:<version>", "the Iceberg runtime "
                    f"for Spark {minor}", " and configure an Iceberg catalog"),
    }
    if fmt not in needs:
        return ""
    package, note, more = needs[fmt]
    return (f" input.format {fmt} needs its reader on Spark's class path: add '{package}' to spark.jars.packages "
            f"under spark.conf ({note}){more}, or pass --packages to spark-submit.")


def csv_header_message(path: str, lines: Sequence[str], cfg: JobConfig | None = None) -> str:
    """The error for a CSV file whose header differs from the table's columns (Spark's header check); for a
    local input, the headers its files have (first lines only, on this error path)."""
    m = next((m for m in map(_CSV_HEADER.search, lines) if m), None)
    if m is not None:
        what = f"its header has column {m.group(2)!r} where the table has {m.group(1)!r}"
    else:
        count = next((m for m in map(_CSV_HEADER_COUNT.search, lines) if m), None)
        what = "its header has another number of columns than the table" + (
            f" ({count.group(1).strip().rstrip('.')[:200]})" if count is not None and count.group(1).strip() else "")
    headers = _csv_headers(cfg, path) if cfg is not None else ""
    stray = stray_file_hint(cfg, path) if cfg is not None else ""
    return (f"CSV file {path} of the evaluation table does not match the other files: {what} (the table's "
            f"column names and order come from one file's header).{stray}{headers} Spark reads CSV columns by "
            "position, so this file would be read into the wrong columns. Write every file with the same columns in "
            "the same order (or set input.options: {enforceSchema: 'true'} to read by position regardless, at your "
            "own risk).")


MAX_HEADER_FILES = 2000
"""CSV files whose first line :func:`_csv_headers` reads at most."""


def _csv_headers(cfg: JobConfig, path: str) -> str:
    """' The files have N headers: …; <path> has [...] that the others lack …' for a local CSV input whose files
    have more than one header ('' for any other input, or when they cannot be read); gzip and bzip2 files are
    read as Spark reads them."""
    local = local_input_files(cfg, MAX_HEADER_FILES + 1)
    if local is None:
        return ""
    root, files = local
    sep = csv_sep(cfg.input.options)
    more = len(files) > MAX_HEADER_FILES
    groups: dict[tuple[str, ...], list[str]] = {}
    try:
        for f in files[:MAX_HEADER_FILES]:
            if compression(f) not in ("", ".gz", ".bz2"):  # lz4, snappy, …: Hadoop's framing; not read here
                continue
            head, _ = csv_first_record(FileStore(f).head(f, 1 << 16), sep[:1] or ",")
            groups.setdefault(tuple(head), []).append(f)
    except Exception:  # noqa: BLE001 - OSError, ArrowInvalid (a corrupt .gz): no listing
        return ""
    if len(groups) < 2:
        return ""
    mine = next((h for h, names in groups.items() if os.path.abspath(path) in map(os.path.abspath, names)), None)
    parts = [f"{len(names)} file{'s' if len(names) > 1 else ''} ({os.path.relpath(names[0], root)}"
             f"{', …' if len(names) > 1 else ''}): {', '.join(h)}"
             for h, names in sorted(groups.items(), key=lambda kv: -len(kv[1]))]
    which = f"The first {MAX_HEADER_FILES:,} files" if more else "The files"
    line = f" {which} have {len(groups)} different headers: " + "; ".join(parts[:4]) + \
        (f"; and {len(parts) - 4} more" if len(parts) > 4 else "") + "."
    others = [h for h in groups if h != mine]
    if mine is not None and len(others) == 1:
        extra = [c for c in mine if c not in others[0]]
        lacks = [c for c in others[0] if c not in mine]
        said = [f"has {extra} that the others lack" if extra else "",
                f"lacks {lacks} that the others have" if lacks else ""]
        said = [t for t in said if t] or ["has the same columns in another order"]
        line += f" {os.path.relpath(path, root) if os.path.isdir(root) else path} " + " and ".join(said) + "."
    return line


def plain_file_path(path: str) -> str:
    """A local file URI as a path (file:///tmp/x and file:/tmp/x -> /tmp/x); percent-escapes decoded."""
    from urllib.parse import unquote

    return "/" + unquote(path[5:]).lstrip("/") if path.startswith("file:") else unquote(path)


_RESULT_TOO_LARGE = re.compile(r"Total size of serialized results of \d+ tasks \(([^)]+)\) is bigger than "
                               r"(?:spark\.driver\.)?maxResultSize \(([^)]+)\)")


def result_too_large_error(error: BaseException, cfg: JobConfig) -> ConfigError | None:
    """One line for a scan whose aggregated result exceeds ``spark.driver.maxResultSize`` (its usual cause and
    the fixes), or None when ``error`` is about something else."""
    m = _RESULT_TOO_LARGE.search(str(error))
    if m is None:
        return None
    slices = list(cfg.columns.slices)
    cause = (f"a slice column with very many values (columns.slices: {slices}) makes summary rows per value"
             if slices else "very many models and runs, or a very small histogram.bin_width, make many summary rows")
    return ConfigError(
        f"The scan's result ({m.group(1)} and more) is larger than spark.driver.maxResultSize ({m.group(2)}): the "
        f"summaries have a row per (day, model, run, slice value, split, label, histogram bin), and {cause}. "
        "Slice by a coarser column (a segment such as a country), evaluate fewer days at once, or raise "
        "spark.driver.maxResultSize (spark.conf, or spark-submit --conf) with the driver's memory.")


@contextmanager
def input_read_errors(cfg: JobConfig) -> Iterator[None]:
    """Around a query over the input: Spark's failure to read one file, or an aggregated result larger than
    the driver accepts, becomes a one-line error (pyspark's warning that repeats the failure is not shown)."""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="toPandas attempted Arrow optimization", category=UserWarning)
            yield
    except CtcalcError:
        raise
    except Exception as e:  # noqa: BLE001 - classified below; anything else propagates unchanged
        error = unreadable_file_error(e, cfg) or result_too_large_error(e, cfg)
        if error is None:
            raise
        raise error from None


def unread_files(spark: SparkSession, cfg: JobConfig, days: Sequence[str] | None) -> list[str]:
    """Input files that yielded no row: with ``input.skip_unreadable_files``, the ones Spark skipped.

    One more pass over the columns the scan reads, so it runs only with that option. In a ``<ds>=<day>``
    folder layout only the folders of ``days`` are read (as the scan does); in any other layout, every file.
    """
    if cfg.input.model_paths:
        return [f for _, sub in path_inputs(cfg) for f in unread_files(spark, sub, days)]
    from pyspark.sql import functions as F

    df = load_input(spark, cfg, days)
    listed = sorted({plain_file_path(f) for f in df.inputFiles()})
    part = f"/{cfg.columns.ds}=" if cfg.columns.ds else ""
    if part and days is not None and listed and all(part in f for f in listed):
        wanted = {*(input_day(cfg.columns.ds_format, d) for d in days), NULL_PARTITION}
        listed = [f for f in listed if f.split(part, 1)[1].split("/", 1)[0] in wanted]
        df = df.where(_in_days(_day_sql(df, cfg), df, cfg, days))
    values = F.hash(*[col(n) for n in source_columns(cfg) if n in df.columns])  # reads what the scan reads
    seen = df.groupBy(F.col("_metadata.file_path").alias("f")).agg(F.max(values).alias("h")).collect()
    got = {plain_file_path(r["f"]) for r in seen}
    return [f for f in listed if f not in got]


# ---- pandas <-> Spark ---------------------------------------------------------------------------------

def spark_schema(types: Mapping[str, str]) -> StructType:
    """A StructType from a {name: 'string'|'long'|'double'} mapping."""
    from pyspark.sql import types as T

    kinds = {"string": T.StringType(), "long": T.LongType(), "double": T.DoubleType()}
    return T.StructType([T.StructField(n, kinds[t], True) for n, t in types.items()])


def pandas_to_spark(spark: SparkSession, pdf: pd.DataFrame, schema: StructType) -> DataFrame:
    """A driver-side frame as a Spark frame with an explicit schema, through an Arrow table; None becomes null.

    Callers guarantee there is no NaN (finalizers use None for undefined values), since Arrow would also
    turn NaN into null. The Arrow table is built here, column by column, with the target types: faster than
    pyspark's conversion of the pandas frame, which infers and checks each column again.
    """
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql import types as T

    arrays = []
    for f in schema.fields:
        col = pdf[f.name] if f.name in pdf else pd.Series([None] * len(pdf), dtype=object)
        if isinstance(f.dataType, T.DoubleType):
            arrays.append(pa.array(pd.to_numeric(col, errors="raise").astype("float64"), type=pa.float64(),
                                   from_pandas=True))
        elif isinstance(f.dataType, T.LongType):
            arrays.append(pa.array(pd.to_numeric(col, errors="raise").astype("Int64"), type=pa.int64(),
                                   from_pandas=True))
        else:
            arrays.append(pa.array(col, type=pa.string(), from_pandas=True))  # None and NaN: null
    return spark.createDataFrame(pa.Table.from_arrays(arrays, names=[f.name for f in schema.fields]), schema)


# ---- leases ---------------------------------------------------------------------------------------------

@dataclass
class Lease:
    """A running job's claim on an output root, refreshed by a heartbeat thread until released."""

    files: FileStore
    path: str
    record: dict[str, Any]
    interval_s: float
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)  # the heartbeat thread and update() write it

    def start(self) -> None:
        self._beat()
        thread = threading.Thread(target=self._run, name="ctcalc-lease", daemon=True)
        thread.start()
        self._thread = thread  # only once started: release() joins it (a Ctrl-C can land inside start())

    def update(self, **fields: Any) -> None:
        """Change fields of the record and write it now (not at the next heartbeat)."""
        with self._lock:
            self.record.update(fields)
        self._beat()

    def _beat(self) -> None:
        with self._lock:
            self.record["heartbeat_at"] = time.time()
            self.files.write_text(self.path, json.dumps(self.record))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._beat()
            except Exception as e:  # noqa: BLE001 - a missed heartbeat must not kill the job
                log.warning("lease heartbeat failed: %s", e)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self.files.delete(self.path)
        except Exception as e:  # noqa: BLE001
            log.warning("could not remove lease %s: %s", self.path, e)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lease_is_live(record: Mapping[str, Any], timeout_s: float, now: float | None = None) -> bool:
    """A lease is live while its process runs (same host) or its heartbeat is recent (other hosts)."""
    now = time.time() if now is None else now
    if record.get("host") == socket.gethostname() and isinstance(record.get("pid"), int):
        return _pid_alive(int(record["pid"]))
    return now - float(record.get("heartbeat_at", 0.0)) < timeout_s


# ---- recovery of what killed runs left -----------------------------------------------------------------

def recover_root(files: FileStore, root: str, depth: int) -> list[str]:
    """Clear what killed writes left under a table root; returns what was done, one line per action.

    * ``.spark-staging-<id>/`` holding ``_SUCCESS``: every task's files were merged into it, so its partition
      folders are complete; one whose final folder is missing was deleted by Spark's swap just before the
      process died and is moved into place (rolled forward). The rest is removed.
    * ``.spark-staging-<id>/`` without ``_SUCCESS``, ``_temporary/``: unfinished, removed.
    * the earlier layout's ``_staging/`` and ``ds=<d>.old.<token>`` folders: the aside copy is moved back if
      its day is missing, else removed.
    """
    done: list[str] = []
    entries = files.list(root)
    names = {e.name for e in entries}
    for e in entries:
        path = f"{root}/{e.name}"
        if e.name.startswith(".spark-staging-") and e.is_dir:
            if files.exists(f"{path}/_SUCCESS"):
                for part in _partition_dirs(files, path, depth):
                    final = f"{root}/{part}"
                    if not files.exists(final):
                        files.rename(f"{path}/{part}", final)
                        done.append(f"rolled forward {final} from {e.name} (its writer died during the swap)")
            files.delete(path)
            done.append(f"removed {path}")
        elif e.name in ("_temporary", "_staging") or (e.name.startswith(".") and e.name.endswith(".tmp")) \
                or e.name.startswith(".ctcalc-probe-"):
            files.delete(path)  # unfinished Spark task output, the earlier layout's staging, a torn small file
            done.append(f"removed {path}")
        elif _LEGACY_ASIDE.match(e.name):
            day = e.name.split(".old.", 1)[0]
            if day not in names:
                files.rename(path, f"{root}/{day}")
                names.add(day)
                done.append(f"moved {path} back to {root}/{day}")
            else:
                files.delete(path)
                done.append(f"removed {path}")
    return done


def _partition_dirs(files: FileStore, base: str, depth: int, prefix: str = "") -> list[str]:
    """Relative partition folders ('k=v' or 'k=v/k2=v2') below ``base``, ``depth`` levels deep."""
    out: list[str] = []
    for e in files.list(f"{base}/{prefix}".rstrip("/")):
        if not e.is_dir or "=" not in e.name or e.name[0] in "._":
            continue
        rel = f"{prefix}{e.name}"
        out.extend([rel] if depth == 1 else _partition_dirs(files, base, depth - 1, f"{rel}/"))
    return out


# ---- the store ------------------------------------------------------------------------------------------

class OutputStore:
    """The output tables of one configuration: where they are, reading them, writing them in transactions."""

    def __init__(self, cfg: JobConfig | OutputConfig, spark: SparkSession | None = None) -> None:
        self.output = cfg.output if isinstance(cfg, JobConfig) else cfg
        self.spark = spark
        self.root = absolute(self.output.path)
        self._files: FileStore | None = None
        self._exchange: dict[str, bool] = {}

    # ---- where -----------------------------------------------------------------------------------
    @property
    def catalog(self) -> bool:
        return self.output.catalog

    @property
    def files(self) -> FileStore:
        if self._files is None:
            self._files = FileStore(self.root)
        return self._files

    def location(self, table: str) -> str:
        """The folder (path mode) or catalog name of a logical output table."""
        if table not in PARTITIONS:
            raise ConfigError(f"Unknown output table {table!r}; known: {sorted(PARTITIONS)}.")
        if not self.catalog:
            return f"{self.root}/{table}"
        if table in self.output.tables:
            return self.output.tables[table]
        return f"{self.output.database}.{self.output.table_prefix}{table}"

    def _session(self, why: str) -> SparkSession:
        if self.spark is None:
            raise ConfigError(f"{why} needs a Spark session (catalog tables or a non-local output path).")
        return self.spark

    def _local_reads(self) -> bool:
        """Read path tables with pyarrow here (no Spark job): local folders and no Spark Connect server."""
        if self.catalog or not is_local(self.root):
            return False
        if self.spark is None:
            return True
        from ctcalc_spark.spark.session import is_connect

        return not is_connect(self.spark)

    # ---- reading ---------------------------------------------------------------------------------
    def partitions(self, table: str) -> list[dict[str, str]]:
        """The partitions present in a table, as {column: value} dicts, sorted."""
        parts = PARTITIONS[table]
        if self.catalog:
            spark = self._session("Listing catalog partitions")
            name = self.location(table)
            if not spark.catalog.tableExists(name):
                return []
            try:
                rows = [r[0] for r in spark.sql(f"SHOW PARTITIONS {name}").collect()]
                found = [dict(kv.split("=", 1) for kv in r.split("/")) for r in rows]
            except Exception:  # noqa: BLE001 - v2 tables may not support SHOW PARTITIONS
                found = [r.asDict() for r in spark.table(name).select(*parts).distinct().collect()]
        else:
            try:
                found = [dict(kv.split("=", 1) for kv in p.split("/"))
                         for p in _partition_dirs(self.files, self.location(table), len(parts))]
            except ConfigError:  # a file system pyarrow cannot open: ask Spark
                found = [r.asDict() for r in self.read_spark(table).select(*parts).distinct().collect()]
        ok = [p for p in found if all(_PARTITION_VALUE.match(str(p.get(k, ""))) for k in parts)]
        return sorted(({k: str(p[k]) for k in parts} for p in ok), key=lambda p: tuple(p[k] for k in parts))

    def days(self, table: str, **where: str) -> list[str]:
        """The ds values present in a table (optionally within other partition values, e.g. window_spec)."""
        return sorted({p["ds"] for p in self.partitions(table) if all(p.get(k) == v for k, v in where.items())})

    def read_spark(self, table: str, *, days: Sequence[str] | None = None,
                   where: Mapping[str, Sequence[str]] | None = None) -> DataFrame:
        """A table as a Spark frame, pruned to ``days`` and ``where`` partition/column values."""
        from pyspark.sql import functions as F

        spark = self._session(f"Reading {table}")
        loc = self.location(table)
        if self.catalog:
            df = spark.table(loc)
        else:
            df = spark.read.format(self.output.format).option("mergeSchema", "true").load(literal_path(loc))
        if days is not None:
            df = df.where(F.col("ds").isin(list(days)))
        for col, values in (where or {}).items():
            df = df.where(F.col(col).cast("string").isin([str(v) for v in values]))
        return df

    def check_databases(self) -> None:
        """For catalog outputs: fail before any work when a database the tables go to does not exist.

        The jobs create missing tables, not databases (where a database lives and who may create one is the
        platform's decision). Without this check a job scanned its input and then failed at the write with
        Spark's SCHEMA_NOT_FOUND; a stream failed in its first batch.
        """
        if not self.catalog:
            return
        spark = self._session("Checking the output database")
        databases = {name.rsplit(".", 1)[0] for name in map(self.location, PARTITIONS) if "." in name}
        missing = sorted(d for d in databases if not spark.catalog.databaseExists(d))
        if missing:
            raise ConfigError(
                f"The output database(s) {missing} do not exist in the session's catalog (output.database / "
                f"output.tables). Create them first (e.g. CREATE DATABASE {missing[0]}) or name existing ones; "
                "the jobs create missing tables, not databases.")

    def exists(self, table: str) -> bool:
        if self.catalog:
            return bool(self._session("Checking a catalog table").catalog.tableExists(self.location(table)))
        return self.files.is_dir(self.location(table))

    def read(self, table: str, *, days: Sequence[str] | None = None,
             where: Mapping[str, Sequence[str]] | None = None, with_run_id: bool = False,
             task: str | None = None) -> pd.DataFrame:
        """A table (or its ``days`` / ``where`` part) as pandas, partition columns as strings; empty if absent.

        The ``run_id`` column (which run wrote each partition) is dropped unless ``with_run_id``. ``task``: the
        summaries must be that task's (InputError naming the days another task's job wrote).
        """
        import pandas as pd

        if not self.exists(table):
            return pd.DataFrame()
        if self._local_reads():  # the run id is left out as the files are read
            frame = self._read_local(table, days, where, with_run_id=with_run_id)
        else:
            rows = self.read_spark(table, days=days, where=where)
            frame = (rows if with_run_id else rows.drop(RUN_ID)).toPandas()  # dropped in Spark: never sent over
        if task is not None and table == "summaries" and not frame.empty:
            self._check_summary_rows(frame, task)
        return frame

    def _check_summary_rows(self, frame: pd.DataFrame, task: str) -> None:
        """InputError when summaries rows lack ``task``'s values: days written by a job of another task (an output
        shared by two tasks' configs; they used to stop the reading job with 'a bug' deep in the arithmetic)."""
        import numpy as np

        from ctcalc_spark.core.finalize import SUMMARY_TYPES

        if task not in SUMMARY_TYPES:
            return
        shared = {n for t, kinds in SUMMARY_TYPES.items() if t != task for n in kinds}
        names = [n for n in SUMMARY_TYPES[task] if n not in shared]  # binary: bin, label, ...; not count, weight
        missing = [n for n in names if n not in frame.columns]
        if missing:
            foreign = frame
        else:  # column by column: selecting them as a frame copied a year's summaries
            unset = np.logical_and.reduce([frame[n].isna().to_numpy() for n in names])
            if not unset.any():
                return
            foreign = frame[unset]
        days = sorted(foreign["ds"].astype(str).unique()) if "ds" in foreign else []
        shown = listed(days)
        other = [t for t, kinds in SUMMARY_TYPES.items() if t != task and all(
            n in foreign.columns and foreign[n].notna().all() for n in kinds)]
        by = f"a {other[0]} job" if other else "a job of another task"
        if other and len(foreign) == len(frame):  # nothing of this task at all: most likely the config's task
            raise InputError(
                f"The summaries of ds={shown or '?'} under {self.location('summaries')!r} are {other[0]} summaries, "
                f"and this config's task is {task}: if they are the outputs you mean, set task: {other[0]} (with "
                f"its columns, as the evaluate job had them); otherwise give each task its own output (output.path).")
        raise InputError(
            f"The summaries of ds={shown or '?'} under {self.location('summaries')!r} are not {task} summaries (no "
            f"{names[0]!r} values): {by} wrote those days into this output. Run `ctcalc evaluate` for them again "
            f"with this config, or give each task its own output (output.path).")

    def _read_local(self, table: str, days: Sequence[str] | None,
                    where: Mapping[str, Sequence[str]] | None, root: str | None = None, *,
                    with_run_id: bool = True, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The rows of the partitions that ``days`` and ``where`` select, read with pyarrow (from ``root``, a
        staging folder of the table, instead of the table's location where given).

        ``columns``: only these, in this order (each must be in the table; all of them in an empty result too);
        otherwise every column, the run id only ``with_run_id``. Columns are chosen as the files are read:
        dropping or reordering them afterwards copied a year's summaries once more (about 0.2 s in a first range
        job's profile, 2026-11-28).

        Partitions are selected by their folder names before any file is opened, and the schema is unified over
        one file of each selected partition only: a read of two weeks no longer opens a file of every day the
        table holds (in a year of summaries 22-26 ms instead of 54-60 ms once warm; 2026-11-27), so its cost
        does not grow with the table's history.
        """
        import pandas as pd

        import pyarrow as pa
        import pyarrow.dataset as pads

        parts = PARTITIONS[table]
        part_schema = pa.schema([(p, pa.string()) for p in parts])
        partitioning = pads.partitioning(part_schema, flavor="hive")
        root = root or self.location(table)
        # a schema given: the listing opens no file
        files = list(pads.dataset(root, format=self.output.format, partitioning=partitioning, schema=part_schema).files)
        if not files:  # no rows, but the columns asked for
            return pd.DataFrame(columns=list(columns or []))
        conds = {k: {str(v) for v in values} for k, values in (where or {}).items()}
        if days is not None:
            conds["ds"] = {str(d) for d in days}
        chosen = [f for f in files if _in_partitions(f, parts, conds)]
        schema = pa.unify_schemas([pads.dataset(f, format=self.output.format).schema
                                   for f in _one_per_dir(chosen or files[-1:])] + [part_schema])  # none: the latest
        if columns is None:
            columns = [n for n in schema.names if with_run_id or n != RUN_ID]
        if not chosen or not all(conds.values()):  # nothing can match
            return schema.empty_table().select(list(columns)).to_pandas()
        ds = pads.dataset(root, format=self.output.format, partitioning=partitioning, schema=schema)
        flt = None
        for col, values in conds.items():  # partition values prune files unopened
            term = pads.field(col).isin(sorted(values))
            flt = term if flt is None else flt & term
        return ds.to_table(filter=flt, columns=list(columns)).to_pandas()

    def commits(self, table: str | None = None) -> pd.DataFrame:
        """The latest commit per (table, partition): columns :data:`COMMIT_COLUMNS`."""
        return _latest_commits(self._commit_records(), table)

    def _commit_records(self) -> list[dict[str, Any]]:
        folder = f"{self.root}/_commits"
        out = []
        for e in self.files.list(folder):
            if e.name.endswith(".json") and not e.name.startswith("."):
                try:
                    out.append({**json.loads(self.files.read_text(f"{folder}/{e.name}")), "file": e.name})
                except (OSError, ValueError) as err:  # a record is moved into place whole; anything else is noise
                    log.warning("unreadable commit record %s: %s", e.name, err)
        return out

    def write_commit(self, run_id: str, job: str, partitions: Sequence[Mapping[str, Any]]) -> None:
        """Record a finished run's partitions, then drop records every partition of which a later run replaced,
        and fold the records into one when there are more than :data:`COMPACT_AT` (a stream commits every batch).
        """
        record = {RUN_ID: run_id, "job": job, "committed_at": _utc_now(), "partitions": list(partitions)}
        folder = f"{self.root}/_commits"
        self.files.write_text(f"{folder}/{run_id}.json", json.dumps(record))
        records = self._commit_records()
        latest = _latest_commits(records)
        keep = set(latest[RUN_ID])
        kept = []
        for other in records:
            runs = {p.get(RUN_ID, other[RUN_ID]) for p in other["partitions"]}
            if other[RUN_ID] != run_id and not keep & runs:
                self.files.delete(f"{folder}/{other['file']}")
            else:
                kept.append(other["file"])
        if len(kept) > COMPACT_AT:
            entries = [{k: r[k] for k in COMMIT_COLUMNS} for r in latest.to_dict("records")]
            record = {RUN_ID: run_id, "job": "compaction", "committed_at": _utc_now(), "partitions": entries}
            self.files.write_text(f"{folder}/compacted-{run_id}.json", json.dumps(record))
            for name in kept:  # a record a concurrent run commits meanwhile is in a file not in this list
                self.files.delete(f"{folder}/{name}")

    def check_days(self, days: Sequence[str], tables: Sequence[str] = ("summaries", "metrics")) -> list[str]:
        """Problems with these days' partitions: data written by a run that did not commit, or tables whose
        data come from different runs. Empty when every partition holds its latest committed run."""
        problems = []
        commits = self.commits()
        for table in tables:
            frame = self.read(table, days=days, with_run_id=True)
            if frame.empty or RUN_ID not in frame:
                continue
            got = frame.groupby("ds")[RUN_ID].agg(lambda s: sorted(set(s)))
            committed = {} if commits.empty else {
                r["ds"]: r[RUN_ID] for _, r in commits[commits["table"] == table].iterrows()}
            for day, runs in got.items():
                if len(runs) != 1 or committed.get(day) != runs[0]:
                    problems.append(f"{table} ds={day}: holds run(s) {runs}, latest commit "
                                    f"{committed.get(day, 'none')}; rerun the job for {day}.")
        return problems

    # ---- writing ---------------------------------------------------------------------------------
    def transaction(self, job: str, days: Sequence[str] | None = None, scope: str | None = None) -> Transaction:
        """A write transaction (use as a context manager): lease, recovery, writes, commit records last.

        ``days``: the days it writes; another live run of ``job`` with the same ``scope`` (e.g. rolling's window
        spec) on one of them stops it before it writes."""
        return Transaction(self, job, days, scope)

    def stages_locally(self, table: str) -> bool:
        """Whether ``table``'s writes are staged and swapped in (:meth:`swap_mode` 'exchange') in a folder this
        process reads with pyarrow (:meth:`Transaction.stage_and_read`)."""
        return not self.catalog and self._local_reads() and self.swap_mode(self.location(table)) == "exchange"

    def swap_mode(self, root: str) -> str:
        """'exchange' (stage, then swap each partition atomically) or 'spark' (Spark's dynamic partition
        overwrite: a delete then a rename, so a reader can find the partition missing for a moment)."""
        mode = self.output.swap
        if mode == "spark":
            return mode
        if root not in self._exchange:
            self._exchange[root] = supports_exchange(root)
        if mode == "exchange" and not self._exchange[root]:
            raise ConfigError(f"output.swap is 'exchange' but {root!r} is not on a local Linux file system with "
                              "atomic exchange (renameat2); use 'auto' or 'spark' there.")
        return "exchange" if self._exchange[root] else "spark"

    def _live_runs(self, exclude_run: str | None) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """({run id: lease record} of the runs holding a live lease, stale lease file names)."""
        live: dict[str, dict[str, Any]] = {}
        stale: list[str] = []
        for e in self.files.list(f"{self.root}/_runs"):
            if not e.name.endswith(".json") or e.name[:-5] == exclude_run:
                continue
            try:
                record = json.loads(self.files.read_text(f"{self.root}/_runs/{e.name}"))
            except (OSError, ValueError):
                record = {"heartbeat_at": e.mtime}
            if lease_is_live(record, self.output.lease_timeout_s):
                live[e.name[:-5]] = record
            else:
                stale.append(e.name)
        return live, stale

    def check_before_work(self, job: str, days: Sequence[str], scope: str | None = None,
                          task: str | None = None) -> None:
        """Before a job's scan: its output databases exist, they hold ``task``'s tables, and no live run of ``job``
        (and ``scope``) is writing one of ``days`` (the same check its transaction makes, made early so that a
        long scan is not wasted)."""
        self.check_databases()
        self._check_output_folder()
        self._check_foreign_files()
        self._check_output_filesystem()
        if task is not None:
            self._check_task(task)
        try:
            self.check_no_concurrent_run("", job, days, scope)
        except ConfigError:  # leases unreachable from here: the transaction says so
            pass

    def _check_task(self, task: str) -> None:
        """ConfigError when the metrics or summaries table holds another task's columns: a job of this task would
        replace those days' partitions with rows of another schema (a binary day replaced by regression rows, and
        the binary jobs reading the table then fail). One footer or catalog schema read per table."""
        from ctcalc_spark.core.finalize import METRIC_TYPES, SUMMARY_TYPES, task_of_columns

        for table, kinds in (("metrics", METRIC_TYPES), ("summaries", SUMMARY_TYPES)):
            try:
                columns = self._columns(table)
            except Exception as e:  # noqa: BLE001 - unreadable here: the writes themselves will say so
                log.debug("cannot read the columns of the %s table: %s", table, e)
                continue
            found = task_of_columns(columns or (), kinds)
            if found is None or found == task or (table == "summaries" and task not in kinds):
                continue
            where = self.location(table)
            raise ConfigError(
                f"The {table} table {where!r} holds {found} outputs, and this job's task is {task}: its {task} rows "
                f"would replace partitions of this output, and {found} jobs reading it would then fail. Give each "
                f"task its own output (output.path, or output.database / output.tables).")

    def _columns(self, table: str) -> list[str] | None:
        """The columns of an existing output table (None if there is none): the catalog's schema, or the footer of
        one file of its first partition."""
        if self.catalog:
            if not self.exists(table):
                return None
            return list(self._session("Reading a table's schema").table(self.location(table)).columns)
        folder = self.location(table)
        key = PARTITIONS[table][0]
        parts = [e for e in self.files.list(folder) if e.is_dir and e.name.startswith(f"{key}=")]
        for part in parts[:1]:
            files = [e for e in self.files.list(f"{folder}/{part.name}")
                     if not e.is_dir and not e.name.startswith(("_", "."))]
            if files:
                return self.files.parquet_columns(f"{folder}/{part.name}/{files[0].name}")
        return None

    def _check_foreign_files(self) -> None:
        """An output table folder holding what ctcalc never writes there (a Parquet file of another tool's table, a
        folder not named ``<partition>=<value>``): say so before the scan. The job would add its partitions beside
        them, and every reader of the folder would read both (one level listed per table folder; local paths)."""
        if self.catalog or not is_local(self.root):
            return
        for table, keys in PARTITIONS.items():
            folder = self.location(table)
            foreign = [e.name for e in self.files.list(folder)  # sorted; empty for a folder not there
                       if not e.name.startswith(("_", ".")) and not (e.is_dir and e.name.startswith(f"{keys[0]}="))]
            if foreign and keys[0] != "ds" and all(n.startswith("ds=") for n in foreign):
                raise ConfigError(
                    f"output.path {self.output.path!r} has a {table!r} folder of an earlier ctcalc layout: its "
                    f"partitions are ds=<day> folders ({foreign[0]!r}, ...), and the {table} table is now partitioned "
                    f"by {', '.join(keys)}, so that rows of different window specs coexist. Move {folder!r} aside and "
                    "run the job again for the days you need.")
            if foreign:
                shown = listed([repr(n) for n in foreign], 3)
                raise ConfigError(
                    f"output.path {self.output.path!r} has a {table!r} folder that is not a ctcalc table: it holds "
                    f"{shown}, where ctcalc keeps only {keys[0]}=<value> partition folders. The job would write its "
                    f"partitions beside them, and readers of {folder!r} would read both. Set output.path to a new "
                    "folder, or move those files out.")

    def _check_output_folder(self) -> None:
        """A local output path below a file, on a read-only file system or not writable by this user: say so
        before the scan (nothing is created)."""
        if not is_local(self.root):
            return
        why = unwritable_reason(local_path(self.root))
        if why is not None:
            raise ConfigError(f"output.path {self.output.path!r} cannot hold the outputs: {why}, so the job would "
                              "fail in its first write. Set output.path to a folder this job can create and write to.")

    def _check_output_filesystem(self) -> None:
        """A remote output path (s3a://, gs://, abfss://, ...) whose file system Spark has no connector for: say
        so before the scan (it used to fail in the first write, after the whole scan). Spark is asked for a
        name that does not exist below the output folder: that loads the file system and costs one lookup (the
        folder itself would be listed whole, every partition of every table). Any other outcome is left to the
        writes."""
        if self.catalog or is_local(self.root) or self.spark is None:
            return
        try:
            probe = f"{self.root}/_ctcalc_probe_{uuid.uuid4().hex[:8]}"
            self.spark.read.format("text").load(probe).columns  # noqa: B018 - resolves the file system
        except Exception as e:  # noqa: BLE001 - PATH_NOT_FOUND and friends are fine here
            connector = connector_error(e, self.output.path)
            if connector is not None:
                raise ConfigError(connector) from None

    def check_no_concurrent_run(self, run_id: str, job: str, days: Sequence[str], scope: str | None = None) -> None:
        """ConcurrentRunError when another live run of ``job`` (and ``scope``) holds a lease on any of ``days``."""
        live, _ = self._live_runs(run_id)
        for other, record in sorted(live.items()):
            if record.get("job") != job or record.get("scope") != scope:
                continue
            theirs = record.get("days")
            shared = sorted(set(days) & set(theirs)) if isinstance(theirs, list) else list(days)
            if not shared:
                continue
            shown = listed(shared)
            if record.get("host") == socket.gethostname():
                alive = "its process is running"
            else:  # another host: only the heartbeat tells
                age = time.time() - float(record.get("heartbeat_at", 0.0))
                alive = (f"its lease was renewed {age:.0f} s ago (a lease counts for output.lease_timeout_s = "
                         f"{self.output.lease_timeout_s} s without renewal, so a killed run's holds that long)")
            raise ConcurrentRunError(
                f"Another {job} run{f' ({scope})' if scope else ''} is writing ds={shown} of {self.root!r}: run "
                f"{other} (pid {record.get('pid')} on {record.get('host')}, started {record.get('started_at')}); "
                f"{alive}. Two runs of one day would replace its partitions in turn; this one stopped before "
                "writing. Run it again once that one has ended (a rerun of a day replaces it), or stop that one.")

    def recover(self, exclude_run: str | None = None) -> list[str]:
        """Clear what killed runs left: their staging folders always; Spark's own leftovers (``.spark-staging-*``,
        ``_temporary``) and stale leases only while no other run holds this output."""
        try:
            live, stale = self._live_runs(exclude_run)
        except ConfigError as e:
            log.warning("cannot check leftovers of earlier runs: %s", e)
            return []
        roots = {table: self._table_root(table) for table in PARTITIONS}
        done = []
        for root in {r for r in roots.values() if r is not None}:
            for entry in self.files.list(root):
                if entry.name.startswith(STAGING_PREFIX):
                    run = entry.name[len(STAGING_PREFIX):].rsplit("-", 1)[0]
                    if run != exclude_run and run not in live:
                        self.files.delete(f"{root}/{entry.name}")
                        done.append(f"removed {root}/{entry.name} (run {run} ended before its swap finished)")
        if live:
            log.info("runs %s are writing to %s: Spark's leftovers are left for later", sorted(live), self.root)
        else:
            done += recover_root(self.files, f"{self.root}/_commits", 1) + recover_root(self.files, f"{self.root}/_runs", 1)
            for table, parts in PARTITIONS.items():
                root = roots[table]
                if root is not None:
                    rolled = recover_root(self.files, root, len(parts))
                    done += rolled
                    if self.catalog and any(d.startswith("rolled forward") for d in rolled):
                        self._session("Repairing a catalog table").sql(
                            f"ALTER TABLE {self.location(table)} RECOVER PARTITIONS")
            for name in stale:
                self.files.delete(f"{self.root}/_runs/{name}")
                done.append(f"removed stale lease {name}")
        for line in done:
            log.warning("recovery: %s", line)
        return done

    def _table_root(self, table: str) -> str | None:
        """The folder holding a table's files, if it has one this process can reach."""
        if not self.catalog:
            return self.location(table)
        spark = self._session("Locating a catalog table")
        name = self.location(table)
        if not spark.catalog.tableExists(name):
            return None
        rows = {r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}
        loc = rows.get("Location")
        if not loc or (self._files is not None and not is_local(loc) and not is_local(self.root)
                       and loc.split("://")[0] != self.root.split("://")[0]):
            return None
        try:
            FileStore(loc)
        except ConfigError:
            return None
        return absolute(loc)


def _in_partitions(path: str, parts: Sequence[str], conds: Mapping[str, set[str]]) -> bool:
    """Whether a table's data file ``path`` (in a folder per partition column ``parts``) lies in a partition
    whose values pass ``conds`` ({column: allowed values}); conditions on other columns pass. Folder names
    are URI-escaped, as Spark writes them."""
    from urllib.parse import unquote

    folders = path.replace("\\", "/").split("/")[-1 - len(parts):-1]
    values = dict(seg.split("=", 1) for seg in folders if "=" in seg)
    return all(unquote(values[k]) in allowed for k, allowed in conds.items() if k in values)


def _one_per_dir(files: Sequence[str]) -> list[str]:
    """One file per folder (partitions written by one run share a schema)."""
    seen: dict[str, str] = {}
    for f in files:
        seen.setdefault(f.rsplit("/", 1)[0], f)
    return list(seen.values())


class Transaction:
    """One run's writes to an output: see the module docstring for the protocol."""

    def __init__(self, store: OutputStore, job: str, days: Sequence[str] | None = None,
                 scope: str | None = None) -> None:
        self.store = store
        self.job = job
        self.scope = scope
        self.days = None if days is None else sorted({str(d) for d in days})
        self.run_id = new_run_id()
        self.written: list[tuple[str, dict[str, str], int]] = []
        self.staged: list[tuple[str, str, list[str]]] = []  # (staging root, table root, partition paths)
        self.new_catalog_partitions: list[tuple[str, dict[str, str]]] = []
        self.lease: Lease | None = None
        self.recovered: list[str] = []
        self._pool: ThreadPoolExecutor | None = None
        self._early: list[tuple[str, Future[None], list[tuple[dict[str, str], int]]]] = []  # stage()d writes
        self._new_root = False  # the output folder did not exist when the run started

    def __enter__(self) -> Transaction:
        store = self.store
        try:
            self._new_root = not store.files.exists(store.root)
        except (ConfigError, OSError):  # a file system pyarrow cannot reach: nothing to tidy after a failure
            self._new_root = False
        record = {"run_id": self.run_id, "job": self.job, "host": socket.gethostname(), "pid": os.getpid(),
                  "started_at": _utc_now(), "days": self.days, "scope": self.scope}
        try:
            self.lease = Lease(store.files, f"{store.root}/_runs/{self.run_id}.json", record,
                               interval_s=max(5.0, store.output.lease_timeout_s / 4))
            self.lease.start()
            if self.days is not None:
                store.check_no_concurrent_run(self.run_id, self.job, self.days, self.scope)
            self.recovered = store.recover(exclude_run=self.run_id)
        except ConfigError as e:  # output on a file system pyarrow cannot reach: no lease, no recovery
            log.warning("%s", e)
            if self.lease is not None:  # started before the check that failed: its thread and file go too
                self.lease.release()
            self.lease = None
        except BaseException:  # another live run, or Ctrl-C: __exit__ will not run, so the lease goes back here
            if self.lease is not None:
                self.lease.release()
            raise
        return self

    def __exit__(self, kind: Any, value: Any, tb: Any) -> None:
        try:
            try:
                self._finish_early()  # a write stage() started ends before its folder is swapped in or removed
            except BaseException:
                if kind is None:
                    raise
                log.debug("a staged write failed after the run had failed", exc_info=True)
            if kind is None:
                with interrupt.deferred():  # a signal now lets the exchange and the commit record finish
                    self._swap_in()
                    if self.written:
                        self._commit()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            for staging, _, _ in self.staged:
                try:
                    self.store.files.delete(staging)  # after the swap it holds the replaced partitions
                except OSError as e:
                    log.warning("could not remove %s (the next run will): %s", staging, e)
            if self.lease is not None:
                self.lease.release()
            if kind is not None and self._new_root:
                self._remove_empty_root()

    def _remove_empty_root(self) -> None:
        """Remove the output folder this failed run created, if nothing but empty folders is left in it (its lease
        folder, a table folder its staged write made): a run that stops on a bad input leaves no output behind."""
        files = self.store.files

        def empty(path: str) -> bool:
            return all(e.is_dir and empty(f"{path}/{e.name}") for e in files.list(path))

        try:
            if empty(self.store.root):
                files.delete(self.store.root)
        except OSError as e:
            log.warning("could not remove the empty output folder %s: %s", self.store.root, e)

    def narrow(self, days: Sequence[str]) -> None:
        """Hold only ``days`` of the run's days from now on. A range run opens its transaction before its scan
        (its summaries are staged in the scan's job) with every day asked for; once the scan has found which of
        them have rows (``--allow-missing-days``), the others are no longer claimed, so another run may write
        them. A lease that cannot be rewritten keeps claiming every day (a warning): stricter, not wrong."""
        kept = sorted({str(d) for d in days})
        if self.days is not None and not set(kept) <= set(self.days):
            raise ValueError(f"narrow() can only drop days: {sorted(set(kept) - set(self.days))} were not held")
        self.days = kept
        if self.lease is not None:
            try:
                self.lease.update(days=kept)
            except Exception as e:  # noqa: BLE001 - as a missed heartbeat: a lease left wider must not stop the job
                log.warning("could not narrow the lease %s to %d days: %s", self.lease.path, len(kept), e)

    def write(self, table: str, frame: pd.DataFrame | DataFrame, types: Mapping[str, str] | None = None) -> str:
        """Replace the partitions of ``table`` that ``frame`` holds (a pandas frame needs ``types``); returns the
        table's location. :meth:`write_all` for several tables."""
        return self.write_all([(table, frame, types)])[0]

    def write_all(self, items: Sequence[tuple[str, pd.DataFrame | DataFrame, Mapping[str, str] | None]],
                  same_rows: Mapping[str, pd.DataFrame] | None = None) -> list[str]:
        """Replace the partitions of each (table, frame, types) in ``items``; returns the tables' locations.

        Where partitions are swapped atomically (:meth:`OutputStore.swap_mode`), the rows are written to hidden
        staging folders now and swapped in when the transaction ends; otherwise Spark replaces them now, one
        table after the other. Staged writes of several tables run side by side (:data:`WRITE_THREADS` Spark
        jobs at once): a small table's write is per-file work in one or a few tasks
        (:func:`_one_file_per_partition`), which leaves cores idle. A Spark frame is counted per partition first
        (one more Spark job) unless ``same_rows`` holds a driver frame of the same rows for its table, whose
        partitions are counted instead.
        """
        same_rows = same_rows or {}
        planned = [self._plan(table, frame, types, same_rows.get(table)) for table, frame, types in items]
        with interrupt.deferred():
            if (len(planned) > 1 or self._early) and all(staged for _, staged, _, _ in planned):
                futures = [self._submit(save) for _, _, save, _ in planned]
                self._finish_early()
                for done in futures:
                    done.result()  # the first failure, after every write has ended
            else:
                self._finish_early()
                for _, _, save, _ in planned:
                    save()
        for (table, _, _), (_, _, _, written) in zip(items, planned):
            self.written += [(table, values, n) for values, n in written]
        return [loc for loc, _, _, _ in planned]

    def stage(self, table: str, frame: pd.DataFrame | DataFrame, types: Mapping[str, str],
              same_rows: pd.DataFrame | None = None) -> bool:
        """Start writing ``table``'s partitions of ``frame`` now, beside the caller's further work, where they are
        staged (hidden until the transaction ends and swapped in only if it ends without an error); True if
        started. The next :meth:`write_all` (or the end of the transaction) waits for it, and a failure of it is
        raised there. Where Spark would replace the partitions in place (not staged), nothing starts and False
        is returned: write the table with :meth:`write_all` once the run's numbers are known. ``same_rows``: as
        for :meth:`write_all`.

        A range job on Spark Connect, or with an output it cannot read back locally, stages its summaries this way
        (on Spark Connect from the aggregate Spark holds, counted from the driver's copy) while it computes the
        metrics from them (a year of daily partitions: the metrics take about a second on the driver, while the
        summaries' write keeps both cores busy for two to three); otherwise it uses :meth:`stage_and_read`."""
        if self.store.catalog or self.store.swap_mode(self.store.location(table)) != "exchange":
            return False
        _, staged, save, written = self._plan(table, frame, types, same_rows)
        if not staged:  # pragma: no cover - swap_mode said exchange
            raise AssertionError(f"{table} was planned in place")
        self._early.append((table, self._submit(save), written))
        return True

    def stage_and_read(self, table: str, frame: DataFrame, clustered: bool = False,
                       columns: Sequence[str] | None = None) -> pd.DataFrame:
        """Write ``table``'s partitions of the Spark ``frame`` into a staging folder now, and return its rows as
        written, read back with pyarrow (partition columns as strings, no run id); only where
        :meth:`OutputStore.stages_locally`. Swapped in when the transaction ends without an error, removed if it
        fails, like :meth:`stage`'s writes.

        For a frame that Spark computes once and the driver needs as well (a range's summaries): Spark writes it
        where it computed it and the driver reads the files, instead of collecting the rows and sending them back
        to be written. The partitions are counted from the rows read back, so the write needs no count first.

        ``clustered``: the rows of each output partition are in one task of ``frame`` already (it was shuffled by
        the partition columns): written without a shuffle of their own, still one file per partition.
        ``columns``: the columns to read back, in this order (they must include the partition columns); default
        every column but the run id.
        """
        from pyspark.sql import functions as F

        store = self.store
        if not store.stages_locally(table):
            raise AssertionError(f"stage_and_read needs a staged local output for {table}")
        spark = store._session(f"Writing {table}")
        parts = PARTITIONS[table]
        root = store.location(table)
        staging = self._staging(root, table)
        rels: list[str] = []
        self.staged.append((staging, root, rels))  # removed if this run fails, whatever the write left there
        out = frame.withColumn(RUN_ID, F.lit(self.run_id))
        out = out.select(*[col(c) for c in out.columns if c not in parts], *[col(p).cast("string") for p in parts])
        with interrupt.deferred():
            shuffled = out if clustered else out.repartition(*parts)
            (shuffled.write.mode("overwrite").options(**codec_options(store.output))
             .partitionBy(*parts).format(store.output.format).save(staging))
        rows = store._read_local(table, None, None, root=staging, with_run_id=False, columns=columns)
        counts = rows.groupby(list(parts), dropna=False).size() if not rows.empty else {}
        written = [(dict(zip(parts, k if isinstance(k, tuple) else (k,))), int(n)) for k, n in counts.items()]
        _check_partition_values(table, written)
        rels.extend(_partition_path(v) for v, _ in written)
        self.written += [(table, values, n) for values, n in written]
        return rows

    def _staging(self, root: str, table: str) -> str:
        """The hidden folder under ``root`` that this run stages ``table``'s partitions in."""
        return f"{root}/{STAGING_PREFIX}{self.run_id}-{table}"

    def _submit(self, save: Callable[[], None]) -> Future[None]:
        """``save`` on a write thread; a signal during it lets it end, as for a write in the main thread."""
        def deferred_save() -> None:
            with interrupt.deferred():
                save()

        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=WRITE_THREADS, thread_name_prefix="ctcalc-write")
        return self._pool.submit(deferred_save)

    def _finish_early(self) -> None:
        """Wait for every write :meth:`stage` started; record those that succeeded, raise the first failure."""
        early, self._early = self._early, []
        if not early:
            return
        with interrupt.deferred():
            wait([done for _, done, _ in early])
        for _, done, _ in early:
            done.result()
        for table, _, written in early:
            self.written += [(table, values, n) for values, n in written]

    def _plan(self, table: str, frame: pd.DataFrame | DataFrame, types: Mapping[str, str] | None,
              same_rows: pd.DataFrame | None = None
              ) -> tuple[str, bool, Callable[[], None], list[tuple[dict[str, str], int]]]:
        """(location, whether staged, the write, [(partition values, rows)]) of one table; a staged write's
        folder is registered for the swap (and removed if the run fails). A Spark ``frame``'s partitions are
        counted from ``same_rows`` (a driver frame of the same rows) where given."""
        import pandas as pd

        store = self.store
        spark = store._session(f"Writing {table}")
        parts = PARTITIONS[table]
        if isinstance(frame, pd.DataFrame) and types is None:
            raise TypeError("A pandas frame needs its column types.")
        counted = frame if isinstance(frame, pd.DataFrame) else same_rows
        if counted is not None:
            counts = counted.groupby(list(parts), dropna=False).size()
            written = [(dict(zip(parts, k if isinstance(k, tuple) else (k,))), int(n)) for k, n in counts.items()]
        else:
            rows = frame.groupBy(*parts).count().collect()
            written = [({p: str(r[p]) for p in parts}, int(r["count"])) for r in rows]
        _check_partition_values(table, written)
        n_rows = sum(n for _, n in written)

        def spark_frame(data: pd.DataFrame | DataFrame) -> DataFrame:  # the rows as written, with the run id
            from pyspark.sql import functions as F

            sdf = pandas_to_spark(spark, data, spark_schema(types)) if isinstance(data, pd.DataFrame) else data
            sdf = sdf.withColumn(RUN_ID, F.lit(self.run_id))
            return sdf.select(*[col(c) for c in sdf.columns if c not in parts], *[col(p).cast("string") for p in parts])

        def saved(path: str, **options: str) -> Callable[[], None]:
            return lambda: (_one_file_per_partition(spark_frame(frame), parts, len(written), n_rows).write
                            .mode("overwrite").options(**codec_options(store.output), **options)
                            .partitionBy(*parts).format(store.output.format).save(path))

        loc = store.location(table)
        empty = frame.iloc[:0] if isinstance(frame, pd.DataFrame) else frame
        root = _prepare_catalog_table(spark, loc, spark_frame(empty), parts, store.output.format,
                                      codec_options(store.output), store.output) if store.catalog else loc
        if root is not None and store.swap_mode(root) == "exchange":
            staging = self._staging(root, table)
            self.staged.append((staging, root, [_partition_path(v) for v, _ in written]))  # removed if this fails
            if store.catalog:
                self.new_catalog_partitions += [(loc, v) for v, _ in written]
            return loc, True, saved(staging), written
        if store.catalog:
            return loc, False, lambda: _overwrite_catalog_partitions(spark, loc, spark_frame(frame)), written
        return loc, False, saved(loc, partitionOverwriteMode="dynamic"), written

    def _swap_in(self) -> None:
        """Every staged partition into place: one atomic exchange each (a new one is renamed into place)."""
        files = self.store.files
        for staging, root, rels in self.staged:
            for rel in rels:
                final = f"{root}/{rel}"
                if files.exists(final):
                    files.exchange(f"{staging}/{rel}", final)
                else:
                    files.rename(f"{staging}/{rel}", final)
        if self.new_catalog_partitions:
            spark = self.store._session("Registering catalog partitions")
            for name in sorted({n for n, _ in self.new_catalog_partitions}):
                specs = [v for n, v in self.new_catalog_partitions if n == name]
                clause = " ".join("PARTITION (" + ", ".join(f"{k} = '{v}'" for k, v in s.items()) + ")" for s in specs)
                spark.sql(f"ALTER TABLE {name} ADD IF NOT EXISTS {clause}")
                spark.sql(f"REFRESH TABLE {name}")

    def _commit(self) -> None:
        parts = [{"table": t, "partition": _partition_path(values), "ds": values.get("ds"), "n_rows": n}
                 for t, values, n in self.written]
        try:
            self.store.write_commit(self.run_id, self.job, parts)
        except ConfigError as e:
            log.warning("no commit record written: %s", e)


def _latest_commits(records: Sequence[Mapping[str, Any]], table: str | None = None) -> pd.DataFrame:
    """The latest commit per (table, partition) among commit ``records``: columns :data:`COMMIT_COLUMNS`."""
    import pandas as pd

    rows = []
    for record in records:
        for part in record["partitions"]:  # a compacted record carries each partition's own run
            if table is None or part["table"] == table:
                rows.append({RUN_ID: record[RUN_ID], "job": record["job"],
                             "committed_at": record["committed_at"], **part})
    frame = pd.DataFrame(rows, columns=COMMIT_COLUMNS)
    frame = frame.sort_values(["committed_at", RUN_ID]).drop_duplicates(["table", "partition"], keep="last")
    return frame.reset_index(drop=True)


def _one_file_per_partition(frame: DataFrame, parts: Sequence[str], n_partitions: int, n_rows: int) -> DataFrame:
    """Each output partition's rows in one task: one file per partition (Spark's writer sorts a task's rows by
    the partition columns and writes them one partition after the other).

    Up to :data:`ROWS_PER_WRITE_TASK` rows and :data:`FILES_PER_WRITE_TASK` partitions go to one task: a task's
    start, shuffle and commit cost more than a small file, but a small table of many day partitions is
    per-file work (the Parquet writer's set-up and footer), which one task does one file after the other while
    the other cores idle. Such a table is hashed by the partition columns into just enough tasks. More rows are
    shuffled by the partition columns without a fixed task count, so that Spark's adaptive execution sizes the
    tasks (``spark.sql.adaptive.*``; it merges whole shuffle partitions, so each output partition still lands
    in one task).
    """
    if n_partitions <= 1 or n_rows <= ROWS_PER_WRITE_TASK:
        tasks = -(-n_partitions // FILES_PER_WRITE_TASK)
        return frame.coalesce(1) if tasks <= 1 else frame.repartition(tasks, *parts)
    return frame.repartition(*parts)


ROWS_PER_WRITE_TASK = 250_000
FILES_PER_WRITE_TASK = 200
"""Partitions (files) of a small table that one write task takes: a year of day partitions goes to two tasks.
Measured on local[2] (2026-11-27, writes from driver frames, each a whole transaction): a year's rolling rows
(1,460 rows, 365 partitions) 1.05 s in one task and 0.92 s in two (medians of ten interleaved writes); a range
evaluate's summaries and metrics written side by side 3.73 s and 3.40 s (medians of eight). Whole range jobs
showed no difference inside the VM's spread (docs/benchmarks.md). A year of metrics rows in twelve tasks took
2.1 s against 0.9 s in one (exploratory, 2026-11-24)."""
WRITE_THREADS = 2
"""Staged writes of one transaction that run at once. A small table's write is per-file work in one or a few
tasks (the Parquet writer's set-up and footer). Measured on 2026-11-26, when each such write was one task with
a compressor per column chunk: two writes of 1,460 rows into 365 partitions took 1.70 s one after the other
and 1.11 s side by side, and a year's range evaluate (summaries and metrics, 730 files) 10.07 s and 8.37 s
(local[2], medians of five and of three interleaved runs). Cutting one table's write into pieces of whole
days, written at once, measured no faster (9.20 s)."""


def _check_partition_values(table: str, written: Sequence[tuple[Mapping[str, str], int]]) -> None:
    """InputError when a partition value of ``table`` is not a safe folder name."""
    for values, _ in written:
        bad = {k: v for k, v in values.items() if not _PARTITION_VALUE.match(str(v))}
        if bad:
            raise InputError(f"Partition value(s) {bad} of {table} are not safe folder names "
                             "(letters, digits and _ . : + - only).")


def _partition_path(values: Mapping[str, str]) -> str:
    return "/".join(f"{k}={v}" for k, v in values.items())


FILE_PROVIDERS = ("parquet", "orc", "json", "csv", "avro", "text", "hive")
"""Catalog table providers whose partitions are folders under the table's location."""


def _prepare_catalog_table(spark: SparkSession, name: str, frame: DataFrame, parts: Sequence[str],
                           fmt: str, options: Mapping[str, str], output: OutputConfig) -> str | None:
    """Create the table (partitioned, with writer ``options``: its codec; external under ``output.location`` and
    with ``output.table_properties`` when set) when missing and add new columns; return its folder when it is a
    file-based table on a local file system (partitions can be exchanged atomically), else None."""
    if not spark.catalog.tableExists(name):
        where = {"path": f"{output.location.rstrip('/')}/{name.split('.')[-1]}"} if output.location else {}
        frame.limit(0).write.partitionBy(*parts).format(fmt).options(**options, **where).saveAsTable(name)
        if output.table_properties:
            props = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in output.table_properties.items())
            spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ({props})")
    have = spark.table(name).columns
    new = [f for f in frame.schema.fields if f.name not in have]
    if new:
        cols = ", ".join(f"{quoted(f.name)} {f.dataType.simpleString()}" for f in new)
        spark.sql(f"ALTER TABLE {name} ADD COLUMNS ({cols})")
    info = {r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}
    loc, provider = info.get("Location"), str(info.get("Provider", "")).lower()
    if provider not in FILE_PROVIDERS or not loc or not is_local(loc):
        return None
    return absolute(loc)


def _overwrite_catalog_partitions(spark: SparkSession, name: str, frame: DataFrame) -> None:
    """Spark's own partition overwrite of a catalog table: overwritePartitions() for v2 tables (Delta,
    Iceberg: atomic), insertInto(overwrite=True) in dynamic mode for file-based tables elsewhere."""
    from pyspark.sql import functions as F

    have = spark.table(name).columns
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
