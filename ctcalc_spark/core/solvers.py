"""Bias solvers on rows: logit shift (binary), mean shift (regression), temperature (multiclass).

Each solver either returns a finite value or raises :class:`DegenerateBiasError`
whose ``status`` names the reason (the same strings the metrics table uses).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from numpy.typing import ArrayLike

from ctcalc_spark.core._math import F64, logit, logsumexp_rows
from ctcalc_spark.errors import DegenerateBiasError
from ctcalc_spark.core.metrics import (
    validate_binary_labels,
    validate_multiclass,
    validate_vector,
    validate_weight,
)

NEWTON_TOL = 1e-13
MAX_ITER = 200

STATUS_OK = "ok"
STATUS_NO_REMAIN_ROWS = "no_remain_rows"
STATUS_ZERO_WEIGHT = "zero_weight"
STATUS_NO_BIAS_ROWS = "no_bias_rows"
STATUS_BIAS_NO_POSITIVES = "bias_single_class_negative"
STATUS_BIAS_NO_NEGATIVES = "bias_single_class_positive"
STATUS_TEMPERATURE_NOT_POSITIVE = "temperature_not_positive"
STATUS_TEMPERATURE_UNBOUNDED = "temperature_unbounded"
STATUS_BIAS_ILL_CONDITIONED = "bias_ill_conditioned"

ROUNDING_TOL = 1e-7
"""A c* whose float rounding can move it by more than this is not reported (status ``bias_ill_conditioned``): far
below the histogram's error bound at any usable bin width (2.65e-6 at h = 0.05), so the bound holds for every
c* that is reported, on either path."""


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


def check_binary_bias_set(pos_w: float, total_w: float, n: int) -> None:
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


def logit_shift_start(z_min: F64, z_max: F64, z_mean: F64, base_rate: F64) -> tuple[F64, F64, F64]:
    """(lo, hi, x0) of a logit-shift solve, elementwise: the bracket [lo, hi] that must hold c* (every logit
    shifted to the base-rate logit from each end) and the start, the mean logit minus the base-rate logit."""
    t = logit(base_rate)
    return z_min - t, z_max - t, z_mean - t


def solve_logit_shift(y: ArrayLike, z: ArrayLike, *, sample_weight: ArrayLike | None = None) -> float:
    """c* minimising Σ w·logloss(y, σ(z - c)); at the optimum Σ w·σ(z - c*) = Σ w·y.

    The lockstep solver of the histogram path (:func:`lockstep_solve`) with each row its own bin at its own logit
    (no offsets from the centre, so nothing is expanded): the same equation, formed the same way, so that tiny
    terms of confidently right or confidently wrong rows keep their digits.

    Parameters
    ----------
    y : array_like of {0, 1}, shape (n,)
        Binary labels of the val-bias rows.
    z : array_like of float, shape (n,)
        Their logits.
    sample_weight : array_like of float, shape (n,), optional
        Finite row weights >= 0; every row weighs 1 when omitted. Rows of weight 0 take no part.

    Returns
    -------
    float
        The finite shift ``c*`` in logit units; the calibrated logits are ``z - c*``.

    Raises
    ------
    InputError
        A label other than 0/1; a NaN/inf label, logit or weight; a length that differs from ``y``'s; a
        negative weight.
    DegenerateBiasError
        ``status`` ``no_bias_rows`` (no rows, or zero total weight), ``bias_single_class_negative`` or
        ``bias_single_class_positive`` (weight in one label only: c* = +-inf), ``bias_ill_conditioned`` (float
        rounding of the weight sums can move c* by more than :data:`ROUNDING_TOL`).

    Examples
    --------
    >>> round(solve_logit_shift([1, 0, 0, 0], [0.0, 0.0, 0.0, 0.0]), 6)  # log(1/3)
    1.098612
    """
    yv = validate_binary_labels(y)
    zv = validate_vector("z", z, yv.size)
    w = validate_weight(sample_weight, yv.size)
    total, pos = float(w.sum()), float(np.sum(w * yv))
    check_binary_bias_set(pos, total, yv.size)
    keep = w > 0
    zv, w, yv = zv[keep], w[keep], yv[keep]
    sides = []
    for label in (0, 1):
        on = yv == label
        zl, wl = zv[on][None, :], w[on][None, :]
        sides.append(PaddedSide(1.0 - 2.0 * label, zl, wl, np.zeros_like(wl), np.zeros_like(wl), wl > 0))
    lo, hi, x0 = logit_shift_start(np.array([zv.min()]), np.array([zv.max()]),
                                   np.array([np.sum(w * zv) / float(w.sum())]), np.array([pos / total]))
    c = bias_or_error(lockstep_solve(sides[0], sides[1], lo, hi, x0)[0])
    if isinstance(c, DegenerateBiasError):
        raise c
    return c


def sigmoid_pair(x: F64) -> tuple[F64, F64, F64]:
    """(σ(x), σ(-x), log1p(e^-|x|)) from one exp: ``sigmoid(x)``, ``sigmoid(-x)`` and the common part of
    ``softplus(±x) = max(±x, 0) + log1p(e^-|x|)``, computed exactly as :mod:`ctcalc_spark.core._math` does."""
    e = np.exp(-np.abs(x))
    one_e = 1.0 + e
    r, q = 1.0 / one_e, e / one_e
    return np.where(x >= 0, r, q), np.where(x <= 0, r, q), np.log1p(e)


class PaddedSide:
    """One label's bins of many val-bias summaries as (n, width) arrays: bin centres, Σw, s·Σw·d and Σw·d² (``d``
    a logit's offset from its centre, ``s = 1 - 2·label``); ``live`` marks the bins with weight (padding has none).
    Rows of labels and logits are the case of one bin per row at its own logit (d = 0)."""

    def __init__(self, sign: float, centres: F64, w: F64, m1: F64, m2: F64, live: np.ndarray) -> None:
        self.sign, self.centres, self.w, self.m1, self.m2, self.live = sign, centres, w, m1, m2, live

    def small_masses(self, c: F64, rows: np.ndarray) -> tuple[F64, F64, np.ndarray]:
        """Per bin of the summaries ``rows`` at their shifts ``c``: the log of the smaller of the bin's expanded
        missed mass Σw·σ(t) and hit mass Σw·σ(-t) (``t`` a row's margin against its label), that log's
        derivative in c, and whether the hit mass is the smaller one (the centre's margin x > 0: a wrong bin).

        The two expansions are the second-order Taylor polynomials of σ(t) and σ(-t) around the centre, so they
        add up to Σw exactly: σ(x)·A and σ(-x)·B with A = w + m1·σ(-x) + ½·m2·σ(-x)·(σ(-x) - σ(x)) and
        B = w - m1·σ(x) + ½·m2·σ(x)·(σ(x) - σ(-x)), both > 0 for h <= 0.5.
        """
        live, w, m1, m2 = self.live[rows], self.w[rows], self.m1[rows], self.m2[rows]
        x = self.sign * (self.centres[rows] - c[:, None])
        s, sc, l1p = sigmoid_pair(x)
        wrong = live & (x > 0)
        factor = np.where(wrong, w - m1 * s + 0.5 * m2 * s * (s - sc), w + m1 * sc + 0.5 * m2 * sc * (sc - s))
        factor = np.where(live, factor, 1.0)
        # d(σ(x)·A)/dc = -d(σ(-x)·B)/dc = -s·σ(x)·σ(-x)·[w + m1·(σ(-x) - σ(x)) + ½·m2·(1 - 6·σ(x)·σ(-x))]
        inner = w + m1 * (sc - s) + 0.5 * m2 * (1.0 - 6.0 * s * sc)
        with np.errstate(divide="ignore"):
            log_terms = np.where(live, -(np.maximum(np.where(wrong, x, -x), 0.0) + l1p) + np.log(factor), -np.inf)
        slope = np.where(live, self.sign * np.where(wrong, s, -sc) * inner / factor, 0.0)
        return log_terms, slope, wrong


def _log_sum(log_terms: F64, slope: F64) -> tuple[F64, F64]:
    """Row-wise (log Σ e^terms, d/dc of it) from each term's log and the derivative of that log; -inf and 0
    for a row with no terms."""
    top = log_terms.max(axis=1)
    top = np.where(np.isfinite(top), top, 0.0)
    share = np.exp(log_terms - top[:, None])
    total = share.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return top + np.log(total), np.where(total > 0, (share * slope).sum(axis=1) / total, 0.0)


def lockstep_solve(neg: PaddedSide, pos: PaddedSide, lo: F64, hi: F64, x0: F64) -> F64:
    """c* of many val-bias summaries at once (each holding weight in both labels): bracket widening and
    safeguarded Newton, element by element, on their padded bins (``lo``, ``hi``, ``x0``: each one's bracket and
    start; ``lo`` and ``hi`` are updated in place). NaN for a c* that float rounding can move by more than
    :data:`ROUNDING_TOL` (:func:`_rounding_error`; :func:`bias_or_error` turns it into its status).

    c* solves Q(c) = P(c), Q = Σ_pos w·σ(c - z) the mass missed on the positives and P = Σ_neg w·σ(z - c) the
    mass put on the negatives. Written with each bin's smaller mass (:meth:`PaddedSide.small_masses`),
    Q - P = D + a - b: ``D`` the weight of the wrong positive bins minus that of the wrong negative bins (exact
    sums of weights), ``a`` the missed mass of the right positive bins plus the hit mass of the wrong negative
    bins, ``b`` the reverse; ``a`` and ``b`` are summed in log space. The solver's function is
    log(D⁺ + a) - log(D⁻ + b), which has the sign of Q - P and increases with c: terms of size e^-30 keep their
    digits whether the rows are confidently right (Q and P tiny) or confidently wrong (Q and P near Σw, their
    difference tiny), and any finite logit gives a finite c*.
    """

    def grad(c: F64, rows: np.ndarray) -> tuple[F64, F64]:
        left, right, slope = _sides(neg, pos, c, rows)[:3]
        return left - right, np.where(np.isfinite(slope), slope, 0.0)

    n = lo.size
    for end, step, outside in ((lo, -1.0, lambda g: ~(g <= 0)), (hi, 1.0, lambda g: ~(g >= 0))):
        rows = np.arange(n)
        for _ in range(60):  # the expansion can move the sign change by O(h³); widen until bracketed
            if not rows.size:
                break
            rows = rows[outside(grad(end[rows], rows)[0])]
            end[rows] += step
    # safeguarded Newton, element by element
    x = np.minimum(np.maximum(x0, lo), hi)
    g_prev = np.full(n, np.inf)
    result = np.full(n, np.nan)
    rows = np.arange(n)
    for _ in range(MAX_ITER):
        if not rows.size:
            break
        xr = x[rows]
        g, dg = grad(xr, rows)
        zero = g == 0.0
        result[rows[zero]] = xr[zero]
        lo[rows] = np.where(g < 0, xr, lo[rows])
        hi[rows] = np.where(g < 0, hi[rows], xr)
        lor, hir = lo[rows], hi[rows]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # such steps are bisected
            x_new = np.where((dg > 0) & np.isfinite(dg), xr - g / dg, np.nan)
        tol = NEWTON_TOL * (1.0 + np.abs(xr))
        # a Newton step below the tolerance ends the solve even when it rounds onto the bracket's end (at the
        # root itself), where bisecting would give up the digits that Newton has reached
        converged = np.abs(x_new - xr) <= tol
        bisect = ~converged & (~((lor < x_new) & (x_new < hir)) | (np.abs(g) > 0.5 * np.abs(g_prev[rows])))
        x_new = np.where(bisect, 0.5 * (lor + hir), x_new)
        g_prev[rows] = g
        done = ~zero & (converged | (np.abs(x_new - xr) <= tol) | (hir - lor <= tol))
        result[rows[done]] = x_new[done]
        x[rows] = x_new
        rows = rows[~(zero | done)]
    result[rows] = x[rows]
    return np.where(_rounding_error(neg, pos, result) <= ROUNDING_TOL, result, np.nan)


def _sides(neg: PaddedSide, pos: PaddedSide, c: F64, rows: np.ndarray) -> tuple[F64, ...]:
    """At shifts ``c`` of the summaries ``rows``: log(D⁺ + a), log(D⁻ + b), the derivative of their difference,
    log|Q - P|' (the derivative of Q - P, in log), and the weight of the wrong bins (:func:`lockstep_solve`)."""
    ln, dn, wrong_n = neg.small_masses(c, rows)
    lp, dp, wrong_p = pos.small_masses(c, rows)
    wrong_pos = np.where(wrong_p, pos.w[rows], 0.0).sum(axis=1)  # the weight of the wrong bins of each label
    wrong_neg = np.where(wrong_n, neg.w[rows], 0.0).sum(axis=1)
    d = wrong_pos - wrong_neg
    la, da = _log_sum(np.concatenate([np.where(wrong_p, -np.inf, lp), np.where(wrong_n, ln, -np.inf)], axis=1),
                      np.concatenate([dp, dn], axis=1))
    lb, db = _log_sum(np.concatenate([np.where(wrong_n, -np.inf, ln), np.where(wrong_p, lp, -np.inf)], axis=1),
                      np.concatenate([dn, dp], axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        left = np.logaddexp(np.log(np.maximum(d, 0.0)), la)
        right = np.logaddexp(np.log(np.maximum(-d, 0.0)), lb)
        slope = da * np.exp(la - left) - db * np.exp(lb - right)
        log_df = np.logaddexp(la + np.log(da), lb + np.log(-db))  # (Q - P)' = a·(log a)' - b·(log b)'
    return left, right, slope, log_df, wrong_pos + wrong_neg


def _rounding_error(neg: PaddedSide, pos: PaddedSide, c: F64) -> F64:
    """How far float rounding can move each c*: the rounding of D (a difference of sums of weights, a few ulps of
    the wrong bins' weight) over the slope of Q - P. Confidently wrong rows in balance make that slope e^-|z|-sized,
    so that D's last bits decide c*. Sums of integer weights are exact, and so is D then."""
    err = np.where(np.isfinite(c), 0.0, np.inf)
    integral = np.all(neg.w == np.rint(neg.w), axis=1) & np.all(pos.w == np.rint(pos.w), axis=1)
    integral &= (neg.w.sum(axis=1) + pos.w.sum(axis=1)) < 2.0**53
    rows = np.flatnonzero(np.isfinite(c) & ~integral)
    if rows.size:
        _, _, _, log_df, w_wrong = _sides(neg, pos, c[rows], rows)
        with np.errstate(over="ignore", invalid="ignore"):
            err[rows] = np.where(w_wrong == 0, 0.0, 8.0 * np.finfo(float).eps * w_wrong * np.exp(-log_df))
    return err


def bias_or_error(c: float) -> float | DegenerateBiasError:
    """A solved c*, or the DegenerateBiasError of one that :func:`lockstep_solve` left out (NaN)."""
    if np.isfinite(c):
        return float(c)
    return DegenerateBiasError(
        STATUS_BIAS_ILL_CONDITIONED,
        "The val-bias rows are confidently wrong in both directions and balance to within float rounding: c* "
        "depends on the last bits of the weight sums. Use more val-bias rows, or check the model's logits.",
    )


def solve_mean_shift(y: ArrayLike, p: ArrayLike, *, sample_weight: ArrayLike | None = None) -> float:
    """c* = Σ w (y - p) / Σ w, the shift minimising Σ w (y - p - c)².

    Parameters
    ----------
    y : array_like of float, shape (n,)
        Targets of the val-bias rows.
    p : array_like of float, shape (n,)
        Their predictions.
    sample_weight : array_like of float, shape (n,), optional
        Finite row weights >= 0; every row weighs 1 when omitted. Rows of weight 0 take no part.

    Returns
    -------
    float
        The shift ``c*`` in the unit of ``y``; the calibrated predictions are ``p + c*``.

    Raises
    ------
    InputError
        A NaN/inf value; a length that differs from ``y``'s; a negative weight.
    DegenerateBiasError
        ``status`` ``no_bias_rows``: no rows, or a total weight that is not positive.
    """
    yv = validate_vector("y", y)
    pv = validate_vector("p", p, yv.size)
    w = validate_weight(sample_weight, yv.size)
    return mean_shift(float(np.sum(w * (yv - pv))), float(w.sum()), yv.size)


def mean_shift(wr: float, weight: float, n_rows: int) -> float:
    """c* = Σw·r / Σw (r = y - p) from the sums over ``n_rows`` val-bias rows; DegenerateBiasError when they have
    no weight."""
    if n_rows == 0 or weight <= 0:
        raise DegenerateBiasError(STATUS_NO_BIAS_ROWS, "The val-bias part is empty: no mean shift can be fitted.")
    return wr / weight


def solve_temperature(y: ArrayLike, z: ArrayLike, *, sample_weight: ArrayLike | None = None) -> float:
    """T* minimising the cross-entropy of softmax(z / T), by safeguarded Newton on β = 1/T (convex).

    d/dβ CE = Σ w (E_softmax(βz)[z] - z_y); d²/dβ² = Σ w Var_softmax(βz)[z] >= 0.

    Parameters
    ----------
    y : array_like of int, shape (n,)
        Class indices in ``[0, k - 1]`` of the val-bias rows.
    z : array_like of float, shape (n, k), k >= 2
        Their logits.
    sample_weight : array_like of float, shape (n,), optional
        Finite row weights >= 0; every row weighs 1 when omitted. Rows of weight 0 take no part.

    Returns
    -------
    float
        The temperature ``T* > 0``; the calibrated logits are ``z / T*``.

    Raises
    ------
    InputError
        ``z`` not of shape (n, k >= 2) or with NaN/inf entries; ``y`` not integers in ``[0, k - 1]``; a NaN/inf
        or negative weight.
    DegenerateBiasError
        ``status`` ``no_bias_rows`` (no rows, or zero total weight), ``temperature_not_positive`` (β* <= 0: the
        logits rank the true class no better than uniform), ``temperature_unbounded`` (β* = +inf: every row is
        classified correctly at any scale).
    """
    yi, zv = validate_multiclass(y, z)
    w = validate_weight(sample_weight, yi.size)
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
