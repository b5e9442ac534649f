"""What a bad evaluation input gets said about it: checks before the scan (a table format read as files,
CSV quoting, temporary files, files of another kind) and Spark's read failures turned into one-line errors that
name the file and the fix. The reading itself is :mod:`ctcalc_spark.spark.inputs`.
"""
from __future__ import annotations

import itertools
import logging
import os
import re
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Sequence

from ctcalc_spark.config import JobConfig
from ctcalc_spark.core.findings import ERROR, HINT, NOTE, Finding, render
from ctcalc_spark.errors import ConfigError, CtcalcError, InputError
from ctcalc_spark.filekind import (
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
from ctcalc_spark.storage import (
    FileStore,
    absolute,
    csv_first_record,
    is_local,
    local_path,
)

log = logging.getLogger(__name__)


def csv_sep(options: Mapping[str, Any]) -> str:
    """The delimiter a CSV reader with ``options`` splits fields at (its ``sep`` or ``delimiter``, else ',')."""
    return next((str(v) for k, v in options.items() if str(k).lower() in ("sep", "delimiter")), ",")


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


def columns_in_some_files(cfg: JobConfig, missing: Sequence[str]) -> str:
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
    found = columns_in_some(have, lack, missing)
    return render(found) if found else ""


def columns_in_some(have: Sequence[str], lack: Sequence[str], missing: Sequence[str]) -> Finding | None:
    """The hint when some files of an input (``have``) hold one of the ``missing`` columns and others
    (``lack``) none; None unless both are some."""
    return Finding("columns_in_some_files", HINT, {"have": len(have), "lack": len(lack)}, {
        "files": len(have) + len(lack), "missing": list(missing), "first_have": have[0], "first_lack": lack[0]}) \
        if have and lack else None


SNIFFED_FILES = 20
"""Files of a local input folder whose first bytes :func:`foreign_file_error` reads at most."""


def foreign_file_error(cfg: JobConfig) -> InputError | None:
    """When a local text input (CSV, JSON) lacks columns: the error that says a file is of another type (a
    Feather file read as CSV, a CSV read as JSON, a gzip file not named .gz), from its first bytes; None when
    the files are the text ``input.format`` says, or the input is not local."""
    local = local_input_files(cfg, SNIFFED_FILES) if cfg.input.format in ("csv", "json") else None
    hint = next((h for h in (kind_hint(f, cfg.input.format) for f in local[1]) if h), "") if local else ""
    return InputError(render(Finding("foreign_files", ERROR, {}, {"table": str(cfg.input.path), "format":
                                                                  cfg.input.format, "hint": hint}))) if hint else None


def _said(found: Finding | None) -> str:
    """A hint's sentence to append to a message (a space and the finding rendered), or '' for None."""
    return " " + render(found) if found else ""


def no_data_files_hint(path: str) -> str:
    """For Spark's 'Unable to infer schema' on a local folder: that it is empty, or that its files lie in
    folders that are not ``key=value`` folders (:func:`unlisted_files_hint`); '' for any other path."""
    if not is_local(path) or not os.path.isdir(local_path(absolute(path))):
        return ""
    return unlisted_files_hint(path) if has_data_files(absolute(path)) else _said(Finding("empty_folder", HINT))


def unlisted_files(files: Sequence[str]) -> Finding | None:
    """The hint for ``files`` (paths below an input folder) that lie in folders that are not ``key=value``
    folders (``2026/01/05/a.csv``), the first three named; None when none does."""
    unlisted = [f for f in files if in_plain_folder(f)]
    more = [Finding("ellipsis", NOTE)] if len(unlisted) > 3 else []
    return Finding("files_in_plain_folders", HINT, {"files": len(unlisted)}, {"shown": unlisted[:3], "more": more}) \
        if unlisted else None


def unlisted_files_hint(path: str, options: Mapping[str, Any] | None = None) -> str:
    """A sentence when files below a local input folder lie in folders that are not ``key=value`` folders
    (:func:`unlisted_files`), which Spark does not read unless ``options`` set ``recursiveFileLookup``; else ''."""
    if recursive_lookup(options or {}) or not is_local(path) or not os.path.isdir(local_path(absolute(path))):
        return ""
    root = local_path(absolute(path)).rstrip("/")
    return _said(unlisted_files([os.path.relpath(f, root) for f in itertools.islice(data_files(root),
                                                                                     MAX_HEADER_FILES)]))


def check_output_outside(root: str, cfg: JobConfig) -> None:
    """ConfigError when the outputs are inside an input folder that is read whole: the read would take the
    metrics and summaries for evaluation rows. (An input of ``<ds>=<day>`` folders reads only those.)"""
    out = absolute(str(cfg.output.path)).rstrip("/")
    if out == root.rstrip("/") or out.startswith(root.rstrip("/") + "/"):
        raise ConfigError(render(Finding("output_inside_input", ERROR, {}, {"output": cfg.output.path,
                                                                            "input": cfg.input.path})))


TEMPORARY_SHOWN = 5
"""Files under a temporary name an error names at most."""


def check_table_format(root: str, cfg: JobConfig) -> None:
    """InputError when a local input folder is a Delta Lake, Apache Hudi or Iceberg table read as plain files
    (:func:`table_format`): Spark would read the rows of earlier versions too, or (Iceberg's data/ folder) say
    it finds no table, where recursiveFileLookup would read every version."""
    if cfg.input.format in TABLE_FORMAT_MARKS or not is_local(root) or not os.path.isdir(local_path(root)):
        return
    fmt = table_format(local_path(root))
    if fmt is not None:
        raise InputError(render(Finding(f"{fmt}_table_folder", ERROR, {}, {
            "table": str(cfg.input.path), "mark": TABLE_FORMAT_MARKS[fmt], "format": cfg.input.format,
            "table_format": fmt})))


CSV_SAMPLE_BYTES = 1 << 18
"""Bytes of a CSV file's start that :func:`check_csv_quoting` reads."""


CSV_SAMPLED_FILES = 3
"""Files of a local CSV input that :func:`check_csv_quoting` reads the start of."""


def _quoting_checks(options: Mapping[str, Any]) -> tuple[bool, bool]:
    """(whether to look for doubled quotes, for line breaks inside quoted fields): reader ``options`` without
    their own ``escape``, without ``multiLine: 'true'``."""
    lowered = {str(k).lower(): str(v).strip().lower() for k, v in options.items()}
    return "escape" not in lowered, lowered.get("multiline", "false") != "true"


def csv_quoting_problems(data: bytes, options: Mapping[str, Any], option_key: str = "input.options",
                         cut: bool = False) -> list[Finding]:
    """What Spark's CSV reader, with ``options``, would read into wrong values without a word, in a CSV file whose
    start is ``data`` (``cut``: more of the file follows, so its last record may be cut short), as findings (each
    with its first such value, its column and the ``option_key`` setting that reads it):

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

    def first(code: str, test: Callable[[str], bool]) -> list[Finding]:
        hit = next(((r, i) for r in rows for i, v in enumerate(r) if test(v)), None)
        return [] if hit is None else [Finding(code, NOTE, {}, {
            "value": hit[0][hit[1]], "option_key": option_key, "quote": quote, "separator": sep,
            "in_column": [Finding("in_column", NOTE, {}, {"column": names[hit[1]]})] if hit[1] < len(names) else []})]

    found = []
    inside = re.compile(f"(?<![{re.escape(sep)}\n\r]){re.escape(quote * 2)}(?![{re.escape(sep)}\n\r])")
    if check_escape and inside.search(text) and "\\" + quote not in text:
        found += first("csv_doubled_quotes" if sep == "," else "csv_doubled_quotes_other_separator",
                       lambda v: quote in v)
    if check_lines:
        found += first("csv_line_break", lambda v: "\n" in v or "\r" in v)
    return found


def check_csv_quoting(cfg: JobConfig) -> None:
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
            raise InputError(render(Finding("csv_quoting", ERROR, {}, {"file": where, "found": found})))


def check_temporary_files(paths: Sequence[str], cfg: JobConfig) -> None:
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
    more = [Finding("and_more", NOTE)] if len(found) >= TEMPORARY_SHOWN else []
    raise InputError(render(Finding("temporary_files", ERROR, {}, {"table": str(cfg.input.path), "files": shown,
                                                                   "more": more, "pattern": pattern})))


def stray_file(names: Sequence[str], name: str, table: str) -> Finding | None:
    """For a file ``name`` of the input folder ``table`` that Spark could not read as the table's: when it ends
    unlike most of the folder's files ``names`` (a README.txt among .csv files), the hint that it may not belong
    there and how to read only the table's files; None otherwise."""
    kinds: dict[str, list[str]] = {}
    for n in names:
        kinds.setdefault(name_kind(n), []).append(n)
    top = max(kinds, key=lambda k: len(kinds[k]), default="")
    if not top or name_kind(name) == top or len(kinds[top]) < 2:
        return None
    endings = [os.path.splitext(n[:len(n) - len(compression(n))])[1] for n in kinds[top]]
    spelled = max(set(endings), key=endings.count)  # as the files spell it: the filter tells case apart
    return Finding("stray_file", HINT, {"files": len(kinds[top])}, {"file": name, "ending": spelled, "table": table,
                                                                    "pattern": names_glob(kinds[top])})


def stray_file_hint(cfg: JobConfig, path: str) -> str:
    """:func:`stray_file` for a file of a local input folder, as a sentence to append; '' for other inputs."""
    local = local_input_files(cfg, MAX_HEADER_FILES)
    if local is None or not os.path.isdir(local[0]):
        return ""
    return _said(stray_file([os.path.basename(f) for f in local[1]], os.path.basename(path), str(cfg.input.path)))


def first_line(e: BaseException) -> str:
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


def missing_reader(fmt: str, spark_version: str) -> Finding | None:
    """For an input format whose reader is not on the class path of Spark ``spark_version`` (Avro, Delta Lake,
    Iceberg): the hint naming the package to add; None for any other format."""
    version = spark_version.split("+")[0]
    return Finding(f"{fmt}_reader_missing", HINT, {}, {"version": version, "minor": ".".join(version.split(".")[:2])}) \
        if fmt in ("avro", "delta", "iceberg") else None


def missing_source_hint(error: BaseException, fmt: str) -> str:
    """:func:`missing_reader` for a read that failed for want of its reader, as a sentence to append; '' for any
    other failure."""
    text = str(error)
    if not ("ClassNotFoundException" in text or "Failed to find data source" in text
            or "DATA_SOURCE_NOT_FOUND" in text):
        return ""
    import pyspark

    return _said(missing_reader(fmt, pyspark.__version__))


def csv_header_message(path: str, lines: Sequence[str], cfg: JobConfig | None = None) -> str:
    """:func:`csv_header_mismatch`, rendered; for a local input, with the headers its files have (first lines
    only, on this error path)."""
    told = stray_file_hint(cfg, path) + _csv_headers(cfg, path) if cfg is not None else ""
    return render(csv_header_mismatch(path, lines, told))


def csv_header_mismatch(path: str, lines: Sequence[str], told: str = "") -> Finding:
    """The error for a CSV file whose header differs from the table's columns, from the ``lines`` of Spark's
    header check; ``told``: what else is known of the files, as sentences."""
    m = next((m for m in map(_CSV_HEADER.search, lines) if m), None)
    count = next((m for m in map(_CSV_HEADER_COUNT.search, lines) if m), None)
    detail = [Finding("csv_header_count_detail", NOTE, {}, {"detail": count.group(1).strip().rstrip(".")[:200]})] \
        if count is not None and count.group(1).strip() else []
    what = Finding("csv_header_column", NOTE, {}, {"found": m.group(2), "expected": m.group(1)}) if m is not None \
        else Finding("csv_header_count", NOTE, {}, {"detail": detail})
    return Finding("csv_header_differs", ERROR, {}, {"path": path, "what": [what], "told": told})


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
    return None if m is None else ConfigError(render(result_too_large(m.group(1), m.group(2), cfg.columns.slices)))


def result_too_large(size: str, limit: str, slices: Sequence[str]) -> Finding:
    """The error for a scan's result of ``size`` (as Spark gives it) over maxResultSize ``limit``, with its
    likely cause: the ``slices`` columns, or (none) many groups or bins."""
    cause = Finding("many_slice_values", NOTE, {}, {"slices": list(slices)}) if slices else Finding("many_groups", NOTE)
    return Finding("result_too_large", ERROR, {}, {"size": size, "limit": limit, "cause": [cause]})


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
