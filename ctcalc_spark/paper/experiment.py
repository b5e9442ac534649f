"""The experiment runner: generate CTR data, train m seeds per pipeline (torch), score, evaluate (Spark), compare.

One command for a list of pipeline pairs (``conf/experiment_default.yaml``):

1. ``upstream.data.write_ctr_tables``: one training table and one evaluation table
   from one synthetic world (fixed across runs: the seeds vary the model
   initialisation and the data order only, as in the paper's Avazu runs) — or
   the user's own tables (``data.train_table``, ``data.eval_table`` with
   ``data.columns`` declared, as for ``ctcalc train``; see docs/upstream.md);
2. ``upstream.train`` for seeds ``0..m-1`` of every pipeline used by a pair;
3. ``upstream.score.score_table``: the evaluation table model/run/ds/example_id/label/logit;
4. the Spark evaluate job (:func:`ctcalc_spark.jobs.evaluate.evaluate`) on every eval day;
5. :mod:`ctcalc_spark.jobs.compare` per pair, the paper-style tables and one HTML report.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Mapping

import pandas as pd
from pydantic import Field, StrictBool

from ctcalc_spark.config import (
    BinWidth,
    Fraction,
    Number,
    Section,
    SparkConfig,
    Whole,
    build_config,
    read_yaml,
    section,
)
from ctcalc_spark.errors import ConfigError
from ctcalc_spark.upstream.config import EncodingConfig, TableColumns, TableSource, check_ds_value

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ctcalc_spark.core.accuracy import Comparison


@dataclass(frozen=True)
@section
class DataConfig:
    """Synthetic CTR data (ctcalc_spark.upstream.data: rows, days, seeds), or your own tables.

    Setting ``train_table.path`` switches to your own tables: ``eval_table.path`` and ``columns`` (at least
    one feature) are then required, ``encoding`` applies, and the synthetic keys are ignored.
    """

    n_train: Whole = 40_000
    n_eval: Whole = 40_000
    eval_days: Whole = 1
    seed: Whole = 0
    world_seed: Whole = 0
    base_rate: Number = 0.15
    start_ds: str = "2026-11-01"
    train_table: Section[TableSource] = field(default_factory=TableSource)
    eval_table: Section[TableSource] = field(default_factory=TableSource)
    columns: Section[TableColumns] = field(default_factory=TableColumns)
    encoding: Section[EncodingConfig] = field(default_factory=EncodingConfig)
    ds: str | None = None

    @property
    def own_tables(self) -> bool:
        """Whether the runner reads the user's tables instead of generating CTR data."""
        return self.train_table.path is not None

    def __post_init__(self) -> None:
        if self.ds is not None:
            object.__setattr__(self, "ds", check_ds_value(self.ds, "data.ds"))
        if not self.own_tables:
            if self.eval_table.path is not None:
                raise ConfigError("'data.eval_table.path' is set without 'data.train_table.path'; set both.")
            return
        if self.eval_table.path is None:
            raise ConfigError("'data.train_table.path' is set: set 'data.eval_table.path' too (the rows to score).")
        self.columns.require_features()
        if self.columns.ds is None and self.ds is None:
            raise ConfigError("Declare 'data.columns.ds' (the day column) or give every row one day with 'data.ds'.")


@dataclass(frozen=True)
@section
class EvalConfig:
    """Split and histogram of the evaluate job."""

    bias_fraction: Fraction = 0.1
    salt: str = "ctcalc-experiment"
    bin_width: BinWidth = 0.05


@dataclass(frozen=True)
@section
class ExperimentConfig:
    """Everything the runner needs; ``pipelines`` maps a name to ModelSpec fields, ``pairs`` lists [A, B]."""

    output: str = "output/experiment"
    seeds: Annotated[Whole, Field(ge=2, description="The runs per pipeline.")] = 12
    data: Section[DataConfig] = field(default_factory=DataConfig)
    evaluate: Section[EvalConfig] = field(default_factory=EvalConfig)
    pipelines: Section[Mapping[str, Section[Mapping[str, Any]]]] = field(default_factory=dict)
    pairs: Annotated[tuple[tuple[str, str], ...], Field(min_length=1, description=(
        "List pipeline pairs like [[deepfm_bn, deepfm]]."))] = ()
    device: str = "cpu"
    torch_threads: Whole = 1
    bootstrap: Whole = 2000
    level: Fraction = 0.95
    save_models: StrictBool = True
    spark: Section[SparkConfig] = field(default_factory=SparkConfig)

    def __post_init__(self) -> None:
        from ctcalc_spark.upstream.models import ModelSpec

        for p in self.pairs:
            if p[0] == p[1]:
                raise ConfigError(f"Each pair must name two different pipelines, got {list(p)}.")
            missing = [n for n in p if n not in self.pipelines]
            if missing:
                raise ConfigError(f"Pair {list(p)} names {missing}, not under 'pipelines' ({sorted(self.pipelines)}).")
        for name, spec in self.pipelines.items():
            try:
                dropped = ModelSpec.from_dict(spec).drop_fields
            except (TypeError, ValueError) as e:
                raise ConfigError(f"Pipeline {name!r}: {e}") from e
            unknown = [f for f in dropped if self.data.own_tables and f not in self.data.columns.features]
            if unknown and name in self.used_pipelines:
                raise ConfigError(f"Pipeline {name!r} drops {unknown}, not a declared feature of data.columns "
                                  f"({list(self.data.columns.features)}); name your own columns in drop_fields.")
        if not self.data.own_tables and (self.data.n_train < 100 or self.data.n_eval < 100):
            raise ConfigError("'data.n_train' and 'data.n_eval' must be >= 100.")

    def spec(self, name: str) -> Any:
        """The ModelSpec of a pipeline."""
        from ctcalc_spark.upstream.models import ModelSpec

        return ModelSpec.from_dict(self.pipelines[name])

    @property
    def used_pipelines(self) -> list[str]:
        """Pipelines named by a pair, in first-use order."""
        return list(dict.fromkeys(n for p in self.pairs for n in p))


def experiment_config_from_dict(data: Mapping[str, Any]) -> ExperimentConfig:
    """Validate a mapping (from YAML) into an ExperimentConfig; unknown keys are errors."""
    return build_config(ExperimentConfig, data)


def load_experiment_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> ExperimentConfig:
    """Read a YAML experiment config; ``overrides`` maps dotted keys ('data.n_train') to values."""
    data = read_yaml(path, overrides, example="conf/experiment_default.yaml")
    return experiment_config_from_dict(data)


def job_config(cfg: ExperimentConfig) -> Any:
    """The evaluate job's config for the runner's score table."""
    from ctcalc_spark.config import config_from_dict

    out = Path(cfg.output)
    return config_from_dict({
        "task": "binary",
        "input": {"path": str(out / "scores"), "format": "parquet"},
        "output": {"path": str(out / "eval")},
        "split": {"bias_fraction": cfg.evaluate.bias_fraction, "salt": cfg.evaluate.salt},
        "histogram": {"bin_width": cfg.evaluate.bin_width},
        "spark": dataclasses.asdict(cfg.spark),
    })


@dataclass
class ExperimentResult:
    """What a runner call produced."""

    comparisons: list[Comparison]
    per_run: pd.DataFrame
    timings: dict[str, float]
    paths: dict[str, Path]
    days: list[str]


def run_experiment(
    cfg: ExperimentConfig,
    *,
    spark: SparkSession | None = None,
    log: Callable[[str], None] = print,
) -> ExperimentResult:
    """Steps 1–5 of the module docstring; returns the comparisons, per-run metrics and step timings."""
    from ctcalc_spark.jobs.compare import compare_pipelines, run_metrics
    from ctcalc_spark.jobs.evaluate import evaluate
    from ctcalc_spark.reports.comparison import write_report

    t_all = time.perf_counter()
    timings: dict[str, float] = {}
    out = Path(cfg.output)
    d = cfg.data
    names = cfg.used_pipelines
    train_models = _train_own_tables if d.own_tables else _train_synthetic
    models, eval_rows = train_models(cfg, names, timings, log)

    t = time.perf_counter()
    from ctcalc_spark.upstream.score import score_table

    report = score_table(models, eval_rows, out / "scores", ds_value=d.ds, days=d.eval_table.days, mode="overwrite",
                         device=cfg.device, num_threads=cfg.torch_threads)
    timings["score"] = time.perf_counter() - t
    log(f"[3/5] score: {sum(report.rows_per_day.values()):,} rows in {timings['score']:.1f} s -> {out / 'scores'}")

    t = time.perf_counter()
    jcfg = job_config(cfg)
    if spark is None:
        from ctcalc_spark.spark.session import build_session

        spark = build_session(jcfg.spark, app_name="ctcalc-experiment")
    days = report.days
    for ds in days:
        # the experiment owns its output: a rerun with fewer seeds replaces the days whole
        res = evaluate(spark, jcfg, ds, replace_runs=True)
        bad = res.metrics[res.metrics["status"] != "ok"]
        if len(bad):
            log(f"      ds={ds}: {len(bad)} metrics rows without a calibrated value: "
                f"{bad['status'].value_counts().to_dict()}")
    timings["evaluate"] = time.perf_counter() - t
    log(f"[4/5] evaluate (Spark): {len(days)} day(s) in {timings['evaluate']:.1f} s -> {jcfg.output.path}")

    t = time.perf_counter()
    per_run = run_metrics(jcfg, names, days)
    comparisons = []
    for k, (a, b) in enumerate(cfg.pairs):
        comparisons.append(compare_pipelines(per_run, "binary", a, b, n_boot=cfg.bootstrap, level=cfg.level,
                                             seed=k).comparison)
    timings["compare"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t_all
    if d.own_tables:
        data_note = (f"Data: your tables, train {d.train_table.path}, evaluation {d.eval_table.path} "
                     f"({report.counts.get('rows_in', 0):,} rows over {len(days)} day(s))")
    else:
        data_note = (f"Data: synthetic CTR (ctcalc_spark.upstream.data), {d.n_train:,} training rows, {d.n_eval:,} "
                     f"evaluation rows over {d.eval_days} day(s), world_seed {d.world_seed}")
    notes = [
        f"{data_note}; the same data for every run, seeds 0..{cfg.seeds - 1} "
        "vary initialisation and data order. Val-bias = "
        f"{cfg.evaluate.bias_fraction:.0%} of evaluation rows by hash of example_id.",
        "Timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()),
    ]
    paths = write_report(out / "report", comparisons, title=f"Experiment: {len(cfg.pairs)} pipeline pairs, "
                         f"{cfg.seeds} seeds each", notes=notes,
                         extra={"timings_s": timings, "days": days,
                                "pipelines": {n: cfg.spec(n).to_dict() for n in names}})
    log(f"[5/5] compare: {len(comparisons)} pair(s) in {timings['compare']:.1f} s -> {paths['html']}")
    return ExperimentResult(comparisons, per_run, timings, paths, days)


def _train_synthetic(
    cfg: ExperimentConfig, names: list[str], timings: dict[str, float], log: Callable[[str], None]
) -> tuple[dict[tuple[str, int], Any], pd.DataFrame]:
    """Steps 1-2 on generated CTR data: the models and the evaluation rows."""
    from ctcalc_spark.upstream.data import write_ctr_tables
    from ctcalc_spark.upstream.train import model_file, save_model, train_model

    out, d = Path(cfg.output), cfg.data
    t = time.perf_counter()
    tables = write_ctr_tables(out / "data", n_train=d.n_train, n_eval=d.n_eval, seed=d.seed, n_eval_days=d.eval_days,
                              start_ds=d.start_ds, world_seed=d.world_seed, base_rate=d.base_rate)
    train_df = pd.read_parquet(tables["train"])
    eval_df = pd.read_parquet(tables["eval"])
    timings["data"] = time.perf_counter() - t
    log(f"[1/5] data: {len(train_df):,} train rows, {len(eval_df):,} eval rows in {timings['data']:.1f} s "
        f"-> {out / 'data'}")

    t = time.perf_counter()
    models: dict[tuple[str, int], Any] = {}
    for name in names:
        spec = cfg.spec(name)
        tp = time.perf_counter()
        for seed in range(cfg.seeds):
            model, meta = train_model(spec, train_df, seed=seed, device=cfg.device, progress=False,
                                      num_threads=cfg.torch_threads)
            if cfg.save_models:
                save_model(model_file(out / "models", name, seed), model, spec, meta)
            models[(name, seed)] = model
        log(f"      trained {cfg.seeds} x {name} ({spec.arch}) in {time.perf_counter() - tp:.1f} s")
    timings["train"] = time.perf_counter() - t
    log(f"[2/5] train: {len(models)} models in {timings['train']:.1f} s")
    return models, eval_df


def _train_own_tables(
    cfg: ExperimentConfig, names: list[str], timings: dict[str, float], log: Callable[[str], None]
) -> tuple[dict[tuple[str, int], Any], Any]:
    """Steps 1-2 on the user's tables (declared columns): the models (with their encoder) and the eval table."""
    from ctcalc_spark.upstream.table import read_table
    from ctcalc_spark.upstream.train import train_table_models

    out, d = Path(cfg.output), cfg.data
    t = time.perf_counter()
    train_table, eval_table = read_table(d.train_table), read_table(d.eval_table)
    timings["data"] = time.perf_counter() - t
    log(f"[1/5] data: your tables, {train_table.num_rows:,} train rows ({d.train_table.path}), "
        f"{eval_table.num_rows:,} eval rows ({d.eval_table.path}) in {timings['data']:.1f} s")

    t = time.perf_counter()
    models = train_table_models({n: cfg.spec(n) for n in names}, train_table, d.columns, seeds=range(cfg.seeds),
                                encoding=d.encoding, models_dir=out / "models" if cfg.save_models else None,
                                device=cfg.device, num_threads=cfg.torch_threads, days=d.train_table.days)
    timings["train"] = time.perf_counter() - t
    log(f"[2/5] train: {len(models)} models in {timings['train']:.1f} s")
    return models, eval_table


def paper_table(comparisons: list[Comparison]) -> str:
    """Pipeline A | Pipeline B | LL Acc | CLL Acc (the paper's layout), with bootstrap intervals."""
    from ctcalc_spark.reports.comparison import ACC_CHANGE, accuracy_table_rows, format_text_table

    rows = []
    for r, c in zip(accuracy_table_rows(comparisons), comparisons):
        rows.append({"Pipeline A": r["Pipeline A"], "Pipeline B": r["Pipeline B"], "runs": r["runs"],
                     "LL Acc": r[f"{c.vanilla.metric} Acc"], "CLL Acc": r[f"{c.calibrated.metric} Acc"],
                     "CLL - LL": r[ACC_CHANGE]})
    return format_text_table(rows)


def spread_table(comparisons: list[Comparison]) -> str:
    """Per pipeline: LL and CLL mean ± std across seeds and the std reduction."""
    from ctcalc_spark.reports.comparison import format_text_table, spread_table_rows

    rows = [{"pipeline": r["pipeline"], "runs": r["runs"], "LL mean ± std": r["log_loss mean ± std"],
             "CLL mean ± std": r["calibrated_log_loss mean ± std"], "std reduction": r["std reduction"]}
            for r in spread_table_rows(comparisons)]
    return format_text_table(rows)
