"""The embedded default: a generated CTR-like evaluation table and an end-to-end run on it."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd

from ctcalc_spark.core._math import sigmoid

DEMO_MODELS = {
    # name: (signal strength, calibration offset of the pipeline, run-to-run bias noise std)
    "baseline": (1.00, 0.00, 0.06),
    "wide_deep": (1.08, 0.05, 0.06),
    "dcn": (1.12, -0.03, 0.06),
}


def generate_demo_eval(
    *,
    n_examples_per_day: int = 20_000,
    n_runs: int = 5,
    n_days: int = 7,
    start_ds: str = "2026-11-15",
    seed: int = 7,
    base_logit: float = -1.9,
    drift_per_day: float = 0.05,
) -> pd.DataFrame:
    """One row per (model, run, example): ``model, run, ds, example_id, label, logit``.

    Each day's examples have a true click logit ``t`` (base rate drifting by
    ``drift_per_day`` in logit space); model m of run r predicts
    ``s_m·t' + offset_m + b_{m,r} + ε`` where ``t'`` is a noisy view of ``t``,
    ``b_{m,r} ~ N(0, σ_m)`` is the run's global bias (the seed noise the
    calibrated metric removes) and ``ε`` is per-row run noise.
    """
    rng = np.random.default_rng(seed)
    start = dt.date.fromisoformat(start_ds)
    frames = []
    next_id = 0
    run_bias = {(m, r): rng.normal(0.0, spec[2]) for m, spec in DEMO_MODELS.items() for r in range(n_runs)}
    for day in range(n_days):
        ds = (start + dt.timedelta(days=day)).isoformat()
        n = n_examples_per_day
        ids = np.arange(next_id, next_id + n, dtype=np.int64)
        next_id += n
        features = rng.normal(0.0, 1.0, n)
        hidden = rng.normal(0.0, 0.6, n)
        t = base_logit + drift_per_day * day + 0.9 * features + hidden
        labels = (rng.random(n) < sigmoid(t)).astype(np.int32)
        for m, (strength, offset, _) in DEMO_MODELS.items():
            view = base_logit + 0.9 * features + (strength - 1.0) * 2.0 * hidden
            for r in range(n_runs):
                eps = rng.normal(0.0, 0.15, n)
                logit = view + offset + run_bias[(m, r)] + eps
                frames.append(pd.DataFrame({
                    "model": m, "run": r, "ds": ds, "example_id": ids, "label": labels, "logit": logit,
                }))
    return pd.concat(frames, ignore_index=True)


def write_demo_eval(path: str | Path, **kwargs: object) -> pd.DataFrame:
    """Generate the demo table and write it as Parquet partitioned by ds (replacing what was there).

    Each day's folder is closed with an empty ``_SUCCESS`` file, as a writer that is done with a day does;
    the daily Airflow DAG waits for it before evaluating that day.
    """
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    df = generate_demo_eval(**kwargs)  # type: ignore[arg-type]
    path = Path(path)
    if path.exists():
        shutil.rmtree(path)
    pq.write_to_dataset(pa.Table.from_pandas(df, preserve_index=False), str(path), partition_cols=["ds"])
    for ds in df["ds"].unique():
        (path / f"ds={ds}" / "_SUCCESS").touch()
    return df


def runs_table(per_run: pd.DataFrame, metric: str = "log_loss", calibrated: str = "calibrated_log_loss") -> pd.DataFrame:
    """Per model: mean and std across runs of the vanilla and calibrated metric, and the std reduction."""
    rows = []
    for model, grp in per_run.groupby("model", sort=True):
        v, c = grp[metric].to_numpy(float), grp[calibrated].to_numpy(float)
        sv, sc = v.std(ddof=1) if v.size > 1 else np.nan, c.std(ddof=1) if c.size > 1 else np.nan
        rows.append({"model": model, "runs": v.size, f"{metric}_mean": v.mean(), f"{metric}_std": sv,
                     f"{calibrated}_mean": c.mean(), f"{calibrated}_std": sc,
                     "std_reduction_pct": 100.0 * (1.0 - sc / sv) if sv > 0 else np.nan})
    return pd.DataFrame(rows)


def _num(x: float, spec: str) -> str:
    """A number, or 'n/a' where it is undefined (one run, or no spread across runs)."""
    return format(x, spec) if np.isfinite(x) else format("n/a", spec.rstrip("fg").split(".")[0] + "s")


def format_runs_table(table: pd.DataFrame, metric: str = "log_loss", calibrated: str = "calibrated_log_loss") -> str:
    """Readable fixed-width text of :func:`runs_table`."""
    head = f"{'model':<12} {'runs':>4}  {metric + ' (mean ± std)':>26}  {calibrated + ' (mean ± std)':>37}  {'std reduction':>13}"
    lines = [head, "-" * len(head)]
    for _, r in table.iterrows():
        lines.append(
            f"{r['model']:<12} {int(r['runs']):>4}  {r[metric + '_mean']:>14.6f} ± {_num(r[metric + '_std'], '<9.6f')}  "
            f"{r[calibrated + '_mean']:>25.6f} ± {_num(r[calibrated + '_std'], '<9.6f')}  "
            f"{_num(r['std_reduction_pct'], '>12.1f') + '%' if np.isfinite(r['std_reduction_pct']) else 'n/a':>13}"
        )
    return "\n".join(lines)


# ---- "your own data": a CSV of scored rows with drift (docs/your-own-data.md) ------------------------------------

def generate_scored_rows(
    *,
    runs: int = 5,
    n_days: int = 90,
    rows_per_day: int = 48,
    start_ds: str = "2026-01-01",
    seed: int = 11,
) -> pd.DataFrame:
    """Scored rows as a user's own table might hold them: ``model, run, date, row_id, label, score``.

    Two pipelines score the same ``rows_per_day`` rows a day (e.g. half-hourly prices: label 1 when the price
    goes up). The population log-odds drift: ``level(t) = 1.1·sin(2πt/60) + a random walk``; the true log-odds
    of a row is ``level(t) + 1.2·x + 0.8·h``. ``baseline`` sees ``x`` only but tracks the level (it uses
    yesterday's level, a lagged feature); ``candidate`` also sees ``h`` (it ranks better) but keeps the level
    of its training period (0), so its bias drifts, and its runs (seeds) differ more in bias. Scores are
    probabilities rounded to 6 decimals, as a CSV export holds them. ``row_id`` is the same for every model,
    so the hash split puts a row in the same part for each.
    """
    rng = np.random.default_rng(seed)
    start = dt.date.fromisoformat(start_ds)
    t = np.arange(n_days + 1)
    level = 1.1 * np.sin(2 * np.pi * t / 60.0) + np.cumsum(rng.normal(0.0, 0.05, n_days + 1))
    run_bias = {"baseline": rng.normal(0.0, 0.05, runs), "candidate": rng.normal(0.0, 0.2, runs)}
    frames = []
    for day in range(n_days):
        n = rows_per_day
        x, h = rng.normal(0.0, 1.0, n), rng.normal(0.0, 1.0, n)
        y = (rng.random(n) < sigmoid(level[day + 1] + 1.2 * x + 0.8 * h)).astype(np.int64)
        ds = (start + dt.timedelta(days=day)).isoformat()
        ids = np.arange(day * n, (day + 1) * n, dtype=np.int64)
        for r in range(runs):
            noise = rng.normal(0.0, 0.25, (2, n))
            views = {"baseline": level[day] + 1.2 * x + run_bias["baseline"][r] + noise[0],
                     "candidate": 1.2 * x + 0.8 * h + run_bias["candidate"][r] + noise[1]}
            for model, z in views.items():
                frames.append(pd.DataFrame({"model": model, "run": r, "date": ds, "row_id": ids, "label": y,
                                            "score": np.round(sigmoid(z), 6)}))
    return pd.concat(frames, ignore_index=True)


def write_scored_csv(path: str | Path, **kwargs: object) -> pd.DataFrame:
    """:func:`generate_scored_rows` as one CSV file with a header row (replacing ``path``)."""
    df = generate_scored_rows(**kwargs)  # type: ignore[arg-type]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False)
    return df
