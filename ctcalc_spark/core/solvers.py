"""Bias solvers on rows: logit shift (binary), mean shift (regression), temperature (multiclass).

Each solver either returns a finite value or raises :class:`DegenerateBiasError`
whose ``status`` names the reason (the same strings the metrics table uses).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from numpy.typing import ArrayLike

from ctcalc_spark.core._math import F64, logit, logsumexp_rows, sigmoid, softplus
from ctcalc_spark.errors import DegenerateBiasError
from ctcalc_spark.core.metrics import (
    _validate_binary_labels,
    _validate_multiclass,
    _validate_vector,
    _validate_weight,
)

NEWTON_TOL = 1e-13
MAX_ITER = 200

STATUS_NO_BIAS_ROWS = "no_bias_rows"
STATUS_BIAS_NO_POSITIVES = "bias_single_class_negative"
STATUS_BIAS_NO_NEGATIVES = "bias_single_class_positive"
STATUS_TEMPERATURE_NOT_POSITIVE = "temperature_not_positive"
STATUS_TEMPERATURE_UNBOUNDED = "temperature_unbounded"


def safeguarded_newton(
    grad: Callable[[float], tuple[float, float]], lo: float, hi: float, x0: float
) -> float:
    """Root of an increasing function on [lo, hi] (grad(lo) <= 0 <= grad(hi)).

    ``grad(x)`` returns (value, derivative). Newton steps that leave the current
    bracket, or that do not halve |value|, are replaced by bisection, so the
    iteration always converges; it stops when the step is below 1e-13·(1+|x|).
    """
    x = min(max(x0, lo), hi)
    g_prev = np.inf
    for _ in range(MAX_ITER):
        g, dg = grad(x)
        if g == 0.0:
            return x
        if g < 0:
            lo = x
        else:
            hi = x
        newton_ok = dg > 0 and np.isfinite(dg)
        x_new = x - g / dg if newton_ok else np.nan
        if not (lo < x_new < hi) or abs(g) > 0.5 * abs(g_prev):
            x_new = 0.5 * (lo + hi)
        g_prev = g
        if abs(x_new - x) <= NEWTON_TOL * (1.0 + abs(x)) or hi - lo <= NEWTON_TOL * (1.0 + abs(x)):
            return float(x_new)
        x = x_new
    return float(x)


def _check_binary_bias_set(pos_w: float, total_w: float, n: int) -> None:
    if n == 0 or total_w <= 0:
        raise DegenerateBiasError(
            STATUS_NO_BIAS_ROWS, "The val-bias part is empty (or has zero total weight): no bias can be fitted."
        )
    if pos_w <= 0:
        raise DegenerateBiasError(
            STATUS_BIAS_NO_POSITIVES,
            "The val-bias part has no positive labels: the log-loss optimal shift is c* = +inf. "
            "Use a larger val-bias fraction or a longer window.",
        )
    if pos_w >= total_w:
        raise DegenerateBiasError(
            STATUS_BIAS_NO_NEGATIVES,
            "The val-bias part has no negative labels: the log-loss optimal shift is c* = -inf. "
            "Use a larger val-bias fraction or a longer window.",
        )


def logit_shift_bracket(z_min: float, z_max: float, base_rate: float) -> tuple[float, float]:
    """A bracket [lo, hi] that must hold c*: shifting every logit to the base-rate logit from each end."""
    t = float(logit(base_rate))
    return z_min - t, z_max - t


def solve_logit_shift(y: ArrayLike, z: ArrayLike, *, sample_weight: ArrayLike | None = None) -> float:
    """c* minimising Σ w·logloss(y, σ(z - c)); at the optimum Σ w·σ(z - c*) = Σ w·y.

    The optimality condition is solved as log Q(c) = log P(c), with Q = Σ_pos w·σ(c - z) the mass
    missed on the positives and P = Σ_neg w·σ(z - c) the mass put on the negatives, each a log-sum-exp
    over its rows: the difference increases with c, tiny terms (confidently right rows, |z| >= 30) keep
    their digits, and no σ underflows at any finite logit. Safeguarded Newton; raises
    DegenerateBiasError when the rows are empty or single-class (c* = +-inf).

    >>> round(solve_logit_shift([1, 0, 0, 0], [0.0, 0.0, 0.0, 0.0]), 6)  # log(1/3)
    1.098612
    """
    yv = _validate_binary_labels(y)
    zv = _validate_vector("z", z, yv.size)
    w = _validate_weight(sample_weight, yv.size)
    total, pos = float(w.sum()), float(np.sum(w * yv))
    _check_binary_bias_set(pos, total, yv.size)
    keep = w > 0
    zv, w, yv = zv[keep], w[keep], yv[keep]
    z_pos, lw_pos = zv[yv == 1], np.log(w[yv == 1])
    z_neg, lw_neg = zv[yv == 0], np.log(w[yv == 0])

    def grad(c: float) -> tuple[float, float]:
        lq, dlq = _log_missed_mass(lw_pos, c - z_pos)
        lp, dlp = _log_missed_mass(lw_neg, z_neg - c)
        return lq - lp, dlq + dlp

    lo, hi = logit_shift_bracket(float(zv.min()), float(zv.max()), pos / total)
    x0 = float(np.sum(w * zv) / float(w.sum())) - float(logit(pos / total))
    return safeguarded_newton(grad, lo, hi, x0)


def _log_missed_mass(log_w: F64, margin: F64) -> tuple[float, float]:
    """(log Σ w·σ(margin), Σ share·σ(-margin)): the log of a missed mass and the derivative of that log
    with respect to the margin, ``share`` being each row's part of the mass."""
    terms = log_w - softplus(-margin)
    top = float(terms.max())
    share = np.exp(terms - top)
    total = float(share.sum())
    return top + float(np.log(total)), float(np.sum(share * sigmoid(-margin)) / total)


def solve_mean_shift(y: ArrayLike, p: ArrayLike, *, sample_weight: ArrayLike | None = None) -> float:
    """c* = Σ w (y - p) / Σ w, the shift minimising Σ w (y - p - c)²."""
    yv = _validate_vector("y", y)
    pv = _validate_vector("p", p, yv.size)
    w = _validate_weight(sample_weight, yv.size)
    total = float(w.sum())
    if yv.size == 0 or total <= 0:
        raise DegenerateBiasError(STATUS_NO_BIAS_ROWS, "The val-bias part is empty: no mean shift can be fitted.")
    return float(np.sum(w * (yv - pv)) / total)


def solve_temperature(y: ArrayLike, z: ArrayLike, *, sample_weight: ArrayLike | None = None) -> float:
    """T* minimising the cross-entropy of softmax(z / T), by safeguarded Newton on β = 1/T (convex).

    d/dβ CE = Σ w (E_softmax(βz)[z] - z_y); d²/dβ² = Σ w Var_softmax(βz)[z] >= 0.
    Raises DegenerateBiasError when β* <= 0 (the logits are no better than
    uniform) or β* = +inf (every val-bias row is classified correctly at any scale).
    """
    yi, zv = _validate_multiclass(y, z)
    w = _validate_weight(sample_weight, yi.size)
    if yi.size == 0 or float(w.sum()) <= 0:
        raise DegenerateBiasError(STATUS_NO_BIAS_ROWS, "The val-bias part is empty: no temperature can be fitted.")
    keep = w > 0
    yi, zv, w = yi[keep], zv[keep], w[keep]
    zy = zv[np.arange(yi.size), yi]

    def grad(beta: float) -> tuple[float, float]:
        zb = beta * zv
        pr = np.exp(zb - logsumexp_rows(zb)[:, None])
        mean = np.sum(pr * zv, axis=1)
        var = np.sum(pr * zv * zv, axis=1) - mean * mean
        return float(np.sum(w * (mean - zy))), float(np.sum(w * np.maximum(var, 0.0)))

    g0, _ = grad(0.0)
    if g0 >= 0:
        raise DegenerateBiasError(
            STATUS_TEMPERATURE_NOT_POSITIVE,
            "The val-bias logits rank the true class no better than uniform (optimal 1/T <= 0): "
            "no positive temperature exists.",
        )
    hi = 1.0
    while grad(hi)[0] <= 0:  # exactly 0 at large β: softmax saturated on every row
        hi *= 2.0
        if hi > 1e8:
            raise DegenerateBiasError(
                STATUS_TEMPERATURE_UNBOUNDED,
                "Every val-bias row is classified correctly: cross-entropy keeps falling as T -> 0.",
            )
    beta = safeguarded_newton(grad, 0.0, hi, 1.0)
    return 1.0 / beta
