"""Driver-side finalisation of summary tables (pandas in, pandas out), shared by every job.

Summary rows of any set of days, partitions or runs are merged by summing and
finalised by :mod:`ctcalc_spark.core.summary`; daily metric values are never averaged.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ctcalc_spark.core.batch import finalize_binary_groups
from ctcalc_spark.core.solvers import STATUS_BIAS_NO_NEGATIVES, STATUS_BIAS_NO_POSITIVES
from ctcalc_spark.core.state import BINARY, REGRESSION, STATES, SummaryState
from ctcalc_spark.core.summary import (
    DEFAULT_MAX_ABS_LOGIT,
    BinarySummary,
    RegressionSummary,
    finalize_regression,
)

ALL = "__all__"
"""slice_name / slice_value of the rows that cover every slice."""

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
SUMMARY_TYPES: dict[str, dict[str, str]] = {task: state.column_types() for task, state in STATES.items()}
"""Summaries-table columns after the group keys, per task that keeps summaries (from
:mod:`ctcalc_spark.core.state`)."""


def task_of_columns(columns: Iterable[str], kinds: Mapping[str, Mapping[str, str]] = METRIC_TYPES) -> str | None:
    """The task whose columns (of ``kinds``: METRIC_TYPES or SUMMARY_TYPES) a table has; None if not one."""
    have = set(columns)
    fits = [task for task, names in kinds.items() if set(names) <= have]
    return fits[0] if len(fits) == 1 else None


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
    cols = list(keys) + ["slice_name", "slice_value"] + list(METRIC_TYPES[task])
    if summaries.empty:
        return pd.DataFrame(out, columns=cols)
    views: list[tuple[str, str | None]] = [(ALL, None)] + [(s, s) for s in slices]
    # Groups are cut as numpy index arrays (one groupby per view): pandas indexing per group made a year of
    # days x models x runs spend most of its time here.
    summaries_of = _numpy_summaries(summaries, task, bin_width, max_abs_logit)
    inv_total = _invalid_totals(invalid_counts)
    todo = [(slice_name, col, by, key_vals, idx) for slice_name, col in views
            for by in [list(keys) + ([col] if col else [])] for key_vals, idx in groups(summaries, by)]
    for start in range(0, len(todo), FINALIZE_CHUNK):  # a chunk's val-bias summaries are solved together
        chunk = todo[start:start + FINALIZE_CHUNK]
        for (slice_name, col, by, key_vals, _), metrics in zip(chunk, summaries_of([idx for *_, idx in chunk])):
            row: dict[str, Any] = dict(zip(by, key_vals))
            row.update(apply_min_bias_rows(metrics, task, min_bias_rows))
            row["slice_name"] = slice_name
            row["slice_value"] = ALL if col is None else row.pop(col)
            row["n_invalid"] = inv_total(by, key_vals)
            out.append(check_row(row))
    return pd.DataFrame(out, columns=cols)


FINALIZE_CHUNK = 4096
"""Groups whose summaries :func:`metrics_from_summaries` holds at once (their bias solves run in lockstep)."""


def groups(frame: pd.DataFrame, by: Sequence[str]) -> list[tuple[tuple[Any, ...], np.ndarray]]:
    """(key values, row positions) per group of ``frame`` by ``by``, in pandas' sorted group order (nulls kept)."""
    codes = frame.groupby(list(by), sort=True, dropna=False, observed=True).ngroup().to_numpy()
    order = np.argsort(codes, kind="stable")
    cuts = np.flatnonzero(np.diff(codes[order])) + 1
    keys = frame[list(by)].to_numpy(dtype=object)
    return [(tuple(keys[idx[0]]), idx) for idx in np.split(order, cuts)]


def binary_summary_rows(summaries: pd.DataFrame, bin_width: float) -> Any:
    """A function (row positions) -> the BinarySummary of those binary summary-table rows (columns cut once)."""
    arrays = _columns(summaries, BINARY)

    def binary(rows: np.ndarray) -> BinarySummary:
        if rows.size == 0:
            return BinarySummary.empty(bin_width)
        return BinarySummary.from_columns(bin_width, arrays["bin"][rows], arrays["label"][rows],
                                          **{n: arrays[n][rows] for n in BINARY.names})
    return binary


def _columns(summaries: pd.DataFrame, state: SummaryState) -> dict[str, np.ndarray]:
    """The cells and statistics of ``state`` as numpy columns of ``summaries`` (none when it is empty)."""
    if summaries.empty:
        return {}
    return {n: summaries[n].to_numpy() for n in (*state.cell_names, *state.names)}


def _numpy_summaries(summaries: pd.DataFrame, task: str, bin_width: float, max_abs_logit: float) -> Any:
    """A function (row positions of each group) -> metrics of each group's summary rows (val-bias and
    val-remain), on numpy columns."""
    is_bias = (summaries["split"] == "bias").to_numpy() if "split" in summaries else np.zeros(0, bool)
    if task == "binary":
        columns = _columns(summaries, BINARY)

        def of_binary(idxs: Sequence[np.ndarray]) -> list[dict[str, Any]]:
            return finalize_binary_groups(columns, idxs, is_bias, bin_width=bin_width, max_abs_logit=max_abs_logit)
        return of_binary
    arrays = _columns(summaries, REGRESSION)

    def regression(rows: np.ndarray) -> RegressionSummary:
        return RegressionSummary.from_columns(**{n: arrays[n][rows] for n in REGRESSION.names})

    def of_regression(idxs: Sequence[np.ndarray]) -> list[dict[str, Any]]:
        return [finalize_regression(regression(idx[is_bias[idx]]), regression(idx[~is_bias[idx]])) for idx in idxs]
    return of_regression


def _invalid_totals(invalid_counts: pd.DataFrame | None) -> Any:
    """A function (key names, key values) -> the summed n_invalid of the rows of ``invalid_counts`` that match."""
    if invalid_counts is None or invalid_counts.empty:
        return lambda by, key_vals: 0
    cache: dict[tuple[str, ...], dict[tuple[Any, ...], int]] = {}

    def total(by: Sequence[str], key_vals: tuple[Any, ...]) -> int:
        names = tuple(by)
        if names not in cache:
            sums = invalid_counts.groupby(list(names), dropna=False)["n_invalid"].sum()
            cache[names] = {(k if isinstance(k, tuple) else (k,)): int(v) for k, v in sums.items()}
        return cache[names].get(key_vals, 0)
    return total
