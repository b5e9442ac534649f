"""Synthetic daily summaries with drift, built directly as summaries-table rows (vectorised, no Spark).

Binary task: per (day, model, run) ``n`` rows with a true logit ``x`` and the
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
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ctcalc_spark.core._math import sigmoid, softplus

JUMPS = {("ctr_b", "2024-03-04"): 1.0, ("ctr_a", "2025-01-06"): -1.0}
"""The default scenario's model-specific bias jumps (both Mondays: ISO weeks 2024-W10 and 2025-W02)."""


def day_range(start: str, n: int) -> list[str]:
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
