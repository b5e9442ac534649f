"""Two pipelines compared under rolling (previous-window) calibration: per window and over a period. Pure.

For each run and window ``t`` the stored daily summaries of ``t`` are summed (core/windows.py), giving the
vanilla loss sum ``V_t = Σ w·loss(y, z)``, the weight ``W_t = Σ w`` and the rolling-calibrated loss sum
``C_t = Σ w·loss(y, z - c*(t-1))``, with ``c*(t-1)`` fitted on **all** rows of window ``t-1`` of the same run
(binary: histogram path with its bound; regression: exact). Per window, each run's vanilla metric is
``V_t / W_t`` and its rolling-calibrated metric ``C_t / W_t``, and Acc (core/accuracy.py: Mann-Whitney share
of run pairs, ties ½, paired percentile bootstrap over runs) compares the pipelines under each. Over the
period, per run,

    vanilla = Σ_{t∈T} V_t / Σ_{t∈T} W_t        rolling-calibrated = Σ_{t∈T} C_t / Σ_{t∈T} W_t

where ``T`` is the set of windows in which **every** compared run has a rolling-calibrated value, so both
metrics of every run cover the same rows: window sums are summed, never window values averaged. Runs with no
rolling-calibrated value in any window are left out (and listed) before ``T`` is formed.

Windows: ``day``, ``week`` (ISO) and ``month`` windows are the calendar windows touching [start, end], each
counted up to ``end`` (the rolling table's windows). ``rolling`` windows of N days are tiled backwards from
``end`` (end-N+1..end, the N days before, ...) until one reaches ``start``: disjoint, so each day counts once in
the period, and each window's bias comes from the N days right before it, as in the rolling table.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ctcalc_spark.core.accuracy import Comparison, compare_runs
from ctcalc_spark.core.finalize import ALL
from ctcalc_spark.core.windows import (
    METRIC_NAME,
    Window,
    WindowSpec,
    previous_window,
    rolling_metrics,
    window_of,
    windows_between,
)
from ctcalc_spark.errors import ConfigError, InputError

RUN_COLUMNS = ["window", "window_start", "window_end", "model", "run", "n_rows", "weight", "vanilla", "calibrated",
               "vanilla_sum", "calibrated_sum", "prev_bias", "status"]
"""Per (window, run) rows of a rolling comparison."""


def calibrated_name(task: str) -> str:
    """Name of the rolling-calibrated metric: 'rolling_calibrated_log_loss' or 'rolling_calibrated_mse'."""
    return f"rolling_calibrated_{METRIC_NAME[task]}"


def comparison_windows(start: str, end: str, spec: WindowSpec) -> list[Window]:
    """The windows of a period (see the module docstring), oldest first."""
    if spec.kind != "rolling":
        return windows_between(start, end, spec)
    if end < start:
        raise ConfigError(f"--ds-from {start} is after --ds-to {end}.")
    out: list[Window] = []
    w = window_of(end, spec)
    while True:
        out.append(w)
        if w.start <= start:
            break
        w = previous_window(w, spec)
    return out[::-1]


def days_needed(windows: Sequence[Window], spec: WindowSpec, end: str) -> list[str]:
    """Every day whose summaries the comparison reads: the windows' days up to ``end`` and their previous windows."""
    days = {d for w in windows for d in w.days(until=end)} | {d for w in windows
                                                            for d in previous_window(w, spec).days()}
    return sorted(days)


def run_table(summaries: pd.DataFrame, task: str, windows: Sequence[Window], spec: WindowSpec, *,
              model: str = "model", run: str = "run", bin_width: float = 0.05, first_ds: str | None = None,
              end: str | None = None) -> pd.DataFrame:
    """Per (window, model, run): weight, vanilla and rolling-calibrated metric and their loss sums (RUN_COLUMNS).

    ``summaries``: daily summary-table rows of :func:`days_needed`; ``first_ds``: the earliest day with
    summaries at all (a window whose previous window ends before it is a first window).
    """
    t = rolling_metrics(summaries, task, windows, spec, model=model, run=run, bin_width=bin_width,
                        first_ds=first_ds, until=end)
    t = t[(t["slice_name"] == ALL) & (t["n_rows"] > 0)].copy()
    weight = t["weight"].astype(float)
    t["vanilla_sum"] = pd.to_numeric(t["vanilla"], errors="coerce") * weight
    t["calibrated_sum"] = pd.to_numeric(t["calibrated"], errors="coerce") * weight
    return t[RUN_COLUMNS].reset_index(drop=True)


@dataclass(frozen=True)
class WindowResult:
    """One window: runs with a rolling-calibrated value per pipeline and the comparison (None with < 2 runs)."""

    window: str
    window_start: str
    window_end: str
    runs_a: int
    runs_b: int
    comparison: Comparison | None
    note: str = ""


@dataclass
class RollingComparison:
    """Per-window and whole-period comparison of two pipelines under rolling calibration."""

    name_a: str
    name_b: str
    task: str
    spec: WindowSpec
    start: str
    end: str
    runs: pd.DataFrame
    period_runs: pd.DataFrame
    period: Comparison
    windows: list[WindowResult]
    period_windows: list[str]
    left_out: pd.DataFrame
    excluded: dict[str, list[str]] = field(default_factory=dict)

    @property
    def metric(self) -> str:
        return METRIC_NAME[self.task]

    @property
    def calibrated_metric(self) -> str:
        return calibrated_name(self.task)


def _missing_reason(rows: pd.DataFrame, expected: int) -> str:
    counts = rows.loc[rows["calibrated"].isna(), "status"].value_counts()
    parts = [f"{k} {v}" for k, v in counts.items()]
    absent = expected - len(rows)
    if absent > 0:
        parts.append(f"no rows {absent}")
    return ", ".join(parts)


def compare_rolling(table: pd.DataFrame, task: str, model_a: str, model_b: str, *, spec: WindowSpec, start: str,
                    end: str, n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> RollingComparison:
    """Acc of the vanilla vs the rolling-calibrated metric per window and over the period, from :func:`run_table`."""
    van, cal = METRIC_NAME[task], calibrated_name(task)
    t = table.assign(model=table["model"].astype(str), run=table["run"].astype(str))
    excluded: dict[str, list[str]] = {}
    keep = []
    for name in (model_a, model_b):
        rows = t[t["model"] == name]
        if rows.empty:
            raise InputError(f"No summaries of model {name!r} between {start} and {end}; models present: "
                             f"{sorted(t['model'].unique())}.")
        has = rows.groupby("run")["calibrated"].apply(lambda s: s.notna().any())
        excluded[name] = [f"{r}: {_missing_reason(rows[rows['run'] == r], len(rows['window'].unique()))}"
                          for r in has.index[~has]]
        keep += [(name, r) for r in has.index[has]]
        if int(has.sum()) < 2:
            statuses = rows.loc[rows["calibrated"].isna(), "status"].value_counts().to_dict()
            raise InputError(
                f"{int(has.sum())} of {len(has)} runs of {name!r} have a rolling-calibrated value in some window "
                f"between {start} and {end}; a comparison needs 2 or more. Statuses of the windows without one: "
                f"{statuses}. A first window of the data has no previous window: start --ds-from one window later, "
                "or evaluate the days before it.")
    kept = pd.MultiIndex.from_tuples(keep, names=["model", "run"])
    t = t[pd.MultiIndex.from_frame(t[["model", "run"]]).isin(kept)]
    windows = t.drop_duplicates("window").sort_values("window_start")[["window", "window_start", "window_end"]]
    results: list[WindowResult] = []
    in_period: list[str] = []
    left_out = []
    for w in windows.itertuples(index=False):
        rows = t[t["window"] == w.window]
        ok = rows[rows["calibrated"].notna()]
        ra, rb = ok[ok["model"] == model_a], ok[ok["model"] == model_b]
        comp, note = None, ""
        if len(ra) >= 2 and len(rb) >= 2:
            comp = compare_runs(ra["vanilla"].to_numpy(float), ra["calibrated"].to_numpy(float),
                                rb["vanilla"].to_numpy(float), rb["calibrated"].to_numpy(float),
                                name_a=model_a, name_b=model_b, metric=van, calibrated_metric=cal,
                                n_boot=n_boot, level=level, seed=seed)
        else:
            note = ("fewer than 2 runs per pipeline with a rolling-calibrated value "
                    f"({_missing_reason(rows, len(kept))})")
        if len(ok) == len(kept):
            in_period.append(w.window)
        else:
            left_out.append({"window": w.window, "window_start": w.window_start, "window_end": w.window_end,
                             "runs_without_value": len(kept) - len(ok), "reason": _missing_reason(rows, len(kept))})
        results.append(WindowResult(w.window, w.window_start, w.window_end, len(ra), len(rb), comp, note))
    if not in_period:
        raise InputError(f"No window between {start} and {end} in which every run of {model_a!r} and {model_b!r} has "
                         f"a rolling-calibrated value ({len(results)} windows; e.g. {left_out[0]['window']}: "
                         f"{left_out[0]['reason']}). Leave out the runs with gaps, or compare a range without them.")
    p = t[t["window"].isin(in_period)].groupby(["model", "run"], sort=True).agg(
        windows=("window", "nunique"), n_rows=("n_rows", "sum"), weight=("weight", "sum"),
        vanilla_sum=("vanilla_sum", "sum"), calibrated_sum=("calibrated_sum", "sum")).reset_index()
    p["vanilla"] = p["vanilla_sum"] / p["weight"]
    p["calibrated"] = p["calibrated_sum"] / p["weight"]
    pa, pb = p[p["model"] == model_a], p[p["model"] == model_b]
    period = compare_runs(pa["vanilla"].to_numpy(float), pa["calibrated"].to_numpy(float),
                          pb["vanilla"].to_numpy(float), pb["calibrated"].to_numpy(float),
                          name_a=model_a, name_b=model_b, metric=van, calibrated_metric=cal,
                          n_boot=n_boot, level=level, seed=seed)
    left = pd.DataFrame(left_out, columns=["window", "window_start", "window_end", "runs_without_value", "reason"])
    return RollingComparison(model_a, model_b, task, spec, start, end, t.reset_index(drop=True), p, period, results,
                             in_period, left, excluded)


def _side_counts(results: Sequence[WindowResult], which: str) -> tuple[int, int, int, int]:
    """(windows compared, A ahead, interval above 50 %, interval below 50 %) for 'vanilla' or 'calibrated'."""
    comps = [getattr(r.comparison, which) for r in results if r.comparison is not None]
    return (len(comps), sum(s.acc > 0.5 for s in comps), sum(s.acc_ci[0] > 0.5 for s in comps),
            sum(s.acc_ci[1] < 0.5 for s in comps))


def window_summary(rc: RollingComparison) -> list[str]:
    """Sentences: in how many windows each metric ranks A ahead, and how often its interval excludes 50 %."""
    out = []
    for which, name in (("vanilla", rc.metric), ("calibrated", rc.calibrated_metric)):
        n, ahead, above, below = _side_counts(rc.windows, which)
        if n == 0:
            continue
        out.append(f"{name}: {rc.name_a} ahead (Acc > 50%) in {ahead} of {n} windows; interval above 50% in "
                   f"{above}, below 50% in {below}.")
    skipped = sum(r.comparison is None for r in rc.windows)
    if skipped:
        out.append(f"{skipped} window(s) not compared: fewer than 2 runs per pipeline with a rolling-calibrated value.")
    return out


def period_description(rc: RollingComparison) -> str:
    """How the per-run period values are formed, in words, with the numbers of this comparison."""
    n, total = len(rc.period_windows), len(rc.windows)
    return (f"Period value per run = Σ over the {n} of {total} {rc.spec.label} windows in which every compared run "
            f"has a rolling-calibrated value of that window's loss sum, divided by Σ of their weights: vanilla = "
            f"Σ_t Σw·loss(y, z) / Σ_t Σw, rolling-calibrated = Σ_t Σw·loss(y, z − c*(t−1)) / Σ_t Σw, c*(t−1) fitted "
            "on all rows of the window before t. Window values are never averaged.")


def to_payload(rc: RollingComparison) -> dict[str, Any]:
    """JSON-ready fields of a rolling comparison (per-window Acc, the period's windows, left-out windows)."""
    def side(c: Comparison | None, which: str) -> dict[str, Any] | None:
        if c is None:
            return None
        s = getattr(c, which)
        return {"acc": s.acc, "acc_ci": list(s.acc_ci), "mean_a": s.mean_a, "mean_b": s.mean_b}

    return {
        "window_kind": rc.spec.kind, "window_days": rc.spec.days, "start": rc.start, "end": rc.end,
        "windows": [{"window": r.window, "window_start": r.window_start, "window_end": r.window_end,
                     "runs_a": r.runs_a, "runs_b": r.runs_b, "vanilla": side(r.comparison, "vanilla"),
                     "rolling_calibrated": side(r.comparison, "calibrated"), "note": r.note} for r in rc.windows],
        "period_windows": rc.period_windows,
        "left_out_windows": rc.left_out.to_dict("records"),
        "excluded_runs": rc.excluded,
        "period_runs": rc.period_runs.replace({np.nan: None}).to_dict("records"),
        "period_definition": period_description(rc),
    }
