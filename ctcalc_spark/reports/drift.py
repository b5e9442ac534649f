"""Drift report: one self-contained HTML file (plots as base64 PNG) plus the same numbers as CSV and JSON.

Numbers come from the stored daily summaries, summed per window and finalised
by :func:`ctcalc_spark.core.windows.rolling_metrics` (the rolling job's math), so a
report never rescans evaluation rows and needs no Spark for a local output folder.

The page leads with the answer (docs/reports.md): a short summary (which models'
bias moved, when, by how much; vanilla vs calibrated spread across runs), then
the plots, then the largest flagged moves (top N; the full list is in the
``_flags.csv`` and the JSON), then the windows without a calibrated value.

A move is judged per model and window on ``Δc̄``, the across-run mean of
``c*(t) - c*(t-1)``. It is flagged when it exceeds both

* the model's limit: ``k · s`` by default, ``s`` the model's seed spread of c* (median over windows of the
  across-run std of c*), the run-to-run noise that calibration removes; ``--threshold`` gives a fixed limit
  instead; and
* the labels' sampling noise of c* in that window (:func:`label_noise`, a 99 % half-width): refitted on a new
  window's labels, c* moves that much with no drift at all, and the runs share the rows, so averaging runs does
  not shrink it.

A move beyond the limit but within that noise is not flagged; the page lists it apart.
"""
from __future__ import annotations

import datetime as dt
import html
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ctcalc_spark.config import JobConfig, config_to_dict
from ctcalc_spark.core.finalize import ALL
from ctcalc_spark.core.findings import Finding, render
from ctcalc_spark.core.summary import BinarySummary, RegressionSummary
from ctcalc_spark.core.days import parse_day
from ctcalc_spark.core.windows import (
    METRIC_NAME,
    Window,
    WindowSpec,
    attach_exact,
    day_runs,
    previous_window,
    parts_within,
    read_in_parts,
    rolling_metrics,
    window_of,
    window_summaries,
    windows_between,
)
from ctcalc_spark.errors import ConfigError, InputError
from ctcalc_spark.pathsafe import report_root, write_atomic
from ctcalc_spark.redact import redact, redact_url, spreadsheet_safe
from ctcalc_spark.reports.plotting import figure_png, fix_date_ticks, img_tag, plain, pyplot

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_SPREAD_K = 2.0
"""Default k of the rule |Δc̄| > k · (seed spread of c*)."""
NOISE_Z = 2.5758293035489004
"""z of the labels' sampling noise a flagged move must exceed: the 99 % two-sided normal quantile, so on data
without drift about 1 % of model-windows pass it by chance (a 95 % half-width passes 1 in 20)."""
DEFAULT_TOP = 25
"""Flagged moves shown on the page (largest |Δc̄| first); every one is in the CSV and JSON."""
SUMMARY_MODELS = 12
"""Models listed in the summary table (flagged first); the JSON has them all."""

SECTIONS = ("bias", "metric", "gap", "calibration", "reliability")
"""Plot sections per model, in page order (each an embedded PNG)."""
SECTION_TITLES = {
    "bias": "Fitted bias c* per window, flagged moves marked",
    "metric": "Vanilla and calibrated {metric} over time",
    "gap": "Gap vanilla − calibrated",
    "calibration": "Calibration over time",
    "reliability": "Reliability diagram, latest window",
}


@dataclass(frozen=True)
class FlagRule:
    """When a model's bias move in a window is flagged.

    ``spread_k`` set: ``|Δc̄| > spread_k · s`` with ``s`` the model's seed spread of c*;
    a model with fewer than two runs (no spread) falls back to ``|Δc̄| > threshold``.
    ``spread_k`` None: ``|Δc̄| > threshold`` for every model.
    """

    spread_k: float | None = DEFAULT_SPREAD_K
    threshold: float = 0.1

    def __post_init__(self) -> None:
        if self.spread_k is not None and not (math.isfinite(self.spread_k) and self.spread_k > 0):
            raise ConfigError(f"Expected a positive --spread-k, got {self.spread_k}; 2 flags moves above "
                              "twice the run-to-run spread of the bias.")
        if not (math.isfinite(self.threshold) and self.threshold >= 0):
            raise ConfigError(f"Expected a bias threshold >= 0, got {self.threshold}; set --threshold or "
                              "rolling.bias_threshold to a logit (binary) or mean (regression) shift such as 0.1.")

    @classmethod
    def from_options(cls, cfg: JobConfig, *, threshold: float | None = None,
                     spread_k: float | None = None) -> FlagRule:
        """``--threshold`` (absolute) or ``--spread-k`` (relative, the default); not both."""
        if threshold is not None and spread_k is not None:
            raise ConfigError(f"Give either --threshold (an absolute limit, got {threshold}) or --spread-k "
                              f"(a multiple of the seed spread, got {spread_k}), not both.")
        if threshold is not None:
            return cls(None, float(threshold))
        return cls(DEFAULT_SPREAD_K if spread_k is None else float(spread_k), float(cfg.rolling.bias_threshold))

    def describe(self) -> str:
        noise = " and beyond the labels' sampling noise of c* (99 %)"
        if self.spread_k is None:
            return f"|Δc̄| > {self.threshold:g}, a fixed limit,{noise}"
        return (f"|Δc̄| > {self.spread_k:g} × the model's seed spread of c*{noise}; "
                f"models with one run: |Δc̄| > {self.threshold:g}")


@dataclass(frozen=True)
class ReportInput:
    """What the report reads from storage: daily summary rows and in-scan exact sums.

    ``rows``: the summary rows, or a function that reads them a part at a time, ``rows(days)``, and
    ``rows(days, keys)`` each combination of the ``keys`` columns' values in those days once; ``days``: then the
    days it has rows for.
    """

    rows: pd.DataFrame | Callable[..., pd.DataFrame]
    exact: pd.DataFrame
    first_ds: str | None
    last_ds: str | None
    source: str
    days: tuple[str, ...] = ()

    def reader(self) -> tuple[Callable[..., pd.DataFrame], set[str]]:
        """(``rows`` as a function, the days with rows)."""
        if callable(self.rows):
            return self.rows, set(self.days)
        frame, ds = self.rows, self.rows["ds"].astype(str)

        def read(days: Sequence[str], keys: Sequence[str] | None = None) -> pd.DataFrame:
            part = frame[ds.isin(days).to_numpy()]
            return part if keys is None else part[list(keys)].drop_duplicates(ignore_index=True)
        return read, set(ds) if not frame.empty else set()


@dataclass
class DriftReport:
    """The report's data and where its files went."""

    start: str
    end: str
    task: str
    spec: WindowSpec
    rule: FlagRule
    top: int
    table: pd.DataFrame
    moves: pd.DataFrame
    flags: pd.DataFrame
    summary: pd.DataFrame
    latest: dict[tuple[str, str], Any] = field(repr=False, default_factory=dict)
    latest_label: str = ""
    paths: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    """Data checks (extreme logits, clipped probabilities) shown in the summary."""

    @property
    def whole(self) -> pd.DataFrame:
        """Rows of the '__all__' slice view for windows with data."""
        t = self.table
        return t[(t["slice_name"] == ALL) & (t["n_rows"] > 0)]


# ---- reading (the one place that touches storage) --------------------------------------------------

def read_report_input(cfg: JobConfig, start: str, end: str, spec: WindowSpec,
                      spark: SparkSession | None = None, *, as_of: int | dt.datetime | None = None) -> ReportInput:
    """Daily summaries (text columns as categoricals) and calibrated_exact rows of the windows touching [start, end]
    and their previous windows, as the tables are now or ``as_of`` a version of the metrics table or a time."""
    from ctcalc_spark.tables import OutputStore

    if cfg.task not in ("binary", "regression"):  # it said "No summaries … run the evaluate job for those days"
        raise ConfigError(f"The drift report is made from the daily summaries, which the {cfg.task} task does not "
                          "write (the binary and regression tasks do); compare runs of one day with `ctcalc compare "
                          "--ds`.")

    windows = windows_between(start, end, spec)
    store = OutputStore(cfg, spark, as_of=as_of)
    available = store.days("summaries")
    days = sorted({d for w in windows for d in w.days(until=end)}
                  | {d for w in windows for d in previous_window(w, spec).days()})
    present = set(available)
    have = tuple(d for d in days if d in present)
    store.require_one_run(list(have))

    def read(part: Sequence[str], keys: Sequence[str] | None = None) -> pd.DataFrame:
        if keys is not None:
            return store.read("summaries", days=part, columns=keys, distinct=True)
        return store.read("summaries", days=part, task=cfg.task, categories=True)
    exact = store.read("calibrated_exact", days=days, where={"window_spec": [spec.label]})
    return ReportInput(read, exact, available[0] if available else None, available[-1] if available else None,
                       store.location("summaries"), have)


# ---- building the report data (pure) ---------------------------------------------------------------

def _numeric(frame: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """Columns that hold None for undefined values, as floats (None -> NaN) for arithmetic."""
    return frame.assign(**{c: pd.to_numeric(frame[c], errors="coerce") for c in cols})


def spread_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per model: median over windows of the across-run std of the vanilla and calibrated metric."""
    whole = _numeric(table[(table["slice_name"] == ALL) & (table["status"] == "ok")],
                     ["vanilla", "calibrated", "calibration_gain"])
    out = []
    for model, grp in whole.groupby("model", sort=True):
        per_w = grp.groupby("window").agg(runs=("run", "nunique"), sv=("vanilla", "std"), sc=("calibrated", "std"))
        per_w = per_w[per_w["runs"] > 1]
        sv = float(per_w["sv"].median()) if len(per_w) else math.nan
        sc = float(per_w["sc"].median()) if len(per_w) else math.nan
        out.append({"model": model, "windows": int(grp["window"].nunique()), "runs": int(grp["run"].nunique()),
                    "median_std_vanilla": sv, "median_std_calibrated": sc,
                    "std_reduction_pct": 100.0 * (1 - sc / sv) if sv > 0 else math.nan,
                    "mean_gap": float(grp["calibration_gain"].mean())})
    return pd.DataFrame(out, columns=["model", "windows", "runs", "median_std_vanilla", "median_std_calibrated",
                                      "std_reduction_pct", "mean_gap"])


def seed_spread(whole: pd.DataFrame) -> pd.Series:
    """Per model: median over windows (with >= 2 runs) of the across-run std (ddof 1) of c*."""
    b = _numeric(whole, ["bias"]).dropna(subset=["bias"])
    per_w = b.groupby(["model", "window"])["bias"].agg(["std", "count"])
    per_w = per_w[per_w["count"] > 1]
    return per_w.groupby(level="model")["std"].median().rename("seed_spread")


MOVE_COLUMNS = ["window", "window_start", "window_end", "model", "runs", "prev_bias", "bias", "move",
                "run_move_min", "run_move_max", "seed_spread", "in_seed_spreads", "limit", "basis", "flagged",
                "label_noise", "within_noise"]


class ModelInformation:
    """Per model, the information about c per unit weight, median over its (run, day) summaries: binary, the
    mean q(1-q) at the day's own c* (Fisher information; of at most 200 of the groups, evenly spaced in their
    sorted order); regression, 1 / the variance of the residual y - p (c* is the mean residual). Of the rows
    given to :meth:`add` a part at a time, each (model, run, day) in one part; ``keys``: every (model, run, ds)
    of them (binary: the groups are picked before the rows are read). Nothing for multiclass."""

    def __init__(self, cfg: JobConfig, keys: pd.DataFrame) -> None:
        from ctcalc_spark.core.sanity import information_picks

        c = cfg.columns
        self.task, self.bin_width, self.by = cfg.task, cfg.histogram.bin_width, [c.model, c.run, "ds"]
        self.picks: dict[Any, list[tuple]] = {}
        self.summaries: dict[tuple, BinarySummary] = {}
        self.sums: list[pd.DataFrame] = []
        if self.task == "binary" and not keys.empty:
            ordered = keys[self.by].dropna(subset=[c.model]).sort_values(self.by, na_position="last", kind="stable")
            for model, grp in ordered.groupby(c.model, sort=True):
                cut = [_key(k) for k in grp.itertuples(index=False, name=None)]
                self.picks[model] = information_picks(cut)
        self.wanted = {k for picked in self.picks.values() for k in picked}

    def add(self, rows: pd.DataFrame) -> None:
        from ctcalc_spark.core.finalize import binary_summary_rows, groups

        if rows.empty:
            return
        if self.task == "regression":
            self.sums.append(rows.groupby(self.by, sort=True, observed=True)[["weight", "wr", "wr2"]].sum())
        elif self.wanted:
            rows = rows[_has_key(rows, self.by, self.wanted)]
            summary_of = binary_summary_rows(rows, self.bin_width)
            for key, idx in groups(rows, self.by):
                if _key(key) in self.wanted:
                    self.summaries[_key(key)] = summary_of(idx)

    def result(self) -> dict[str, float]:
        from ctcalc_spark.core.sanity import information_of

        out = {}
        if self.task == "regression" and self.sums:
            sums = pd.concat(self.sums)
            sums = sums[sums["weight"] > 0]
            var = sums["wr2"] / sums["weight"] - (sums["wr"] / sums["weight"]) ** 2
            for model, v in var[var > 0].groupby(level=0, sort=True, observed=True):
                out[str(model)] = 1.0 / float(v.median())
        for model, picked in self.picks.items():
            info = information_of([self.summaries[k] for k in picked if k in self.summaries])
            if info is not None and info > 0:
                out[str(model)] = info
        return out


def _key(values: tuple) -> tuple:
    """A group's key values with every null as None (NaN != NaN would not find it)."""
    return tuple(None if pd.isna(v) else v for v in values)


def _codes(values: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """(a code per row, -1 for null; the distinct values the codes point to)."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        return values.cat.codes.to_numpy().astype(np.int64), values.cat.categories
    codes, uniques = pd.factorize(values)
    return codes.astype(np.int64), pd.Index(uniques)


def _has_key(rows: pd.DataFrame, by: Sequence[str], keys: set[tuple]) -> np.ndarray:
    """Which rows have one of ``keys`` (values of the ``by`` columns, nulls as None: :func:`_key`) as their values;
    compared as integer codes, not row by row."""
    row_key, wanted = np.zeros(len(rows), dtype=np.int64), np.zeros(len(keys), dtype=np.int64)
    ordered = list(keys)
    for i, col in enumerate(by):
        codes, values = _codes(rows[col])
        want = np.asarray(values.get_indexer(pd.Index([k[i] for k in ordered], dtype=object)), dtype=np.int64)
        if (want < 0).any():  # a null, or a value not in these rows: a null matches a null only
            nulls = np.array([k[i] is None for k in ordered], dtype=bool)
            want = np.where(nulls, -1, np.where(want < 0, -2, want))
        base = len(values) + 2  # codes -2 (absent), -1 (null), 0.. shifted to 0, 1, 2..
        row_key, wanted = row_key * base + codes + 2, wanted * base + want + 2
    return np.isin(row_key, wanted)


def label_noise(whole: pd.DataFrame, information: Mapping[str, float]) -> pd.DataFrame:
    """Per (model, window): the 99 % half-width of the move of c* that the labels' sampling alone gives between
    two windows with no drift, ``2.576 · sqrt(1/(W_t·ī) + 1/(W_{t-1}·ī))`` (W: the windows' weight, median over
    runs; ī: :func:`model_information`; for regression 1/ī is the residual's variance, so this is the standard
    error of a difference of two means). Runs share the rows, so averaging runs does not shrink it."""
    w = _numeric(whole, ["weight", "prev_weight", "bias_change"]).dropna(subset=["bias_change"])
    if w.empty or not information:
        return pd.DataFrame(columns=["model", "window", "label_noise"])
    per = w.groupby(["model", "window"], sort=False).agg(weight=("weight", "median"),
                                                         prev_weight=("prev_weight", "median")).reset_index()
    info = per["model"].astype(str).map(information).astype(float)
    var = 1.0 / (per["weight"] * info) + 1.0 / (per["prev_weight"] * info)
    per["label_noise"] = NOISE_Z * np.sqrt(var.where((per["weight"] > 0) & (per["prev_weight"] > 0)))
    return per[["model", "window", "label_noise"]]


def bias_moves(whole: pd.DataFrame, rule: FlagRule, information: Mapping[str, float] | None = None) -> pd.DataFrame:
    """One row per (model, window) with a bias change: the across-run mean move Δc̄, its limit, flagged or not.

    ``prev_bias``/``bias``: mean c* of t-1 and t over the runs that have both;
    ``run_move_min/max``: the range of the per-run moves; ``in_seed_spreads``: |Δc̄| / s; ``label_noise``:
    :func:`label_noise` (NaN without ``information``). ``flagged``: |Δc̄| beyond the limit and beyond the label
    noise (the limit alone where the noise is unknown); ``within_noise``: beyond the limit but not the noise, a
    move the window is too small to tell from sampling, not flagged.
    """
    w = _numeric(whole, ["bias", "prev_bias", "bias_change"]).dropna(subset=["bias_change"])
    if w.empty:
        types = {c: float for c in MOVE_COLUMNS if c not in ("window", "window_start", "window_end", "model", "basis")}
        return pd.DataFrame(columns=MOVE_COLUMNS).astype({**types, "runs": int, "flagged": bool, "within_noise": bool})
    moves = w.groupby(["model", "window"], sort=False).agg(
        window_start=("window_start", "first"), window_end=("window_end", "first"), runs=("run", "nunique"),
        prev_bias=("prev_bias", "mean"), bias=("bias", "mean"), move=("bias_change", "mean"),
        run_move_min=("bias_change", "min"), run_move_max=("bias_change", "max"),
    ).reset_index()
    s = moves["model"].map(seed_spread(whole)).astype(float)
    moves["seed_spread"] = s
    relative = np.isfinite(s) & (s > 0) & (rule.spread_k is not None)
    k = rule.spread_k or 0.0
    moves["in_seed_spreads"] = (moves["move"].abs() / s).where(np.isfinite(s) & (s > 0))
    moves["limit"] = np.where(relative, k * s, rule.threshold)
    moves["basis"] = np.where(relative, f"{k:g} x seed spread", "absolute")
    noise = label_noise(whole, information or {})
    moves = moves.merge(noise, on=["model", "window"], how="left")
    moves["label_noise"] = moves["label_noise"].astype(float)
    size = moves["move"].abs()
    beyond_limit = size > moves["limit"]
    inside_noise = moves["label_noise"].notna() & (size <= moves["label_noise"])
    moves["flagged"] = beyond_limit & ~inside_noise
    moves["within_noise"] = beyond_limit & inside_noise
    return moves[MOVE_COLUMNS].sort_values(["window_start", "model"], kind="stable").reset_index(drop=True)


def _largest(moves: pd.DataFrame) -> pd.Series | None:
    return None if moves.empty else moves.loc[moves["move"].abs().idxmax()]


def model_summary(whole: pd.DataFrame, moves: pd.DataFrame, spread: pd.DataFrame) -> pd.DataFrame:
    """Per model: runs, windows, flagged moves, the largest move (flagged if any), last flagged window, spreads."""
    out = []
    sp = spread.set_index("model") if not spread.empty else pd.DataFrame()
    for model, grp in whole.groupby("model", sort=True):
        mv = moves[moves["model"] == model]
        fl = mv.loc[mv["flagged"].astype(bool)]
        big = _largest(fl if not fl.empty else mv)
        row = {
            "model": model, "runs": int(grp["run"].nunique()), "windows": int(grp["window"].nunique()),
            "moves": len(mv), "flagged": len(fl), "within_noise": int(mv["within_noise"].astype(bool).sum()),
            "largest_move": None if big is None else float(big["move"]),
            "largest_move_window": None if big is None else big["window"],
            "largest_in_seed_spreads": None if big is None or pd.isna(big["in_seed_spreads"])
            else float(big["in_seed_spreads"]),
            "last_flagged_window": fl.sort_values("window_start")["window"].iloc[-1] if len(fl) else None,
            "seed_spread": None if mv.empty or pd.isna(mv["seed_spread"].iloc[0]) else float(mv["seed_spread"].iloc[0]),
            "limit": None if mv.empty else float(mv["limit"].iloc[0]),
            "basis": None if mv.empty else mv["basis"].iloc[0],
        }
        for col in ("median_std_vanilla", "median_std_calibrated", "std_reduction_pct"):
            v = sp.loc[model, col] if model in sp.index else math.nan
            row[col] = None if pd.isna(v) else float(v)
        out.append(row)
    frame = pd.DataFrame(out)
    if frame.empty:
        return frame
    order = frame.assign(_size=pd.to_numeric(frame["largest_move"]).abs().fillna(-1.0))
    ranked = order.sort_values(["flagged", "_size"], ascending=False, kind="stable").index
    return frame.loc[ranked].reset_index(drop=True)


def build_report(inp: ReportInput, cfg: JobConfig, start: str, end: str, *, spec: WindowSpec | None = None,
                 rule: FlagRule | None = None, top: int = DEFAULT_TOP) -> DriftReport:
    """Every number of the report from its input: rolling table, moves, flags (largest first), model summary."""
    spec = spec or WindowSpec.from_config(cfg.rolling)
    rule = rule or FlagRule.from_options(cfg)
    if int(top) < 1:
        raise ConfigError(f"Expected --top >= 1 flagged windows on the page, got {top}.")
    read, have = inp.reader()
    if not any(start <= d <= end for d in have):
        have_text = f"{inp.first_ds}..{inp.last_ds}" if inp.first_ds else "none"
        raise InputError(f"No summaries between {start} and {end} under {inp.source!r} (available: {have_text}); "
                         "run the evaluate job for those days first.")
    windows = windows_between(start, end, spec)
    c = cfg.columns
    period = sorted(d for d in have if start <= d <= end)
    information = ModelInformation(cfg, read(period, [c.model, c.run, "ds"]) if cfg.task == "binary"
                                   else pd.DataFrame())
    # the windows a part at a time (each day read once, read_in_parts): the rolling rows of the part's windows and,
    # from the days of the period in them, the information and the extreme logits
    parts = parts_within(windows, lambda w: w.start)
    part_days = [sorted({d for w in part for d in [*w.days(until=end), *previous_window(w, spec).days()]} & have)
                 for part in parts]
    tables, extreme, latest, latest_summ = [], [], windows[-1], {}
    for part, rows in zip(parts, read_in_parts(read, part_days)):
        tables.append(rolling_metrics(rows, cfg.task, part, spec, model=c.model, run=c.run, slices=c.slices,
                                      bin_width=cfg.histogram.bin_width, first_ds=inp.first_ds, until=end))
        own = rows[_on_days(rows["ds"], [d for w in part for d in w.days(until=end)
                                         if d >= start and window_of(d, spec) == w])]
        information.add(own)
        if cfg.task == "binary":
            extreme.append(_extreme_counts(own, cfg))
        if part[-1] == latest:
            latest_rows = rows[_on_days(rows["ds"], [d for d in have if latest.start <= d <= min(latest.end, end)])]
            latest_summ = dict(window_summaries(latest_rows, cfg.task, latest, by=[c.model, c.run],
                                                bin_width=cfg.histogram.bin_width))
        del rows, own
    table = pd.concat(tables, ignore_index=True) if len(tables) > 1 else tables[0]
    table = attach_exact(table, inp.exact)
    whole = table[(table["slice_name"] == ALL) & (table["n_rows"] > 0)]
    moves = bias_moves(whole, rule, information.result())
    flags = moves.loc[moves["flagged"].astype(bool)]
    flags = flags.loc[flags["move"].abs().sort_values(ascending=False, kind="stable").index].reset_index(drop=True)
    return DriftReport(start, end, cfg.task, spec, rule, int(top), table, moves, flags,
                       model_summary(whole, moves, spread_table(table)), latest_summ, latest.label,
                       warnings=[*_missing_days_warning(have, start, end, inp.source),
                                 *map(render, _extreme_scores(extreme, cfg))])


def _on_days(ds: pd.Series, days: Sequence[str]) -> np.ndarray:
    """Which rows' day (``ds``) is one of ``days``; a categorical's days are compared once per category."""
    if isinstance(ds.dtype, pd.CategoricalDtype):
        return np.r_[ds.cat.categories.astype(str).isin(days), False][ds.cat.codes.to_numpy()]
    return ds.astype(str).isin(days).to_numpy()


def _missing_days_warning(have: set[str], start: str, end: str, source: str) -> list[str]:
    """A warning naming the days of [start, end] without daily summaries (``have``: the days with them): their
    windows are short of days or missing from the page, which the window counts alone did not tell."""
    asked = Window(start, end, f"{start}..{end}").days()
    missing = sorted(set(asked) - have)
    if not missing:
        return []
    return [f"WARNING: no daily summaries for {len(missing)} of the {len(asked)} days {start}..{end} "
            f"({day_runs(missing)}) under {source!r}: the windows of those days are missing or short of days here. "
            "Run `ctcalc evaluate` for them (a range in one job) and make the report again."]


def _extreme_counts(rows: pd.DataFrame, cfg: JobConfig) -> pd.DataFrame:
    """Per run of binary summary rows, rows, rows with logits beyond sanity.max_abs_logit and clipped rows."""
    from ctcalc_spark.core.sanity import extreme_counts

    c = cfg.columns
    return extreme_counts(rows, [c.model, c.run], max_abs_logit=cfg.sanity.max_abs_logit,
                          bin_width=cfg.histogram.bin_width)


def _extreme_scores(counts: list[pd.DataFrame], cfg: JobConfig) -> list[Finding]:
    """The warnings for runs with logits beyond sanity.max_abs_logit or clipped probabilities in the period, from
    :func:`_extreme_counts` of its parts."""
    from ctcalc_spark.core.sanity import effective_limit, extreme_scores

    counts = [n for n in counts if not n.empty]
    if cfg.task != "binary" or not counts:
        return []
    c, h = cfg.columns, cfg.histogram.bin_width
    total = pd.concat(counts).groupby([c.model, c.run], sort=True, dropna=False, observed=True).sum().reset_index()
    return extreme_scores(total, [c.model, c.run], limit=effective_limit(cfg.sanity.max_abs_logit, h))


def headline(report: DriftReport, *, most: int = 5) -> list[str]:
    """The summary in sentences: which models' bias moved, when, by how much; calibrated vs vanilla spread."""
    s, mv = report.summary, report.moves
    if s.empty:
        return ["No window has data."]
    moved = s[s["flagged"] > 0]
    n = f"{len(report.flags):,} of {len(mv):,} model-windows"
    if mv.empty:
        out = ["No bias move to check: no window has a previous window with a fitted c* (first windows, gaps)."]
    elif moved.empty:
        big = _largest(mv)
        tail = "" if big is None else (f" The largest move was {big['move']:+.3g} ({big['model']}, window "
                                       f"{big['window']}); its limit {big['limit']:.3g}"
                                       + ("" if pd.isna(big["label_noise"])
                                          else f", the label noise ±{big['label_noise']:.3g}") + ".")
        out = [f"No model's bias moved beyond its limit and the labels' sampling noise ({n} checked).{tail}"]
    else:
        items = []
        for r in moved.head(most).itertuples():
            times = f"{r.flagged} windows, last in {r.last_flagged_window}, largest" if r.flagged > 1 else "1 window,"
            ratio = "" if pd.isna(r.largest_in_seed_spreads) else f" ({r.largest_in_seed_spreads:.1f}× its seed spread)"
            items.append(f"{r.model}: {times} {r.largest_move:+.3g} in {r.largest_move_window}{ratio}")
        more = f"; and {len(moved) - most} more models" if len(moved) > most else ""
        out = [f"Bias moved beyond its limit and the labels' sampling noise in {n}. " + "; ".join(items) + more + "."]
    noisy = noise_line(report.moves, report.spec)
    if noisy:
        out.append(noisy)
    red = s.dropna(subset=["std_reduction_pct"]) if "std_reduction_pct" in s else s.iloc[0:0]
    if not red.empty:
        lower = int((red["std_reduction_pct"] > 0).sum())
        parts = [f"{r.model} {r.median_std_vanilla:.3g} → {r.median_std_calibrated:.3g} ({-r.std_reduction_pct:+.0f}%)"
                 for r in red.head(most).itertuples()]
        metric = METRIC_NAME[report.task]
        out.append(f"Across-run std of {metric} (median over windows), vanilla → calibrated: lower for {lower} of "
                   f"{len(red)} model{'s' if len(red) != 1 else ''}: " + ", ".join(parts)
                   + ("; ..." if len(red) > most else "") + ".")
    else:
        out.append("No window has calibrated values from two or more runs: no across-run spread to compare.")
    return out


def _longer_windows(spec: WindowSpec | None) -> str:
    """Options for windows longer than ``spec``'s."""
    if spec is None or spec.kind == "day":
        return "--window week or month, or --window rolling --days N"
    if spec.kind == "week":
        return "--window month, or --window rolling --days N with N > 7"
    if spec.kind == "month":
        return "--window rolling --days N with N > 31"
    return f"--window rolling --days N with N > {spec.days}"


def noise_line(moves: pd.DataFrame, spec: WindowSpec | None = None) -> str | None:
    """A sentence when moves beyond the limit are within the labels' sampling noise of c* (see :func:`label_noise`):
    they are not flagged, and the page lists them apart."""
    within = moves[moves["within_noise"].astype(bool)]
    if within.empty:
        return None
    typical = float(pd.to_numeric(within["label_noise"], errors="coerce").median())
    return (f"{len(within):,} more model-window{'s' if len(within) != 1 else ''} moved beyond the limit but within "
            f"the labels' sampling noise of c* (median ±{typical:.2g} at 99 %): refitted on a new window's labels, c* "
            "moves that much with no drift at all, so these are not flagged; they are listed apart. Longer windows "
            f"shrink the noise ({_longer_windows(spec)}).")


# ---- plots -----------------------------------------------------------------------------------------

def _dates(values: pd.Series) -> list[dt.date]:
    return [dt.date.fromisoformat(str(s)) for s in values]


DPI = 100
"""Every drift plot's resolution; with fonts of 8 pt and more its text is 11 px or more as shown (1 image pixel per
CSS pixel: the plots are no wider than the page)."""
FONT = 8.5
"""Tick labels and legends, in points."""


def _band(ax: Any, grp: pd.DataFrame, col: str, label: str, color: str) -> None:
    """Mean across runs per window, with the min..max across runs shaded where there are several runs."""
    g = _numeric(grp, [col]).dropna(subset=[col]).groupby("window_end")[col].agg(["mean", "min", "max", "count"])
    if g.empty:
        return
    x = _dates(g.index.to_series())
    ax.plot(x, g["mean"], lw=1.4, color=color, label=f"{label} (mean of runs)", zorder=3)
    if (g["count"] > 1).any():
        ax.fill_between(x, g["min"], g["max"], color=color, alpha=0.2, label=f"{label} (min..max across runs)")


def _per_run(ax: Any, grp: pd.DataFrame, col: str, color: str = "tab:blue") -> None:
    """Each run as a faint grey line, the mean across runs per window on top in ``color``."""
    num = _numeric(grp, [col]).dropna(subset=[col])
    runs = [r for _, r in num.groupby("run", sort=True) if not r.empty]
    for i, r in enumerate(runs):
        ax.plot(_dates(r["window_end"]), r[col], lw=0.7, color="0.55", alpha=0.45,
                label=f"each run ({len(runs)})" if i == 0 else None, zorder=2)
    mean = num.groupby("window_end")[col].mean()
    if not mean.empty:
        ax.plot(_dates(mean.index.to_series()), mean.to_numpy(), lw=1.6, color=color,
                label="mean of runs" if len(runs) > 1 else "the run", zorder=3)


def _finish_ax(ax: Any, title: str, ylabel: str) -> None:
    """Title, labels, grid; the legend outside the axes (beside them with many entries, below with few), so it
    never covers data. Called when every artist is on the axes: the date ticks are fixed (:func:`fix_date_ticks`)."""
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.tick_params(axis="both", labelsize=FONT)
    ax.tick_params(axis="x", labelrotation=30)
    handles, labels = ax.get_legend_handles_labels()
    if len(handles) > LEGEND_BELOW:
        ax.legend(fontsize=FONT, ncol=1 if len(handles) <= 16 else 2, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0.0)
    elif handles:
        wide = max(len(t) for t in labels) > 30  # two columns of long labels would widen the plot
        ax.legend(fontsize=FONT, ncol=1 if wide else min(len(handles), 2), loc="upper center",
                  bbox_to_anchor=(0.5, -0.3), frameon=False)
    fix_date_ticks(ax)


LEGEND_BELOW = 4
"""At most this many legend entries go below a plot; more go beside it."""


def series_styles(n: int) -> list[dict[str, Any]]:
    """Colour and line style of ``n`` lines, all different, and neighbours differ in dash too, so a line drawn on
    top of another close to it leaves the one below visible: matplotlib's 10-colour cycle repeats from the 11th
    line on (two of twelve models shared a colour), so 11 to 20 lines take tab20."""
    import matplotlib

    if n <= 10:
        colors = [matplotlib.colormaps["tab10"](i) for i in range(10)]
    else:
        colors = [matplotlib.colormaps["tab20"](i) for i in range(20)]
    dashes = ["-", (0, (5, 2)), (0, (1, 1.5)), (0, (6, 2, 1, 2))]
    return [{"color": colors[i % len(colors)], "linestyle": dashes[(i + i // len(colors)) % len(dashes)]}
            for i in range(n)]


def _bias_label(task: str) -> str:
    return "logit shift c*" if task == "binary" else "mean shift c*"


def _mark_flags(ax: Any, flags: pd.DataFrame, quiet: pd.DataFrame | None = None) -> None:
    """Flagged moves as red rings at the window's mean c* (the line stays visible through them); moves within the
    label noise, when given, as small grey dots."""
    if quiet is not None and not quiet.empty:
        ax.scatter(_dates(quiet["window_end"]), quiet["bias"], marker="o", s=10, color="0.35", zorder=4,
                   label=f"within label noise, not flagged ({len(quiet)})")
    if not flags.empty:
        ax.scatter(_dates(flags["window_end"]), flags["bias"], marker="o", s=40, facecolors="none",
                   edgecolors="tab:red", linewidths=1.3, zorder=5, label=f"flagged move ({len(flags)})")


def overview_png(report: DriftReport) -> str:
    """One plot across models: mean c* over runs per window, flagged moves marked (the page's first plot)."""
    plt = pyplot()
    whole = _numeric(report.whole, ["bias"])
    fig, ax = plt.subplots(figsize=(10.0, 3.0))
    groups = list(whole.dropna(subset=["bias"]).groupby("model", sort=True))
    for (model, grp), style in zip(groups, series_styles(len(groups))):
        g = grp.groupby("window_end")["bias"].mean()
        ax.plot(_dates(g.index.to_series()), g.to_numpy(), lw=1.3, label=plain(model), **style)
    _mark_flags(ax, report.flags)
    _finish_ax(ax, "Mean c* across runs per window, flagged moves ringed", _bias_label(report.task))
    return figure_png(fig, dpi=DPI, tight=True)


def model_plots(report: DriftReport, model: str) -> dict[str, str]:
    """The base64 PNGs of one model (keys: :data:`SECTIONS`)."""
    plt = pyplot()
    whole = report.whole
    grp = whole[whole["model"] == model]
    task, latest = report.task, report.latest
    metric = METRIC_NAME[task]
    name = plain(model)
    out: dict[str, str] = {}
    size = (6.0, 3.0)

    fig, ax = plt.subplots(figsize=size)
    _per_run(ax, grp, "bias")
    mine = report.moves[report.moves["model"] == model]
    _mark_flags(ax, report.flags[report.flags["model"] == model], mine[mine["within_noise"].astype(bool)])
    _finish_ax(ax, f"{name}: c* fitted on all of each window", _bias_label(task))
    out["bias"] = figure_png(fig, dpi=DPI, tight=True)

    fig, ax = plt.subplots(figsize=size)
    _band(ax, grp, "vanilla", f"vanilla {metric}", "tab:blue")
    _band(ax, grp, "calibrated", f"calibrated {metric}", "tab:orange")
    _finish_ax(ax, f"{name}: vanilla vs rolling-calibrated {metric}", metric)
    out["metric"] = figure_png(fig, dpi=DPI, tight=True)

    fig, ax = plt.subplots(figsize=size)
    _band(ax, grp, "calibration_gain", "vanilla − calibrated", "tab:red")
    _band(ax, grp, "best_shift_gain", "vanilla − metric at the window's own c*", "tab:purple")
    ax.axhline(0.0, color="grey", lw=1)
    _finish_ax(ax, f"{name}: loss a bias shift removes (invisible to the calibrated metric)", metric)
    out["gap"] = figure_png(fig, dpi=DPI, tight=True)

    fig, ax = plt.subplots(figsize=size)
    if task == "binary":
        _per_run(ax, grp, "calibration")
        ax.axhline(1.0, color="grey", lw=1, ls="--")
        _finish_ax(ax, f"{name}: calibration ratio Σw·p / Σw·y", "ratio")
    else:
        _band(ax, grp, "mean_prediction", "mean prediction", "tab:blue")
        _band(ax, grp, "mean_label", "mean label", "tab:green")
        _finish_ax(ax, f"{name}: mean prediction vs mean label (ratio is unstable near 0)", "mean")
    out["calibration"] = figure_png(fig, dpi=DPI, tight=True)

    fig, ax = plt.subplots(figsize=(4.6, 3.6))
    label = plain(report.latest_label)
    if task == "binary":
        for (m, run), s in sorted(latest.items()):
            if str(m) != model or not isinstance(s, BinarySummary) or s.total_weight <= 0:
                continue
            rel = s.reliability(10)
            ok = rel["weight"] > 0
            ax.plot(rel["mean_predicted"][ok], rel["observed_rate"][ok], marker="o", ms=3, lw=1, alpha=0.7,
                    label=plain(f"run {run}"))
        ax.plot([0, 1], [0, 1], color="grey", ls="--", lw=1)
        ax.set_xlabel("mean predicted probability (bucket)")
        _finish_ax(ax, f"{name}: reliability, window {label}", "observed rate")
    else:
        for (m, run), s in sorted(latest.items()):
            if str(m) == model and isinstance(s, RegressionSummary) and s.weight > 0:
                ax.scatter([s.wp / s.weight], [s.wy / s.weight], label=plain(f"run {run}"))
        lim = ax.get_xlim()
        ax.plot(lim, lim, color="grey", ls="--", lw=1)
        ax.set_xlabel("mean prediction")
        _finish_ax(ax, f"{name}: window {label} (regression summaries keep no histogram)", "mean label")
    out["reliability"] = figure_png(fig, dpi=DPI, tight=True)
    return out


# ---- HTML ------------------------------------------------------------------------------------------

def _fmt(v: Any, digits: int = 4) -> str:
    if v is None or (isinstance(v, (float, np.floating)) and not math.isfinite(v)):
        return "–"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (float, np.floating)):
        return f"{v:.{digits}g}"
    return html.escape(str(v))


def _signed(v: Any) -> str:
    return _fmt(v) if v is None or pd.isna(v) else f"{v:+.3g}"


def _html_table(head: list[str], rows: list[list[str]], empty: str) -> str:
    """A table of already formatted (and escaped) cells."""
    if not rows:
        return f"<p class='empty'>{html.escape(empty)}</p>"
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def summary_table_html(report: DriftReport) -> str:
    s = report.summary.head(SUMMARY_MODELS)
    head = ["model", "runs", "flagged / windows", "within label noise", "largest Δc̄ (window)", "× seed spread",
            "last flagged", "seed spread of c*", "limit", "std vanilla", "std calibrated", "std change"]
    rows = [[_fmt(r.model), _fmt(r.runs), f"{r.flagged} / {r.moves}", _fmt(r.within_noise),
             "–" if r.largest_move is None or pd.isna(r.largest_move)
             else f"{_signed(r.largest_move)} ({_fmt(r.largest_move_window)})",
             _fmt(r.largest_in_seed_spreads, 2), _fmt(r.last_flagged_window), _fmt(r.seed_spread, 3),
             _fmt(r.limit, 3), _fmt(r.median_std_vanilla, 3), _fmt(r.median_std_calibrated, 3),
             "–" if r.std_reduction_pct is None or pd.isna(r.std_reduction_pct) else f"{-r.std_reduction_pct:+.0f}%"]
            for r in s.itertuples()]
    more = len(report.summary) - len(s)
    note = f"<p class='note'>{more} more models in the JSON file.</p>" if more > 0 else ""
    return _html_table(head, rows, "No model has data in these windows.") + note


_MOVE_HEAD = ["window", "model", "runs", "mean c* before", "mean c* after", "Δc̄", "per-run Δc* range",
              "× seed spread", "limit", "label noise (99 %)"]


def _move_rows(moves: pd.DataFrame) -> list[list[str]]:
    return [[_fmt(r.window), _fmt(r.model), _fmt(r.runs), _fmt(r.prev_bias), _fmt(r.bias), _signed(r.move),
             f"{_signed(r.run_move_min)} .. {_signed(r.run_move_max)}", _fmt(r.in_seed_spreads, 2),
             f"{_fmt(r.limit, 3)} ({_fmt(r.basis)})",
             "" if pd.isna(r.label_noise) else f"±{_fmt(r.label_noise, 3)}"] for r in moves.itertuples()]


def flags_table_html(report: DriftReport) -> str:
    return _html_table(_MOVE_HEAD, _move_rows(report.flags.head(report.top)),
                       f"No model's bias moved beyond its limit and the label noise ({report.rule.describe()}).")


def within_noise_moves(report: DriftReport) -> pd.DataFrame:
    """Moves beyond the limit but within the label noise (not flagged), largest |Δc̄| first."""
    w = report.moves[report.moves["within_noise"].astype(bool)]
    return w.loc[w["move"].abs().sort_values(ascending=False, kind="stable").index].reset_index(drop=True)


def missing_table(report: DriftReport) -> pd.DataFrame:
    """Windows without a calibrated value, per (status, model): how many, first and last. A window with a value
    and a status that qualifies it (incomplete_window, incomplete_previous_window) is not one of them."""
    t = report.table
    w = t[(t["slice_name"] == ALL) & pd.to_numeric(t["calibrated"], errors="coerce").isna()]
    if w.empty:
        return pd.DataFrame(columns=["status", "model", "windows", "runs", "first", "last"])
    return (w.sort_values("window_start").groupby(["status", "model"], sort=True)
            .agg(windows=("window", "nunique"), runs=("run", "nunique"), first=("window", "first"),
                 last=("window", "last")).reset_index())


_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:16px 24px;color:#222;max-width:1300px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;border-bottom:1px solid #ccc;padding-bottom:3px;margin:18px 0 6px}
h3{font-size:13px;margin:8px 0 2px} p{margin:4px 0}
table{border-collapse:collapse;font-size:12px;margin:6px 0}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:right}
th{background:#f3f3f3} td:first-child,th:first-child{text-align:left}
.grid{display:flex;flex-wrap:wrap;gap:10px} .plot{flex:0 0 auto} .note{color:#555;font-size:12px}
.headline{font-size:14px} .flag{background:#fff4e5;border:1px solid #f0b35a;padding:4px 8px}
.empty{color:#2a7a2a} img{max-width:100%;height:auto}
"""


def render_html(report: DriftReport, cfg: JobConfig, overview: str, plots: dict[str, dict[str, str]],
                files: dict[str, str]) -> str:
    """The whole page, answer first; every image is a data: URI, no external resource is referenced."""
    metric = METRIC_NAME[report.task]
    spec = report.spec
    wdesc = f"rolling {spec.days} days" if spec.kind == "rolling" else spec.kind
    n_flags, shown = len(report.flags), min(len(report.flags), report.top)
    missing = missing_table(report)
    quiet = within_noise_moves(report)
    links = " · ".join(f"<a href='{html.escape(Path(p).name)}'>{html.escape(Path(p).name)}</a>"
                       for k, p in files.items() if k != "html")
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>ctcalc drift report {report.start}..{report.end}</title><style>{_CSS}</style></head><body>",
        f"<h1>Drift report: {html.escape(report.task)} ({metric}), {report.start} .. {report.end}</h1>",
        f"<p class='note'>{html.escape(wdesc)} windows; flag rule {html.escape(report.rule.describe())}; "
        f"Δc̄ = across-run mean of c*(t) − c*(t−1). <a href='#method'>How to read this page</a>.</p>",
        "<section id='summary'><h2>Summary</h2>",
        *[f"<p class='headline'>{html.escape(line)}</p>" for line in headline(report)],
        *[f"<p class='flag'>{html.escape(line)}</p>" for line in report.warnings],
        summary_table_html(report), "</section>",
        "<section id='overview'><h2>Bias over time, all models</h2>",
        f"<div class='plot' data-section='overview'>{img_tag(overview, 'mean c* per model over time')}</div>",
        "</section>",
    ]
    for model in sorted(plots):
        parts.append(f"<section id='model-{html.escape(model)}' class='model'><h2>Model {html.escape(model)}</h2>"
                     "<div class='grid'>")
        for sec in SECTIONS:
            title = SECTION_TITLES[sec].format(metric=metric)
            parts.append(f"<div class='plot' data-section='{sec}'><h3>{html.escape(title)}</h3>"
                         f"{img_tag(plots[model][sec], f'{model} {sec}')}</div>")
        parts.append("</div></section>")
    parts += [
        "<section id='flags'>",
        f"<h2>Largest flagged bias moves: {shown} of {n_flags:,}</h2>",
        "<div class='flag'>" if n_flags else "<div>", flags_table_html(report), "</div>",
        f"<p class='note'>Largest |Δc̄| first. Every flagged move is in {links or 'the CSV and JSON files'}.</p>",
        "</section>",
        "<section id='within-noise'>",
        f"<h2>Beyond the limit, within the label noise (not flagged): {min(len(quiet), report.top)} of "
        f"{len(quiet):,}</h2>",
        _html_table(_MOVE_HEAD, _move_rows(quiet.head(report.top)),
                    "No move beyond the limit is within the labels' sampling noise."),
        "<p class='note'>These windows' bias moved by more than the limit, but by no more than the labels' "
        "sampling alone moves c* between two windows of their size (99 %): they cannot be told from noise. Every "
        "move, with <code>within_noise</code>, is in the JSON file.</p>",
        "</section>",
        "<section id='missing'><h2>Windows without a calibrated value</h2>",
        _html_table(["status", "model", "windows", "runs", "first", "last"],
                    [[_fmt(v) for v in r] for r in missing.head(report.top).itertuples(index=False)],
                    "Every window has a calibrated value."),
        "</section>",
        "<section id='method'><h2>How to read this page</h2>",
        f"<p class='note'>Calibrated metric of window t = vanilla {metric} of window t with every prediction shifted "
        "by the bias c* fitted on <b>all</b> of window t−1 (rolling calibration). Window summaries are sums of the "
        "stored daily summaries, then finalised. "
        f"{'Binary values carry the histogram bound in calibrated_bound. ' if report.task == 'binary' else ''}</p>",
        "<p class='note'>Seed spread of c* = median over windows of the across-run standard deviation of c*: the "
        "run-to-run noise in the bias that calibration removes. A move larger than a few seed spreads means the "
        "correction fitted on window t−1 is stale in window t. Change the limit with <code>--spread-k K</code>, or "
        "use a fixed limit with <code>--threshold X</code> (docs/reports.md).</p>",
        "<p class='note'>Label noise = the 99 % half-width of the move of c* that the labels' sampling alone gives "
        "between two windows of these sizes, 2.576·sqrt(1/(W<sub>t</sub>·ī) + 1/(W<sub>t−1</sub>·ī)), W the "
        "window's weight and ī the information about c per unit weight. The runs share the rows, so it does not "
        "shrink with more runs; a move is flagged only beyond both the limit and this noise.</p>",
        "<p class='note'>std vanilla / calibrated = median over windows of the across-run standard deviation of "
        "the metric; the calibrated one should be lower when most run-to-run noise is a global bias.</p>",
        f"<p class='note'>Output root: {html.escape(redact_url(cfg.output.path))}. "
        f"Generated {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC. All rows: {links}.</p>",
        "</section></body></html>",
    ]
    return "\n".join(parts)


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return json.loads(frame.to_json(orient="records", double_precision=15))


def write_report_files(report: DriftReport, cfg: JobConfig, out_dir: str | Path) -> DriftReport:
    """drift_<start>_<end>_<window spec>.{html,csv,json} and _flags.csv under ``out_dir`` (the spec in the name, so
    a week and a day report of one period do not replace each other); the echoed config is redacted."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"drift_{report.start}_{report.end}_{report.spec.label}"
    paths = {"html": out / f"{stem}.html", "csv": out / f"{stem}.csv", "flags_csv": out / f"{stem}_flags.csv",
             "json": out / f"{stem}.json"}
    plots = {str(m): model_plots(report, str(m)) for m in sorted(report.whole["model"].unique())}
    write_atomic(paths["csv"], spreadsheet_safe(report.table).to_csv(index=False))
    write_atomic(paths["flags_csv"], spreadsheet_safe(report.flags).to_csv(index=False))
    meta = {"start": report.start, "end": report.end, "task": report.task, "window": report.spec.kind,
            "days": report.spec.days, "rule": {**asdict(report.rule), "description": report.rule.describe()},
            "config": redact(config_to_dict(cfg)), "warnings": report.warnings, "summary": _records(report.summary),
            "spread": _records(spread_table(report.table)), "flags": _records(report.flags),
            "moves": _records(report.moves), "rows": _records(report.table)}
    write_atomic(paths["json"], json.dumps(meta, indent=1, default=str, allow_nan=False))
    str_paths = {k: str(v) for k, v in paths.items()}
    write_atomic(paths["html"], render_html(report, cfg, overview_png(report), plots, str_paths))
    report.paths = str_paths
    return report


def write_report(
    cfg: JobConfig, start: str, end: str, *, out_dir: str | Path | None = None, spec: WindowSpec | None = None,
    threshold: float | None = None, spread_k: float | None = None, top: int = DEFAULT_TOP,
    spark: SparkSession | None = None, as_of: int | dt.datetime | None = None,
) -> DriftReport:
    """Build the report over [start, end] and write its files to ``out_dir`` (default ``<output.path>/reports``);
    ``as_of``: from the tables as they were then (a version of the metrics table, or a time)."""
    spec = spec or WindowSpec.from_config(cfg.rolling)
    rule = FlagRule.from_options(cfg, threshold=threshold, spread_k=spread_k)
    report = build_report(read_report_input(cfg, start, end, spec, spark, as_of=as_of), cfg, start, end, spec=spec, rule=rule,
                          top=top)
    return write_report_files(report, cfg, out_dir or report_root(cfg.output.path) / "reports")
