"""Job configuration: YAML files in conf/ loaded into frozen dataclasses, validated once.

Unknown keys are errors (a typo must not silently fall back to a default).
"""
from __future__ import annotations

import contextvars
import dataclasses
import datetime as dt
import difflib
import functools
import os
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, Mapping, Sequence, TypeVar

import yaml
from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, StrictBool, ValidationError, WrapValidator
from pydantic_core import PydanticCustomError

from ctcalc_spark.core.days import parse_day
from ctcalc_spark.errors import ConfigError

STREAM_FORMATS = ("parquet", "json", "csv")  # the formats of files landing in stream.path

# ---- the field types: pydantic checks a YAML value against them (build_config) ----------------------------------
# Every section refuses unknown keys; text takes numbers (a column named 2024); numbers take no inf or nan.
PYDANTIC = ConfigDict(extra="forbid", coerce_numbers_to_str=True, allow_inf_nan=False)
_T = TypeVar("_T")
Section = Annotated[_T, BeforeValidator(lambda v: {} if v is None else v)]
"""A nested section or a mapping: null (every line under it commented out) is its defaults."""
Names = Annotated[tuple[str, ...], BeforeValidator(lambda v: () if v is None else v)]
Settings = Annotated[dict[str, str], BeforeValidator(
    lambda v: {} if v is None else {k: str(x).lower() if isinstance(x, bool) else x for k, x in v.items()}
    if isinstance(v, Mapping) else v), Field(description="Write a mapping of settings, each one value: text, a "
                                                         "number or true/false.")]
"""Settings passed on as text (Spark, reader, storage options): numbers and true/false too."""
LocalPath = Annotated[str, AfterValidator(os.path.expanduser)]
"""A local path or URI: a leading ``~`` is the home folder, as in a shell."""


def _number(value: Any) -> Any:
    """A YAML number: true/false is not one; '1e6' is (YAML 1.1 reads an exponent without a dot as text)."""
    if isinstance(value, bool):
        raise PydanticCustomError("number_type", "Input should be a number, not true or false")
    return float(value) if isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d+[eE][-+]?\d+\s*", value) else value


Whole = Annotated[int, BeforeValidator(_number)]
Number = Annotated[float, BeforeValidator(_number)]
Positive = Annotated[Whole, Field(ge=1)]
Fraction = Annotated[Number, Field(gt=0, lt=1)]
MIN_BIN_WIDTH = 1e-4
"""Finest histogram bin: one group per bin, and the scan packs the bin index into a 64-bit key."""
BinWidth = Annotated[Number, Field(ge=MIN_BIN_WIDTH, le=0.5, description=(
    "Finer bins cost memory; docs/evaluate.md gives the histogram's error bound for a bin width."))]
"""``histogram.bin_width``: the logit histogram's bin width."""
MaxAbsLogit = Annotated[Number, Field(gt=0, le=1e9, description="50 flags logits beyond ±50 (probabilities within "
                                                                 "2e-22 of 0 or 1).")]
"""``sanity.max_abs_logit``: logits beyond it are counted."""


_BUILDING: contextvars.ContextVar[str | None] = contextvars.ContextVar("_BUILDING", default=None)
"""What pydantic is validating now: 'mapping' (:func:`build_config`), 'instance' (a config built in Python,
:func:`section`), None (nothing)."""


def _internal(value: Any) -> Any:
    """A field the config cannot set: given in a mapping, it is an unknown key (a Python constructor may set it)."""
    if _BUILDING.get() != "instance":
        raise PydanticCustomError("unexpected_keyword_argument", "Unexpected keyword argument")
    return value


_C = TypeVar("_C", bound=type)


def _is_default(f: dataclasses.Field[Any], value: Any) -> bool:
    """Whether ``value`` is field ``f``'s default, of the same type."""
    if f.default is not dataclasses.MISSING:
        default = f.default
    elif f.default_factory is not dataclasses.MISSING:
        default = f.default_factory()
    else:
        return False
    return value is default or (type(value) is type(default) and value == default)


def section(cls: _C) -> _C:
    """A config class (put under ``@dataclass(frozen=True)``): its fields are checked by pydantic (:data:`PYDANTIC`)
    against their types however it is built. From a mapping :func:`build_config` checks them; built in Python
    (``JobConfig(...)``, ``dataclasses.replace``) ``__post_init__`` validates the values given other than the
    defaults (as a mapping's missing keys, defaults are not checked) through the same adapter and takes the checked
    values (numbers as text, lists as tuples, ``~`` expanded), a problem being a ConfigError naming ``Class.key``.
    The class's own ``__post_init__`` (its cross-field rules) runs on checked values either way."""
    own: Callable[[Any], None] | None = cls.__dict__.get("__post_init__")

    def __post_init__(self: Any) -> None:
        building = _BUILDING.get() is not None  # pydantic built it from checked values
        given = {} if building else {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                                     if f.init and not _is_default(f, getattr(self, f.name))}
        if not given:  # built by pydantic, or every value is its default
            if own is not None:
                own(self)
            return
        checked = _validate_as(type(self), given, f"{type(self).__name__}.", "instance")
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, getattr(checked, f.name))

    cls.__pydantic_config__ = PYDANTIC  # type: ignore[attr-defined]
    cls.__post_init__ = __post_init__  # type: ignore[attr-defined]
    return cls


_DS_FIELD = re.compile(r"yyyy|MM|M|dd|d")
_DS_SEPARATORS = "-/._ :"
_DS_FORMAT = re.compile(r"^(?:yyyy|MM|M|dd|d|[-/._ :])+$")


def _ds_tokens(fmt: str) -> list[str]:
    """A ds_format cut into its fields and separators: 'M/d/yyyy' -> ['M', '/', 'd', '/', 'yyyy']."""
    return re.findall(r"yyyy|MM|M|dd|d|.", fmt)


EPOCH_FORMATS = {"epoch_s": 1, "epoch_ms": 1000, "epoch_us": 10**6, "epoch_ns": 10**9}
"""ds_format values for a number of seconds, milliseconds, microseconds or nanoseconds since 1970-01-01 UTC
(pandas' to_json writes dates as epoch milliseconds by default; a Parquet timestamp in nanoseconds read with
spark.sql.legacy.parquet.nanosAsLong is epoch_ns); the day is that instant's, as for a timestamp column."""


def validate_ds_format(fmt: Any) -> None:
    """``columns.ds_format``: None, or a year ``yyyy``, a month ``MM`` (or ``M``: one or two digits) and a day
    ``dd`` (or ``d``) once each, with separators (- / . _ space :); a one-letter field needs a separator next to
    it (``yyyyMd`` cannot be read back)."""
    if fmt is None or fmt in EPOCH_FORMATS:
        return
    ok = isinstance(fmt, str) and bool(_DS_FORMAT.match(fmt))
    if ok:
        tokens = _ds_tokens(fmt)
        fields = [t for t in tokens if t not in _DS_SEPARATORS]
        ok = sorted(f[0] for f in fields) == ["M", "d", "y"] and not any(
            a in ("M", "d") or b in ("M", "d")
            for a, b in zip(tokens, tokens[1:]) if a not in _DS_SEPARATORS and b not in _DS_SEPARATORS)
    if not ok:
        raise ConfigError(f"'columns.ds_format' must be a pattern of yyyy, MM (or M) and dd (or d), once each, "
                          f"and separators (- / . _ space :), e.g. 'yyyyMMdd', 'dd.MM.yyyy' or 'M/d/yyyy' "
                          f"(M and d: one or two digits, each next to a separator), or epoch_s / epoch_ms / "
                          f"epoch_us / epoch_ns for seconds / milliseconds / microseconds / nanoseconds since "
                          f"1970-01-01 UTC, got {fmt!r}.")


def input_day(fmt: str | None, day: str) -> str:
    """A YYYY-MM-DD day as the input's date column writes it (``columns.ds_format``; None: unchanged)."""
    if fmt is None:
        return day
    d = dt.date.fromisoformat(day)
    if fmt in EPOCH_FORMATS:  # the day's first instant (UTC)
        return str((d - dt.date(1970, 1, 1)).days * 86400 * EPOCH_FORMATS[fmt])
    values = {"yyyy": f"{d.year:04d}", "MM": f"{d.month:02d}", "M": str(d.month), "dd": f"{d.day:02d}",
              "d": str(d.day)}
    return _DS_FIELD.sub(lambda m: values[m.group(0)], fmt)


def date_part(text: str, fmt: str | None) -> str:
    """The part of a date column's text a day is read from: YYYY-MM-DD text its first ten characters, text in
    ``fmt`` (without a space) what comes before the first space, so a time after the date is ignored. The
    scan's SQL does the same (``spark.inputs``)."""
    if fmt is None:
        return text[:10]
    return text if " " in fmt else text.split(" ", 1)[0]


def _ds_regex(fmt: str) -> re.Pattern[str]:
    widths = {"yyyy": r"(?P<y>\d{4})", "MM": r"(?P<m>\d{2})", "M": r"(?P<m>\d{1,2})", "dd": r"(?P<d>\d{2})",
              "d": r"(?P<d>\d{1,2})"}
    return re.compile("".join(widths.get(t, re.escape(t)) for t in _ds_tokens(fmt)) + "$")


_WHOLE_NUMBER = re.compile(r"\d+(\.0*)?")
"""An epoch date as text: digits, maybe with a zero fraction (a number column read as a double)."""


def fits_ds_format(text: str, fmt: str) -> bool:
    """Whether a date column's text is a real day written in ``fmt`` (a time after it allowed, as in the scan)."""
    if fmt in EPOCH_FORMATS:  # a whole number of seconds (ms, us, ns) in years 1970..2200
        return _WHOLE_NUMBER.fullmatch(text.strip()) is not None and \
            0 <= float(text) / EPOCH_FORMATS[fmt] < 7258118400
    m = _ds_regex(fmt).match(date_part(text.strip(), fmt))
    if m is None:
        return False
    try:
        dt.date(int(m["y"]), int(m["m"]), int(m["d"]))
    except ValueError:
        return False
    return True


def guess_ds_formats(values: typing.Iterable[str]) -> list[str]:
    """The usual day layouts (year first, day first, month first; - / . _ separators, or yyyyMMdd) that every
    value fits, two-digit fields when every value has them. Several when the values cannot tell day from month
    (every day a value shows is 12 or less)."""
    texts = [str(v).strip() for v in values if v is not None and str(v).strip()]
    if not texts:
        return []
    layouts = ["yyyyMMdd"] + [sep.join(order) for sep in "-/._" for order in
                              (("yyyy", "MM", "dd"), ("dd", "MM", "yyyy"), ("MM", "dd", "yyyy"))]
    if all(_WHOLE_NUMBER.fullmatch(t) for t in texts):  # s, ms, us or ns since 1970: 10 / 13 / 16 / 19 digits
        widths = {len(t.split(".")[0]) for t in texts}
        for fmt, width in (("epoch_s", 10), ("epoch_ms", 13), ("epoch_us", 16), ("epoch_ns", 19)):
            if widths == {width}:
                return [fmt]
    found = []
    for layout in layouts:
        if all(fits_ds_format(t, layout) for t in texts):
            found.append(layout)
            continue
        short = layout.replace("MM", "M").replace("dd", "d")
        if short != layout and all(fits_ds_format(t, short) for t in texts):
            found.append(short)
    return [f for f in found if f != "yyyy-MM-dd"]


def validate_ds(ds: str, what: str = "--ds") -> str:
    """Check a YYYY-MM-DD logical date (:func:`parse_day`). ``what``: the option the error names."""
    if parse_day(ds) is None:
        meant = _iso_form(ds)
        raise ConfigError(f"{what} must be a date like 2026-11-21, got {ds!r}"
                          + (f" (write it {meant})." if meant else "."))
    return ds


MAX_RANGE_DAYS = 146_097
"""Days a --ds range may have (400 years): a 300-year range runs, and one of 10,000 years is refused up front."""


def day_range(start: str, end: str) -> list[str]:
    """Every day from ``start`` to ``end`` inclusive."""
    first, last = dt.date.fromisoformat(validate_ds(start)), dt.date.fromisoformat(validate_ds(end))
    if last < first:
        raise ConfigError(f"The range {start}..{end} ends before it starts.")
    span = (last - first).days + 1
    if span > MAX_RANGE_DAYS:  # 0001-01-01..9999-12-31 would build a filter of 3.6 million days
        raise ConfigError(f"The range {start}..{end} has {span:,} days; a run takes at most {MAX_RANGE_DAYS:,} (400 "
                          "years): give the years the table holds, or run the range in parts.")
    return [(first + dt.timedelta(days=i)).isoformat() for i in range(span)]


def parse_days(spec: str | Sequence[str], what: str = "--ds") -> list[str]:
    """Days from '2026-11-21', '2026-11-15..2026-11-21', a comma list of those, or a sequence of days (sorted,
    each once): how ``--ds`` names the days of every command that takes some. ``what``: the option errors name;
    an error quotes the whole value given."""
    parts = [spec] if isinstance(spec, str) else list(spec)
    days: set[str] = set()
    for part in parts:
        for item in str(part).split(","):
            item = item.strip()
            try:
                if ".." in item:
                    days.update(day_range(*(end.strip() for end in item.split("..", 1))))
                elif item:
                    days.add(validate_ds(item, what))
            except ConfigError as e:  # it quoted the one day, not the value given
                if repr(str(part)) in str(e) or repr(str(part).strip()) in str(e):
                    raise
                raise ConfigError(f"{str(e).rstrip('.')}, in {what} {str(part)!r}.") from None
    if not days:
        raise ConfigError(f"Expected at least one day in {what} (YYYY-MM-DD or a range START..END).")
    return sorted(days)


def _iso_form(text: object) -> str | None:
    """The YYYY-MM-DD day that a date written another unambiguous way names (20261121, 2026/11/21, 2026.11.21,
    2026-11-21T00:00:00, 2026-11-21 00:00), or None."""
    if not isinstance(text, str):
        return None
    m = re.fullmatch(r"\s*(\d{4})([-/.]?)(\d{1,2})\2(\d{1,2})(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d*)?)?Z?)?\s*", text)
    if not m or (not m.group(2) and (len(m.group(3)) != 2 or len(m.group(4)) != 2)):
        return None
    try:
        return dt.date(int(m.group(1)), int(m.group(3)), int(m.group(4))).isoformat()
    except ValueError:
        return None


@dataclass(frozen=True)
@section
class InputConfig:
    """Where the evaluation rows are: a path (``format``, reader ``options``) or a catalog table."""

    path: Annotated[LocalPath | None, Field(description=(
        "It is one path (a file, a folder or a glob): for several folders give a glob that matches them, e.g. "
        "'/data/{exports_a,exports_b}' (Spark reads every match as one table), or, when each folder holds one "
        "model's scores, input.model_paths: {model: folder, ...}."))] = None
    table: str | None = None
    format: Annotated[Literal["parquet", "json", "csv", "orc", "avro", "delta", "iceberg"], Field(
        description="Any other source can be registered as a table and read with 'input.table'.")] = "parquet"
    options: Settings = field(default_factory=dict)
    """Reader options passed to ``spark.read.options(...)`` (CSV: ``sep``, ``inferSchema``, ...). A CSV's first line
    is read as its header unless they say ``header: "false"`` (as ``ctcalc score`` and a CSV stream read it)."""
    skip_unreadable_files: StrictBool = False
    """Skip files Spark cannot read (corrupt, truncated, other column types: Spark's ``ignoreCorruptFiles``) and
    report which were skipped, instead of failing the run."""
    model_paths: Mapping[str, LocalPath] = field(default_factory=dict)
    """One path per model, when each pipeline's scores are a table of their own: ``{baseline: scores/a, candidate:
    scores/b}``. Each is read as ``path`` is (``format``, ``options``, its ``<ds>=<day>`` folders) and their rows are
    one table, the key giving the ``columns.model`` of each path's rows (so the tables have no model column)."""
    duplicate_ids: Literal["ignore", "count", "error"] = "ignore"
    """Rows sharing (day, model, run, example_id): 'ignore' (not checked, no cost), 'count' (counted and reported,
    one more pass over the ids) or 'error' (counted; any duplicate stops the run)."""

    def sources(self) -> list[str]:
        """The keys that name the input here ('path', 'table', 'model_paths'): one, or none for a job that reads
        only the outputs."""
        return [k for k in ("path", "table", "model_paths") if getattr(self, k)]

    def reader_options(self) -> dict[str, str]:
        """The options the reader gets: ``options`` as text, with a CSV's header line read unless they say not."""
        options = {str(k): str(v) for k, v in dict(self.options).items()}
        if self.format == "csv" and not any(k.lower() == "header" for k in options):
            options["header"] = "true"
        return options


@dataclass(frozen=True)
@section
class ColumnsConfig:
    """Names of the input columns (the input contract)."""

    model: str = "model"
    run: Annotated[str, WrapValidator(lambda v, check: v if v is None else check(v))] = "run"
    """The training run (seed) column. Null (YAML ``run: null``) when each model was trained once and the table
    has no such column: every row is then run ``'0'`` (``one_run`` is true; the outputs keep a ``run`` column)."""
    ds: str | None = "ds"
    """The date column; null for a fixed evaluation set without dates (every row is the ``--ds`` given)."""
    ds_format: str | None = None
    """How a text or number date column writes a day when not as YYYY-MM-DD: a pattern of ``yyyy``, ``MM`` and
    ``dd`` with separators, e.g. ``yyyyMMdd`` for Hive-style ``dt=20261121`` (a date or timestamp column needs
    none). Outputs and ``--ds`` keep YYYY-MM-DD."""
    label: str = "label"
    logit: str | None = "logit"
    prediction: str | None = None
    weight: str | None = None
    example_id: str | None = "example_id"
    split: str | None = None
    slices: Names = ()
    class_logits: Names = ()
    """Multiclass: one number column per class, class i's logit in the i-th (a CSV cannot hold the array column
    ``logit`` takes); ``logit`` is then not read."""
    class_probabilities: Names = ()
    """Multiclass: one column per class holding its predicted probability (e.g. ``predict_proba``'s columns);
    a class's logit is ln(max(p, clip_eps)), so softmax gives back p / Σp. ``logit`` is then not read."""

    class_names: Names = ()
    """The labels the label column holds, in class order: multiclass, class i is the i-th name (the i-th score
    column or array element), e.g. ``[bird, cat, dog]`` for scikit-learn's sorted ``classes_``; binary, the
    negative class then the positive one (``["<=50K", ">50K"]``). Empty: labels are class indices 0..K-1 (binary
    0/1 or true/false). Matched as text; a number column's labels as numbers (``[1, 2, 3]``)."""

    model_scores: Annotated[Mapping[str, Names], BeforeValidator(  # one column: one run, as a list of one
        lambda v: {k: [c] if isinstance(c, (str, int)) and not isinstance(c, bool) else c for k, c in v.items()}
        if isinstance(v, Mapping) else v)] = field(default_factory=dict)
    """A table with one score column per model (and run) on the same rows, as one scoring job writes it for
    several models: ``{baseline: p_base, candidate: p_cand}``, or a list per model, one column per run (runs 0, 1,
    ... by position): ``{baseline: [p_base_s0, p_base_s1]}``. Each row is read once per column, as that model's
    (and run's) score in the column that ``logit`` or ``prediction`` names (set just one of them); a model given
    one column takes its run from the ``run`` column (or ``'0'`` with ``run: null``). The table has no model
    column then."""

    one_run: Annotated[bool, BeforeValidator(_internal)] = field(default=False, metadata={"internal": True})
    """Set by ``run: null`` (not a YAML key): the input has no run column and every row is run ``ONE_RUN``. A
    field of the constructor, so ``dataclasses.replace`` keeps it."""

    def __post_init__(self) -> None:
        if self.run is None:  # type: ignore[comparison-overlap] - YAML null, let through by the field's validator
            object.__setattr__(self, "run", "run")
            object.__setattr__(self, "one_run", True)

    def class_columns(self) -> tuple[str, ...]:
        """The per-class score columns (class_logits or class_probabilities; empty for an array column)."""
        return self.class_logits or self.class_probabilities

    def score_target(self) -> str | None:
        """The score column ``model_scores`` stacks into: ``logit`` or ``prediction``, whichever is set (None when
        both or neither are, which validation refuses)."""
        named = [n for n in (self.logit, self.prediction) if n is not None]
        return named[0] if len(named) == 1 else None

    def model_score_columns(self) -> list[str]:
        """Every column ``model_scores`` names, in order."""
        return [name for names in self.model_scores.values() for name in names]


@dataclass(frozen=True)
@section
class SplitConfig:
    """Deterministic hash split: a row is val-bias when its salted xxhash64 mod 2^32 < bias_fraction * 2^32."""

    bias_fraction: Fraction = 0.1
    salt: str = "ctcalc"
    min_bias_rows: Annotated[Whole, Field(ge=0, description="0 = off.")] = 0
    """Groups whose val-bias part has fewer rows get status ``too_few_bias_rows`` and no calibrated value
    (0 = off). docs/your-own-data.md gives the rows needed for c* to within a tolerance."""


@dataclass(frozen=True)
@section
class SanityConfig:
    """Checks on the scores: logits outside [-max_abs_logit, max_abs_logit) are counted per group (``n_extreme``,
    from the histogram bins, so exact when the limit is a multiple of the bin width); ``on_extreme``: ``warn``
    (print and report them) or ``error`` (stop before writing, naming the groups; saturated probabilities, the
    ``n_clipped`` rows, count too). ``max_slice_values``: a slice column with more values than this on a day is
    named in a warning (a slice is a segment such as a country; an id column makes a metrics row per value);
    null: no warning."""

    max_abs_logit: MaxAbsLogit = 50.0
    on_extreme: Literal["warn", "error"] = "warn"
    max_slice_values: Annotated[Positive | None, Field(description="null: no warning.")] = 1000


@dataclass(frozen=True)
@section
class HistogramConfig:
    """Logit histogram of the binary summaries."""

    bin_width: BinWidth = 0.05


OUTPUT_TABLES = ("metrics", "summaries", "rolling", "calibrated_exact", "stream_summaries", "stream_counts",
                 "stream_metrics", "stream_rolling")


@dataclass(frozen=True)
@section
class OutputConfig:
    """Where the output tables go: Delta tables under ``path`` (default) or catalog tables.

    ``path`` always holds what is not a catalog table (the stream's batch log, reports). Catalog mode is on when
    ``database`` or ``tables`` is set: a table is ``tables[name]`` if given, else
    ``<database>.<table_prefix><name>``; the jobs create missing tables (``format``, partitioned) and replace
    exactly the partitions they compute, with Spark's writers.
    """

    path: LocalPath = "output"
    format: str = "parquet"
    """The format of catalog tables the jobs create (path outputs are Delta tables)."""
    database: str | None = None
    table_prefix: str = "ctcalc_"
    tables: Mapping[str, str] = field(default_factory=dict)
    storage_options: Settings = field(default_factory=dict)
    """delta-rs storage options for an object-store ``path`` (s3://, gs://, abfss://): credentials, region,
    endpoint. Unset keys come from the usual environment variables (docs/storage.md)."""
    compression: str = "none"
    """The codec of the catalog tables ctcalc creates (Spark's ``compression`` option: none, snappy, zstd, ...)."""
    location: str | None = None
    """Catalog mode: the folder under which ctcalc creates its missing tables as external tables, one folder per
    table (``<location>/<table name>``, e.g. s3a://bucket/ctcalc/ctcalc_metrics); None: managed tables in the
    database's own location."""
    table_properties: Settings = field(default_factory=dict)
    """Catalog mode: ``TBLPROPERTIES`` of the tables ctcalc creates (an owner, a retention class, ...)."""

    @property
    def catalog(self) -> bool:
        return self.database is not None or bool(self.tables)


@dataclass(frozen=True)
@section
class RollingConfig:
    """Windows for the rolling job: 'day', 'week', 'month' or 'rolling' (last `days` days)."""

    window: Literal["day", "week", "month", "rolling"] = "day"
    days: Positive = 7
    bias_threshold: Number = 0.1


_MEMORY = re.compile(r"(?i)^\d+\s*([kmgtp]b?|b)?$")  # a JVM memory size: 2g, 512m, 1024


@dataclass(frozen=True)
@section
class SparkConfig:
    """Session settings used when the job builds its own session (``ctcalc`` CLI).

    ``remote``: a Spark Connect URL (``sc://host:15002``), or ``local[N]`` for a local Connect server; unset
    for a classic session on ``master``. ``conf``: any Spark settings. Under spark-submit the session exists
    already: runtime settings (``spark.sql.*``) from ``conf`` are still applied, launch settings (master,
    memory, ``spark.sql.catalogImplementation``) must be spark-submit ``--conf`` flags.
    """

    master: str = "local[2]"
    remote: str | None = None
    shuffle_partitions: Positive = 8
    driver_memory: Annotated[str, Field(pattern=_MEMORY.pattern,
                                        description="Write a JVM memory size like '2g' or '512m'.")] = "2g"
    conf: Settings = field(default_factory=dict)
    log_level: str | None = None


DURATION_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+)\s*(second|minute|hour|day|week)s?\s*$")


def duration_seconds(text: str, where: str) -> int:
    """Seconds in a duration like '1 hour', '10 minutes', '1 day' (fixed-length units only)."""
    m = _DURATION.match(str(text))
    if not m or int(m.group(1)) <= 0:
        raise ConfigError(f"'{where}' must be a positive duration like '10 minutes', '1 hour', '1 day', got {text!r}.")
    return int(m.group(1)) * DURATION_UNITS[m.group(2)]


@dataclass(frozen=True)
@section
class StreamConfig:
    """Streaming job (ctcalc_spark/jobs/stream.py): source, event-time windows, watermark, trigger, checkpoint."""

    source: Literal["file", "kafka"] = "file"
    format: str = "parquet"
    path: Annotated[LocalPath | None, Field(description="A stream watches one folder: land every file there.")] = None
    schema: str | None = None
    options: Settings = field(default_factory=dict)
    """Reader options for the landed files (CSV: ``sep``, ``header``, ``nullValue``, ...; a CSV stream reads a
    header line unless ``header: "false"``)."""
    kafka_bootstrap_servers: str | None = None
    kafka_topic: str | None = None
    kafka_starting_offsets: str = "earliest"
    kafka_options: Settings = field(default_factory=dict)
    """Options passed to Spark's Kafka reader as they are (``kafka.security.protocol``, ``failOnDataLoss``, ...)."""
    kafka_format: Literal["json", "csv"] = "json"
    """How a message's value holds its row: ``json`` (an object of the columns) or ``csv`` (one line, the columns
    of ``stream.schema`` in its order)."""
    kafka_max_value_bytes: Positive = 65536
    """A message value longer than this is quarantined unparsed (a scored row is a few hundred bytes)."""
    event_time: str = "event_time"
    window: str = "1 hour"
    watermark: str = "10 minutes"
    trigger: str = "30 seconds"
    checkpoint: LocalPath | None = None
    max_files_per_trigger: Positive | None = None
    max_offsets_per_trigger: Positive | None = None


@dataclass(frozen=True)
@section
class JobConfig:
    """Top-level configuration of every job."""

    task: Literal["binary", "regression", "multiclass"] = "binary"
    input: Section[InputConfig] = field(default_factory=InputConfig)
    columns: Section[ColumnsConfig] = field(default_factory=ColumnsConfig)
    split: Section[SplitConfig] = field(default_factory=SplitConfig)
    histogram: Section[HistogramConfig] = field(default_factory=HistogramConfig)
    output: Section[OutputConfig] = field(default_factory=OutputConfig)
    rolling: Section[RollingConfig] = field(default_factory=RollingConfig)
    spark: Section[SparkConfig] = field(default_factory=SparkConfig)
    stream: Section[StreamConfig] = field(default_factory=StreamConfig)
    sanity: Section[SanityConfig] = field(default_factory=SanityConfig)
    clip_eps: Annotated[Number, Field(gt=0, lt=1e-3)] = 1e-15
    on_invalid: Literal["error", "drop"] = "error"
    max_bias_rows_multiclass: Whole = 2_000_000

    def __post_init__(self) -> None:
        _validate(self)


def undated_day(cfg: JobConfig, days: Sequence[str] | None) -> str | None:
    """Without a date column (``columns.ds: null``, a fixed evaluation set) the one day given, which labels the
    output partitions (every row belongs to it); ConfigError for no day or several. None with a date column."""
    if cfg.columns.ds is not None:
        return None
    if days is None or len(days) != 1:
        raise ConfigError("The config has no date column ('columns.ds: null'): give exactly one --ds, the day that "
                          "labels this fixed evaluation set's output partitions.")
    return days[0]


def require_input(cfg: JobConfig) -> None:
    """ConfigError unless the config names the evaluation table. Only the jobs that read it need it (evaluate,
    ``rolling --scan``): rolling, compare and report read the outputs, so their configs may leave it out."""
    if not cfg.input.sources():
        raise ConfigError("This job reads the evaluation rows: set 'input.path' (a file or folder, e.g. --set "
                          "input.path=scores), 'input.table' (a metastore table) or 'input.model_paths' (one path "
                          "per model).")


def _validate_model_scores(cfg: JobConfig) -> None:
    c = cfg.columns
    if not c.model_scores:
        return
    example = "{baseline: p_base, candidate: p_cand} (a list per model for several runs: [p_base_s0, p_base_s1])"
    for name, names in c.model_scores.items():
        if not name.strip() or not names or not all(n.strip() for n in names):
            raise ConfigError(f"'columns.model_scores' maps each model's name to its score column, e.g. {example}; "
                              f"got {name!r}: {list(names)}.")
    every = c.model_score_columns()
    twice = sorted({n for n in every if every.count(n) > 1})
    if twice:
        raise ConfigError(f"'columns.model_scores' names the column(s) {twice} more than once: each column is one "
                          "model's (and run's) scores.")
    if cfg.input.model_paths:
        raise ConfigError("Set 'input.model_paths' (a table per model) or 'columns.model_scores' (a column per model "
                          "in one table), not both.")
    if c.class_columns():
        raise ConfigError("'columns.model_scores' gives each model one score column; a multiclass model's class "
                          "columns (columns.class_logits / class_probabilities) cannot be named per model. Write each "
                          "model's class logits as one array column, or stack the models' rows upstream.")
    if c.score_target() is None:
        raise ConfigError("'columns.model_scores' stacks each model's column into one score column, named by "
                          "'columns.logit' (logits) or 'columns.prediction' (probabilities, forecasts): set one of "
                          f"them and the other to null; got columns.logit: {c.logit!r}, columns.prediction: "
                          f"{c.prediction!r}.")
    clash = [n for n in (c.model, c.score_target()) if n in every]
    if clash:
        raise ConfigError(f"'columns.model_scores' names {clash[0]!r}, which is also the name the stacked rows' "
                          f"{'model' if clash[0] == c.model else 'score'} column takes; name that column another "
                          "way under 'columns:'.")


def _validate(cfg: JobConfig) -> None:
    given = cfg.input.sources()
    if len(given) > 1:
        raise ConfigError("Set one of 'input.path' (a file or folder), 'input.table' (a metastore table) or "
                          "'input.model_paths' (one path per model), not "
                          + " and ".join(f"'input.{k}'" for k in given) + ".")
    for name, path in cfg.input.model_paths.items():
        if not str(name).strip() or not str(path).strip():
            raise ConfigError("'input.model_paths' maps each model's name to the path of its scores, e.g. "
                              f"{{baseline: scores/baseline, candidate: scores/candidate}}; got {name!r}: {path!r}.")
    _validate_model_scores(cfg)
    if cfg.input.skip_unreadable_files and cfg.input.table is not None:
        raise ConfigError("'input.skip_unreadable_files' works with 'input.path'; for a table set the Spark setting "
                          "spark.sql.files.ignoreCorruptFiles: true under 'spark.conf' (skipped files are not listed).")
    if cfg.input.duplicate_ids != "ignore" and cfg.columns.example_id is None:
        raise ConfigError("'input.duplicate_ids' counts rows per 'columns.example_id'; set that column or set "
                          "'input.duplicate_ids: ignore'.")
    _validate_output(cfg.output)
    _validate_spark(cfg.spark)
    _validate_column_names(cfg)
    c = cfg.columns
    if cfg.task == "binary" and c.logit is None and c.prediction is None:
        raise ConfigError("A binary task needs 'columns.logit' or 'columns.prediction'.")
    if cfg.task == "regression" and c.prediction is None:
        raise ConfigError("A regression task needs 'columns.prediction'.")
    if c.class_logits and c.class_probabilities:
        raise ConfigError("Set 'columns.class_logits' or 'columns.class_probabilities', not both.")
    if c.class_columns() and cfg.task != "multiclass":
        two = ""
        if cfg.task == "binary" and len(c.class_probabilities) == 2:
            positive = c.class_probabilities[1]
            two = (f" A binary model's two class probabilities (predict_proba's) carry one score: read the positive "
                   f"class's, columns.prediction: {positive} and columns.logit: null (as options: --set "
                   f"columns.prediction={positive} --set columns.logit=null).")
        elif cfg.task == "binary" and len(c.class_logits) == 2:
            z0, z1 = c.class_logits
            two = (f" A binary model's logit is the positive class's minus the negative's ({z1} - {z0}): write that "
                   "difference as one column upstream and name it in columns.logit.")
        raise ConfigError(f"'columns.class_logits' and 'columns.class_probabilities' are for task: multiclass; this "
                          f"task is {cfg.task!r} (its score is 'columns.logit' or 'columns.prediction').{two}")
    if c.class_columns() and len(set(c.class_columns())) < 2:
        raise ConfigError(f"A multiclass task needs two or more distinct class columns, got {list(c.class_columns())}.")
    if c.class_names:
        if cfg.task == "regression":
            raise ConfigError("'columns.class_names' names the classes of a binary or multiclass task; a regression "
                              "label is a number.")
        if cfg.task == "binary" and len(c.class_names) != 2:
            raise ConfigError(f"'columns.class_names' of a binary task lists two labels, the negative class first, "
                              f"got {list(c.class_names)}.")
        if len(c.class_names) < 2 or len(set(c.class_names)) < len(c.class_names):
            raise ConfigError(f"'columns.class_names' must list two or more distinct labels, in class order, got "
                              f"{list(c.class_names)}.")
        if c.class_columns() and len(c.class_names) != len(c.class_columns()):
            kind = "class_logits" if c.class_logits else "class_probabilities"
            raise ConfigError(f"'columns.class_names' lists {len(c.class_names)} classes and 'columns.{kind}' "
                              f"{len(c.class_columns())} score columns: name one class per score column, in the "
                              f"same order.")
    if cfg.task == "multiclass" and c.logit is None and not c.class_columns():
        raise ConfigError("A multiclass task needs 'columns.logit' (an array<double> column of class logits), or "
                          "one column per class: 'columns.class_logits' or 'columns.class_probabilities'.")
    if c.example_id is None and c.split is None:
        raise ConfigError(
            "Set 'columns.example_id' (rows are split by a hash of it) or 'columns.split' (a 'bias'/'remain' column)."
        )
    _validate_stream(cfg.stream)
    validate_ds_format(cfg.columns.ds_format)


def _validate_output(o: OutputConfig) -> None:
    unknown = sorted(set(o.tables) - set(OUTPUT_TABLES))
    if unknown:
        raise ConfigError(f"Unknown table(s) {unknown} under 'output.tables'; known: {list(OUTPUT_TABLES)}.")
    if o.tables and o.database is None:
        missing = [t for t in OUTPUT_TABLES if t not in o.tables]
        if missing:
            raise ConfigError(f"'output.tables' names only some tables; set 'output.database' for the others "
                              f"({missing}) or name them all.")
    seen: dict[str, str] = {}
    for table in OUTPUT_TABLES if o.catalog else ():
        name = o.tables.get(table) or f"{o.database}.{o.table_prefix}{table}"
        key = str(name).strip().lower()
        if key in seen:
            raise ConfigError(f"'output.tables' names {name!r} for both {seen[key]!r} and {table!r}: each output table "
                              "needs a table of its own (their rows have other columns). Give one of them another "
                              "name.")
        seen[key] = table
    if (o.location or o.table_properties) and not o.catalog:
        raise ConfigError("'output.location' and 'output.table_properties' describe the catalog tables ctcalc "
                          "creates; set 'output.database' (or 'output.tables') too, or leave them out for output "
                          "folders under 'output.path'.")
    if o.location is not None and not str(o.location).strip():
        raise ConfigError("'output.location' must be a folder (a path or URI), or null for managed tables.")
    codecs = OUTPUT_CODECS.get(str(o.format).lower())
    if codecs is not None and o.compression.lower() not in codecs:
        raise ConfigError(f"'output.compression' must be one of {list(codecs)} for output.format {o.format!r}, got "
                          f"{o.compression!r}.")


_TEXT_CODECS = ("none", "uncompressed", "bzip2", "deflate", "gzip", "lz4", "snappy", "zstd")
OUTPUT_CODECS = {
    "parquet": ("none", "uncompressed", "snappy", "gzip", "lzo", "brotli", "lz4", "lz4_raw", "zstd"),
    "orc": ("none", "uncompressed", "snappy", "zlib", "lzo", "lz4", "zstd", "brotli"),
    "json": _TEXT_CODECS, "csv": _TEXT_CODECS, "text": _TEXT_CODECS,
}
"""The codecs Spark's writer takes for ``output.compression``, per output format. Another format gets the option
only when a codec other than 'none' is set, as given."""


def codec_options(output: OutputConfig) -> dict[str, str]:
    """The writer options that carry ``output.compression`` (none for a format outside :data:`OUTPUT_CODECS` left
    at 'none', whose own writer may not know the name)."""
    known = str(output.format).lower() in OUTPUT_CODECS
    return {"compression": output.compression} if known or output.compression.lower() != "none" else {}


def _validate_stream(s: StreamConfig) -> None:
    if s.source == "file" and s.format not in STREAM_FORMATS:
        raise ConfigError(f"'stream.format' must be one of {list(STREAM_FORMATS)} for a file source, got "
                          f"{s.format!r}.")
    if s.source == "kafka" and not (s.kafka_bootstrap_servers and s.kafka_topic):
        raise ConfigError("A Kafka stream needs 'stream.kafka_bootstrap_servers' and 'stream.kafka_topic'.")
    if s.source == "kafka" and s.kafka_format == "csv" and not s.schema:
        raise ConfigError("A Kafka stream of CSV lines needs 'stream.schema': the line's columns in their order as "
                          "DDL, e.g. 'model STRING, run STRING, label DOUBLE, logit DOUBLE, example_id STRING, "
                          "event_time TIMESTAMP'.")
    duration_seconds(s.window, "stream.window")
    duration_seconds(s.watermark, "stream.watermark")
    if s.trigger not in ("availableNow", "once"):
        duration_seconds(s.trigger, "stream.trigger")


def _validate_spark(s: SparkConfig) -> None:
    if s.remote is None and not _MASTER.match(s.master):
        raise ConfigError(f"'spark.master' must be a Spark master URL: local, local[N], local[*], spark://HOST:PORT, "
                          f"yarn or k8s://URL, got {s.master!r}.")
    if s.log_level is not None:
        from ctcalc_spark.spark.session import spark_log_level

        try:
            spark_log_level(s.log_level)
        except ConfigError as e:
            raise ConfigError(f"'spark.log_level': {e}") from None
    # The Spark settings whose bad values stop the JVM or the session with a Java stack: checked here.
    for name, (pattern, what) in _CHECKED_SPARK_CONF.items():
        value = s.conf.get(name)
        if value is not None and not pattern.match(value):
            raise ConfigError(f"'spark.conf.{name}' must be {what}, got {value!r}.")


_MASTER = re.compile(r"^(local(\[(\d+|\*)(,\s*\d+)?\])?|local-cluster\[.+\]|yarn|spark://.+|k8s://.+)$")
_CHECKED_SPARK_CONF = {
    "spark.sql.shuffle.partitions": (re.compile(r"^[1-9]\d*$"), "an integer >= 1"),
    "spark.driver.memory": (_MEMORY, "a JVM memory size like '2g' or '512m'"),
    "spark.executor.memory": (_MEMORY, "a JVM memory size like '2g' or '512m'"),
    "spark.master": (_MASTER, "a Spark master URL (local[N], spark://HOST:PORT, yarn, k8s://URL)"),
}


def reserved_column_names() -> frozenset[str]:
    """Column names ctcalc computes itself (output tables, scan): a model, run or slice column of that name would
    be overwritten by a computed value, e.g. a slice named 'status' or 'auc'."""
    from ctcalc_spark.core.finalize import KEY_TYPES, METRIC_TYPES, SUMMARY_TYPES
    from ctcalc_spark.core.windows import ROLLING_TYPES
    from ctcalc_spark.spark.scan import INTERNAL_COLUMNS

    names = {*KEY_TYPES, *ROLLING_TYPES, *INTERNAL_COLUMNS, "window_spec", "run_id"}
    for kinds in (*METRIC_TYPES.values(), *SUMMARY_TYPES.values()):
        names.update(kinds)
    return frozenset(names)


def _validate_column_names(cfg: JobConfig) -> None:
    c = cfg.columns
    lists = ("slices", "class_logits", "class_probabilities")
    named = [(f"columns.{f.name}", getattr(c, f.name)) for f in dataclasses.fields(c)
             if not f.metadata.get("internal") and f.name not in (*lists, "class_names", "model_scores")]
    # class_names: labels; model_scores: its own check
    for key, name in [*named, *((f"columns.{k}", s) for k in lists for s in getattr(c, k))]:
        if name is not None and not name.strip():
            raise ConfigError(f"'{key}' must be a column name, got {name!r}.")
    if c.model == c.run:
        raise ConfigError(f"'columns.model' and 'columns.run' must be two different columns, both are {c.model!r}.")
    seen: set[str] = set()
    for s in c.slices:
        if s in seen or s in (c.model, c.run):
            what = "is listed twice" if s in seen else "is also the model or run column"
            raise ConfigError(f"Slice column {s!r} {what}; 'columns.slices' must name other, distinct columns, "
                              f"got {list(c.slices)}.")
        seen.add(s)
    reserved = reserved_column_names()
    for key, name in [("model", c.model), ("run", c.run), *(("slices", s) for s in c.slices)]:
        if name in reserved and name != key:
            raise ConfigError(
                f"'columns.{key}' names the input column {name!r}, a name ctcalc gives a computed column (output "
                f"tables or scan), so its values would be overwritten. Rename it in the input (e.g. a view "
                f"selecting `{name} AS {name}_{key}`) and name that in 'columns.{key}'. Reserved: {sorted(reserved)}."
            )


# ---- building: pydantic checks a mapping against the field types; its first problem is one ConfigError ---------

_FIXES = {
    **dict.fromkeys(("float_parsing", "float_type"), "Write numbers like 0.1, 1e-9 or 1.0e-9."),
    "number_type": "Write a number like 8, 0.1 or 1e-9.",
    **dict.fromkeys(("int_parsing", "int_from_float", "int_type"), "Write a whole number."),
    "bool_type": "Write true or false.", "string_type": "Quote it in YAML if it is meant as text.",
    "tuple_type": "Write a list: [{value}] (YAML) or --set {key}=[{value}].",
    "dict_type": "Write a mapping of names to values: {{name: value}}.",
    "dataclass_type": "Write the section as a mapping of its keys: {{key: value}}.",
}
"""The fix a message gives for a pydantic error type, when the field's type and description give none."""


def _field_at(cls: type, loc: Sequence[Any]) -> tuple[type, Any]:
    """The section (dataclass) that holds the key ``loc`` leads to, and that key's type (Annotated kept)."""
    hint: Any = cls
    for name in loc:
        if not dataclasses.is_dataclass(cls) or not isinstance(name, str):
            break
        hint = typing.get_type_hints(cls, include_extras=True).get(name)
        inner = typing.get_args(hint)[0] if typing.get_origin(hint) is Annotated else hint
        if not dataclasses.is_dataclass(inner):
            return cls, hint
        cls = typing.cast(type, inner)
    return cls, hint


_BOUNDS = {"gt": ("(", ">"), "ge": ("[", ">="), "lt": (")", "<"), "le": ("]", "<=")}


def _number_text(x: Any) -> str:
    return f"{x:g}".replace("e+0", "e").replace("e+", "e") if isinstance(x, float) else str(x)


def _rule(hint: Any, described: bool = False) -> str:
    """What a field's type allows, as a fix: 'Give a number in (0, 1).', 'Give one of 'warn', 'error'.', 'Give a
    whole number >= 1, or null.' ('' for a type without choices or constraints, and for a pattern when the field's
    description says what it takes)."""
    limits: dict[str, Any] = {}
    choices: list[Any] = []
    kinds: list[Any] = []
    todo = [hint]
    while todo:
        t = todo.pop(0)
        if typing.get_origin(t) is Annotated:
            todo.insert(0, t.__origin__)
            for m in t.__metadata__:  # Field(...) holds its constraints in .metadata
                for c in getattr(m, "metadata", None) or [m]:
                    limits.update({k: getattr(c, k) for k in (*_BOUNDS, "min_length", "max_length", "pattern")
                                   if getattr(c, k, None) is not None and k not in limits})
        elif typing.get_origin(t) is Literal:
            choices += typing.get_args(t)
        elif typing.get_origin(t) in (typing.Union, types.UnionType):
            todo[:0] = typing.get_args(t)
        else:
            kinds.append(t)
    null = ", or null" if type(None) in kinds else ""
    if choices:
        return f"Give one of {', '.join(map(repr, choices))}{null}."
    what = "a whole number" if int in kinds else "a number" if float in kinds else None
    low = next(((k, limits[k]) for k in ("gt", "ge") if k in limits), None)
    high = next(((k, limits[k]) for k in ("lt", "le") if k in limits), None)
    if what and low and high:
        return (f"Give {what} in {_BOUNDS[low[0]][0]}{_number_text(low[1])}, {_number_text(high[1])}"
                f"{_BOUNDS[high[0]][0]}{null}.")
    if what and (low or high):
        k, x = low or high  # type: ignore[misc]
        return f"Give {what} {_BOUNDS[k][1]} {_number_text(x)}{null}."
    unit = "character" if str in kinds else "item"
    shortest, longest = limits.get("min_length"), limits.get("max_length")
    sizes = [(w, n) for w, n in (("at least", shortest), ("at most", longest)) if n is not None]
    if shortest is not None and shortest == longest:
        sizes = [("exactly", shortest)]
    if sizes:
        span = " and ".join(f"{w} {n}" for w, n in sizes)
        return f"Give {span} {unit}{'' if sizes[-1][1] == 1 else 's'}{null}."
    return f"Give text matching {limits['pattern']}{null}." if "pattern" in limits and not described else ""


def _key(where: str, loc: Sequence[Any]) -> str:
    """The key path ``where`` + ``loc`` names: 'columns.slices[0]'."""
    return (where.rstrip(".") + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)).lstrip(".")


def config_error(cls: type, error: ValidationError, where: str = "") -> ConfigError:
    """pydantic's first problem with a ``cls`` mapping as one ConfigError: the key path, the value given,
    pydantic's message and the fix (what the field's type allows, :func:`_rule`, and the field's description; else
    :data:`_FIXES`); unknown keys of one section
    together, with the likely key; a cross-field rule's ConfigError as it is."""
    problems = error.errors()
    unknown = [p for p in problems if p["type"] == "unexpected_keyword_argument"]
    if unknown:
        section = unknown[0]["loc"][:-1]
        keys = sorted(_key(where, p["loc"]) for p in unknown if p["loc"][:-1] == section)
        known = sorted(f.name for f in dataclasses.fields(_field_at(cls, section)[0]) if not f.metadata.get("internal"))
        close = {k: m[0] for k in keys if (m := difflib.get_close_matches(k.rsplit(".", 1)[-1], known, cutoff=0.6))}
        meant = [f"'{_key(where, (*section, m))}'" + (f" for '{k}'" if len(keys) > 1 else "") for k, m in close.items()]
        return ConfigError(f"Unknown config key(s) {keys}; known keys here: {known}."
                           + (f" Did you mean {', '.join(meant)}?" if meant else ""))
    first = problems[0]
    if isinstance((first.get("ctx") or {}).get("error"), ConfigError):
        return typing.cast(ConfigError, first["ctx"]["error"])
    key = _key(where, first["loc"])
    value = first["input"]
    field_type = _field_at(cls, first["loc"])[1]
    hint = next((m.description for m in getattr(field_type, "__metadata__", ()) if getattr(m, "description", None)),
                None)
    fix = " ".join(filter(None, (_rule(field_type, hint is not None), hint))) or _FIXES.get(first["type"], "").format(
        key=key, value=value)
    more = f" ({len(problems) - 1} more problem(s) after it.)" if len(problems) > 1 else ""
    kind = "null" if value is None else type(value).__name__
    return ConfigError(f"'{key or 'config'}' got {value!r} ({kind}): {first['msg']}. {fix}".rstrip() + more)


@functools.cache
def _adapter(cls: type) -> Any:
    from pydantic import TypeAdapter  # its import (pydantic.main) waits for the first config built

    return TypeAdapter(cls)


def build_config(cls: type, data: Mapping[str, Any], where: str = "") -> Any:
    """The config dataclass ``cls`` from a mapping (from YAML), checked by pydantic against its field types
    (nested sections too, unknown keys refused), then its cross-field rules (``__post_init__``). ``where``: the key
    path of ``data`` (``"columns."``; ``""`` at the root), which the errors name."""
    return _validate_as(cls, data, where, "mapping")


def _validate_as(cls: type, data: Mapping[str, Any], where: str, what: str) -> Any:
    """``cls`` validated from ``data`` by its cached adapter, :data:`_BUILDING` set to ``what`` meanwhile; a problem
    is one ConfigError (:func:`config_error`) naming keys under ``where``."""
    token = _BUILDING.set(what)
    try:
        return _adapter(cls).validate_python(data)
    except ValidationError as e:
        raise config_error(cls, e, where) from None
    finally:
        _BUILDING.reset(token)


ONE_RUN = "0"
"""The run of every row when the input has no run column (``columns.run: null``)."""

def config_from_dict(data: Mapping[str, Any]) -> JobConfig:
    """Validate a nested mapping (as read from YAML) into a JobConfig."""
    return build_config(JobConfig, data, "")


def read_yaml(path: str | Path, overrides: Mapping[str, Any] | None = None, *, example: str = "conf/") -> dict[str, Any]:
    """A YAML config file as a dict, with ``overrides`` (dotted keys like 'output.path') applied."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"Config file {str(p)!r} does not exist; see {example} for examples.")
    if p.is_dir():
        raise ConfigError(f"Config file {str(p)!r} is a folder; give the YAML file in it (see {example}).")
    data = parse_yaml(yaml_text(p.read_bytes(), f"Config file {str(p)!r}"), f"Config file {str(p)!r}")
    return apply_overrides({} if data is None else data, overrides)


def yaml_text(data: bytes, what: str) -> str:
    """A YAML file's bytes as text: UTF-8 (a byte-order mark dropped), or UTF-16/UTF-32 with their byte-order mark
    (Windows Notepad's "Unicode"), as YAML allows; anything else is a ConfigError naming the first byte that is
    not UTF-8 and its line."""
    import codecs

    for bom, encoding in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                          (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            return data.decode(encoding)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ConfigError(f"{what} is not UTF-8 text: byte 0x{data[e.start]:02x} on line {line} is not UTF-8 (a file "
                          "saved as ANSI/windows-1252, say). Save it as UTF-8.") from None


def parse_yaml(text: str, what: str) -> Any:
    """``text`` as YAML (an empty document: None), a mapping with a key given twice refused; a syntax error is
    one ConfigError line that starts with ``what`` and gives the line and column."""
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except ConfigError as e:
        raise ConfigError(f"{what}: {e}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{what} is not valid YAML: {yaml_error_line(e)}") from None
    return data


def yaml_error_line(e: Exception) -> str:
    """PyYAML's multi-line error as one line: the problem, where (line, column), and a hint for tabs."""
    problem = getattr(e, "problem", None)
    mark = getattr(e, "problem_mark", None)
    if problem is None:
        return " ".join(str(e).split())
    context = getattr(e, "context", None)
    text = f"{context}: {problem}" if context else problem
    if mark is not None:
        text += f" at line {mark.line + 1}, column {mark.column + 1}"
    if "'\\t'" in problem:
        text += " (YAML indents with spaces, not tabs)"
    return text


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping: PyYAML keeps the last one, so a second
    ``columns:`` section would silently replace the first."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        lines: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # '<<: *defaults': keys given after it override those
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            try:
                first = lines.get(key)
            except TypeError:  # an unhashable key: SafeLoader's own error follows
                continue
            if first is not None:
                where = f"line {line}" if first == line else f"lines {first} and {line}"
                raise ConfigError(f"key {key!r} is given twice ({where}); YAML would keep only the last one. Merge "
                                  "the two into one.")
            lines[key] = line
        return super().construct_mapping(node, deep=deep)


# Mappings whose own keys are free text that may hold dots (Spark settings, reader options, Kafka options): in an
# override 'spark.conf.spark.sql.shuffle.partitions' everything after the section is one key.
FREE_KEY_SECTIONS = ("spark.conf", "input.options", "output.tables", "output.table_properties", "stream.options",
                     "stream.kafka_options")


def override_path(key: str) -> list[str]:
    """The path of a dotted override key: 'output.path' -> [output, path]; in a free-key section the rest of the
    key is one name: 'spark.conf.spark.sql.shuffle.partitions' -> [spark, conf, spark.sql.shuffle.partitions]."""
    for section in FREE_KEY_SECTIONS:
        if key.startswith(section + ".") and len(key) > len(section) + 1:
            return [*section.split("."), key[len(section) + 1:]]
    return key.split(".")


def apply_overrides(data: dict[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """``data`` (a config mapping, changed in place and returned) with dotted keys like 'output.path' set (see
    :func:`override_path` for keys inside ``spark.conf`` and the other free-key sections)."""
    for key, value in (overrides or {}).items():
        node = data
        *parents, leaf = override_path(key)
        for depth, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):  # e.g. 'output.path' where this config's 'output' is a path itself
                section = ".".join(parents[: depth + 1])
                raise ConfigError(f"--set {key}: {section!r} is a value here ({node!r}), not a section with keys; "
                                  f"set it with --set {section}=<value>.")
        node[leaf] = value
    return data


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> JobConfig:
    """Read a YAML job config; ``overrides`` maps dotted keys ('output.path') to values."""
    return config_from_dict(read_yaml(path, overrides))


def config_to_dict(cfg: JobConfig) -> dict[str, Any]:
    """Plain nested dict of a config (for logging and for writing the effective config), as config_from_dict
    reads it."""
    data = dataclasses.asdict(cfg)
    columns = data["columns"]
    if columns.pop("one_run"):
        columns["run"] = None
    return data
