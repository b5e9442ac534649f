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
    """Calibrated MSE: ``c* = Σw(y - p)/Σw`` on the bias rows, then MSE of ``p_remain + c*``."""
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
    """Temperature-scaled cross-entropy: T* fitted on the bias rows, CE of softmax(z_remain / T*)."""
    t = solve_temperature(y_bias, z_bias, sample_weight=sample_weight_bias)
    return multiclass_log_loss(y_remain, z_remain, sample_weight=sample_weight_remain, temperature=t)
