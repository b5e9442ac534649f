"""The one scan: native column expressions and built-in aggregates that yield the summaries.

No Python UDF touches the rows. Every row gets an integer ``invalid`` code
(0 = valid; :data:`ctcalc_spark.core.findings.ROW_REASONS`) so that bad input is counted in the same scan; the
code is a group key, so invalid rows are summed in groups of their own, which only count them.
"""
from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Mapping, Sequence

from ctcalc_spark.config import JobConfig
from ctcalc_spark.errors import InputError
from ctcalc_spark.core.split import bias_threshold, salt_key
from ctcalc_spark.core.state import BINARY, REGRESSION, SummaryState
from ctcalc_spark.core.summary import HIST_LOGIT_LIMIT
from ctcalc_spark.spark.names import col, quoted

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from pyspark.sql import Column, DataFrame

log = logging.getLogger(__name__)

LABEL_NOT_ALLOWED = 4
"""The code of a label the task does not take (the evaluate job then says what the labels are)."""
PROBABILITY_OUTSIDE = 3
"""The code of a binary probability outside [0, 1] (the evaluate job then says what the column holds)."""
TEXT_NOT_NUMBER = 7
"""The code of text that is not a number (the evaluate job then shows one such value)."""
MALFORMED_RECORD = 8
"""The code of a record the reader could not parse (the evaluate job then names the files that hold them)."""
UNATTRIBUTED_CODES = (MALFORMED_RECORD, 9)
"""Codes of rows that no (model, run) owns: counted per day, outside the metrics rows."""
NULL_SLICE = "__null__"
"""slice_value of the rows whose slice column is null (a slice of its own, like any other value)."""
NULL_SLICE_TEXT = re.compile(r"^\\*__null__$")
"""Slice values written with one more backslash in front (:func:`string_key`): the text ``__null__`` itself, and
the values that escaping makes (``\\__null__``), so that no value merges with the null slice or another value."""


INTERNAL_COLUMNS = ("_ds", "_y", "_z", "_w", "_clipped", "_known_c", "_k", "invalid", "is_bias")
"""Column names the scan gives its own intermediates; input columns it groups by must be named otherwise."""


INTEGRAL_TYPES = ("tinyint", "smallint", "int", "bigint")

# The per-row expressions below are Spark SQL text over quoted column names: a select of SQL text is one call
# to Spark, where the Column API makes one per operation (a py4j round trip each on a classic session, a plan
# node each on Spark Connect), and Spark parses both into the same plan.


def not_finite(x: str) -> str:
    """SQL: ``x`` is NaN or infinite."""
    return f"(isnan({x}) OR abs({x}) = CAST('Infinity' AS DOUBLE))"


def bad_weight(w: str) -> str:
    """SQL: weight ``w`` is negative, NaN or infinite (invalid code 5)."""
    return f"({w} < 0.0D OR {not_finite(w)})"


def _long(value: int) -> str:
    """A BIGINT literal of Spark SQL (the most negative long has no positive counterpart to negate)."""
    return "(-9223372036854775807L - 1L)" if value == -(2**63) else f"({value}L)"


def _text(value: str) -> str:
    """A STRING literal of Spark SQL for any text: hex-encoded UTF-8, so neither quotes, backslashes nor the
    parser's escaping setting can change it (constant-folded to the plain literal)."""
    return f"CAST(unhex('{value.encode('utf-8').hex()}') AS STRING)"


def split_expr(cfg: JobConfig, schema_types: dict[str, str] | None = None) -> str:
    """SQL, true for val-bias rows: the configured split column, else the low 32 bits of the
    split hash below fraction·2³² (see :mod:`ctcalc_spark.core.split`).

    Integer ids are hashed as longs and others as strings, as :func:`ctcalc_spark.core.split.bias_mask` does;
    ``schema_types`` maps column names to Spark simple type names (``df.dtypes``).
    """
    c = cfg.columns
    if c.split is not None:
        return f"(lower(CAST({quoted(c.split)} AS STRING)) = 'bias')"
    kind = (schema_types or {}).get(c.example_id, "string")
    ident = quoted(str(c.example_id))
    if kind in INTEGRAL_TYPES:
        hashed = f"xxhash64(CAST({ident} AS BIGINT) ^ {_long(salt_key(cfg.split.salt))})"
    else:
        hashed = f"xxhash64({_text(cfg.split.salt)}, CAST({ident} AS STRING))"
    return f"(({hashed} & 4294967295L) < {_long(bias_threshold(cfg.split.bias_fraction))})"


def group_columns(cfg: JobConfig) -> list[str]:
    """Keys of a summary group below the day: model, run and every slice column."""
    return [cfg.columns.model, cfg.columns.run, *cfg.columns.slices]


def corrupt_record_column(df: DataFrame, cfg: JobConfig) -> str | None:
    """The reader's column of unparsable records (JSON/CSV in PERMISSIVE mode), when ``df`` has one."""
    name = dict(cfg.input.options).get("columnNameOfCorruptRecord", "_corrupt_record")
    return name if name in df.columns else None


def number_column(df: DataFrame, name: str) -> tuple[str, str | None]:
    """(SQL of column ``name`` as a double, SQL of 'holds text that is not a number' or None for non-text columns).

    A text column goes through ``try_cast``: with ANSI mode on (Spark 4's default) a plain cast of 'abc' would
    fail the whole query instead of marking the row.
    """
    raw = quoted(name)
    if dict(df.dtypes).get(name) != "string":
        return f"CAST({raw} AS DOUBLE)", None
    value = f"try_cast({raw} AS DOUBLE)"
    return value, f"({raw} IS NOT NULL AND {value} IS NULL)"


def class_name_label(df: DataFrame, cfg: JobConfig) -> str:
    """SQL of a label given by ``columns.class_names``: its class index as a double (binary: 0 for the first
    name, 1 for the second), -1 for a label that is not one of the names (an invalid label), null for a null
    label.

    A text (or boolean) column is matched as text; a number column by value, which needs names that are numbers.
    """
    c = cfg.columns
    kind = dict(df.dtypes).get(c.label, "string")
    raw = quoted(c.label)
    if kind in ("string", "boolean"):
        names, value = ", ".join(_text(n) for n in c.class_names), f"CAST({raw} AS STRING)"
    else:
        numbers = []
        for n in c.class_names:
            try:
                numbers.append(float(n))
            except ValueError:
                raise InputError(f"The label column {c.label!r} holds numbers (Spark type {kind}) and "
                                 f"'columns.class_names' lists {n!r}, which is not one: list the labels as the "
                                 f"column holds them, in class order, or leave class_names out for labels that "
                                 f"are class indices 0..K-1.") from None
        names, value = ", ".join(sql_double(x) for x in numbers), f"CAST({raw} AS DOUBLE)"
    return f"(CAST(array_position(array({names}), {value}) AS DOUBLE) - 1.0D)"


def label_column(df: DataFrame, cfg: JobConfig) -> tuple[str, str | None]:
    """:func:`number_column` of the label; a binary task's text labels may also be booleans written as text
    ('true'/'false', 't'/'f', 'yes'/'no', any case: Spark's boolean cast), as a CSV or JSON read without
    types gives them. With ``columns.class_names`` the label's class index (:func:`class_name_label`)."""
    if cfg.columns.class_names:
        return class_name_label(df, cfg), None
    y, text = number_column(df, cfg.columns.label)
    if text is None or cfg.task != "binary":
        return y, text
    raw = quoted(cfg.columns.label)
    value = f"coalesce({y}, CAST(try_cast({raw} AS BOOLEAN) AS DOUBLE))"
    return value, f"({raw} IS NOT NULL AND {value} IS NULL)"


def prepared_rows(df: DataFrame, cfg: JobConfig, extra_keys: Sequence[str] = ()) -> DataFrame:
    """Project the rows to keys, y, z (binary: logit; regression: prediction), w, is_bias, clipped, invalid.

    ``extra_keys``: further grouping columns of ``df`` kept as strings (e.g. an event-time window).
    """
    c = cfg.columns
    types = dict(df.dtypes)
    y, y_text = label_column(df, cfg)
    w, w_text = number_column(df, c.weight) if c.weight else ("1.0D", None)
    score, s_text = number_column(df, c.logit if cfg.task == "binary" and c.logit is not None else c.prediction)
    clipped = "0"
    prob_out = None
    if cfg.task == "binary" and c.logit is None:
        eps, top = sql_double(cfg.clip_eps), sql_double(1.0 - cfg.clip_eps)
        pc = f"least(greatest({score}, {eps}), {top})"
        z = f"(ln({pc}) - log1p(-{pc}))"
        clipped = f"CAST(({score} < {eps} OR {score} > {top}) AS INT)"
        prob_out = f"({score} < 0.0D OR {score} > 1.0D)"
    else:
        z = score
    label_bad = f"NOT ({y} IN (0.0D, 1.0D))" if cfg.task == "binary" else not_finite(y)
    split_key = quoted(c.split) if c.split else quoted(str(c.example_id))
    checks = first_checks(df, cfg, [y_text, s_text, w_text])
    checks += [*null_checks(y, score, w if c.weight else None, split_key), (not_finite(score), 2)]
    if prob_out is not None:
        checks.append((prob_out, 3))
    checks += [(label_bad, LABEL_NOT_ALLOWED)]
    if c.weight:
        checks.append((bad_weight(w), 5))
    # Keys keep their native types here (grouping on an int is cheaper than on a string built per row);
    # summary_aggregation casts them to strings on the small aggregated result.
    return df.selectExpr(
        *[quoted(k) for k in [*extra_keys, *group_columns(cfg)]],
        f"{y} AS _y",
        f"{z} AS _z",
        f"{w} AS _w",
        # never null: a null split value or id is an invalid row, but its group key must still decode
        f"coalesce({split_expr(cfg, types)}, false) AS is_bias",
        f"{clipped} AS _clipped",
        f"{invalid_code(checks, cfg)} AS invalid",
    )


def first_checks(df: DataFrame, cfg: JobConfig, text: Sequence[str | None]) -> list[tuple[str, int]]:
    """The checks every task makes first (SQL conditions): a malformed record (8), a null (or NaN) model or run (9),
    text that is not a number (7) in the columns whose ``text`` condition (from :func:`number_column`) is given."""
    checks: list[tuple[str, int]] = []
    corrupt = corrupt_record_column(df, cfg)
    if corrupt is not None:
        checks.append((f"{quoted(corrupt)} IS NOT NULL", 8))
    types = dict(df.dtypes)
    # a NaN in a float model or run column is a missing value as a null is (not a run of its own, 'NaN')
    keys = [f"{quoted(k)} IS NULL" + (f" OR isnan({quoted(k)})" if types.get(k) in ("float", "double") else "")
            for k in (cfg.columns.model, cfg.columns.run)]
    checks.append((f"({' OR '.join(keys)})", 9))
    flags = [t for t in text if t is not None]
    if flags:
        checks.append(("(" + " OR ".join(flags) + ")", 7))
    return checks


def null_checks(y: str, score: str, w: str | None, split_key: str) -> list[tuple[str, int]]:
    """The checks for a null label (11), score (12), weight (13; ``w`` None: no weight column) and split value
    or example id (1), SQL conditions in that order: the error and the counts name the column that was null
    (a Parquet file without the weight column gives null weights, not "a null in some column")."""
    checks = [(f"{y} IS NULL", 11), (f"{score} IS NULL", 12)]
    if w is not None:
        checks.append((f"{w} IS NULL", 13))
    return [*checks, (f"{split_key} IS NULL", 1)]


def invalid_code(checks: Sequence[tuple[str, int]], cfg: JobConfig) -> str:
    """SQL: the code of the first check that holds (then a split value other than bias/remain: 6), else 0.

    A check that is null (e.g. a comparison with a null) does not hold, as in ``CASE WHEN``."""
    if cfg.columns.split is not None:
        checks = [*checks, (f"NOT (lower(CAST({quoted(cfg.columns.split)} AS STRING)) IN ('bias', 'remain'))", 6)]
    return "CASE " + " ".join(f"WHEN {cond} THEN {code}" for cond, code in checks) + " ELSE 0 END"


KNOWN_BIAS_COLUMN = "_known_c"
"""Column of the optional known-bias frame holding c, joined on (model, run)."""
EXACT_COLUMNS = ("cal_weight", "cal_loss")
"""Extra sums when a known bias is given: Σw and Σw·loss(y, shifted prediction) over rows that have a c."""


def _softplus(x: Column) -> Column:
    from pyspark.sql import functions as F

    return F.greatest(x, F.lit(0.0)) + F.log1p(F.exp(-F.abs(x)))


def summary_aggregation(
    df: DataFrame, cfg: JobConfig, extra_keys: Sequence[str] = (), known_bias: DataFrame | None = None,
    single: Mapping[str, str] | None = None,
) -> DataFrame:
    """Per (extra keys, model, run, slices, invalid, is_bias[, bin]) additive sums over the rows; one scan.

    ``single`` (optional): extra keys that hold one known value or null in every row (the day of a one-day job),
    as {key: value}. A binary scan then groups by one bit per such key (null or not) instead of the value, which
    it puts back, as text, after aggregating: the same output, without hashing and comparing the value per row.

    ``known_bias`` (optional, small): columns model, run (config names, strings) and
    ``_known_c``; broadcast-joined so that the same aggregation also yields the exact
    calibrated sums ``cal_loss`` = Σw·logloss(y, σ(z - c)) (binary) or Σw·(y - p - c)²
    (regression) and ``cal_weight`` = Σw over valid rows with a c. Without it the
    output is unchanged.
    """
    from pyspark.sql import functions as F

    rows = prepared_rows(df, cfg, extra_keys)
    ok = F.col("invalid") == 0
    y = F.when(ok, F.col("_y"))
    z = F.when(ok, F.col("_z"))
    w = F.when(ok, F.col("_w"))
    keys = [*extra_keys, *group_columns(cfg), "invalid", "is_bias"]
    exact: list[Column] = []
    if known_bias is not None:
        on = [cfg.columns.model, cfg.columns.run]
        types = dict(rows.dtypes)
        known = known_bias.select(*[col(k).cast(types[k]).alias(k) for k in on], KNOWN_BIAS_COLUMN)
        rows = rows.join(F.broadcast(known), on=on, how="left")
        c = F.col(KNOWN_BIAS_COLUMN)
        wc = F.when(ok & c.isNotNull(), F.col("_w"))
        if cfg.task == "regression":
            rc = y - z - c
            per_row = rc * rc
        else:
            u = z - c
            per_row = _softplus(u) - y * u
        exact = [F.sum(wc).alias(EXACT_COLUMNS[0]), F.sum(wc * per_row).alias(EXACT_COLUMNS[1])]
    if cfg.task == "regression":
        r = y - z
        per_row = {"count": F.lit(1), "weight": w, "wr": w * r, "wr2": w * r * r, "wp": w * z, "wy": w * y}
        sums = state_sums(REGRESSION, per_row)
        return _string_keys(rows.groupBy(*[col(k) for k in keys]).agg(*sums, *exact), keys, cfg.columns.slices)
    # Per-row terms written straight into the aggregate: Spark's aggregate code generation evaluates each
    # common subexpression once per row (explicit projection stages measured no faster). The label is part of
    # the group key: per (bin, label) the margin t = (1 - 2y)·z gives the loss softplus(t) and the missed mass
    # σ(t) (see core/summary.py), and no y·w products are summed.
    # They are SQL text over the scan's own column names (_y, _z, _w, is_bias, invalid, _k), as are the row
    # checks of prepared_rows: Spark parses them into the same optimised plan the Column API builds, and
    # building the query takes far fewer py4j calls (every Column operation is a call of its own).
    outer = [k for k in keys if k not in ("invalid", "is_bias")]
    single = {k: v for k, v in (single or {}).items() if k in extra_keys}
    unweighted = cfg.columns.weight is None
    # The terms read the raw columns with nulls made 0: an invalid row's group differs from every valid group by
    # its code, so whatever it adds (0 for a null, NaN, inf) lands in sums that are never used, and no
    # expression is nullable, so Spark generates no null tracking in them. The key must not overflow: the clamp
    # keeps inf and NaN inside a long.
    zv, yv, wv = "coalesce(_z, 0.0D)", "coalesce(_y, 0.0D)", "coalesce(_w, 0.0D)"
    h, limit = sql_double(cfg.histogram.bin_width), sql_double(HIST_LOGIT_LIMIT)
    zh = f"least(greatest({zv}, -{limit}), {limit})"
    b = f"floor({zh} / {h})"
    d = f"({zh} - ({b} + 0.5D) * {h})"
    e = f"exp(-abs({zv}))"
    positive = f"({yv} = 1.0D)"
    margin = f"(CASE WHEN {positive} THEN -{zv} ELSE {zv} END)"
    softplus = f"(greatest({margin}, 0.0D) + log1p({e}))"
    missed = f"(CASE WHEN {margin} >= 0 THEN 1.0D ELSE {e} END / (1.0D + {e}))"
    terms = {  # per-row SQL terms of the BINARY statistics (count: rows, counted by count(1))
        "count": "1",
        "m1": d if unweighted else f"{wv} * {d}",
        "m2": f"{d} * {d}" if unweighted else f"{wv} * {d} * {d}",
        "wmiss": missed if unweighted else f"{wv} * {missed}",
        "wloss": softplus if unweighted else f"{wv} * {softplus}",
    }
    # Sums that are known without summing are filled in after the aggregate: with no weight column the
    # weight of a (valid) group is its row count; with logits as input no row is ever clipped.
    if not unweighted:
        terms["weight"] = wv
    if cfg.columns.logit is None:
        terms["clipped"] = "coalesce(_clipped, 0)"
    filled = {"weight": "CAST(`count` AS DOUBLE)", "clipped": "CAST(0 AS BIGINT)"}
    assert set(terms) | set(filled) == set(BINARY.names)
    # invalid (4 bits), is_bias (1 bit), the label (1 bit) and the bin are packed into one long group key:
    # hashing one primitive is cheaper than four (measured), and the small aggregated result is decoded after.
    # |bin| <= 1e9 / bin_width (>= 1e-4) keeps the key far inside a long.
    # Bit operations, not arithmetic: ANSI mode checks every long + and * for overflow, and shiftleft of the
    # (possibly negative) bin equals bin·64 with the 6 low bits free for the flags.
    flags = [f"CASE WHEN {positive} THEN 32L ELSE 0L END", "CASE WHEN is_bias THEN 16L ELSE 0L END",
             "CAST(invalid AS BIGINT)"]
    null_bit = {k: 6 + i for i, k in enumerate(single)}  # bits 6, 7, ...: the key is null
    flags += [f"CASE WHEN {quoted(k)} IS NULL THEN {1 << bit}L ELSE 0L END" for k, bit in null_bit.items()]
    low = 6 + len(single)  # the bin's lowest bit
    packed = f"shiftleft({b}, {low}) | " + " | ".join(flags)
    # Key order matters to Spark's first-level aggregate map. It mixes the keys' hashes in order, weakly, and
    # gives up after two probes (such a key's rows then go through the slower second map): with the constant
    # day first, a share of the keys would fall out of it. And it compares a probed entry's keys in order: with
    # the model (a string) first, every probe of an entry of the same model and run but another bin would
    # compare the strings before the packed key tells them apart. So the packed key comes first. A one-day job
    # does not group by the day at all (``single``). What these choices measure is in docs/benchmarks.md ("What
    # the figures say").
    sums = state_sums(BINARY, {name: F.expr(term) for name, term in terms.items()})
    grouped = [k for k in [*group_columns(cfg), *extra_keys] if k not in single]
    agg = rows.groupBy(F.expr(packed).alias("_k"), *[col(k) for k in grouped]).agg(*sums, *exact)
    # Decoded, and the keys made strings (the summaries-table contract), in one projection.
    invalid = "CAST(_k & 15 AS INT)"
    decoded = [
        f"{invalid} AS invalid",
        "(shiftright(_k, 4) & 1) = 1 AS is_bias",
        f"CASE WHEN {invalid} = 0 THEN shiftright(_k, 5) & 1 END AS label",
        f"CASE WHEN {invalid} = 0 THEN shiftright(_k, {low}) END AS bin",
        *[f"`{n}`" for n in BINARY.names if n in terms], *[f"`{n}`" for n in (EXACT_COLUMNS if exact else ())],
        *[f"{expr} AS `{name}`" for name, expr in filled.items() if name not in terms],
    ]
    keys_out = [F.expr(f"CASE WHEN (shiftright(_k, {null_bit[k]}) & 1) = 0 THEN {_text(single[k])} END").alias(k)
                if k in single else string_key(k, cfg.columns.slices) for k in outer]
    return agg.select(*keys_out, *[F.expr(x) for x in decoded])


def state_sums(state: SummaryState, terms: Mapping[str, Column]) -> list[Column]:
    """Spark aggregates of the statistics of ``state`` that ``terms`` (name -> per-row column) holds, in declared
    order, each named after its statistic."""
    from pyspark.sql import functions as F

    return [getattr(F, s.spark)(terms[s.name]).alias(s.name) for s in state.stats if s.name in terms]


def sql_double(x: float) -> str:
    """A double literal of Spark SQL for ``x``, exact (Python's repr round-trips)."""
    return f"{float(x)!r}D"


def string_key(c: str, slices: Sequence[str]) -> Column:
    """Key column ``c`` as a string (the summaries-table contract), cast after aggregating; a null slice
    value becomes :data:`NULL_SLICE`, and a slice value that is that text (after any backslashes) gets one more
    backslash in front (``'__null__'`` -> ``'\\__null__'``), so that it stays a slice of its own."""
    from pyspark.sql import functions as F

    text = col(c).cast("string")
    if c not in slices:
        return text.alias(c)
    literal = text.rlike(NULL_SLICE_TEXT.pattern)
    return F.when(text.isNull(), F.lit(NULL_SLICE)).when(literal, F.concat(F.lit("\\"), text)).otherwise(text).alias(c)


def _string_keys(agg: DataFrame, keys: Sequence[str], slices: Sequence[str]) -> DataFrame:
    """Model, run, slice and extra keys of ``agg`` as strings (:func:`string_key`)."""
    skip = {"invalid", "is_bias"}
    return agg.select(*[string_key(c, slices) if c in keys and c not in skip else col(c) for c in agg.columns])


def decode_aggregate(agg: pd.DataFrame, cfg: JobConfig, extra: Sequence[str] = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summaries-table rows, invalid-row tally) of a collected :func:`summary_aggregation` output.

    Summaries: valid groups only; columns ``extra``, model, run, slices, then ``SUMMARY_TYPES[task]``
    (``split`` as 'bias'/'remain', sums never null, ``bin_width`` for binary). Tally: rows per
    (``extra``, model, run, slices, invalid code) with a non-zero code, column ``count``.
    """
    import numpy as np
    import pandas as pd

    from ctcalc_spark.core.finalize import SUMMARY_TYPES

    keys = [*extra, *group_columns(cfg)]
    tally = invalid_tally(agg, keys)
    ok = agg[agg["invalid"] == 0]
    _check_sums(ok, keys, cfg)
    out = {k: ok[k].to_numpy() for k in keys}
    out["split"] = np.where(ok["is_bias"].astype(bool).to_numpy(), "bias", "remain")
    for name, kind in SUMMARY_TYPES[cfg.task].items():
        if name == "split":
            continue
        if name == "bin_width":
            out[name] = np.full(len(ok), float(cfg.histogram.bin_width))
        else:
            out[name] = ok[name].fillna(0).to_numpy().astype(np.int64 if kind == "long" else np.float64)
    return pd.DataFrame(out), tally


def invalid_tally(groups: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Rows per (``keys``, invalid code) of the aggregate ``groups`` whose code is not 0: columns ``keys``,
    ``invalid`` and ``count``."""
    bad = groups[groups["invalid"] != 0]
    return bad.groupby([*keys, "invalid"], dropna=False)["count"].sum().reset_index()


MAX_WEIGHT_SUM = 1e150
"""Largest total weight of a (model, run) group: the finalisers multiply two weight sums (AUC), and 1e150² is
still a finite double. Metrics do not change when every weight is scaled by one constant."""
MIN_WEIGHT_SUM = 1e-150
"""Smallest total weight of a group with any weight (a summary group of a day, model, run and slice): the
product of two such sums is still a normal double, where weights of 1e-300 made the AUC 0/0."""


def _check_sums(ok: pd.DataFrame, keys: Sequence[str], cfg: JobConfig) -> None:
    """InputError when a group's sums overflowed (inf, or NaN from inf - inf) or its weights are too large, or
    too small to multiply."""
    import numpy as np

    from ctcalc_spark.errors import InputError

    sums = [n for n in ok.columns
            if n not in (*keys, "invalid", "is_bias", "label", "bin", "count", "clipped")]
    values = ok[sums].to_numpy(dtype=np.float64, na_value=0.0)
    finite = np.isfinite(values).all(axis=1)
    w = ok["weight"].to_numpy(dtype=np.float64, na_value=0.0)
    # A group's weight is a sum of rows' weights, none negative (a negative weight makes its row invalid): when all
    # of them together stay within the limit, no group exceeds it, and the groups need not be summed; when no
    # summary row's weight is below the floor, no group's is.
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(w.sum())
        if finite.all() and total <= MAX_WEIGHT_SUM and not ((w > 0) & (w < MIN_WEIGHT_SUM)).any():
            return
        group = [k for k in keys if k not in cfg.columns.slices]
        # numpy's sums, not pandas': a grouped pandas sum compensates its rounding, and 1e308 + 1e308 gives NaN
        # there (then NaN > limit is false)
        weight = _group_sums(ok, group, w)
        smallest = _group_sums(ok, list(keys), w)
        large = ~finite | ~(weight <= MAX_WEIGHT_SUM)
        small = (smallest > 0) & (smallest < MIN_WEIGHT_SUM)
    if not (large.any() or small.any()):
        return
    mask, names, sums_of = (large, group, weight) if large.any() else (small, list(keys), smallest)
    first = ok[mask].iloc[0]
    where = ", ".join(f"{k}={first[k]!r}" for k in names)
    got = float(sums_of[mask][0])
    column = cfg.columns.weight or "the weight (1 per row)"
    if large.any():
        raise InputError(
            f"The weights in {column!r} or the scores are too large to sum: {int(large.sum())} summary groups "
            f"overflow (e.g. {where}: total weight {got:.3g}, at most {MAX_WEIGHT_SUM:g} is allowed; or a sum of "
            "weight x loss is infinite). Metrics do not change when every weight is divided by one constant: "
            "rescale the weights (e.g. divide by their maximum) and check the scores."
        )
    raise InputError(
        f"The weights in {column!r} are too small to multiply: e.g. {where} has a total weight of {got:.3g}, and at "
        f"least {MIN_WEIGHT_SUM:g} is needed (the AUC multiplies two weight sums, which would round to 0). Metrics do "
        "not change when every weight is multiplied by one constant: rescale the weights (e.g. divide by their "
        "maximum)."
    )


def _group_sums(ok: pd.DataFrame, keys: list[str], w: np.ndarray) -> np.ndarray:
    """Per row of ``ok``: the sum of ``w`` over its group of ``keys`` (plain float sums, inf where they overflow)."""
    import numpy as np

    codes = ok.groupby(keys, dropna=False, sort=False).ngroup().to_numpy()
    sums = np.zeros(int(codes.max()) + 1 if len(codes) else 0)
    np.add.at(sums, codes, w)
    return sums[codes]
