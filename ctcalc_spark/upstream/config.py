"""Configuration of ``ctcalc train`` / ``ctcalc score`` on your own table: frozen dataclasses, validated once.

One YAML file (see ``conf/train_example.yaml``) declares the tables, their columns, the encoding and the
pipelines; unknown keys are errors. Command-line flags become dotted overrides of the same keys.
"""
from __future__ import annotations

import datetime as _dt
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping

from pydantic import Field, StrictBool

from ctcalc_spark.config import (
    LocalPath,
    MaxAbsLogit,
    Names,
    Whole,
    Positive,
    Section,
    SparkConfig,
    apply_overrides,
    build_config,
    parse_days,
    read_yaml,
    section,
)
from ctcalc_spark.core.days import parse_day
from ctcalc_spark.core.summary import DEFAULT_MAX_ABS_LOGIT
from ctcalc_spark.errors import ConfigError

WriteMode = Literal["partitions", "overwrite", "error"]
WRITE_MODES = typing.get_args(WriteMode)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
OUTPUT_COLUMNS: tuple[str, ...] = ("model", "run", "ds", "example_id", "label", "logit")
"""The evaluation table's own columns (passthrough columns follow them)."""


@dataclass(frozen=True)
@section
class TableSource:
    """A table on disk: a file or a folder of files (hive ``key=value`` sub-folders become columns).

    ``days``: only the rows of these days (by the declared ``columns.ds``), written as ``--ds`` takes them: a day,
    ``START..END`` (inclusive) or a comma list of both; kept as the sorted days. None: every row.
    """

    path: LocalPath | None = None
    format: Literal["parquet", "csv", "json"] = "parquet"
    csv_header: StrictBool = True
    csv_delimiter: Annotated[str, Field(min_length=1, max_length=1)] = ","
    csv_encoding: str = "utf-8"
    days: str | _dt.date | tuple[str | _dt.date, ...] | None = None  # YAML reads an unquoted day as a date

    def __post_init__(self) -> None:
        import codecs

        if self.days is not None:
            spec = [self.days] if isinstance(self.days, (str, _dt.date)) else list(self.days)
            spec = [d.isoformat()[:10] if isinstance(d, _dt.date) else str(d) for d in spec]
            object.__setattr__(self, "days", tuple(parse_days(spec, "--ds (the table's days)")))

        try:
            codecs.lookup(str(self.csv_encoding))
        except LookupError:
            raise ConfigError(f"Expected a text encoding Python knows as csv_encoding (utf-8, cp1252, latin-1, "
                              f"shift_jis, …), got {self.csv_encoding!r}.") from None


@dataclass(frozen=True)
@section
class TableColumns:
    """The declared columns of a user's table (any names).

    ``categorical`` values of any type are indexed by their string form; ``numeric`` values are read as
    float64. ``label`` holds 0/1 (or true/false), unless ``positive_label`` names the value counted as 1
    (every other value is 0). ``example_id`` (optional) keys the val-bias split; ``ds`` (optional) is the
    day (a date, a timestamp or a 'YYYY-MM-DD...' string). ``passthrough`` columns are copied into the
    evaluation table (e.g. slice columns). ``null_values`` are strings read as null in every column (e.g. '?').
    """

    categorical: Names = ()
    numeric: Names = ()
    label: str = "label"
    positive_label: str | None = None
    example_id: str | None = None
    ds: str | None = None
    passthrough: Names = ()
    null_values: Names = ()

    def __post_init__(self) -> None:
        for name in ("categorical", "numeric", "passthrough"):
            values = getattr(self, name)
            repeated = sorted({v for v in values if values.count(v) > 1})
            if repeated:
                raise ConfigError(f"'columns.{name}' lists {repeated} more than once.")
        both = sorted(set(self.categorical) & set(self.numeric))
        if both:
            raise ConfigError(f"Columns {both} are declared both categorical and numeric; declare each once.")
        if self.label in self.categorical or self.label in self.numeric:
            raise ConfigError(f"The label column {self.label!r} is also declared as a feature; remove it there.")
        clash = sorted(set(self.passthrough) & set(OUTPUT_COLUMNS))
        if clash:
            raise ConfigError(
                f"Passthrough columns {clash} clash with the evaluation table's own columns {list(OUTPUT_COLUMNS)}; "
                "rename them in the input table."
            )

    @property
    def features(self) -> tuple[str, ...]:
        """Categorical then numeric feature names."""
        return self.categorical + self.numeric

    def require_features(self) -> None:
        """Raise unless at least one feature column is declared."""
        if not self.features:
            raise ConfigError(
                "Declare at least one feature: 'columns.categorical' and/or 'columns.numeric' "
                "(or --categorical / --numeric)."
            )

    def keys(self) -> dict[str, Any]:
        """What decides the rows and keys of the evaluation table (must agree across models scored together)."""
        return {"label": self.label, "positive_label": self.positive_label, "example_id": self.example_id,
                "ds": self.ds, "null_values": list(self.null_values)}

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (lists for tuples)."""
        return {"categorical": list(self.categorical), "numeric": list(self.numeric), "label": self.label,
                "positive_label": self.positive_label, "example_id": self.example_id, "ds": self.ds,
                "passthrough": list(self.passthrough), "null_values": list(self.null_values)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TableColumns:
        """Inverse of ``to_dict``; unknown keys are an error."""
        return build_config(cls, d, "columns.")  # type: ignore[no-any-return]


@dataclass(frozen=True)
@section
class EncodingConfig:
    """Vocabulary building: values seen fewer than ``min_count`` times in training share the unseen index."""

    min_count: Positive = 2
    max_vocab: Positive | None = None


@dataclass(frozen=True)
@section
class ScoreSanityConfig:
    """``ctcalc score`` warns about logits outside ``[-max_abs_logit, max_abs_logit)``, per model and run (the
    evaluate job's ``sanity.max_abs_logit``, same default)."""

    max_abs_logit: MaxAbsLogit = DEFAULT_MAX_ABS_LOGIT


@dataclass(frozen=True)
@section
class ScoresConfig:
    """Where and how ``ctcalc score`` writes the evaluation table (partitioned by ds; a table without a ds column
    and no ``ds`` given is written undated, without partitions). ``ds``: the day given to every row of a table
    without a ds column (optional)."""

    path: LocalPath = "output/own/scores"
    files_per_partition: Positive = 1
    engine: Literal["local", "spark"] = "local"
    mode: WriteMode = "partitions"
    batch_size: Positive = 65_536
    ds: str | _dt.date | None = None  # a date: YAML (and --set) read an unquoted day as one

    def __post_init__(self) -> None:
        if self.ds is not None:
            object.__setattr__(self, "ds", check_ds_value(self.ds, "scores.ds"))


@dataclass(frozen=True)
@section
class UpstreamConfig:
    """``ctcalc train`` and ``ctcalc score``: tables, columns, encoding, pipelines, seeds, outputs."""

    train_table: Section[TableSource] = field(default_factory=TableSource)
    eval_table: Section[TableSource] = field(default_factory=TableSource)
    columns: Section[TableColumns] = field(default_factory=TableColumns)
    encoding: Section[EncodingConfig] = field(default_factory=EncodingConfig)
    pipelines: Section[Mapping[str, Section[Mapping[str, Any]]]] = field(default_factory=dict)
    seeds: Annotated[tuple[Whole, ...], Field(description="Write a list of whole numbers, e.g. [0, 1, 2].")] = ()
    runs: Positive | None = None
    models_dir: LocalPath = "output/own/models"
    scores: Section[ScoresConfig] = field(default_factory=ScoresConfig)
    sanity: Section[ScoreSanityConfig] = field(default_factory=ScoreSanityConfig)
    device: str | None = None
    torch_threads: Positive = 1
    spark: Section[SparkConfig] = field(default_factory=SparkConfig)

    def __post_init__(self) -> None:
        from ctcalc_spark.upstream.models import ModelSpec

        if self.seeds and self.runs is not None:
            raise ConfigError(
                f"Set 'seeds' (a list) or 'runs' (a count), not both; got {list(self.seeds)} and {self.runs}."
            )
        if len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"'seeds' repeats a value: {list(self.seeds)}.")
        for name, spec in self.pipelines.items():
            if "/" in name or not name:
                raise ConfigError(f"Pipeline names become folder names; expected no '/', got {name!r}.")
            try:
                ModelSpec.from_dict(spec)
            except (TypeError, ValueError) as e:
                raise ConfigError(f"Pipeline {name!r}: {e}") from e

    @property
    def seed_list(self) -> tuple[int, ...]:
        """The training seeds: ``seeds``, else ``0..runs-1``, else ``(0,)``."""
        if self.seeds:
            return self.seeds
        return tuple(range(self.runs)) if self.runs is not None else (0,)

    def specs(self) -> dict[str, Any]:
        """``{pipeline name: ModelSpec}``; a single default DeepFM named 'deepfm' when none are configured."""
        from ctcalc_spark.upstream.models import ModelSpec

        if not self.pipelines:
            return {"deepfm": ModelSpec()}
        return {name: ModelSpec.from_dict(spec) for name, spec in self.pipelines.items()}


def check_ds_value(ds: Any, where: str) -> str:
    """A 'YYYY-MM-DD' string (YAML reads an unquoted date as a date: accepted), or a ConfigError naming ``where``."""
    if isinstance(ds, _dt.date):
        ds = ds.isoformat()[:10]
    if not isinstance(ds, str) or not _DATE.match(ds):
        raise ConfigError(f"Expected '{where}' as a date like 2026-11-01, got {ds!r}.")
    if parse_day(ds) is None:
        raise ConfigError(f"'{where}' is not a calendar date: {ds!r}.")
    return ds


def upstream_config_from_dict(data: Mapping[str, Any]) -> UpstreamConfig:
    """Validate a mapping (from YAML) into an UpstreamConfig; unknown keys are errors."""
    return build_config(UpstreamConfig, data)  # type: ignore[no-any-return]


def load_upstream_config(path: str | Path | None, overrides: Mapping[str, Any] | None = None) -> UpstreamConfig:
    """Read a YAML config (or start empty when ``path`` is None) and apply dotted ``overrides``."""
    data: dict[str, Any] = {} if path is None else read_yaml(path, example="conf/train_example.yaml")
    return upstream_config_from_dict(apply_overrides(data, overrides))
