"""Synthetic rows for tests, in one place: evaluation rows (the jobs' input), the arrays of binary labels and logits
the core functions take, and summaries-table rows (the rolling windows' and the reports' input).

The generators keep the draws of the per-file helpers they replaced (same seed, same order of draws), so a test's
expected numbers hold as they were.

Drift: :func:`binary_drift_summaries` builds daily summaries with drift directly as summaries-table rows
(vectorised, no Spark). Binary task: per (day, model, run) ``n`` rows with a true logit ``x`` and the
population level ``level(t)``, shared by every model: a mean-reverting walk around
-1.5 (daily step std ``walk_std``, daily persistence ``persistence``). Labels enter
as their expectation, ``y = sigmoid(x + level(t))`` (summaries are sums, so a
fractional label is the large-sample limit: no label sampling noise, as on a day
of millions of rows), or with ``sampled_labels`` as draws of Bernoulli(sigmoid(x + level(t))), the sampling
noise of a day of ``n`` rows. Model logits are
``z = x - 1.5 + offset(model, run) + shift(model, t) + noise``: each run keeps its own
persistent bias offset (seed noise, std ``seed_std``), and a model's ``shift`` jumps
at the days listed in ``jumps`` (a broken feature, a new traffic source). ``shifts`` adds a constant logit
shift per model; with ``shared_runs`` every model's run r has the same offset and noise as the other models'
run r, so two models differ only by their shifts and jumps (pipelines that differ only by a bias).
"""
from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.special import expit  # the helpers these replaced drew labels with scipy's, not ours

from ctcalc_spark.core._math import sigmoid, softplus

DS = "2026-11-21"
"""The day of :func:`binary_eval_rows` unless told."""

JUMPS = {("ctr_b", "2024-03-04"): 1.0, ("ctr_a", "2025-01-06"): -1.0}
"""The default scenario's model-specific bias jumps (both Mondays: ISO weeks 2024-W10 and 2025-W02)."""


def day_range(start: str, n: int) -> list[str]:
    """``n`` consecutive days from ``start`` (YYYY-MM-DD)."""
    d0 = dt.date.fromisoformat(start)
    return [(d0 + dt.timedelta(days=i)).isoformat() for i in range(n)]


def binary_drift_summaries(
    days: Sequence[str],
    *,
    models: Sequence[str] = ("ctr_a", "ctr_b"),
    runs: int = 5,
    n: int = 100,
    seed_std: float = 0.25,
    walk_std: float = 0.045,
    persistence: float = 0.97,
    jumps: Mapping[tuple[str, str], float] | None = None,
    shifts: Mapping[str, float] | None = None,
    shared_runs: bool = False,
    sampled_labels: bool = False,
    bin_width: float = 0.1,
    seed: int = 0,
) -> pd.DataFrame:
    """Summaries-table rows (ds, model, run, split='remain', bin, label, count, clipped, weight, ..., bin_width)."""
    rng = np.random.default_rng(seed)
    n_days, n_pairs = len(days), len(models) * runs
    steps = rng.normal(0.0, walk_std, n_days)
    level = np.empty(n_days)
    level[0] = steps[0]
    for t in range(1, n_days):
        level[t] = persistence * level[t - 1] + steps[t]
    level -= 1.5  # population log-odds around -1.5: a base rate near 0.2
    shift = np.zeros((len(models), n_days))
    for model, size in (shifts or {}).items():
        shift[list(models).index(model)] += size
    for (model, day), size in (jumps or {}).items():
        shift[list(models).index(model), days.index(day):] += size
    spread = np.linspace(-1.0, 1.0, runs) if runs > 1 else np.zeros(1)
    spread = spread / spread.std(ddof=1) if runs > 1 else spread  # the runs' offsets have std seed_std exactly
    offsets = seed_std * np.stack([rng.permutation(spread) for _ in models])
    if shared_runs:
        offsets[:] = offsets[0]
    x = rng.normal(0.0, 1.0, (n_days, 1, n))  # the same rows scored by every model run
    y = sigmoid(x + level[:, None, None])  # expected labels; the models below do not track the level
    if sampled_labels:
        y = (rng.random(y.shape) < y).astype(float)
    pair_model = np.repeat(np.arange(len(models)), runs)
    pair_run = np.tile(np.arange(runs), len(models))
    noise = rng.normal(0.0, 0.3, (n_days, runs if shared_runs else n_pairs, n))
    z = (x - 1.5 + offsets[pair_model, pair_run][None, :, None]
         + shift[pair_model].T[:, :, None] + (noise[:, pair_run] if shared_runs else noise))
    y = np.broadcast_to(y, z.shape)
    k = np.floor(z / bin_width).astype(np.int64)
    d = z - (k + 0.5) * bin_width
    day = np.repeat(np.arange(n_days), n_pairs * n)
    pair_of = np.tile(np.repeat(np.arange(n_pairs), n), n_days)
    yr, zr, dr = y.ravel(), z.ravel(), d.ravel()
    # a fractional label y is weight y on the label-1 row and 1 - y on the label-0 row of the same bin
    sides = [pd.DataFrame({
        "day": day, "pair": pair_of, "bin": k.ravel(), "label": label, "count": 1 - label, "clipped": 0,
        "weight": wl, "m1": wl * dr, "m2": wl * dr * dr, "wmiss": wl * sigmoid(sign * zr),
        "wloss": wl * softplus(sign * zr),
    }) for label, sign, wl in ((0, 1.0, 1.0 - yr), (1, -1.0, yr))]
    out = pd.concat(sides).groupby(["day", "pair", "bin", "label"], sort=True).sum().reset_index()
    out.insert(0, "ds", np.asarray(days)[out.pop("day").to_numpy()])
    pair = out.pop("pair").to_numpy()
    out.insert(1, "model", np.asarray(models)[pair_model[pair]])
    out.insert(2, "run", pair_run[pair].astype(str))
    out.insert(3, "split", "remain")
    out["bin_width"] = bin_width
    return out


# ---- binary labels and logits as arrays (the core functions' input) -------------------------------------------

def binary_logits(n: int, seed: int, mu: float, scale: float, *, shift: float = 0.0,
                  weights: tuple[float, float] = (0.1, 5.0), clip: float = 40.0
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(labels y, logits z, weights w) of ``n`` rows: z ~ Normal(mu, scale) clipped to +-``clip``, y ~
    Bernoulli(sigmoid(z + shift)) (the model is off by ``shift`` in logit), w ~ Uniform(``weights``)."""
    rng = np.random.default_rng(seed)
    z = np.clip(rng.normal(mu, scale, n), -clip, clip)
    y = (rng.random(n) < expit(z + shift)).astype(float)
    w = rng.uniform(*weights, n)
    return y, z, w


def multiclass_logits(n: int, k: int, seed: int, *, scale: float, boost=0.0) -> tuple[np.ndarray, np.ndarray]:
    """(labels y, class logits z of shape (n, k)) of ``n`` rows: y uniform over the ``k`` classes, z ~ Normal(0,
    ``scale``) plus ``boost`` (a number or one per row) on each row's true class (0: scores that know nothing)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = rng.normal(0, scale, (n, k))
    z[np.arange(n), y] += boost
    return y, z


# ---- evaluation rows (the batch jobs' input) -----------------------------------------------------------------

def binary_eval_rows(n: int = 6000, seed: int = 0, models: Sequence[str] = ("a", "b"), runs: Sequence = (0, 1),
                     ds: str = DS, weights: bool = False, slices: bool = False) -> pd.DataFrame:
    """Evaluation rows of one day (model, run, ds, example_id, label, logit): the same ``n`` examples and labels
    (base rate near 0.2) scored by every model run, each run's logits the true logit + Normal(0.2, 0.3) noise;
    ``weights`` adds a weight column (Uniform(0.5, 2)), ``slices`` a country column (US for every third id, else
    DE)."""
    rng = np.random.default_rng(seed)
    ids = np.arange(n, dtype=np.int64)
    t = rng.normal(-1.5, 1.0, n)
    y = (rng.random(n) < expit(t)).astype(np.int64)
    frames = []
    for m in models:
        for r in runs:
            df = pd.DataFrame({"model": m, "run": r, "ds": ds, "example_id": ids, "label": y,
                               "logit": t + rng.normal(0.2, 0.3, n)})
            if weights:
                df["weight"] = rng.uniform(0.5, 2.0, n)
            if slices:
                df["country"] = np.where(ids % 3 == 0, "US", "DE")
            frames.append(df)
    return pd.concat(frames, ignore_index=True)


def binary_stream(days: Sequence[str], *, runs: int = 2, n: int = 400, seed: int = 0) -> pd.DataFrame:
    """Rows of model 'm' over ``days`` (ds, model, run, label, logit, split): each day ``n`` new examples whose base
    rate rises day by day (logit -1 + 0.1 per day), runs '0', '1', ... each 0.2 more biased than the one before;
    split is 'bias' for about 10% of the rows."""
    rng = np.random.default_rng(seed)
    frames = []
    for i, ds in enumerate(days):
        x = rng.normal(0, 1, n)
        y = (rng.random(n) < sigmoid(-1.0 + 0.1 * i + x)).astype(float)
        for r in range(runs):
            z = -1.0 + x + rng.normal(0, 0.3, n) + 0.2 * r
            frames.append(pd.DataFrame({"ds": ds, "model": "m", "run": str(r), "label": y, "logit": z,
                                        "split": np.where(rng.random(n) < 0.1, "bias", "remain")}))
    return pd.concat(frames, ignore_index=True)


def regression_drift_stream(seed: int, *, months: int = 12, per_day: int = 40) -> pd.DataFrame:
    """A noisy return predictor whose level drifts month to month (random walk), for one seed: regression rows
    (ds, model 'lstm', run str(seed), split 'remain', label, prediction) of every day of 2026's first ``months``.

    Target: y = s + m_t + ε with a market level m_t; the seed's model predicts
    s + b_seed,t + η, its level error b following a persistent random walk, so one
    month's level error predicts the next month's.
    """
    rng = np.random.default_rng(seed)
    frames = []
    level = rng.normal(0, 0.5)
    for month in range(1, months + 1):
        level += rng.normal(0, 0.1)
        first = dt.date(2026, month, 1)
        n_days = ((first.replace(day=28) + dt.timedelta(days=4)).replace(day=1) - first).days
        for d in range(n_days):
            s = rng.normal(0, 1, per_day)
            y = s + rng.normal(0, 1, per_day)
            p = s + level + rng.normal(0, 0.3, per_day)
            frames.append(pd.DataFrame({"ds": (first + dt.timedelta(days=d)).isoformat(), "model": "lstm",
                                        "run": str(seed), "split": "remain", "label": y, "prediction": p}))
    return pd.concat(frames, ignore_index=True)


def write_eval(df: pd.DataFrame, path: str | Path, *, replace: bool = False) -> None:
    """Write evaluation rows as a Parquet dataset partitioned by ds (``replace``: remove what is at ``path``
    first). A float column's NaN stays NaN (``Table.from_pandas`` alone turns it into null)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if replace:
        shutil.rmtree(path, ignore_errors=True)
    table = pa.Table.from_pandas(df, preserve_index=False)
    for i, name in enumerate(table.column_names):
        if df[name].dtype == np.float64:
            table = table.set_column(i, name, pa.array(df[name].to_numpy()))
    pq.write_to_dataset(table, str(path), partition_cols=["ds"])


# ---- summaries-table rows from evaluation rows (the pure path, no Spark) ---------------------------------------

def binary_summary_rows(frame: pd.DataFrame, bin_width: float = 0.05) -> pd.DataFrame:
    """Summaries-table rows (per ds, model, run, split, bin) of binary rows (label, logit)."""
    from ctcalc_spark.core.summary import BinarySummary

    out = []
    for (ds, model, run, split), g in frame.groupby(["ds", "model", "run", "split"]):
        cols = BinarySummary.from_logits(g["label"], g["logit"], bin_width=bin_width).to_columns()
        out.append(pd.DataFrame(cols).assign(ds=ds, model=model, run=run, split=split, bin_width=bin_width))
    return pd.concat(out, ignore_index=True)


def regression_summary_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Summaries-table rows (per ds, model, run, split) of regression rows (label, prediction)."""
    from ctcalc_spark.core.summary import RegressionSummary

    out = []
    for (ds, model, run, split), g in frame.groupby(["ds", "model", "run", "split"]):
        s = RegressionSummary.from_rows(g["label"], g["prediction"])
        out.append({"ds": ds, "model": model, "run": run, "split": split, "count": s.count, "weight": s.weight,
                    "wr": s.wr, "wr2": s.wr2, "wp": s.wp, "wy": s.wy})
    return pd.DataFrame(out)
