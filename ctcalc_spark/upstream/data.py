"""Synthetic CTR data: Zipf-skewed categorical fields, numeric fields, a known click model.

The *world* (the true click model: per-category effects, numeric weights,
low-rank pairwise interactions, the intercept) depends on ``world_seed`` only;
the *rows* depend on ``seed``. Train and eval tables drawn from one world with
different row seeds therefore share one ground truth.

True logit of a row on day ``t`` (``t = 0`` on the first day)::

    z = b0 + drift_per_day * t + sum_f a_f[c_f] + sum_j w_j g_j(n_j)
          + sum_{(f, g) in pairs} <u_fg[c_f], v_fg[c_g]>

and ``label ~ Bernoulli(sigmoid(z))``. ``b0`` is solved once per world so that
the day-0 click rate equals ``base_rate``.
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ctcalc_spark.errors import ConfigError

DEFAULT_CARDINALITIES: tuple[int, ...] = (5, 13, 37, 100, 268, 720, 1931, 5000)
DEFAULT_PAIRS: tuple[tuple[int, int], ...] = ((0, 1), (2, 3), (1, 5), (4, 6))

# Scales of the true model's terms (logit units), chosen so the true logit has
# std about 1.1 and the Bayes AUC is about 0.75 — typical of CTR data.
_FIRST_ORDER_STD = 0.35
_NUMERIC_WEIGHT_STD = 0.3
_INTERACTION_STD = 0.3
_INTERACTION_RANK = 2
_CALIBRATION_ROWS = 50_000


@dataclass(frozen=True)
class CtrWorld:
    """The true click model: effect tables and intercept, fixed by ``world_seed``."""

    cardinalities: tuple[int, ...]
    n_numeric: int
    pairs: tuple[tuple[int, int], ...]
    zipf_a: float
    first_order: tuple[np.ndarray, ...]
    numeric_weights: np.ndarray
    interactions: tuple[tuple[np.ndarray, np.ndarray], ...]
    intercept: float


def make_world(
    *,
    world_seed: int = 0,
    cardinalities: tuple[int, ...] = DEFAULT_CARDINALITIES,
    n_numeric: int = 3,
    pairs: tuple[tuple[int, int], ...] = DEFAULT_PAIRS,
    zipf_a: float = 1.1,
    base_rate: float = 0.15,
) -> CtrWorld:
    """Draw the true click model; ``intercept`` solves mean(sigmoid(z)) = base_rate on day 0.

    Example: ``make_world(world_seed=0).intercept`` is about ``-2.0`` for ``base_rate=0.15``.
    """
    cards = tuple(int(c) for c in cardinalities)
    _validate_world_args(cards, n_numeric, pairs, zipf_a, base_rate)
    rng = np.random.default_rng(np.random.SeedSequence([int(world_seed), 0x57]))
    first = tuple(rng.normal(0.0, _FIRST_ORDER_STD, size=c) for c in cards)
    weights = rng.normal(0.0, _NUMERIC_WEIGHT_STD, size=n_numeric)
    # <u, v> of two independent N(0, s^2) rank-r vectors has std s^2 sqrt(r).
    s = np.sqrt(_INTERACTION_STD / np.sqrt(_INTERACTION_RANK))
    inter = tuple(
        (
            rng.normal(0.0, s, size=(cards[f], _INTERACTION_RANK)),
            rng.normal(0.0, s, size=(cards[g], _INTERACTION_RANK)),
        )
        for f, g in pairs
    )
    world = CtrWorld(cards, int(n_numeric), tuple(pairs), float(zipf_a), first, weights, inter, 0.0)
    cat, num = _draw_features(world, _CALIBRATION_ROWS, rng)
    z = _logit_without_intercept(world, cat, num)
    intercept = _solve_intercept(z, base_rate)
    return CtrWorld(cards, int(n_numeric), tuple(pairs), float(zipf_a), first, weights, inter, intercept)


def generate_ctr(
    n_rows: int,
    *,
    seed: int,
    n_days: int = 1,
    start_ds: str = "2026-11-01",
    drift_per_day: float = 0.0,
    world: CtrWorld | None = None,
    world_seed: int = 0,
    base_rate: float = 0.15,
    day_offset: int = 0,
    id_offset: int = 0,
    include_true_logit: bool = False,
) -> pd.DataFrame:
    """Draw ``n_rows`` rows spread evenly over ``n_days`` days; same arguments, same frame.

    Columns: ``example_id`` (int64, ``id_offset + row``), ``ds`` ('YYYY-MM-DD'),
    ``label`` (int32 0/1), ``c0..`` (int64 ids in ``[0, cardinality)``),
    ``n0..`` (float64), and ``true_logit`` if asked. Day ``t`` of the frame is
    world day ``day_offset + t`` (its date and its drifted intercept).

    Example: ``generate_ctr(10_000, seed=1, n_days=7, drift_per_day=0.05)``.
    """
    if n_rows < 0:
        raise ConfigError(f"Expected n_rows >= 0, got {n_rows}.")
    if n_days < 1:
        raise ConfigError(f"Expected n_days >= 1, got {n_days}; use 1 for a single day.")
    try:
        start = _dt.date.fromisoformat(start_ds)
    except ValueError as e:
        raise ConfigError(f"Expected start_ds as 'YYYY-MM-DD', got {start_ds!r}.") from e
    if world is None:
        world = make_world(world_seed=world_seed, base_rate=base_rate)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xC7]))
    cat, num = _draw_features(world, n_rows, rng)
    day = (np.arange(n_rows, dtype=np.int64) * n_days) // max(n_rows, 1) + int(day_offset)
    z = world.intercept + drift_per_day * day + _logit_without_intercept(world, cat, num)
    label = (rng.random(n_rows) < _sigmoid(z)).astype(np.int32)
    day_names = np.array(
        [(start + _dt.timedelta(days=int(d))).isoformat() for d in range(day_offset, day_offset + n_days)],
        dtype=object,
    )
    cols: dict[str, np.ndarray] = {
        "example_id": np.arange(n_rows, dtype=np.int64) + int(id_offset),
        "ds": day_names[day - day_offset],
        "label": label,
    }
    for f in range(len(world.cardinalities)):
        cols[f"c{f}"] = cat[:, f]
    for j in range(world.n_numeric):
        cols[f"n{j}"] = num[:, j]
    if include_true_logit:
        cols["true_logit"] = z
    return pd.DataFrame(cols)


def write_ctr_tables(
    out_dir: str | Path,
    *,
    n_train: int,
    n_eval: int,
    seed: int,
    n_train_days: int = 1,
    n_eval_days: int = 1,
    start_ds: str = "2026-11-01",
    drift_per_day: float = 0.0,
    world_seed: int = 0,
    base_rate: float = 0.15,
    include_true_logit: bool = False,
) -> dict[str, Path]:
    """Write ``train.parquet`` then ``eval.parquet`` (the days right after training) under ``out_dir``.

    Both tables share one world; eval ``example_id`` values start at ``n_train``
    so ids are unique across the two tables. Returns ``{'train': path, 'eval': path}``.

    Example: ``write_ctr_tables('/tmp/ctr', n_train=200_000, n_eval=100_000, seed=0)``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    world = make_world(world_seed=world_seed, base_rate=base_rate)
    eval_seed = int(np.random.SeedSequence([int(seed), 1]).generate_state(1)[0])
    common: dict[str, Any] = dict(
        start_ds=start_ds, drift_per_day=drift_per_day, world=world, include_true_logit=include_true_logit
    )
    train = generate_ctr(n_train, seed=seed, n_days=n_train_days, **common)
    evaluation = generate_ctr(
        n_eval, seed=eval_seed, n_days=n_eval_days, day_offset=n_train_days, id_offset=n_train, **common
    )
    paths = {"train": out / "train.parquet", "eval": out / "eval.parquet"}
    train.to_parquet(paths["train"], index=False, row_group_size=1_000_000)
    evaluation.to_parquet(paths["eval"], index=False, row_group_size=1_000_000)
    return paths


def categorical_columns(df: pd.DataFrame) -> list[str]:
    """Names ``c0, c1, ...`` present in ``df``, in field order."""
    return sorted((c for c in df.columns if _is_field(c, "c")), key=lambda c: int(c[1:]))


def numeric_columns(df: pd.DataFrame) -> list[str]:
    """Names ``n0, n1, ...`` present in ``df``, in field order."""
    return sorted((c for c in df.columns if _is_field(c, "n")), key=lambda c: int(c[1:]))


def _is_field(name: str, prefix: str) -> bool:
    return isinstance(name, str) and name.startswith(prefix) and name[1:].isdigit()


def _validate_world_args(
    cards: tuple[int, ...], n_numeric: int, pairs: tuple[tuple[int, int], ...], zipf_a: float, base_rate: float
) -> None:
    if not cards or min(cards) < 1:
        raise ConfigError(f"Expected at least one categorical field, each with cardinality >= 1, got {cards}.")
    if n_numeric < 0:
        raise ConfigError(f"Expected n_numeric >= 0, got {n_numeric}.")
    for f, g in pairs:
        if not (0 <= f < len(cards) and 0 <= g < len(cards)) or f == g:
            raise ConfigError(
                f"Expected interaction pairs of two distinct field indices in [0, {len(cards)}), got {(f, g)}."
            )
    if zipf_a <= 0:
        raise ConfigError(f"Expected zipf_a > 0, got {zipf_a}.")
    if not 0.0 < base_rate < 1.0:
        raise ConfigError(f"Expected base_rate strictly between 0 and 1, got {base_rate}.")


def _draw_features(world: CtrWorld, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    cat = np.empty((n, len(world.cardinalities)), dtype=np.int64)
    for f, card in enumerate(world.cardinalities):
        p = 1.0 / np.arange(1, card + 1, dtype=np.float64) ** world.zipf_a
        cdf = np.cumsum(p / p.sum())
        # Inverse-CDF sampling: same draws as rng.choice(p=...) but cheaper for big n.
        cat[:, f] = np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), card - 1)
    num = np.empty((n, world.n_numeric), dtype=np.float64)
    for j in range(world.n_numeric):
        kind = j % 3
        if kind == 0:
            num[:, j] = rng.normal(0.0, 1.0, size=n)
        elif kind == 1:
            num[:, j] = rng.lognormal(0.0, 1.0, size=n)  # heavy-tailed, count-like
        else:
            num[:, j] = rng.random(n)
    return cat, num


def _logit_without_intercept(world: CtrWorld, cat: np.ndarray, num: np.ndarray) -> np.ndarray:
    z = np.zeros(cat.shape[0], dtype=np.float64)
    for f, table in enumerate(world.first_order):
        z += table[cat[:, f]]
    for j in range(world.n_numeric):
        kind = j % 3
        x = num[:, j]
        # Centred transforms so the numeric part does not move the base rate.
        g = x if kind == 0 else (np.log1p(x) - 0.81 if kind == 1 else (x - 0.5) * 3.0)
        z += world.numeric_weights[j] * g
    for (f, g_), (u, v) in zip(world.pairs, world.interactions):
        z += np.einsum("nr,nr->n", u[cat[:, f]], v[cat[:, g_]])
    return z


def _solve_intercept(z: np.ndarray, base_rate: float) -> float:
    b = float(np.log(base_rate / (1.0 - base_rate)) - np.mean(z))
    for _ in range(50):  # Newton: mean(sigmoid(b + z)) is increasing in b
        p = _sigmoid(b + z)
        gap = float(p.mean()) - base_rate
        if abs(gap) < 1e-12:
            break
        b -= gap / float((p * (1.0 - p)).mean())
    return b


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))
