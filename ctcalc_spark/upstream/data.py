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

from ctcalc_spark.core.days import parse_day
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


def _days(n_rows: int, n_days: int, start_ds: str, day_offset: int) -> tuple[np.ndarray, np.ndarray]:
    """(world day index, 'YYYY-MM-DD') per row: ``n_rows`` rows spread evenly over ``n_days`` days, the first
    being world day ``day_offset`` (date ``start_ds`` + ``day_offset``)."""
    if n_rows < 0:
        raise ConfigError(f"Expected n_rows >= 0, got {n_rows}.")
    if n_days < 1:
        raise ConfigError(f"Expected n_days >= 1, got {n_days}; use 1 for a single day.")
    start = parse_day(start_ds)
    if start is None:
        raise ConfigError(f"Expected start_ds as 'YYYY-MM-DD', got {start_ds!r}.")
    day = (np.arange(n_rows, dtype=np.int64) * n_days) // max(n_rows, 1) + int(day_offset)
    names = np.array([(start + _dt.timedelta(days=int(d))).isoformat() for d in range(day_offset, day_offset + n_days)],
                     dtype=object)
    return day, names[day - day_offset]


def _eval_seed(seed: int) -> int:
    """The seed of an evaluation table drawn after a training table of ``seed``."""
    return int(np.random.SeedSequence([int(seed), 1]).generate_state(1)[0])


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
    day, ds = _days(n_rows, n_days, start_ds, day_offset)
    if world is None:
        world = make_world(world_seed=world_seed, base_rate=base_rate)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xC7]))
    cat, num = _draw_features(world, n_rows, rng)
    z = world.intercept + drift_per_day * day + _logit_without_intercept(world, cat, num)
    label = (rng.random(n_rows) < _sigmoid(z)).astype(np.int32)
    cols: dict[str, np.ndarray] = {
        "example_id": np.arange(n_rows, dtype=np.int64) + int(id_offset),
        "ds": ds,
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
    eval_seed = _eval_seed(seed)
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


_EDUCATION = ("HS-grad", "Some-college", "Bachelors", "Masters", "Assoc", "11th", "Doctorate")
_WORK = ("Private", "Self-emp", "Government", "Without-pay", "?")


def generate_census_like(
    n_rows: int,
    *,
    seed: int,
    n_days: int = 3,
    start_ds: str = "2026-11-01",
    day_offset: int = 0,
    id_offset: int = 0,
    world_seed: int = 0,
    unseen_share: float = 0.0,
) -> pd.DataFrame:
    """A census-like table with arbitrary column names, string categories, nulls and a string label.

    Columns: ``person id`` (strings 'P0000001'), ``age`` (float, 2 % null), ``work class`` (strings,
    '?' for unknown), ``education``, ``occupation`` (Zipf over 40 values, 3 % null), ``hours-per-week``,
    ``capital.gain`` (mostly 0, heavy tail), ``native country`` (Zipf over 60 values), ``sex`` ('F'/'M'),
    ``interview date`` ('YYYY-MM-DD', ``n_days`` days from ``start_ds`` + ``day_offset``) and ``income``
    ('>50K' with probability sigmoid(true logit), else '<=50K'). ``unseen_share`` of the rows get a
    ``native country`` never drawn otherwise ('Atlantis-<k>'). The effects depend on ``world_seed`` only.

    Example: ``generate_census_like(5_000, seed=1).to_csv('census.csv', index=False)``.
    """
    world = np.random.default_rng(np.random.SeedSequence([int(world_seed), 0xCE]))
    effects = {"work class": world.normal(0, 0.4, len(_WORK)), "education": np.linspace(-0.8, 1.2, len(_EDUCATION)),
               "occupation": world.normal(0, 0.5, 40), "native country": world.normal(0, 0.3, 60)}
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xCE]))

    def zipf(k: int, a: float = 1.1) -> np.ndarray:
        p = 1.0 / np.arange(1, k + 1) ** a
        return np.minimum(np.searchsorted(np.cumsum(p / p.sum()), rng.random(n_rows), side="right"), k - 1)

    work, edu, occ, country = zipf(len(_WORK), 0.8), zipf(len(_EDUCATION), 0.5), zipf(40), zipf(60)
    age = rng.normal(40, 12, n_rows).clip(17, 90).round()
    hours = rng.normal(40, 10, n_rows).clip(1, 99).round()
    gain = np.where(rng.random(n_rows) < 0.1, rng.lognormal(8, 1.2, n_rows), 0.0).round()
    sex = rng.random(n_rows) < 0.5
    z = (-1.6 + effects["work class"][work] + effects["education"][edu] + effects["occupation"][occ]
         + effects["native country"][country] + 0.03 * (age - 40) + 0.02 * (hours - 40) + 0.15 * np.log1p(gain)
         + 0.3 * sex)
    income = np.where(rng.random(n_rows) < _sigmoid(z), ">50K", "<=50K")
    dates = _days(n_rows, n_days, start_ds, day_offset)[1]
    countries = np.array([f"country-{i:02d}" for i in range(60)], dtype=object)[country]
    unseen = rng.random(n_rows) < unseen_share
    countries[unseen] = [f"Atlantis-{k}" for k in range(int(unseen.sum()))]
    frame = pd.DataFrame({
        "person id": [f"P{i:07d}" for i in range(id_offset, id_offset + n_rows)],
        "age": np.where(rng.random(n_rows) < 0.02, np.nan, age),
        "work class": np.array(_WORK, dtype=object)[work],
        "education": np.array(_EDUCATION, dtype=object)[edu],
        "occupation": np.where(rng.random(n_rows) < 0.03, None, np.array([f"occ-{i:02d}" for i in range(40)])[occ]),
        "hours-per-week": hours,
        "capital.gain": gain,
        "native country": countries,
        "sex": np.where(sex, "M", "F"),
        "interview date": dates,
        "income": income,
    })
    return frame


def write_census_like(
    out_dir: str | Path, *, n_train: int = 20_000, n_eval: int = 20_000, seed: int = 0, eval_days: int = 3,
    unseen_share: float = 0.01,
) -> dict[str, Path]:
    """Write ``train.csv`` (one day) and ``eval.csv`` (the ``eval_days`` days after it) under ``out_dir``.

    Example: ``write_census_like('output/census/data')`` then ``ctcalc train --config conf/train_example.yaml``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    eval_seed = _eval_seed(seed)
    paths = {"train": out / "train.csv", "eval": out / "eval.csv"}
    generate_census_like(n_train, seed=seed, n_days=1).to_csv(paths["train"], index=False)
    generate_census_like(n_eval, seed=eval_seed, n_days=eval_days, day_offset=1, id_offset=n_train,
                         unseen_share=unseen_share).to_csv(paths["eval"], index=False)
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


def _main(argv: list[str] | None = None) -> None:
    """Write example tables: ``python -m ctcalc_spark.upstream.data --census output/census/data``."""
    import argparse

    parser = argparse.ArgumentParser(description=_main.__doc__)
    parser.add_argument("--census", metavar="DIR",
                        help="census-like CSVs (train.csv, eval.csv) for conf/train_example.yaml")
    parser.add_argument("--ctr", metavar="DIR", help="synthetic CTR Parquet tables (train.parquet, eval.parquet)")
    parser.add_argument("--n-train", type=int, default=20_000)
    parser.add_argument("--n-eval", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not (args.census or args.ctr):
        parser.error("give --census DIR and/or --ctr DIR")
    if args.census:
        paths = write_census_like(args.census, n_train=args.n_train, n_eval=args.n_eval, seed=args.seed)
        print(f"wrote {paths['train']} ({args.n_train:,} rows) and {paths['eval']} ({args.n_eval:,} rows)")
    if args.ctr:
        paths = write_ctr_tables(args.ctr, n_train=args.n_train, n_eval=args.n_eval, seed=args.seed)
        print(f"wrote {paths['train']} and {paths['eval']}")


if __name__ == "__main__":
    _main()
