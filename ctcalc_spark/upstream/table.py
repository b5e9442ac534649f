"""Your own table: read it, turn its declared columns into model inputs and evaluation-table keys.

One set of rules, used by training and by both scorers (pyarrow locally, Spark ``mapInArrow`` in workers),
so the two scorers see the same inputs and give the same logits:

* **categorical**: a value's string form (integers ``'3'``, integral floats ``'3'``, booleans
  ``'true'``/``'false'``, dates ISO, timestamps as epoch microseconds, strings as they are) is looked up in
  the column's vocabulary. Index 0 is null (its own category: null, NaN, or a string listed in
  ``null_values``); 1..V are the values seen at least ``min_count`` times in training, most frequent first;
  -1 is *unseen* (new at scoring, or rare in training): the model's out-of-vocabulary row, trained on the
  rare training values.
* **numeric**: read as float64 (strings parsed, surrounding spaces ignored). Null, NaN and ±inf are replaced
  by the training mean in the model's input space (the value whose standardised ``symlog`` is 0), so they
  add nothing to the linear part. Counted per column.
* **label**: 0/1 or true/false, or ``value == positive_label`` when that is declared. Rows with a null label
  are dropped and counted; any other value is an error.
* **ds**: a date, or a timestamp (its UTC day), or a string starting with 'YYYY-MM-DD'; without a ds column
  the rows are undated (one fixed set), unless one day is given for all. Rows with a null ds are dropped and
  counted. ``--ds`` (a table's ``days``) keeps the rows of some days (:func:`select_days`).
* **example_id**: integers are kept; other values become their integer form when they spell one, else a
  63-bit hash of their string form. Rows with a null id are dropped and counted. Without an example_id
  column the id is a 63-bit hash of every column of the row (identical rows share an id).
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.dataset as pads
import pyarrow.json as pajson

from ctcalc_spark.core.windows import day_runs
from ctcalc_spark.errors import ConfigError, InputError
from ctcalc_spark.filekind import (
    TABLE_FORMAT_MARKS,
    data_files,
    excel_sep_line,
    header_slips,
    name_kind,
    sep_line_fix,
    table_format,
)
from ctcalc_spark.upstream.config import EncodingConfig, TableColumns, TableSource, check_ds_value

log = logging.getLogger(__name__)

NULL_INDEX = 0
UNSEEN_INDEX = -1
_ID_MASK = np.uint64((1 << 63) - 1)
_INT_STRING = r"^-?[0-9]{1,18}$"
_DATE_PREFIX = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}"

ArrowColumn = pa.Array | pa.ChunkedArray
ArrowTable = pa.Table | pa.RecordBatch


# ---------------------------------------------------------------- reading


def _head(path: str, size: int = 4096) -> tuple[str, bytes]:
    """The table's (first) file and its first ``size`` bytes (b'' when there is none or it cannot be read)."""
    first = next(data_files(path), None) if os.path.isdir(path) else path  # the listing the table reads
    if first is None:
        return path, b""
    try:
        with open(first, "rb") as fh:
            return first, fh.read(size)
    except OSError:
        return first, b""


def _json_array_hint(path: str) -> str:
    """A sentence when the (first) JSON file is one array, '[{...}, ...]' (pandas' to_json(orient='records')), which
    the JSON Lines reader cannot read: pyarrow says 'Column() changed from object to array in row 0'."""
    first, head = _head(path)
    if not head.lstrip().startswith(b"["):
        return ""
    return (f". {first!r} is one JSON array ('[{{...}}, ...]'), and JSON tables are read as JSON Lines, one record "
            "per line: write it with pandas' to_json(orient='records', lines=True)")


def _sep_line_hint(path: str, delimiter: str) -> str:
    """A sentence when the (first) CSV file starts with Excel's ``sep=;`` line, which pyarrow reads as the
    header (then failing on the rows' other number of fields)."""
    line = _head(path, 64)[1].lstrip(b"\xef\xbb\xbf").split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    excel = excel_sep_line(line.split(delimiter)[:1], delimiter)
    return "" if excel is None else ". " + sep_line_fix(excel, delimiter,
                                                         f"--delimiter {excel!r} (csv_delimiter in the config)")


def read_table(source: TableSource, columns: Sequence[str] | None = None) -> pa.Table:
    """The table at ``source.path`` (a file or a folder) as Arrow, typed as Spark reads it.

    CSV: every column a string, an unquoted empty field null; without a header the columns are named
    ``_c0, _c1, ...``. JSON Lines: timestamp-like strings stay strings. Hive ``key=value`` folders become
    columns. ``columns`` limits what is read.
    """
    if source.path is None:
        raise InputError("Expected a table path, got none; set the table's 'path' in the config or pass it as a flag.")
    path = os.fspath(source.path)
    if not os.path.exists(path):
        raise InputError(f"Expected a {source.format} table at {path!r}; it does not exist.")
    kind = table_format(path) if os.path.isdir(path) else None
    if kind is not None:  # pyarrow would read every version's files, as Spark does
        raise InputError(f"Table {path!r} is a {kind} table (it holds {TABLE_FORMAT_MARKS[kind]}/): its folder keeps "
                         "the files of earlier versions, rows since deleted or replaced, and reading it as plain "
                         f"files would read those too. Export the table's current version (e.g. with Spark, "
                         f"spark.read.format('{kind}').load(...).write.parquet(...)) and read that.")
    fmt = _file_format(source)
    files = named_files(path, source.format)
    where: Any = path if files is None else files
    hive = {"partitioning": "hive"} if files is None else {"partitioning": "hive", "partition_base_dir": path}
    try:
        dataset = pads.dataset(where, format=fmt, **hive)
        if source.format == "csv":
            fmt = _file_format(source, string_columns=dataset.schema.names)
            dataset = pads.dataset(where, format=fmt, **hive)
        elif source.format == "json":  # timestamps stay the strings they are, as Spark reads JSON
            stamps = [f.name for f in dataset.schema if pa.types.is_timestamp(f.type)]
            if stamps:
                schema = pa.schema([pa.field(f.name, pa.string()) if f.name in stamps else f for f in dataset.schema])
                dataset = pads.dataset(where, format=_file_format(source, string_columns=stamps), schema=schema,
                                       **hive)
        table = dataset.to_table()
    except (pa.ArrowInvalid, OSError) as e:
        hint = _json_array_hint(path) if source.format == "json" else ""
        if source.format == "csv":
            hint = _sep_line_hint(path, source.csv_delimiter)
        if "invalid UTF8" in str(e) and source.format == "csv":
            hint = (". The file is not UTF-8: give its encoding, --encoding cp1252 for a CSV from Excel on Windows "
                    "(csv_encoding in the config), or write it as UTF-8.")
        raise InputError(f"Cannot read {path!r} as {source.format}: {str(e).splitlines()[0]}{hint}") from e
    if source.format == "csv" and not source.csv_header:
        table = table.rename_columns([f"_c{n[1:]}" if _is_autogenerated(n) else n for n in table.column_names])
    if columns is not None:
        check_columns(table.column_names, columns, what=f"table {path!r}", delimiter=source.csv_delimiter)
        table = table.select(list(dict.fromkeys(columns)))
    return table


TABLE_SUFFIXES = {"csv": (".csv", ".tsv"), "json": (".json", ".jsonl", ".ndjson"), "parquet": (".parquet", ".parq")}
"""Name endings of a format's files (compressed ones too: ``.csv.gz``)."""


def named_files(folder: str, fmt: str) -> list[str] | None:
    """The files of a folder that are named as ``fmt``'s (``.csv``, ``.csv.gz``, …) when it also holds files named
    otherwise (a README.txt beside the exports, which would be read as rows, or its first line as the header),
    the others named in a warning; None to read the folder whole (a file, or no file named otherwise)."""
    if not os.path.isdir(folder):
        return None
    named, other = [], []
    for f in data_files(folder):
        (named if name_kind(f) in TABLE_SUFFIXES[fmt] else other).append(f)
    if not named or not other:
        return None
    log.warning("%s: read the %d file(s) named as %s files; left out %d other(s): %s", folder, len(named), fmt,
                len(other), [os.path.relpath(f, folder) for f in other[:10]])
    return named


def _file_format(source: TableSource, string_columns: Sequence[str] = ()) -> pads.FileFormat:
    if source.format == "parquet":
        return pads.ParquetFileFormat()
    if source.format == "json":
        explicit = pa.schema([(c, pa.string()) for c in string_columns])
        return pads.JsonFileFormat(parse_options=pajson.ParseOptions(explicit_schema=explicit))
    # Only an unquoted empty field is null (Spark reads CSV the same way): "?" or "NA" stay strings
    # unless declared in columns.null_values.
    convert = pacsv.ConvertOptions(
        column_types={c: pa.string() for c in string_columns}, null_values=[""], strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )
    return pads.CsvFileFormat(
        parse_options=pacsv.ParseOptions(delimiter=source.csv_delimiter),
        read_options=pacsv.ReadOptions(autogenerate_column_names=not source.csv_header, encoding=source.csv_encoding),
        convert_options=convert,
    )


def _is_autogenerated(name: str) -> bool:
    return name.startswith("f") and name[1:].isdigit()


def check_columns(present: Sequence[str], required: Sequence[str], *, what: str, delimiter: str = ",") -> None:
    """Raise InputError naming the missing and the present columns, and the likely cause: a CSV delimited by
    another character (one column whose name holds it), Excel's ``sep=`` line read as the header (``delimiter``:
    the CSV reader's), or names that differ in letter case or spaces."""
    have = list(present)
    missing = [c for c in dict.fromkeys(required) if c not in have]
    if missing:
        sep, slips = header_slips(have, missing)
        cased = ", ".join(f"{m!r} is {h!r}" for m, h in slips.items())
        excel = excel_sep_line(have, delimiter)
        if excel is not None:
            fix = sep_line_fix(excel, delimiter, f"--delimiter {excel!r} (csv_delimiter in the config)")
        elif sep is not None:
            fix = (f"The one column's name holds {sep!r} between the names: the file is delimited by {sep!r}, not by "
                   f"commas: give --delimiter {sep!r} (csv_delimiter in the config).")
        elif cased:
            fix = (f"Names are matched exactly, letter case and spaces included, and {cased} in the table: declare "
                   "the names as the table writes them (a model file's names: rename the table's columns).")
        else:
            fix = "Fix the names under 'columns:' in the config (or the --categorical/--numeric/--label flags)."
        raise InputError(f"The {what} lacks declared column(s) {missing}; present columns: {have}. {fix}")


def arrow_table(data: pa.Table | pd.DataFrame) -> pa.Table:
    """An Arrow table from a pandas frame (index dropped) or an Arrow table as is."""
    if isinstance(data, pd.DataFrame):
        return pa.Table.from_pandas(data, preserve_index=False)
    return data


# ---------------------------------------------------------------- canonical values


def canonical_strings(arr: ArrowColumn, null_values: Sequence[str] = ()) -> ArrowColumn:
    """The string form of each value (see the module docstring); NaN and ``null_values`` become null."""
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.cast(t.value_type)
        t = arr.type
    if pa.types.is_floating(t):
        arr = pc.if_else(pc.is_nan(arr), pa.scalar(None, t), arr)
    elif pa.types.is_timestamp(t):
        arr = arr.cast(pa.timestamp("us", tz=t.tz)).cast(pa.int64())
    elif not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t) or pa.types.is_boolean(t)
              or pa.types.is_date(t) or pa.types.is_decimal(t) or pa.types.is_null(t)):
        raise InputError(
            f"Expected a categorical column of strings, integers, booleans, dates or timestamps, got {t}; "
            "cast it to string in the table."
        )
    out = arr.cast(pa.string())
    if null_values:
        listed = pc.is_in(out, value_set=pa.array(list(null_values), pa.string()))
        out = pc.if_else(listed, pa.scalar(None, pa.string()), out)
    return out


def numeric_values(arr: ArrowColumn, name: str, null_values: Sequence[str] = ()) -> np.ndarray:
    """float64 values; null (and a string in ``null_values``) becomes NaN, ±inf stays."""
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.cast(t.value_type)
        t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        arr = pc.utf8_trim_whitespace(arr.cast(pa.string()))
        nulls = pa.array(["", *null_values], pa.string())
        arr = pc.if_else(pc.is_in(arr, value_set=nulls), pa.scalar(None, pa.string()), arr)
        try:
            arr = arr.cast(pa.float64())
        except pa.ArrowInvalid as e:
            bad = _unparsable(arr)
            raise InputError(
                f"Expected numbers in numeric column {name!r}, got values like {bad}; declare them under "
                "'columns.null_values' (read as null, then imputed) or declare the column categorical."
            ) from e
    elif not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t)
              or pa.types.is_null(t)):
        raise InputError(f"Expected numeric column {name!r} of numbers or numeric strings, got type {t}.")
    values = arr.cast(pa.float64())
    return np.array(values.to_numpy(zero_copy_only=False), dtype=np.float64)  # a writable copy: fills go in place


def _unparsable(arr: ArrowColumn) -> list[str]:
    bad = []
    for v in pc.unique(arr).to_pylist():
        try:
            float(v)
        except (TypeError, ValueError):
            if v is not None:
                bad.append(v)
        if len(bad) == 5:
            break
    return bad


def _symlog(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.log1p(np.abs(x))


def _hash63(values: np.ndarray) -> np.ndarray:
    """63-bit non-negative int64 hashes of an object array (pandas' fixed-key hash: same in every process)."""
    return (pd.util.hash_array(values) & _ID_MASK).astype(np.int64)


# ---------------------------------------------------------------- keys of the evaluation table


@dataclass
class Keys:
    """The evaluation-table keys of the kept rows, and which input rows were kept."""

    keep: np.ndarray
    ds: pa.Array
    example_id: pa.Array
    label: pa.Array
    counts: Counter[str]


OTHER_DAYS = "left out: other days"
"""The count of rows outside the days asked for (``--ds``): left out on purpose, not dropped as bad rows."""


def evaluation_keys(table: ArrowTable, columns: TableColumns, *, ds_value: str | None = None,
                    days: Sequence[str] | None = None) -> Keys:
    """ds (string), example_id (int64) and label (int32) of every row with a label, a ds and an id.

    Without a ds column the rows get ``ds_value``, or a null ds when none is given (an undated set). ``days``
    keeps the rows of those days only (a ds column is then required).
    """
    n = table.num_rows
    counts: Counter[str] = Counter(rows_in=n)
    label = label_values(table.column(columns.label), columns)
    keep = ~np.isnan(label)
    counts["dropped: null label"] = int(n - keep.sum())
    if columns.ds is not None:
        ds = _ds_strings(table.column(columns.ds), columns.ds)
        ds_null = np.asarray(pc.is_null(ds).to_numpy(zero_copy_only=False), dtype=bool)
        counts["dropped: null ds"] = int((ds_null & keep).sum())
        keep &= ~ds_null
        if days is not None:
            other = ~np.asarray(pc.fill_null(pc.is_in(ds, value_set=pa.array(list(days), pa.string())), True)
                                .to_numpy(zero_copy_only=False), dtype=bool)
            counts[OTHER_DAYS] = int((other & keep).sum())
            keep &= ~other
    else:
        require_ds_column(None, days, "the models")
        value = None if ds_value is None else check_ds_value(ds_value, "ds")
        ds = pa.array(np.full(n, value, dtype=object), pa.string())
    if columns.example_id is not None:
        ids, id_null = _id_values(table.column(columns.example_id))
        counts["dropped: null example_id"] = int((id_null & keep).sum())
        keep &= ~id_null
    else:
        ids = _row_hash(table)
    mask = pa.array(keep)
    return Keys(
        keep=keep,
        ds=_as_array(ds).filter(mask),
        example_id=pa.array(ids[keep], pa.int64()),
        label=pa.array(label[keep].astype(np.int32), pa.int32()),
        counts=counts,
    )


def require_ds_column(ds_column: str | None, days: Sequence[str] | None, declared_by: str) -> None:
    """ConfigError when ``days`` are asked for (``--ds``) but no ds column is declared (``declared_by``: 'the
    models' when the column comes from model files, else the config or flags)."""
    if days is None or ds_column is not None:
        return
    asked = f"--ds {day_runs(list(days))} keeps the rows of those days, but"
    if declared_by == "the models":
        raise ConfigError(f"{asked} the models declare no day column (they were trained without --ds-column): a table "
                          "without days is scored whole; leave --ds out, or train with --ds-column to score some days.")
    raise ConfigError(f"{asked} no day column is declared: declare it with --ds-column (columns.ds), or leave --ds out.")


def select_days(table: pa.Table, ds_column: str | None, days: Sequence[str] | None, *,
                what: str = "table") -> tuple[pa.Table, int]:
    """(the rows of ``table`` whose day in ``ds_column`` is one of ``days``, the number of rows left out); the table
    as is when ``days`` is None. ConfigError without a ds column; InputError, naming the days the table holds, when
    no row is in those days."""
    if days is None:
        return table, 0
    require_ds_column(ds_column, days, "the config")
    assert ds_column is not None
    ds = _ds_strings(table.column(ds_column), ds_column)
    kept = table.filter(pc.fill_null(pc.is_in(ds, value_set=pa.array(list(days), pa.string())), False))
    if kept.num_rows == 0:
        raise no_rows_error(table, ds_column, days, what)
    return kept, table.num_rows - kept.num_rows


def no_rows_error(table: ArrowTable, ds_column: str, days: Sequence[str], what: str) -> InputError:
    """The error for a table with no row on ``days``: it names the days the table holds."""
    ds = _ds_strings(table.column(ds_column), ds_column)
    present = sorted(d for d in pc.unique(ds).to_pylist() if d is not None)
    held = f"days {day_runs(present)}" if present else "no dated row"
    return InputError(f"The {what} has no rows on --ds {day_runs(list(days))}: its column {ds_column!r} holds "
                      f"{held}. Give days in that span.")


NEAR_CONSTANT_SHARE = 0.999
"""A feature whose most common value (null counted as one) covers at least this share of the training rows is
named by :func:`near_constant_features`."""
NEAR_CONSTANT_STD = 1e-3
"""A numeric feature whose training ``symlog`` values spread less than this (their std) is named too."""


def near_constant_features(table: ArrowTable, columns: TableColumns) -> dict[str, str]:
    """``{column: what it holds}`` for each feature constant or nearly so over the training rows ``table``.

    Such a column teaches the model nothing; a numeric one is standardised by a std floored at 1e-6, so at scoring
    any other value becomes an input of up to ``1e6``: the logits that follow are extreme.
    """
    out: dict[str, str] = {}
    n = table.num_rows
    if n == 0:
        return out
    for c in columns.features:
        if c in columns.categorical:
            values = canonical_strings(table.column(c), columns.null_values)
        else:
            x = numeric_values(table.column(c), c, columns.null_values)
            x[~np.isfinite(x)] = np.nan
            values = pa.array(x, pa.float64(), from_pandas=True)
        counted = pc.value_counts(values)
        shares = np.asarray(counted.field("counts").to_numpy(zero_copy_only=False), dtype=np.float64) / n
        top = int(np.argmax(shares))
        value = counted.field("values")[top].as_py()
        shown = "null" if value is None else repr(value)
        if len(counted) == 1:
            out[c] = f"one value, {shown}"
        elif shares[top] >= NEAR_CONSTANT_SHARE:
            out[c] = f"{shown} in {100 * shares[top]:.2f} % of rows"
        elif c in columns.numeric:
            finite = x[np.isfinite(x)]
            spread = float(np.std(_symlog(finite))) if finite.size else 0.0
            if spread < NEAR_CONSTANT_STD:
                out[c] = f"values spread by {spread:.1e} (std of symlog)"
    return out


def _as_array(arr: ArrowColumn) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def label_values(arr: ArrowColumn, columns: TableColumns) -> np.ndarray:
    """The label as float64 0/1, NaN where null; any other value is an InputError."""
    t = arr.type
    if columns.positive_label is not None:
        s = canonical_strings(arr, columns.null_values)
        hit = pc.equal(s, pa.scalar(columns.positive_label, pa.string()))
        return np.asarray(hit.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        y = np.array(arr.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    else:
        s = canonical_strings(arr, columns.null_values)
        lowered = pc.utf8_lower(pc.utf8_trim_whitespace(s))
        one = pc.is_in(lowered, value_set=pa.array(["1", "true", "1.0"]))
        zero = pc.is_in(lowered, value_set=pa.array(["0", "false", "0.0"]))
        y = np.where(one.to_numpy(zero_copy_only=False), 1.0, np.where(zero.to_numpy(zero_copy_only=False), 0.0, 2.0))
        y[np.asarray(pc.is_null(s).to_numpy(zero_copy_only=False), dtype=bool)] = np.nan
        if (y == 2.0).any():
            bad = sorted({v for v, b in zip(s.to_pylist(), y == 2.0) if b})[:5]
            raise InputError(_label_message(columns.label, bad))
    bad_mask = ~(np.isnan(y) | (y == 0.0) | (y == 1.0))
    if bad_mask.any():
        raise InputError(_label_message(columns.label, sorted(set(y[bad_mask].tolist()))[:5]))
    return y


def _label_message(name: str, bad: list[Any]) -> str:
    return (f"Expected label column {name!r} with values 0/1 or true/false, got values like {bad}; "
            "declare 'columns.positive_label' (the value counted as 1) for any other labels.")


def _ds_strings(arr: ArrowColumn, name: str) -> ArrowColumn:
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.cast(t.value_type)
        t = arr.type
    if pa.types.is_timestamp(t):
        return arr.cast(pa.date32()).cast(pa.string())
    if pa.types.is_date(t):
        return arr.cast(pa.string())
    if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
        raise InputError(f"Expected ds column {name!r} of dates, timestamps or 'YYYY-MM-DD' strings, got type {t}.")
    s = arr.cast(pa.string())
    ok = pc.or_kleene(pc.is_null(s), pc.match_substring_regex(s, _DATE_PREFIX))
    if not pc.all(ok).as_py():
        bad = pc.unique(s.filter(pc.invert(ok))).to_pylist()[:5]
        raise InputError(f"Expected ds column {name!r} with values like '2026-11-01', got {bad}; fix the values or "
                         "declare another column as ds.")
    return pc.utf8_slice_codeunits(s, 0, 10)


def _id_values(arr: ArrowColumn) -> tuple[np.ndarray, np.ndarray]:
    """int64 ids and the null mask."""
    t = arr.type
    null = np.asarray(pc.is_null(arr).to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_integer(t):
        return np.asarray(pc.fill_null(arr, 0).cast(pa.int64()).to_numpy(zero_copy_only=False)), null
    s = canonical_strings(arr)
    null |= np.asarray(pc.is_null(s).to_numpy(zero_copy_only=False), dtype=bool)
    is_int = np.asarray(pc.fill_null(pc.match_substring_regex(s, _INT_STRING), False).to_numpy(zero_copy_only=False))
    ids = _hash63(np.asarray(s.to_numpy(zero_copy_only=False), dtype=object))
    if is_int.any():
        spelled = pc.if_else(pa.array(is_int), s, pa.scalar(None, pa.string())).cast(pa.int64())
        ids = np.where(is_int, np.asarray(pc.fill_null(spelled, 0).to_numpy(zero_copy_only=False)), ids)
    return ids, null


def _row_hash(table: ArrowTable) -> np.ndarray:
    frame = pd.DataFrame({
        name: np.asarray(canonical_strings(table.column(name)).to_numpy(zero_copy_only=False), dtype=object)
        for name in sorted(table.column_names)
    })
    return (pd.util.hash_pandas_object(frame, index=False).to_numpy() & _ID_MASK).astype(np.int64)


# ---------------------------------------------------------------- the encoder


@dataclass(frozen=True)
class Encoder:
    """What turns a table's declared columns into model inputs; saved inside every model file.

    ``vocab[c]`` lists the values of categorical column ``c`` (index ``i + 1``), or is None when the
    column already holds integer ids (the synthetic ``c0..`` tables). ``numeric[c]`` holds the training
    ``mean`` and ``std`` of ``symlog(x)`` and the ``fill`` for missing values (None: missing stays NaN).
    """

    columns: TableColumns
    vocab: Mapping[str, tuple[str, ...] | None]
    numeric: Mapping[str, Mapping[str, float | None]]
    encoding: EncodingConfig = EncodingConfig()

    @classmethod
    def raw_ids(cls, categorical: Sequence[str], numeric: Sequence[str]) -> Encoder:
        """The contract of the synthetic tables: integer ids in ``c*`` (null or out of range: unseen), numerics
        as they are (null: NaN logit), columns label/example_id/ds."""
        columns = TableColumns(categorical=tuple(categorical), numeric=tuple(numeric), label="label",
                               example_id="example_id", ds="ds")
        return cls(columns, {c: None for c in categorical}, {c: {"mean": None, "std": None, "fill": None}
                                                             for c in numeric})

    @property
    def cardinalities(self) -> dict[str, int]:
        """Model field sizes: null + the vocabulary (the model adds the unseen row)."""
        return {c: len(v) + 1 for c, v in self.vocab.items() if v is not None}

    def numeric_stats(self, fields: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Training mean and std of ``symlog(x)`` for ``fields``."""
        mean = np.array([float(self.numeric[f]["mean"] or 0.0) for f in fields], dtype=np.float64)
        std = np.array([float(self.numeric[f]["std"] or 1.0) for f in fields], dtype=np.float64)
        return mean, std

    def encode(
        self, table: ArrowTable, cat_fields: Sequence[str], num_fields: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, Counter[str]]:
        """int64 ids ``[n, len(cat_fields)]``, float32 numerics ``[n, len(num_fields)]`` and per-column counts."""
        n = table.num_rows
        counts: Counter[str] = Counter()
        cat = np.empty((n, len(cat_fields)), dtype=np.int64)
        for j, c in enumerate(cat_fields):
            cat[:, j] = self._encode_categorical(table.column(c), c, counts)
        num = np.empty((n, len(num_fields)), dtype=np.float32)
        for j, c in enumerate(num_fields):
            x = numeric_values(table.column(c), c, self.columns.null_values)
            missing, infinite = np.isnan(x), np.isinf(x)
            counts[f"{c}: null"] += int(missing.sum())
            counts[f"{c}: non-finite"] += int(infinite.sum())
            fill = self.numeric[c]["fill"]
            if fill is not None:
                x[missing | infinite] = float(fill)
            num[:, j] = x
        return cat, num, counts

    def _encode_categorical(self, arr: ArrowColumn, name: str, counts: Counter[str]) -> np.ndarray:
        vocab = self._vocab_arrays.get(name)
        if vocab is None:  # integer ids used as they are
            t = arr.type
            if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
                raise InputError(f"Expected integer ids in column {name!r} for this model, got type {t}.")
            if pa.types.is_floating(t):
                arr = pc.if_else(pc.is_nan(arr), pa.scalar(None, t), arr)
            counts[f"{name}: null"] += arr.null_count
            return np.asarray(pc.fill_null(arr.cast(pa.int64()), UNSEEN_INDEX).to_numpy(zero_copy_only=False))
        s = canonical_strings(arr, self.columns.null_values)
        idx = pc.index_in(s, value_set=vocab)
        null = np.asarray(pc.is_null(s).to_numpy(zero_copy_only=False), dtype=bool)
        ids = np.array(pc.fill_null(pc.add(idx, 1), UNSEEN_INDEX).to_numpy(zero_copy_only=False), dtype=np.int64)
        ids[null] = NULL_INDEX
        counts[f"{name}: null"] += int(null.sum())
        counts[f"{name}: unseen"] += int((ids == UNSEEN_INDEX).sum())
        return ids

    @functools.cached_property
    def _vocab_arrays(self) -> dict[str, pa.Array | None]:
        return {c: (None if v is None else pa.array(list(v), pa.string())) for c, v in self.vocab.items()}

    @functools.cached_property
    def fingerprint(self) -> str:
        """A digest of the encoder: equal encoders (one training call, many seeds) encode a table once."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """Plain values only (safe for ``torch.load(weights_only=True)``)."""
        return {
            "columns": self.columns.to_dict(),
            "vocab": {c: None if v is None else list(v) for c, v in self.vocab.items()},
            "numeric": {c: dict(s) for c, s in self.numeric.items()},
            "encoding": {"min_count": self.encoding.min_count, "max_vocab": self.encoding.max_vocab},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Encoder:
        """Inverse of ``to_dict``."""
        return cls(
            TableColumns.from_dict(d["columns"]),
            {c: None if v is None else tuple(v) for c, v in d["vocab"].items()},
            {c: dict(s) for c, s in d["numeric"].items()},
            EncodingConfig(**d.get("encoding", {})),
        )


def fit_encoder(table: ArrowTable, columns: TableColumns, encoding: EncodingConfig | None = None) -> Encoder:
    """Vocabularies and numeric statistics from the training rows (see the module docstring for the policies).

    Example: ``enc = fit_encoder(read_table(src), TableColumns(categorical=('city',), numeric=('age',)))``.
    """
    encoding = encoding or EncodingConfig()
    columns.require_features()
    check_columns(table.column_names, columns.features, what="training table")
    if table.num_rows == 0:
        raise InputError("Expected a non-empty training table, got 0 rows.")
    vocab: dict[str, tuple[str, ...] | None] = {}
    for c in columns.categorical:
        counted = pc.value_counts(canonical_strings(table.column(c), columns.null_values))
        frame = pd.DataFrame({"v": counted.field("values").to_pylist(), "n": counted.field("counts").to_numpy()})
        frame = frame[frame["v"].notna() & (frame["n"] >= encoding.min_count)]
        frame = frame.sort_values(["n", "v"], ascending=[False, True], kind="mergesort")
        if encoding.max_vocab is not None:
            frame = frame.head(encoding.max_vocab)
        vocab[c] = tuple(frame["v"].tolist())
    numeric: dict[str, dict[str, float | None]] = {}
    for c in columns.numeric:
        x = numeric_values(table.column(c), c, columns.null_values)
        finite = x[np.isfinite(x)]
        if finite.size == 0:
            raise InputError(f"Numeric column {c!r} has no finite value in the training table; drop it from "
                             "'columns.numeric' or fix the data.")
        t = _symlog(finite)
        mean, std = float(t.mean()), max(float(t.std()), 1e-6)
        # The fill is the raw value whose symlog is the mean: its standardised input is 0.
        numeric[c] = {"mean": mean, "std": std, "fill": float(np.sign(mean) * np.expm1(abs(mean)))}
    return Encoder(columns, vocab, numeric, encoding)


def load_table_for(source: TableSource | pa.Table | pd.DataFrame | str | Path) -> pa.Table:
    """An Arrow table from a source config, a path (Parquet), a pandas frame or an Arrow table."""
    if isinstance(source, TableSource):
        return read_table(source)
    if isinstance(source, (str, os.PathLike)):
        return read_table(TableSource(path=os.fspath(source)))
    return arrow_table(source)
