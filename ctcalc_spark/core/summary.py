"""Mergeable sufficient statistics and the pure finalizers that turn them into metrics.

Binary (log loss). With ``u = z - c`` the per-row log loss is
``softplus(u) - y·u``, so over a set of rows

    L(c) = Σ w·softplus(z - c) - Σ w·y·z + c·Σ w·y.

The label enters only linearly. :class:`BinarySummary` keeps, per logit bin
``k = floor(z / h)`` with centre ``m_k = (k + ½)·h``: the row count, ``Σw``,
``Σw·y``, ``Σw·d``, ``Σw·d²`` (``d = z - m_k``), the exact ``Σw·σ(z)``, the
exact vanilla loss sum ``Σw·(softplus(z) - y·z)`` and the clipped-row count.
``S(c) = Σ w·softplus(z - c)`` is evaluated by a second-order expansion around
each bin centre, and the calibrated sum as

    L(c) = L(0) + [S_h(c) - S_h(0)] + c·Σ w·y,

so that ``L(0)`` is the exact vanilla sum.

Error bound (bin width ``h``; ``f = softplus``, ``|f'''| <= 1/(6√3)``,
``|σ'''/σ'| <= 1``; each expanded sum errs by at most ``(h/2)³/(36√3)`` per
unit weight):

* ``|Δc*| <= (h/2)³ / 6``  (2.6e-6 at h = 0.05);
* ``|Δ mean calibrated log loss| <= (h/2)³/(18√3) + |r̄|·|Δc*|``, where
  ``r̄ = mean(y - q)`` is the val-remain residual at c* (the first-order effect
  of the error in c*). At h = 0.05 that is ``5.0e-7 + 2.6e-6·|r̄|``: below 1e-6
  whenever ``|r̄| <= 0.19``, which a random val-bias/val-remain split satisfies
  (r̄ is then sampling noise around 0); :func:`calibrated_log_loss_bound`
  gives the value for a given summary and shift.

Bins are unbounded integers, so no logit is clipped by the histogram itself.
Every field is additive: merging summaries of disjoint row sets is a sum,
associative and commutative up to float rounding.

Regression (MSE): with ``r = y - p``, ``Σw``, ``Σw·r``, ``Σw·r²`` give c* and
the calibrated MSE exactly (:class:`RegressionSummary`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ctcalc_spark.core._math import F64, binary_entropy, logit, sigmoid, softplus
from ctcalc_spark.errors import DegenerateBiasError
from ctcalc_spark.core.metrics import (
    CLIP_EPS,
    _validate_binary_labels,
    _validate_vector,
    _validate_weight,
    probs_to_logits,
)
from ctcalc_spark.core.solvers import (
    STATUS_NO_BIAS_ROWS,
    _check_binary_bias_set,
    logit_shift_bracket,
    safeguarded_newton,
)

DEFAULT_BIN_WIDTH = 0.05

STATUS_OK = "ok"
STATUS_NO_REMAIN_ROWS = "no_remain_rows"

BINARY_MOMENTS = ("weight", "pos_weight", "m1", "m2", "wp", "wloss")
"""Float per-bin sums of :class:`BinarySummary`, in table-column order."""
BINARY_COUNTS = ("count", "clipped")
"""Integer per-bin counts of :class:`BinarySummary`."""


@dataclass(frozen=True)
class BinarySummary:
    """Logit histogram with per-bin moments; see the module docstring for the fields and the bound."""

    bin_width: float
    bins: np.ndarray = field(repr=False)
    count: np.ndarray = field(repr=False)
    clipped: np.ndarray = field(repr=False)
    weight: np.ndarray = field(repr=False)
    pos_weight: np.ndarray = field(repr=False)
    m1: np.ndarray = field(repr=False)
    m2: np.ndarray = field(repr=False)
    wp: np.ndarray = field(repr=False)
    wloss: np.ndarray = field(repr=False)

    # ---- construction -------------------------------------------------
    @classmethod
    def empty(cls, bin_width: float = DEFAULT_BIN_WIDTH) -> BinarySummary:
        """The summary of no rows (the identity of :meth:`merge`)."""
        e = np.zeros(0)
        return cls(bin_width, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), e, e, e, e, e, e)

    @classmethod
    def from_columns(cls, bin_width: float, bins: ArrayLike, **cols: ArrayLike) -> BinarySummary:
        """Build from per-bin columns (e.g. rows of the summaries table); duplicate bins are summed."""
        b = np.asarray(bins, dtype=np.int64)
        uniq, inv = np.unique(b, return_inverse=True)
        out: dict[str, np.ndarray] = {}
        for name in BINARY_COUNTS:
            out[name] = np.bincount(inv, weights=np.asarray(cols[name], np.float64), minlength=uniq.size).astype(
                np.int64
            )
        for name in BINARY_MOMENTS:
            out[name] = np.bincount(inv, weights=np.asarray(cols[name], np.float64), minlength=uniq.size)
        return cls(float(bin_width), uniq, **out)

    @classmethod
    def from_logits(
        cls,
        y: ArrayLike,
        z: ArrayLike,
        *,
        sample_weight: ArrayLike | None = None,
        bin_width: float = DEFAULT_BIN_WIDTH,
        clipped: ArrayLike | None = None,
    ) -> BinarySummary:
        """Summarise rows of labels and logits (``clipped``: optional per-row flags from probability clipping)."""
        yv = _validate_binary_labels(y)
        zv = _validate_vector("z", z, yv.size)
        w = _validate_weight(sample_weight, yv.size)
        k = np.floor(zv / bin_width).astype(np.int64)
        d = zv - (k + 0.5) * bin_width
        cl = np.zeros(yv.size) if clipped is None else np.asarray(clipped, dtype=np.float64)
        return cls.from_columns(
            bin_width,
            k,
            count=np.ones(yv.size),
            clipped=cl,
            weight=w,
            pos_weight=w * yv,
            m1=w * d,
            m2=w * d * d,
            wp=w * sigmoid(zv),
            wloss=w * (softplus(zv) - yv * zv),
        )

    @classmethod
    def from_probs(
        cls,
        y: ArrayLike,
        p: ArrayLike,
        *,
        sample_weight: ArrayLike | None = None,
        bin_width: float = DEFAULT_BIN_WIDTH,
        eps: float = CLIP_EPS,
    ) -> BinarySummary:
        """Summarise rows of probabilities, clipped to [eps, 1 - eps] (clipped rows are counted)."""
        pv = _validate_vector("p", p)
        z, _ = probs_to_logits(pv, eps=eps)
        return cls.from_logits(
            y, z, sample_weight=sample_weight, bin_width=bin_width, clipped=(pv < eps) | (pv > 1 - eps)
        )

    def merge(self, other: BinarySummary) -> BinarySummary:
        """Sum of two summaries (rows of both); requires the same bin width."""
        if self.bin_width != other.bin_width:
            raise ValueError(f"Cannot merge summaries with bin widths {self.bin_width} and {other.bin_width}.")
        cols = {n: np.concatenate([getattr(self, n), getattr(other, n)]) for n in BINARY_COUNTS + BINARY_MOMENTS}
        return BinarySummary.from_columns(self.bin_width, np.concatenate([self.bins, other.bins]), **cols)

    def to_columns(self) -> dict[str, np.ndarray]:
        """Per-bin columns, the inverse of :meth:`from_columns`."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "bin_width"}

    # ---- totals -----------------------------------------------------------
    @property
    def n_rows(self) -> int:
        return int(self.count.sum())

    @property
    def n_clipped(self) -> int:
        return int(self.clipped.sum())

    @property
    def total_weight(self) -> float:
        return float(self.weight.sum())

    @property
    def total_pos_weight(self) -> float:
        return float(self.pos_weight.sum())

    @property
    def centres(self) -> F64:
        return (self.bins + 0.5) * self.bin_width

    # ---- the loss as a function of the shift -------------------------------
    def _expansion(self, c: float) -> tuple[float, float, float]:
        """(S_h(c), dL/dc without the c·Σwy term's sign, d²L/dc²) from the per-bin expansion."""
        u = self.centres - c
        s = sigmoid(u)
        s1 = s * (1.0 - s)
        s2 = s1 * (1.0 - 2.0 * s)
        s3 = s1 * (1.0 - 6.0 * s + 6.0 * s * s)
        sh = float(np.sum(self.weight * softplus(u) + self.m1 * s + 0.5 * self.m2 * s1))
        pred = float(np.sum(self.weight * s + self.m1 * s1 + 0.5 * self.m2 * s2))
        curv = float(np.sum(self.weight * s1 + self.m1 * s2 + 0.5 * self.m2 * s3))
        return sh, pred, curv

    def loss_sum(self, c: float = 0.0) -> float:
        """Σ w·logloss(y, σ(z - c)); exact at c = 0, histogram-expanded elsewhere."""
        exact0 = float(self.wloss.sum())
        if c == 0.0:
            return exact0
        return exact0 + self._expansion(c)[0] - self._expansion(0.0)[0] + c * self.total_pos_weight

    def log_loss(self, c: float = 0.0) -> float:
        """Weighted mean log loss after shifting every logit by -c."""
        return self.loss_sum(c) / self.total_weight

    def predicted_positives(self, c: float = 0.0) -> float:
        """Σ w·σ(z - c); exact at c = 0."""
        return float(self.wp.sum()) if c == 0.0 else self._expansion(c)[1]

    def solve_bias(self) -> float:
        """c* minimising the expanded L(c); raises DegenerateBiasError for empty or single-class rows."""
        total, pos = self.total_weight, self.total_pos_weight
        _check_binary_bias_set(pos, total, self.n_rows)

        def grad(c: float) -> tuple[float, float]:
            _, pred, curv = self._expansion(c)
            return pos - pred, curv

        live = self.weight > 0
        z_lo = float(self.bins[live].min()) * self.bin_width
        z_hi = float(self.bins[live].max() + 1) * self.bin_width
        lo, hi = logit_shift_bracket(z_lo, z_hi, pos / total)
        for _ in range(60):  # the expansion can move the sign change by O(h³); widen until bracketed
            if grad(lo)[0] <= 0:
                break
            lo -= 1.0
        for _ in range(60):
            if grad(hi)[0] >= 0:
                break
            hi += 1.0
        x0 = float(np.sum(self.weight * self.centres) / total) - float(logit(pos / total))
        return safeguarded_newton(grad, lo, hi, x0)

    # ---- other metrics from the same bins ------------------------------------
    def auc(self) -> tuple[float, float]:
        """(bucketed AUC, bound): pairs in the same bin count one half; |AUC - exact AUC| <= bound."""
        pos = self.pos_weight
        neg = self.weight - self.pos_weight
        p_tot, n_tot = float(pos.sum()), float(neg.sum())
        if p_tot <= 0 or n_tot <= 0:
            return float("nan"), float("nan")
        neg_below = np.cumsum(neg) - neg
        auc = float(np.sum(pos * (neg_below + 0.5 * neg)) / (p_tot * n_tot))
        bound = float(0.5 * np.sum(pos * neg) / (p_tot * n_tot))
        return auc, bound

    def calibration_ratio(self, c: float = 0.0) -> float:
        """Σ w·σ(z - c) / Σ w·y."""
        return self.predicted_positives(c) / self.total_pos_weight

    def normalized_entropy(self, c: float = 0.0) -> float:
        """Log loss at shift c divided by the entropy of the weighted base rate."""
        return self.log_loss(c) / binary_entropy(self.total_pos_weight / self.total_weight)

    def reliability(self, n_buckets: int = 10) -> dict[str, np.ndarray]:
        """Reliability diagram: fine bins grouped into equal-width probability buckets by their centre."""
        p_centre = sigmoid(self.centres)
        bucket = np.minimum((p_centre * n_buckets).astype(np.int64), n_buckets - 1)
        w = np.bincount(bucket, weights=self.weight, minlength=n_buckets)
        wp = np.bincount(bucket, weights=self.wp, minlength=n_buckets)
        pos = np.bincount(bucket, weights=self.pos_weight, minlength=n_buckets)
        with np.errstate(invalid="ignore", divide="ignore"):
            return {
                "bucket_lo": np.arange(n_buckets) / n_buckets,
                "weight": w,
                "mean_predicted": np.where(w > 0, wp / np.where(w > 0, w, 1), np.nan),
                "observed_rate": np.where(w > 0, pos / np.where(w > 0, w, 1), np.nan),
            }


def calibrated_log_loss_bound(remain: BinarySummary, c: float) -> float:
    """The module's bound on |Δ mean calibrated log loss| for this val-remain summary at shift c."""
    h3 = (remain.bin_width / 2.0) ** 3
    resid = abs(remain.total_pos_weight - remain.predicted_positives(c)) / remain.total_weight
    return h3 / (18.0 * np.sqrt(3.0)) + resid * h3 / 6.0


def finalize_binary(bias: BinarySummary, remain: BinarySummary) -> dict[str, Any]:
    """One metrics row from the val-bias and val-remain summaries of one group.

    ``log_loss``, ``auc``, ``normalized_entropy`` and ``calibration`` are on the
    whole validation set (bias + remain); ``calibrated_log_loss`` on val-remain at
    c*; ``log_loss_remain`` is the vanilla log loss on the same val-remain rows, so
    ``calibration_gain = log_loss_remain - calibrated_log_loss`` is the part of the
    loss a single bias shift removes. Degenerate groups get ``status`` != 'ok' and
    None (never NaN/inf) in the values that cannot be computed.
    """
    whole = bias.merge(remain)
    row: dict[str, Any] = {
        "n_rows": whole.n_rows,
        "n_bias": bias.n_rows,
        "n_remain": remain.n_rows,
        "n_clipped": whole.n_clipped,
        "weight": whole.total_weight,
        "base_rate": None,
        "log_loss": None,
        "log_loss_remain": None,
        "calibrated_log_loss": None,
        "calibration_gain": None,
        "bias": None,
        "auc": None,
        "auc_bound": None,
        "normalized_entropy": None,
        "calibrated_normalized_entropy": None,
        "calibration": None,
        "status": STATUS_OK,
    }
    if whole.total_weight <= 0:
        row["status"] = STATUS_NO_BIAS_ROWS if bias.n_rows == 0 else "zero_weight"
        return row
    base = whole.total_pos_weight / whole.total_weight
    row["base_rate"] = base
    row["log_loss"] = whole.log_loss()
    if 0 < base < 1:
        auc, bound = whole.auc()
        row.update(auc=auc, auc_bound=bound, normalized_entropy=whole.normalized_entropy())
    if whole.total_pos_weight > 0:
        row["calibration"] = whole.calibration_ratio()
    if remain.total_weight <= 0:
        row["status"] = STATUS_NO_REMAIN_ROWS
        return row
    row["log_loss_remain"] = remain.log_loss()
    try:
        c = bias.solve_bias()
    except DegenerateBiasError as e:
        row["status"] = e.status
        return row
    cll = remain.log_loss(c)
    rbase = remain.total_pos_weight / remain.total_weight
    row.update(bias=c, calibrated_log_loss=cll, calibration_gain=row["log_loss_remain"] - cll)
    if 0 < rbase < 1:
        row["calibrated_normalized_entropy"] = cll / binary_entropy(rbase)
    return row


@dataclass(frozen=True)
class RegressionSummary:
    """Σ of count, w, w·r, w·r², w·p, w·y with r = y - p: exact sufficient statistics for MSE under a shift."""

    count: int = 0
    weight: float = 0.0
    wr: float = 0.0
    wr2: float = 0.0
    wp: float = 0.0
    wy: float = 0.0

    @classmethod
    def from_rows(cls, y: ArrayLike, p: ArrayLike, *, sample_weight: ArrayLike | None = None) -> RegressionSummary:
        """Summarise rows of targets and predictions."""
        yv = _validate_vector("y", y)
        pv = _validate_vector("p", p, yv.size)
        w = _validate_weight(sample_weight, yv.size)
        r = yv - pv
        return cls(
            int(yv.size),
            float(w.sum()),
            float(np.sum(w * r)),
            float(np.sum(w * r * r)),
            float(np.sum(w * pv)),
            float(np.sum(w * yv)),
        )

    def merge(self, other: RegressionSummary) -> RegressionSummary:
        """Field-wise sum."""
        return RegressionSummary(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def solve_bias(self) -> float:
        """c* = Σ w·r / Σ w."""
        if self.count == 0 or self.weight <= 0:
            raise DegenerateBiasError(STATUS_NO_BIAS_ROWS, "The val-bias part is empty: no mean shift can be fitted.")
        return self.wr / self.weight

    def mse(self, c: float = 0.0) -> float:
        """Σ w (y - p - c)² / Σ w = (Σwr² - 2cΣwr + c²Σw) / Σw."""
        return (self.wr2 - 2.0 * c * self.wr + c * c * self.weight) / self.weight


def finalize_regression(bias: RegressionSummary, remain: RegressionSummary) -> dict[str, Any]:
    """One metrics row: ``mse`` on the whole set, ``calibrated_mse`` on val-remain at c*, plus the remain MSE."""
    whole = bias.merge(remain)
    row: dict[str, Any] = {
        "n_rows": whole.count,
        "n_bias": bias.count,
        "n_remain": remain.count,
        "weight": whole.weight,
        "mse": None,
        "mse_remain": None,
        "calibrated_mse": None,
        "calibration_gain": None,
        "bias": None,
        "mean_prediction": None,
        "mean_label": None,
        "status": STATUS_OK,
    }
    if whole.weight <= 0:
        row["status"] = STATUS_NO_BIAS_ROWS if bias.count == 0 else "zero_weight"
        return row
    row.update(mse=whole.mse(), mean_prediction=whole.wp / whole.weight, mean_label=whole.wy / whole.weight)
    if remain.weight <= 0:
        row["status"] = STATUS_NO_REMAIN_ROWS
        return row
    row["mse_remain"] = remain.mse()
    try:
        c = bias.solve_bias()
    except DegenerateBiasError as e:
        row["status"] = e.status
        return row
    cm = remain.mse(c)
    row.update(bias=c, calibrated_mse=cm, calibration_gain=row["mse_remain"] - cm)
    return row
