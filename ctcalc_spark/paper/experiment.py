"""The experiment runner: generate CTR data, train m seeds per pipeline (torch), score, evaluate (Spark), compare.

One command for a list of pipeline pairs (``conf/experiment_default.yaml``):

1. ``ctr.data.write_ctr_tables``: one training table and one evaluation table
   from one synthetic world (fixed across runs: the seeds vary the model
   initialisation and the data order only, as in the paper's Avazu runs);
2. ``ctr.train.train_model`` for seeds ``0..m-1`` of every pipeline used by a pair;
3. ``ctr.score.write_scores``: the evaluation table model/run/ds/example_id/label/logit;
4. the Spark evaluate job (:func:`ctcalc_spark.jobs.evaluate.evaluate`) on every eval day;
5. :mod:`ctcalc_spark.jobs.compare` per pair, the paper-style tables and one HTML report.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import pandas as pd

from ctcalc_spark.config import SparkConfig, _build, read_yaml
from ctcalc_spark.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ctcalc_spark.core.accuracy import Comparison


@dataclass(frozen=True)
class DataConfig:
    """Synthetic CTR data (ctcalc_spark.upstream.data): rows, days, seeds."""

    n_train: int = 40_000
    n_eval: int = 40_000
    eval_days: int = 1
    seed: int = 0
    world_seed: int = 0
    base_rate: float = 0.15
    start_ds: str = "2026-11-01"


@dataclass(frozen=True)
class EvalConfig:
    """Split and histogram of the evaluate job."""

    bias_fraction: float = 0.1
    salt: str = "ctcalc-experiment"
    bin_width: float = 0.05


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything the runner needs; ``pipelines`` maps a name to ModelSpec fields, ``pairs`` lists [A, B]."""

    output: str = "output/experiment"
    seeds: int = 12
    data: DataConfig = field(default_factory=DataConfig)
    evaluate: EvalConfig = field(default_factory=EvalConfig)
    pipelines: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    pairs: tuple[tuple[str, str], ...] = ()
    device: str = "cpu"
    torch_threads: int = 1
    bootstrap: int = 2000
    level: float = 0.95
    save_models: bool = True
    spark: SparkConfig = field(default_factory=SparkConfig)

    def __post_init__(self) -> None:
        from ctcalc_spark.upstream.models import ModelSpec

        if self.seeds < 2:
            raise ConfigError(f"'seeds' must be >= 2 (runs per pipeline), got {self.seeds}.")
        if not self.pairs:
            raise ConfigError("'pairs' is empty; list pipeline pairs like [[deepfm_bn, deepfm]].")
        pairs = tuple(tuple(p) for p in self.pairs)
        for p in pairs:
            if len(p) != 2 or p[0] == p[1]:
                raise ConfigError(f"Each pair must name two different pipelines, got {list(p)}.")
            missing = [n for n in p if n not in self.pipelines]
            if missing:
                raise ConfigError(f"Pair {list(p)} names {missing}, not under 'pipelines' ({sorted(self.pipelines)}).")
        object.__setattr__(self, "pairs", pairs)
        for name, spec in self.pipelines.items():
            try:
                ModelSpec.from_dict(spec or {})
            except (TypeError, ValueError) as e:
                raise ConfigError(f"Pipeline {name!r}: {e}") from e
        if self.data.n_train < 100 or self.data.n_eval < 100:
            raise ConfigError("'data.n_train' and 'data.n_eval' must be >= 100.")

    def spec(self, name: str) -> Any:
        """The ModelSpec of a pipeline."""
        from ctcalc_spark.upstream.models import ModelSpec

        return ModelSpec.from_dict(self.pipelines[name] or {})

    @property
    def used_pipelines(self) -> list[str]:
        """Pipelines named by a pair, in first-use order."""
        return list(dict.fromkeys(n for p in self.pairs for n in p))


def experiment_config_from_dict(data: Mapping[str, Any]) -> ExperimentConfig:
    """Validate a mapping (from YAML) into an ExperimentConfig; unknown keys are errors."""
    data = dict(data)
    data["pipelines"] = dict(data.get("pipelines") or {})
    data["pairs"] = tuple(tuple(p) for p in data.get("pairs") or ())
    return _build(ExperimentConfig, data, "")


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
    from ctcalc_spark.reports.comparison import write_report
    from ctcalc_spark.upstream.data import write_ctr_tables
    from ctcalc_spark.upstream.score import write_scores
    from ctcalc_spark.upstream.train import save_model, train_model
    from ctcalc_spark.jobs.evaluate import evaluate

    t_all = time.perf_counter()
    timings: dict[str, float] = {}
    out = Path(cfg.output)
    d = cfg.data

    t = time.perf_counter()
    tables = write_ctr_tables(out / "data", n_train=d.n_train, n_eval=d.n_eval, seed=d.seed, n_eval_days=d.eval_days,
                              start_ds=d.start_ds, world_seed=d.world_seed, base_rate=d.base_rate)
    train_df = pd.read_parquet(tables["train"])
    eval_df = pd.read_parquet(tables["eval"])
    timings["data"] = time.perf_counter() - t
    log(f"[1/5] data: {len(train_df):,} train rows, {len(eval_df):,} eval rows -> {out / 'data'}  "
        f"[{timings['data']:.1f} s]")

    t = time.perf_counter()
    models: dict[tuple[str, int], Any] = {}
    names = cfg.used_pipelines
    for name in names:
        spec = cfg.spec(name)
        tp = time.perf_counter()
        for seed in range(cfg.seeds):
            model, meta = train_model(spec, train_df, seed=seed, device=cfg.device, progress=False,
                                      num_threads=cfg.torch_threads)
            if cfg.save_models:
                save_model(out / "models" / name / f"run{seed}.pt", model, spec, meta)
            models[(name, seed)] = model
        log(f"      trained {cfg.seeds} x {name} ({spec.arch}) in {time.perf_counter() - tp:.1f} s")
    timings["train"] = time.perf_counter() - t
    log(f"[2/5] train: {len(models)} models  [{timings['train']:.1f} s]")

    t = time.perf_counter()
    write_scores(models, eval_df, out / "scores", device=cfg.device, num_threads=cfg.torch_threads)
    timings["score"] = time.perf_counter() - t
    log(f"[3/5] score: {len(models) * len(eval_df):,} rows -> {out / 'scores'}  [{timings['score']:.1f} s]")

    t = time.perf_counter()
    jcfg = job_config(cfg)
    if spark is None:
        from ctcalc_spark.spark.session import build_session

        spark = build_session(jcfg.spark, app_name="ctcalc-experiment")
    days = sorted(eval_df["ds"].astype(str).unique())
    for ds in days:
        res = evaluate(spark, jcfg, ds)
        bad = res.metrics[res.metrics["status"] != "ok"]
        if len(bad):
            log(f"      ds={ds}: {len(bad)} metrics rows without a calibrated value: "
                f"{bad['status'].value_counts().to_dict()}")
    timings["evaluate"] = time.perf_counter() - t
    log(f"[4/5] evaluate (Spark): {len(days)} day(s) -> {jcfg.output.path}  [{timings['evaluate']:.1f} s]")

    t = time.perf_counter()
    per_run = run_metrics(jcfg, names, days)
    comparisons = []
    for k, (a, b) in enumerate(cfg.pairs):
        comparisons.append(compare_pipelines(per_run, "binary", a, b, n_boot=cfg.bootstrap, level=cfg.level,
                                             seed=k).comparison)
    timings["compare"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t_all
    notes = [
        f"Data: synthetic CTR (ctcalc_spark.upstream.data), {d.n_train:,} training rows, {d.n_eval:,} evaluation rows "
        f"over {d.eval_days} day(s), world_seed {d.world_seed}; the same data for every run, seeds 0..{cfg.seeds - 1} "
        "vary initialisation and data order. Val-bias = "
        f"{cfg.evaluate.bias_fraction:.0%} of evaluation rows by hash of example_id.",
        "Timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()),
    ]
    paths = write_report(out / "report", comparisons, title=f"Experiment: {len(cfg.pairs)} pipeline pairs, "
                         f"{cfg.seeds} seeds each", notes=notes,
                         extra={"timings_s": timings, "days": days,
                                "pipelines": {n: cfg.spec(n).to_dict() for n in names}})
    log(f"[5/5] compare: {len(comparisons)} pair(s) -> {paths['html']}  [{timings['compare']:.1f} s]")
    return ExperimentResult(comparisons, per_run, timings, paths, days)


def paper_table(comparisons: list[Comparison]) -> str:
    """Pipeline A | Pipeline B | LL Acc | CLL Acc (the paper's layout), with bootstrap intervals."""
    from ctcalc_spark.reports.comparison import accuracy_table_rows, format_text_table

    rows = []
    for r, c in zip(accuracy_table_rows(comparisons), comparisons):
        rows.append({"Pipeline A": r["Pipeline A"], "Pipeline B": r["Pipeline B"], "runs": r["runs"],
                     "LL Acc": r[f"{c.vanilla.metric} Acc"], "CLL Acc": r[f"{c.calibrated.metric} Acc"],
                     "CLL - LL": r["Acc change"]})
    return format_text_table(rows)


def spread_table(comparisons: list[Comparison]) -> str:
    """Per pipeline: LL and CLL mean ± std across seeds and the std reduction."""
    from ctcalc_spark.reports.comparison import format_text_table, spread_table_rows

    rows = [{"pipeline": r["pipeline"], "runs": r["runs"], "LL mean ± std": r["log_loss mean ± std"],
             "CLL mean ± std": r["calibrated_log_loss mean ± std"], "std reduction": r["std reduction"]}
            for r in spread_table_rows(comparisons)]
    return format_text_table(rows)
