"""ctcalc_spark: calibrated metrics (Calibration-then-Calculation) from one scan.

The pure math (``metrics``, ``solvers``, ``calibrated``, ``summary``) imports
numpy only; the Spark layer (``ctcalc_spark.spark``) produces the same
additive summaries with native column expressions and hands them to the same
finalizers.
"""
from __future__ import annotations

__version__ = "0.1.0"

from ctcalc_spark.errors import ConfigError, DegenerateBiasError, InputError
from ctcalc_spark.metrics import (
    auc_score,
    calibration_ratio,
    log_loss_from_logits,
    log_loss_from_probs,
    mean_squared_error,
    multiclass_log_loss,
    normalized_entropy,
)
from ctcalc_spark.solvers import solve_logit_shift, solve_mean_shift, solve_temperature
from ctcalc_spark.calibrated import (
    calibrated_log_loss,
    calibrated_multiclass_log_loss,
    calibrated_quadratic_loss,
)
from ctcalc_spark.summary import BinarySummary, RegressionSummary

__all__ = [
    "BinarySummary",
    "ConfigError",
    "DegenerateBiasError",
    "InputError",
    "RegressionSummary",
    "auc_score",
    "calibrated_log_loss",
    "calibrated_multiclass_log_loss",
    "calibrated_quadratic_loss",
    "calibration_ratio",
    "log_loss_from_logits",
    "log_loss_from_probs",
    "mean_squared_error",
    "multiclass_log_loss",
    "normalized_entropy",
    "solve_logit_shift",
    "solve_mean_shift",
    "solve_temperature",
]
