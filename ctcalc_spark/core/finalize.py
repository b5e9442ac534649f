"""Driver-side finalisation of summary tables (pandas in, pandas out), shared by every job.

Summary rows of any set of days, partitions or runs are merged by summing and
finalised by :mod:`ctcalc_spark.core.summary`; daily metric values are never averaged.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from ctcalc_spark.core.solvers import STATUS_BIAS_NO_NEGATIVES, STATUS_BIAS_NO_POSITIVES
from ctcalc_spark.core.summary import (
    BINARY_COUNTS,
    DEFAULT_MAX_ABS_LOGIT,
    BINARY_MOMENTS,
    BinarySummary,
    RegressionSummary,
    finalize_binary,
    finalize_regression,
)

ALL = "__all__"
"""slice_name / slice_value of the rows that cover every slice."""

REGRESSION_FIELDS = ("count", "weight", "wr", "wr2", "wp", "wy")

# Output column types, by task: 'string' | 'long' | 'double'.
KEY_TYPES = {"ds": "string", "task": "string", "model": "string", "run": "string",
             "slice_name": "string", "slice_value": "string"}
METRIC_TYPES: dict[str, dict[str, str]] = {
    "binary": {
        "n_rows": "long", "n_bias": "long", "n_remain": "long", "n_clipped": "long", "n_extreme": "long",
        "n_invalid": "long", "weight": "double", "base_rate": "double", "log_loss": "double",
        "log_loss_remain": "double",
        "calibrated_log_loss": "double", "calibration_gain": "double", "bias": "double", "auc": "double",
        "auc_bound": "double", "normalized_entropy": "double", "calibrated_normalized_entropy": "double",
        "calibration": "double", "status": "string",
    },
    "regression": {
        "n_rows": "long", "n_bias": "long", "n_remain": "long", "n_invalid": "long", "weight": "double",
        "mse": "double", "mse_remain": "double", "calibrated_mse": "double", "calibration_gain": "double",
        "bias": "double", "mean_prediction": "double", "mean_label": "double", "status": "string",
    },
    "multiclass": {
        "n_rows": "long", "n_bias": "long", "n_remain": "long", "n_invalid": "long", "weight": "double",
        "log_loss": "double", "log_loss_remain": "double", "calibrated_log_loss": "double",
        "calibration_gain": "double", "temperature": "double", "accuracy": "double", "status": "string",
    },
}
SUMMARY_TYPES: dict[str, dict[str, str]] = {
    "binary": {"split": "string", "bin": "long", "label": "long", **{n: "long" for n in BINARY_COUNTS},
               **{n: "double" for n in BINARY_MOMENTS}, "bin_width": "double"},
    "regression": {"split": "string", "count": "long", **{n: "double" for n in REGRESSION_FIELDS[1:]}},
}


STATUS_TOO_FEW_BIAS_ROWS = "too_few_bias_rows"
"""A val-bias part with fewer rows than ``split.min_bias_rows``: c* too uncertain to report a calibrated value."""
CALIBRATED_FIELDS: dict[str, tuple[str, ...]] = {
    "binary": ("calibrated_log_loss", "calibration_gain", "bias", "calibrated_normalized_entropy"),
    "regression": ("calibrated_mse", "calibration_gain", "bias"),
    "multiclass": ("calibrated_log_loss", "calibration_gain", "temperature"),
}
"""Values of a metrics row that depend on the fitted bias (None when it is not fitted)."""
_OVERRIDDEN_BY_TOO_FEW = ("ok", STATUS_BIAS_NO_POSITIVES, STATUS_BIAS_NO_NEGATIVES)


def apply_min_bias_rows(row: dict[str, Any], task: str, min_bias_rows: int) -> dict[str, Any]:
    """Status ``too_few_bias_rows`` and no calibrated value when 0 < n_bias < min_bias_rows (0 = off).

    It replaces 'ok' and the single-class statuses (with a handful of rows, one class is the usual outcome of
    too few rows); 'no_bias_rows' and 'no_remain_rows' stay, being more precise.
    """
    if min_bias_rows > 0 and 0 < int(row["n_bias"]) < min_bias_rows and row["status"] in _OVERRIDDEN_BY_TOO_FEW:
        row.update({name: None for name in CALIBRATED_FIELDS[task]}, status=STATUS_TOO_FEW_BIAS_ROWS)
    return row


def check_row(row: dict[str, Any]) -> dict[str, Any]:
    """A metrics row holds finite numbers or None, never NaN/inf (that would be a bug, not a result)."""
    for key, value in row.items():
        if isinstance(value, (float, np.floating)) and not np.isfinite(value):
            raise AssertionError(f"Metric {key!r} came out as {value} for {row}; a bug, please report it with the input.")
    return row


def binary_summary_of(rows: pd.DataFrame, bin_width: float) -> BinarySummary:
    """Merge summary-table rows (any days, partitions) into one BinarySummary."""
    if rows.empty:
        return BinarySummary.empty(bin_width)
    return BinarySummary.from_columns(
        bin_width, rows["bin"].to_numpy(), rows["label"].to_numpy(),
        **{n: rows[n].to_numpy() for n in BINARY_COUNTS + BINARY_MOMENTS},
    )


def regression_summary_of(rows: pd.DataFrame) -> RegressionSummary:
    """Merge summary-table rows into one RegressionSummary."""
    if rows.empty:
        return RegressionSummary()
    return RegressionSummary(int(rows["count"].sum()), *(float(rows[n].sum()) for n in REGRESSION_FIELDS[1:]))


def finalize_pair(task: str, bias_rows: pd.DataFrame, remain_rows: pd.DataFrame, bin_width: float, *,
                  max_abs_logit: float = DEFAULT_MAX_ABS_LOGIT, min_bias_rows: int = 0) -> dict[str, Any]:
    """Metrics of one group from its val-bias and val-remain summary rows (see :func:`apply_min_bias_rows`)."""
    if task == "binary":
        row = finalize_binary(binary_summary_of(bias_rows, bin_width), binary_summary_of(remain_rows, bin_width),
                              max_abs_logit=max_abs_logit)
    else:
        row = finalize_regression(regression_summary_of(bias_rows), regression_summary_of(remain_rows))
    return apply_min_bias_rows(row, task, min_bias_rows)


def metrics_from_summaries(
    summaries: pd.DataFrame,
    task: str,
    *,
    keys: Sequence[str],
    slices: Sequence[str] = (),
    bin_width: float = 0.05,
    invalid_counts: pd.DataFrame | None = None,
    max_abs_logit: float = DEFAULT_MAX_ABS_LOGIT,
    min_bias_rows: int = 0,
) -> pd.DataFrame:
    """One metrics row per (keys, slice): every slice merged (slice '__all__') and each slice column's values.

    ``summaries`` holds summary-table rows with a 'split' column ('bias'/'remain');
    ``invalid_counts`` (optional) has the keys, the slice columns and 'n_invalid'.
    ``max_abs_logit`` sets ``n_extreme`` (binary); ``min_bias_rows``: see :func:`apply_min_bias_rows`.
    """
    out: list[dict[str, Any]] = []
    views: list[tuple[str, str | None]] = [(ALL, None)] + [(s, s) for s in slices]
    for slice_name, col in views:
        by = list(keys) + ([col] if col else [])
        for key_vals, grp in summaries.groupby(by, sort=True, dropna=False):
            key_vals = key_vals if isinstance(key_vals, tuple) else (key_vals,)
            row: dict[str, Any] = dict(zip(by, key_vals))
            is_bias = grp["split"] == "bias"
            row.update(finalize_pair(task, grp[is_bias], grp[~is_bias], bin_width, max_abs_logit=max_abs_logit,
                                     min_bias_rows=min_bias_rows))
            row["slice_name"] = slice_name
            row["slice_value"] = ALL if col is None else row.pop(col)
            n_inv = 0
            if invalid_counts is not None and not invalid_counts.empty:
                sel = np.ones(len(invalid_counts), dtype=bool)
                for k, v in zip(by, key_vals):
                    sel &= (invalid_counts[k] == v).to_numpy()
                n_inv = int(invalid_counts.loc[sel, "n_invalid"].sum())
            row["n_invalid"] = n_inv
            out.append(check_row(row))
    cols = list(keys) + ["slice_name", "slice_value"] + list(METRIC_TYPES[task])
    return pd.DataFrame(out, columns=cols)
