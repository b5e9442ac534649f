"""ctcalc_spark: calibrated metrics (Calibration-then-Calculation) from one scan.

The pure math (``metrics``, ``solvers``, ``calibrated``, ``summary``) imports
numpy only; the Spark layer (``ctcalc_spark.spark``) produces the same
additive summaries with native column expressions and hands them to the same
finalizers. The names below are imported on first use (PEP 562), so importing
a light submodule such as ``ctcalc_spark.orchestration`` from an Airflow DAG
does not load numpy.
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "ConfigError": "errors", "DegenerateBiasError": "errors", "InputError": "errors",
    "auc_score": "metrics", "calibration_ratio": "metrics", "log_loss_from_logits": "metrics",
    "log_loss_from_probs": "metrics", "mean_squared_error": "metrics", "multiclass_log_loss": "metrics",
    "normalized_entropy": "metrics",
    "solve_logit_shift": "solvers", "solve_mean_shift": "solvers", "solve_temperature": "solvers",
    "calibrated_log_loss": "calibrated", "calibrated_multiclass_log_loss": "calibrated",
    "calibrated_quadratic_loss": "calibrated",
    "BinarySummary": "summary", "RegressionSummary": "summary",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"ctcalc_spark.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ctcalc_spark' has no attribute {name!r}")
