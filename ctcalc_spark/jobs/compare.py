"""The compare job: per-run metrics of two pipelines from the evaluate job's tables, compared and reported.

One value per run: for one day, the ``slice_name = '__all__'`` row of the
metrics table; for several days, the summaries of those days summed per
(model, run) and finalised (:func:`ctcalc_spark.core.finalize.metrics_from_summaries`),
never an average of daily values. Runs whose status is not ``ok`` have no
calibrated value and are left out of both metrics (and counted).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import pandas as pd

from ctcalc_spark.core.accuracy import Comparison, NoiseCheck, compare_runs, single_run_noise
from ctcalc_spark.config import JobConfig
from ctcalc_spark.errors import ConfigError, InputError
from ctcalc_spark.config import validate_ds
from ctcalc_spark.spark.progress import long_step
from ctcalc_spark.tables import OutputStore
from ctcalc_spark.core.finalize import ALL, metrics_from_summaries
from ctcalc_spark.core.rolling_compare import RollingComparison
from ctcalc_spark.core.windows import WindowSpec

log = logging.getLogger(__name__)

METRIC_NAMES = {
    "binary": ("log_loss", "calibrated_log_loss"),
    "multiclass": ("log_loss", "calibrated_log_loss"),
    "regression": ("mse", "calibrated_mse"),
}


SANITY_COLUMNS = ("n_rows", "n_bias", "base_rate", "n_extreme", "n_clipped")
"""Metrics-table columns :func:`run_metrics` passes on for the data checks (when the table has them)."""


def metric_names(task: str) -> tuple[str, str]:
    """(vanilla, calibrated) column names of the metrics table for a task."""
    return METRIC_NAMES[task]


def available_days(store: OutputStore, table: str = "metrics") -> list[str]:
    """The ds partitions present in an output table, sorted."""
    if not store.exists(table):
        raise InputError(f"No {table} table at {store.location(table)!r}; run the evaluate job first "
                         "(ctcalc evaluate).")
    return store.days(table)


def _read_table(store: OutputStore, cfg: JobConfig, table: str, days: Sequence[str],
                models: Sequence[str]) -> pd.DataFrame:
    missing = sorted(set(days) - set(store.days(table)))
    if missing:
        have = store.days(table)
        span = f"{have[0]}..{have[-1]}" if have else "none"
        raise InputError(f"Missing {table} partitions ds={missing} under {store.location(table)!r} (available: "
                         f"{span}); run the evaluate job for those days first.")
    store.require_one_run(days)
    model = cfg.columns.model if table == "summaries" else "model"  # summaries keep the input's column names
    with long_step(f"compare: reading {table}", store.spark):
        return store.read(table, days=days, where={model: list(models)}, task=cfg.task)


def _check_models(found: Iterable[Any], models: Sequence[str], cfg: JobConfig, table: str, days: Sequence[str],
                  store: OutputStore) -> None:
    """InputError naming each model of ``models`` with no rows in ``found`` (the models column read for
    ``models`` only) and the models the table has on those days."""
    have = {str(m) for m in found}
    missing = [m for m in models if m not in have]
    if not missing:
        return
    column = cfg.columns.model if table == "summaries" else "model"
    present = sorted({str(m) for m in store.read(table, days=days)[column].dropna().unique()})
    span = days[0] if len(days) == 1 else f"{days[0]}..{days[-1]}"
    folded = {p.casefold(): p for p in present}
    cased = [f"{m!r} is {folded[m.casefold()]!r}" for m in missing if m.casefold() in folded]
    hint = f" Model names are matched exactly, letter case included: {', '.join(cased)} there." if cased else ""
    raise InputError(f"No rows of model(s) {missing} in the {table} table on {span}; the models there: {present}."
                     + hint)


def _distinct_pair(model_a: str, model_b: str) -> None:
    if model_a == model_b:
        raise ConfigError(f"--a and --b both name {model_a!r}: a comparison needs two different pipelines (models).")


def run_metrics(cfg: JobConfig, models: Sequence[str], days: Sequence[str], *,
                store: OutputStore | None = None) -> pd.DataFrame:
    """Per (model, run): the vanilla and calibrated metric over ``days`` (columns model, run, <metrics>, status,
    and those of :data:`SANITY_COLUMNS` the metrics have), read from ``store`` (``OutputStore(cfg)`` when not
    given; catalog outputs pass theirs, which holds the Spark session)."""
    days = [validate_ds(d) for d in days]
    if not days:
        raise ConfigError("Expected at least one ds to compare.")
    store = store or OutputStore(cfg)
    if len(days) == 1:
        m = _read_table(store, cfg, "metrics", days, models)
        _check_models(m["model"] if "model" in m else [], models, cfg, "metrics", days, store)
        m = m[(m["slice_name"] == ALL) & (m["slice_value"] == ALL)]
    else:
        if cfg.task == "multiclass":
            raise ConfigError("Several days can only be merged from summaries, which the multiclass task has not; "
                              "compare one ds at a time.")
        s = _read_table(store, cfg, "summaries", days, models)
        _check_models(s[cfg.columns.model] if cfg.columns.model in s else [], models, cfg, "summaries", days, store)
        s = s.rename(columns={cfg.columns.model: "model", cfg.columns.run: "run"})
        for col in ("model", "run"):
            s[col] = s[col].astype(str)
        m = metrics_from_summaries(s, cfg.task, keys=["model", "run"], bin_width=cfg.histogram.bin_width,
                                   max_abs_logit=cfg.sanity.max_abs_logit, min_bias_rows=cfg.split.min_bias_rows)
        held = s.groupby(["model", "run"])["ds"].agg(lambda d: set(d.astype(str)))
        absent = {k: ",".join(sorted(set(days) - v)) for k, v in held.items()}  # for the unequal-rows warning
        m = m.assign(missing_days=[absent.get((str(a), str(b)), "") for a, b in zip(m["model"], m["run"])])
    if m.empty:
        raise InputError(f"No metrics rows for models {list(models)} on days {list(days)}.")
    m = m.assign(model=m["model"].astype(str), run=m["run"].astype(str))
    dup = m.duplicated(["model", "run"])
    if dup.any():
        raise InputError(f"Several metrics rows per (model, run) for {m.loc[dup, ['model', 'run']].head().values.tolist()}.")
    van, cal = metric_names(cfg.task)
    extra = [x for x in (*SANITY_COLUMNS, "missing_days") if x in m.columns]  # old metrics may lack a column
    return m[["model", "run", van, cal, "status", *extra]].sort_values(["model", "run"], key=_natural).reset_index(
        drop=True)


def _natural(col: pd.Series) -> pd.Series:
    """Sort runs '2' before '10'."""
    return col.map(lambda v: (0, int(v), "") if str(v).isdigit() else (1, 0, str(v)))


@dataclass
class PairResult:
    """A comparison with the runs it used and left out."""

    comparison: Comparison
    excluded: dict[str, list[str]] = field(default_factory=dict)
    noise_checks: list[NoiseCheck] = field(default_factory=list)


def compare_pipelines(
    per_run: pd.DataFrame,
    task: str,
    model_a: str,
    model_b: str,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
    single_run: tuple[str, str] | None = None,
    baseline: str | None = None,
) -> PairResult:
    """Compare two models of a :func:`run_metrics` frame; optionally the single-run noise check.

    ``single_run = (run_a, run_b)``: how likely the difference between that run
    of A and that run of B is noise, given the other runs of ``baseline``
    (default: A) as the seed-noise reference.
    """
    _distinct_pair(model_a, model_b)
    van, cal = metric_names(task)
    excluded: dict[str, list[str]] = {}
    values: dict[str, pd.DataFrame] = {}
    for name in (model_a, model_b):
        rows = per_run[per_run["model"] == name]
        if rows.empty:
            have = sorted(per_run["model"].unique())
            raise InputError(f"No runs of model {name!r} in the metrics table; models present: {have}.")
        bad = (rows["status"] != "ok") | rows[cal].isna() | rows[van].isna()
        excluded[name] = [f"{r}: {s}" for r, s in zip(rows.loc[bad, "run"], rows.loc[bad, "status"])]
        values[name] = rows[~bad]
    comp = compare_runs(
        values[model_a][van].to_numpy(float), values[model_a][cal].to_numpy(float),
        values[model_b][van].to_numpy(float), values[model_b][cal].to_numpy(float),
        name_a=model_a, name_b=model_b, metric=van, calibrated_metric=cal, n_boot=n_boot, level=level, seed=seed,
    )
    checks: list[NoiseCheck] = []
    if single_run is not None:
        checks = single_run_checks(per_run, task, model_a, single_run[0], model_b, single_run[1], baseline or model_a)
    return PairResult(comp, excluded, checks)


def single_run_checks(per_run: pd.DataFrame, task: str, model_a: str, run_a: str, model_b: str, run_b: str,
                      baseline: str) -> list[NoiseCheck]:
    """The single-run helper on table rows: one check per metric (vanilla, calibrated)."""
    ok = per_run[per_run["status"] == "ok"]

    def one(model: str, run: str) -> pd.Series:
        r = ok[(ok["model"] == model) & (ok["run"] == str(run))]
        if r.empty:
            raise InputError(f"No run {run!r} of model {model!r} with status ok in the metrics table.")
        return r.iloc[0]

    if baseline not in (model_a, model_b):
        raise ConfigError(f"--baseline names the pipeline whose other runs give the seed noise: {model_a!r} (--a, "
                          f"the default) or {model_b!r} (--b), got {baseline!r}.")
    ra, rb = one(model_a, run_a), one(model_b, run_b)
    base = ok[ok["model"] == baseline]
    base = base[~(((base["model"] == model_a) & (base["run"] == str(run_a)))
                  | ((base["model"] == model_b) & (base["run"] == str(run_b))))]
    if len(base) < 2:
        other = model_b if baseline == model_a else model_a
        raise InputError(f"--single-run estimates the seed noise from the other runs of {baseline!r} (--baseline): "
                         f"it has {len(base)} with status ok besides the run compared, and the noise needs 2 or more. "
                         f"Evaluate more runs of {baseline!r}, or set --baseline {other} if it has them.")
    return [single_run_noise(float(ra[m]), float(rb[m]), base[m].to_numpy(float), metric=m)
            for m in metric_names(task)]


def _span(ds_from: str, ds_to: str) -> tuple[str, str]:
    """--ds-from and --ds-to, validated, in order."""
    lo, hi = validate_ds(ds_from, "--ds-from"), validate_ds(ds_to, "--ds-to")
    if lo > hi:
        raise ConfigError(f"--ds-from {lo} is after --ds-to {hi}.")
    return lo, hi


def resolve_days(store: OutputStore, ds: str | None, ds_from: str | None, ds_to: str | None) -> list[str]:
    """``--ds`` alone, or every metrics partition of ``store`` in ``[ds_from, ds_to]``."""
    if ds is not None:
        if ds_from or ds_to:
            raise ConfigError("Give either --ds or --ds-from/--ds-to, not both.")
        return [validate_ds(ds)]
    if not (ds_from and ds_to):
        raise ConfigError("Give --ds DATE, or --ds-from DATE and --ds-to DATE (inclusive).")
    lo, hi = _span(ds_from, ds_to)
    days = [d for d in available_days(store, "metrics") if lo <= d <= hi]
    if not days:
        raise InputError(f"No metrics partitions between {lo} and {hi} under {store.location('metrics')!r}.")
    return days


@dataclass
class RollingCompareResult:
    """A rolling comparison with the days it read and the extreme-score counts of its runs over the period."""

    comparison: RollingComparison
    days_read: list[str]
    extreme: pd.DataFrame


def rolling_comparison(cfg: JobConfig, model_a: str, model_b: str, ds_from: str, ds_to: str, *,
                       spec: WindowSpec | None = None, store: OutputStore | None = None, n_boot: int = 2000,
                       level: float = 0.95, seed: int = 0) -> RollingCompareResult:
    """Pipelines A and B under previous-window calibration over [ds_from, ds_to], from the stored daily summaries
    of ``store`` (``OutputStore(cfg)`` when not given) with no rescan: per-window and whole-period Acc,
    :mod:`ctcalc_spark.core.rolling_compare`."""
    from ctcalc_spark.core.rolling_compare import comparison_windows, compare_rolling, days_needed, run_table
    from ctcalc_spark.core.sanity import extreme_counts

    from ctcalc_spark.jobs.rolling import check_rolling_task

    check_rolling_task(cfg)
    _distinct_pair(model_a, model_b)
    lo, hi = _span(ds_from, ds_to)
    spec = spec or WindowSpec.from_config(cfg.rolling)
    windows = comparison_windows(lo, hi, spec)
    store = store or OutputStore(cfg)
    available = available_days(store, "summaries")
    if not any(lo <= d <= hi for d in available):
        span = f"{available[0]}..{available[-1]}" if available else "none"
        raise InputError(f"No summaries between {lo} and {hi} under {store.location('summaries')!r} (available: "
                         f"{span}); run `ctcalc evaluate --ds {lo}..{hi}` first.")
    present = set(available)
    days = [d for d in days_needed(windows, spec, hi) if d in present]
    store.require_one_run(days)
    c = cfg.columns
    with long_step("rolling comparison: reading summaries", store.spark):
        rows = store.read("summaries", days=days, where={c.model: [model_a, model_b]}, task=cfg.task)
    _check_models(rows[c.model] if c.model in rows else [], [model_a, model_b], cfg, "summaries", days, store)
    rows = rows.assign(ds=rows["ds"].astype(str),
                       **{c.model: rows[c.model].astype(str), c.run: rows[c.run].astype(str)})
    table = run_table(rows, cfg.task, windows, spec, model=c.model, run=c.run, bin_width=cfg.histogram.bin_width,
                      first_ds=available[0], end=hi)
    rc = compare_rolling(table, cfg.task, model_a, model_b, spec=spec, start=lo, end=hi, n_boot=n_boot, level=level,
                         seed=seed)
    extreme = pd.DataFrame()
    if cfg.task == "binary":
        current = rows[rows["ds"].isin({d for w in windows for d in w.days(until=hi)})]
        extreme = extreme_counts(current.rename(columns={c.model: "model", c.run: "run"}), ["model", "run"],
                                 max_abs_logit=cfg.sanity.max_abs_logit, bin_width=cfg.histogram.bin_width)
    return RollingCompareResult(rc, days, extreme)


def summary_payload(result: PairResult, days: Sequence[str]) -> dict[str, Any]:
    """Extra JSON fields of one compare run."""
    return {"days": list(days), "excluded_runs": result.excluded}
