"""ctcalc_spark: calibrated metrics (Calibration-then-Calculation) from one scan.

The pure math (``core``: metrics, solvers, calibrated, summary) imports
numpy only; the Spark layer (``ctcalc_spark.spark``) produces the same
additive summaries with native column expressions and hands them to the same
finalizers. The names below are imported on first use (PEP 562), so importing
a light submodule such as ``ctcalc_spark.orchestration.tasks`` from an Airflow DAG
does not load numpy.
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "ConfigError": "errors", "DegenerateBiasError": "errors", "InputError": "errors",
    "auc_score": "core.metrics", "calibration_ratio": "core.metrics", "log_loss_from_logits": "core.metrics",
    "log_loss_from_probs": "core.metrics", "mean_squared_error": "core.metrics", "multiclass_log_loss": "core.metrics",
    "normalized_entropy": "core.metrics",
    "solve_logit_shift": "core.solvers", "solve_mean_shift": "core.solvers", "solve_temperature": "core.solvers",
    "calibrated_log_loss": "core.calibrated", "calibrated_multiclass_log_loss": "core.calibrated",
    "calibrated_quadratic_loss": "core.calibrated",
    "BinarySummary": "core.summary", "RegressionSummary": "core.summary",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"ctcalc_spark.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ctcalc_spark' has no attribute {name!r}")
