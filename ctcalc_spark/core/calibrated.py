"""Calibrated metrics on rows, following the paper's Algorithm 1.

The bias is fitted on the val-bias rows, applied to the val-remain rows, and
the vanilla metric of the adjusted val-remain predictions is the calibrated
metric. (The vanilla metric to compare with is computed on val-bias +
val-remain; see :func:`ctcalc_spark.core.metrics.log_loss_from_logits`.)
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ctcalc_spark.core.metrics import log_loss_from_logits, mean_squared_error, multiclass_log_loss
from ctcalc_spark.core.solvers import solve_logit_shift, solve_mean_shift, solve_temperature


def calibrated_log_loss(
    y_bias: ArrayLike,
    z_bias: ArrayLike,
    y_remain: ArrayLike,
    z_remain: ArrayLike,
    *,
    sample_weight_bias: ArrayLike | None = None,
    sample_weight_remain: ArrayLike | None = None,
) -> float:
    """Calibrated log loss: ``c* = solve_logit_shift(bias rows)``, then log loss of σ(z_remain - c*).

    Parameters
    ----------
    y_bias : array_like of {0, 1}, shape (n_bias,)
        Binary labels of the val-bias rows, on which ``c*`` is fitted.
    z_bias : array_like of float, shape (n_bias,)
        Their logits.
    y_remain : array_like of {0, 1}, shape (n_remain,)
        Binary labels of the val-remain rows, on which the loss is measured.
    z_remain : array_like of float, shape (n_remain,)
        Their logits.
    sample_weight_bias, sample_weight_remain : array_like of float, optional
        Finite row weights >= 0 of the val-bias and the val-remain rows; every row weighs 1 when omitted.

    Returns
    -------
    float
        The mean log loss in nats of the val-remain rows at logits ``z_remain - c*``.

    Raises
    ------
    InputError
        Invalid labels, logits or weights on either part, or a val-remain part of no positive weight
        (:func:`~ctcalc_spark.core.metrics.log_loss_from_logits`).
    DegenerateBiasError
        No finite ``c*`` on the val-bias rows (:func:`~ctcalc_spark.core.solvers.solve_logit_shift`).

    Examples
    --------
    >>> round(calibrated_log_loss([1, 0, 0, 0], [0.0] * 4, [1, 0, 0, 0], [0.0] * 4), 6)
    0.562335
    """
    c = solve_logit_shift(y_bias, z_bias, sample_weight=sample_weight_bias)
    return log_loss_from_logits(
        y_remain, np.asarray(z_remain, dtype=np.float64) - c, sample_weight=sample_weight_remain
    )


def calibrated_quadratic_loss(
    y_bias: ArrayLike,
    p_bias: ArrayLike,
    y_remain: ArrayLike,
    p_remain: ArrayLike,
    *,
    sample_weight_bias: ArrayLike | None = None,
    sample_weight_remain: ArrayLike | None = None,
) -> float:
    """Calibrated MSE: ``c* = Σw(y - p)/Σw`` on the bias rows, then MSE of ``p_remain + c*``.

    Parameters
    ----------
    y_bias : array_like of float, shape (n_bias,)
        Targets of the val-bias rows, on which ``c*`` is fitted.
    p_bias : array_like of float, shape (n_bias,)
        Their predictions.
    y_remain : array_like of float, shape (n_remain,)
        Targets of the val-remain rows, on which the loss is measured.
    p_remain : array_like of float, shape (n_remain,)
        Their predictions.
    sample_weight_bias, sample_weight_remain : array_like of float, optional
        Finite row weights >= 0 of the val-bias and the val-remain rows; every row weighs 1 when omitted.

    Returns
    -------
    float
        The mean squared error of the val-remain rows at predictions ``p_remain + c*``.

    Raises
    ------
    InputError
        Invalid values or weights on either part, or a val-remain part of no positive weight.
    DegenerateBiasError
        A val-bias part of no rows or no positive weight (status ``no_bias_rows``).
    """
    c = solve_mean_shift(y_bias, p_bias, sample_weight=sample_weight_bias)
    return mean_squared_error(
        y_remain, np.asarray(p_remain, dtype=np.float64) + c, sample_weight=sample_weight_remain
    )


def calibrated_multiclass_log_loss(
    y_bias: ArrayLike,
    z_bias: ArrayLike,
    y_remain: ArrayLike,
    z_remain: ArrayLike,
    *,
    sample_weight_bias: ArrayLike | None = None,
    sample_weight_remain: ArrayLike | None = None,
) -> float:
    """Temperature-scaled cross-entropy: T* fitted on the bias rows, CE of softmax(z_remain / T*).

    Parameters
    ----------
    y_bias : array_like of int, shape (n_bias,)
        Class indices in ``[0, k - 1]`` of the val-bias rows, on which ``T*`` is fitted.
    z_bias : array_like of float, shape (n_bias, k), k >= 2
        Their logits.
    y_remain : array_like of int, shape (n_remain,)
        Class indices of the val-remain rows, on which the loss is measured.
    z_remain : array_like of float, shape (n_remain, k)
        Their logits.
    sample_weight_bias, sample_weight_remain : array_like of float, optional
        Finite row weights >= 0 of the val-bias and the val-remain rows; every row weighs 1 when omitted.

    Returns
    -------
    float
        The mean cross-entropy in nats of the val-remain rows at logits ``z_remain / T*``.

    Raises
    ------
    InputError
        Invalid labels, logits or weights on either part, or a val-remain part of no positive weight.
    DegenerateBiasError
        No finite positive ``T*`` on the val-bias rows (:func:`~ctcalc_spark.core.solvers.solve_temperature`).
    """
    t = solve_temperature(y_bias, z_bias, sample_weight=sample_weight_bias)
    return multiclass_log_loss(y_remain, z_remain, sample_weight=sample_weight_remain, temperature=t)
