"""Reading the evaluation rows: the input's files or tables, their days, columns and types. What a bad input
gets said about it is :mod:`ctcalc_spark.spark.input_hints`; the output tables are :mod:`ctcalc_spark.tables`.
"""
from __future__ import annotations

import logging
import os
import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping, Sequence

from ctcalc_spark.config import (
    EPOCH_FORMATS,
    ONE_RUN,
    JobConfig,
    input_day,
    require_input,
    undated_day,
    validate_ds,
)
from ctcalc_spark.errors import ConfigError, CtcalcError, InputError, java_root_cause
from ctcalc_spark.spark import delta_input
from ctcalc_spark.filekind import (
    check_folder_links,
    excel_sep_line,
    has_data_files,
    header_slips,
    input_glob,
    sep_line_fix,
)
from ctcalc_spark.spark.connectors import connector_error
from ctcalc_spark.storage import (
    FileStore,
    absolute,
    is_local,
    literal_path,
)
from ctcalc_spark.spark.input_hints import (
    MAX_HEADER_FILES,
    check_csv_quoting,
    check_output_outside,
    check_table_format,
    check_temporary_files,
    columns_in_some_files,
    csv_header_checked,
    csv_sep,
    first_line,
    foreign_file_error,
    local_input_files,
    missing_source_hint,
    no_data_files_hint,
    plain_file_path,
    unreadable_file_error,
)
from ctcalc_spark.spark.names import col, quoted

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

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
        raise InputError(f"The tables of input.model_paths cannot be read as one: {first_line(e).rstrip('.')}. "
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
            if delta_input.reads_log(cfg.input.format, root, cfg.output.storage_options):
                values = None if days is None else [input_day(cfg.columns.ds_format, d) for d in days]
                df = delta_input.read_delta(spark, reader, root, ds_column=cfg.columns.ds, day_values=values,
                                            storage_options=cfg.output.storage_options)
                return nested_columns(df, source_columns(cfg))
            day_paths = _day_folders(root, cfg.columns.ds, days, cfg.columns.ds_format)
            if day_paths is None:
                check_output_outside(root, cfg)
            check_table_format(root, cfg)
            check_temporary_files(day_paths or [root], cfg)
            if is_local(root):
                check_folder_links(root, day_paths or [root])
            check_csv_quoting(cfg)
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
            from ctcalc_spark.core.findings import LEGACY_CHARSETS_HINT

            hint = f" For {LEGACY_CHARSETS_HINT[4:]}."
        if "FLOAT16" in str(e):
            hint = _float16_hint(cfg)
        if "UNABLE_TO_INFER_SCHEMA" in str(e) and not cfg.input.table:
            hint = no_data_files_hint(str(cfg.input.path)) or hint
        java = java_root_cause(e)
        cause = java[0] if java is not None else first_line(e)
        line = f"Cannot read the evaluation table {where!r}: {cause.rstrip('.')}.{hint}"
        raise (unreadable_file_error(e, cfg) or InputError(line)) from None
    return nested_columns(df, source_columns(cfg))


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


ISO_DAY_TEXT = r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])([T ]|$)"
"""A date column's text that is a YYYY-MM-DD day, maybe with a time after a 'T' or a space (Java regex)."""


MAX_KNOWN_DAYS = 4_000
"""Most days written into the scan's SQL as text known to be a day (:func:`_day_sql`); about eleven years."""


def _day_sql(df: DataFrame, cfg: JobConfig, days: Sequence[str] | None = None) -> str:
    """The date column as a date when the input's is a date or timestamp, else as text (null where null), as
    Spark SQL text.

    A date stays a date in the scan: it is grouped as an int and made 'YYYY-MM-DD' text on the small
    aggregated result instead of being formatted row by row. A timestamp's day is its day in the session's time
    zone (UTC unless spark.conf sets spark.sql.session.timeZone). Text is the day as written: its first ten
    characters, so '2026-11-21 13:45:00' and '2026-11-21T23:30:00-08:00' are rows of 2026-11-21 (an exact
    comparison found no rows in such a column); other text is null (:data:`ISO_DAY_TEXT`).

    ``days``: the days the job reads, if known. Text that is one of them is its own day without the regular
    expression, which would otherwise run on every row, a text partition column's one value per folder included,
    and cost more than the rest of the scan's work on the row (bench/bench_evaluate.py). The days are checked once,
    on the driver (:func:`validate_ds`); only rows of other text (a time after the day, bad values, other days of
    an unpartitioned input) are matched one by one.
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
    # left() copies the text of every row, a cost on a text day column (a partition column, say); the length
    # test keeps 'YYYY-MM-DD' rows uncopied.
    text = f"CAST({quoted(name)} AS STRING)"
    # text that is no YYYY-MM-DD day ('', ' 2026-11-21', '21.11.2026') is null, a row of no day that is counted
    parsed = f"CASE WHEN {text} RLIKE '{ISO_DAY_TEXT}' THEN IF(octet_length({text}) > 10, left({text}, 10), {text}) END"
    known = sorted({validate_ds(d) for d in days or ()})
    if len(known) > MAX_KNOWN_DAYS:  # a range of centuries: the days a local input has folders of, if listed
        listed = set(input_day_folders(cfg))
        known = [d for d in known if d in listed]
    if not known or len(known) > MAX_KNOWN_DAYS:
        return parsed
    # one literal is an equality, more a hash-set look-up (Spark's InSet): either is cheap beside the regex
    return f"CASE WHEN {text} IN ({', '.join(repr(d) for d in known)}) THEN {text} ELSE {parsed} END"


def _in_days(day_sql: str, df: DataFrame, cfg: JobConfig, days: Sequence[str]) -> Column:
    """``day_sql`` (:func:`_day_sql`, or the column holding it) is one of ``days`` or null; days compared as
    dates when the column is one.

    One SQL expression, each run of consecutive days a ``BETWEEN`` (ISO day text orders as the days do), so a
    range of any length costs one short expression; on a partitioned input it is a partition filter of the scan.
    Days are checked by :func:`validate_ds` before they become SQL text.
    """
    from pyspark.sql import functions as F

    typed = dict(df.dtypes)[str(cfg.columns.ds)] in ("date", "timestamp", "timestamp_ntz")
    for d in days:
        validate_ds(d)
    if not days:
        return F.expr(f"{day_sql} IS NULL")
    import datetime as dt

    def lit(d: str) -> str:
        return f"DATE'{d}'" if typed else f"'{d}'"

    runs: list[list[str]] = []  # consecutive days: a 300-year range is one BETWEEN, not 109,573 literals
    for d in sorted(set(days)):
        if runs and dt.date.fromisoformat(d) - dt.date.fromisoformat(runs[-1][-1]) == dt.timedelta(days=1):
            runs[-1].append(d)
        else:
            runs.append([d])
    single = [d for r in runs if len(r) <= 2 for d in r]
    terms = [f"{day_sql} BETWEEN {lit(r[0])} AND {lit(r[-1])}" for r in runs if len(r) > 2]
    if single:
        terms.append(f"{day_sql} IN ({', '.join(lit(d) for d in single)})")
    return F.expr("(" + " OR ".join([*terms, f"{day_sql} IS NULL"]) + ")")


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
        spread = columns_in_some_files(cfg, [n for n in required_columns(cfg) if n not in df.columns])
        raise (InputError(f"{e} {spread}") if spread else e) from None
    check_column_types(dict(df.dtypes), cfg)
    if cfg.columns.ds is None:
        return df.withColumn(DS, F.lit(undated_day(cfg, days)))
    out = df.withColumn(DS, F.expr(_day_sql(df, cfg, days)))
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


NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
"""Spark's folder for the rows whose partition value is null: read with the days, so such rows are counted."""


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
        df = df.where(_in_days(_day_sql(df, cfg, days), df, cfg, days))
    values = F.hash(*[col(n) for n in source_columns(cfg) if n in df.columns])  # reads what the scan reads
    seen = df.groupBy(F.col("_metadata.file_path").alias("f")).agg(F.max(values).alias("h")).collect()
    got = {plain_file_path(r["f"]) for r in seen}
    return [f for f in listed if f not in got]
