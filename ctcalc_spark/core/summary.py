"""Mergeable sufficient statistics and the pure finalizers that turn them into metrics.

Binary (log loss). Write ``s = 1 - 2y`` (+1 for a negative, -1 for a positive) and ``t = s·(z - c)``,
the row's margin against its label at shift ``c``. The per-row log loss is ``softplus(t)`` and the
probability the model puts on the wrong label is ``σ(t)``. :class:`BinarySummary` keeps, per logit bin
``k = floor(z / h)`` (centre ``m_k = (k + ½)·h``) **and per label**: the row count, ``Σw``, ``Σw·d``,
``Σw·d²`` (``d = z - m_k``), the exact ``Σw·σ(t)`` at ``c = 0`` (``wmiss``), the exact vanilla loss
sum ``Σw·softplus(t)`` (``wloss``) and the clipped-row count. Sums over rows of ``softplus(t)`` and
``σ(t)`` at any ``c`` are evaluated by a second-order expansion around each bin centre; the calibrated
sum is ``L(c) = L(0) + [S_h(c) - S_h(0)]`` so that ``L(0)`` is the exact vanilla sum.

Keeping the labels apart keeps small numbers small. The optimum ``c*`` solves ``Q(c) = P(c)`` with
``Q = Σ_pos w·σ(c - z)`` (mass missed on positives) and ``P = Σ_neg w·σ(z - c)`` (mass put on
negatives); each bin enters with the smaller of its missed and hit masses, summed in log space, and the
wrong bins' weights as an exact difference (:func:`ctcalc_spark.core.solvers.lockstep_solve`), so
``e^-30``-sized terms keep their digits for confidently right rows (Q and P tiny) and confidently wrong ones
(Q and P near Σw, their difference tiny), and any finite logit gives a finite ``c*``. A ``c*`` that float
rounding of the weight sums can move by more than 1e-7 (confidently wrong rows in balance, weights that are
not integers) gets the status ``bias_ill_conditioned`` instead, on this path and on the row path.

Error bound (bin width ``h``, ``a = h/2``, the largest offset of a logit from its bin centre):

* ``|Δc*| <= e^a·(1 - a + a²/2) - 1 = a³/6 + a⁴/8 + a⁵/20 + …`` (:func:`bias_error_bound`; 2.6535e-6
  at h = 0.05). Each row's expanded missed mass ``σ̃`` is the second-order Taylor polynomial of ``σ``
  around its bin centre; ``c*`` solves ``log Q = log P``, whose slope is the mass-weighted mean of
  ``1 - σ`` over both sides, so ``|Δc*|`` is at most the largest per-row ratio
  ``|log(σ̃/σ)| / (1 - σ)``. That ratio is largest for a logit on a bin edge far in either tail, where
  ``σ`` is an exponential and the ratio is the closed form above (checked on a grid of margins in
  ``tests/test_summary.py``, which also builds val-bias sets that reach 2.6047e-6 and 2.6533e-6).
* ``|Δ mean calibrated log loss| <= (h/2)³/(18√3) + |r̄|·|Δc*|``: each expanded loss sum errs by at most
  ``(h/2)³/(36√3)`` per unit weight (``|softplus'''| <= 1/(6√3)``), and ``r̄ = mean(y - q)``, the
  val-remain residual at c*, carries the error in c* to first order. At h = 0.05 that is
  ``5.0e-7 + 2.65e-6·|r̄|``: below 1e-6 whenever ``|r̄| <= 0.18``, which a random val-bias/val-remain split
  satisfies (r̄ is then sampling noise around 0); :func:`calibrated_log_loss_bound` gives the value for
  a given summary and shift.

Bins are unbounded integers, so no logit is clipped by the histogram itself.
Every field is additive: merging summaries of disjoint row sets is a sum,
associative and commutative up to float rounding. The fields, their types and merges are declared in
:mod:`ctcalc_spark.core.state`. A :class:`BinarySummary` is computed on as the one group of
:mod:`ctcalc_spark.core.batch`: the expansions, the bias solve and the metrics row are written once, there.

Regression (MSE): with ``r = y - p``, ``Σw``, ``Σw·r``, ``Σw·r²`` give c* and
the calibrated MSE exactly (:class:`RegressionSummary`).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, fields
from functools import cache, cached_property
from typing import Any, Sequence

import numpy as np
from numpy.typing import ArrayLike

from ctcalc_spark.core._math import F64, sigmoid, softplus
from ctcalc_spark.core.batch import (
    BinaryGroups,
    extreme_bin,
    finalize_binary_groups,
)
from ctcalc_spark.core.metrics import (
    CLIP_EPS,
    validate_binary_labels,
    validate_vector,
    validate_weight,
    probs_to_logits,
    require_positive_weight,
)
from ctcalc_spark.core.solvers import (
    STATUS_NO_BIAS_ROWS,
    STATUS_NO_REMAIN_ROWS,
    STATUS_OK,
    STATUS_ZERO_WEIGHT,
    mean_shift,
)
from ctcalc_spark.core.state import BINARY, MERGES, REGRESSION
from ctcalc_spark.errors import DegenerateBiasError

DEFAULT_BIN_WIDTH = 0.05


HIST_LOGIT_LIMIT = 1e9
"""Logits enter the histogram clamped to +-1e9 (the exact vanilla sums use the real value). The loss and
missed mass of such a row are linear or flat in any shift a solve can reach, so the calibrated numbers do
not change; the clamp keeps bin indices (and the scan's packed group key) far from overflow."""

DEFAULT_MAX_ABS_LOGIT = 50.0
"""Logits outside [-50, 50) are counted as extreme (``n_extreme``): no trained model of calibrated data puts a
probability within 2e-22 of 0 or 1, so such values mean broken inputs (e.g. constant or unscaled features)."""


@dataclass(frozen=True)
class BinarySummary:
    """Logit histogram with per-bin, per-label moments; see the module docstring for the fields and the bound.

    Every per-bin array has shape ``(2, n_bins)``: row 0 the negatives, row 1 the positives. Build one with
    :meth:`from_logits`, :meth:`from_probs`, :meth:`from_columns` or :meth:`empty`; the constructor takes the
    fields as they are, unchecked.

    Parameters
    ----------
    bin_width : float
        ``h``, the width of a logit bin; bin ``k`` holds the logits in ``[k·h, (k+1)·h)``.
    bins : numpy.ndarray of int64, shape (n_bins,)
        The bin indices ``k``, sorted, unique.
    count : numpy.ndarray of int64, shape (2, n_bins)
        Rows per bin and label.
    clipped : numpy.ndarray of int64, shape (2, n_bins)
        Rows whose probability was clipped (:meth:`from_probs`).
    weight : numpy.ndarray of float64, shape (2, n_bins)
        ``Σw``.
    m1 : numpy.ndarray of float64, shape (2, n_bins)
        ``Σw·d``, ``d = z - m_k`` the logit's offset from its bin centre.
    m2 : numpy.ndarray of float64, shape (2, n_bins)
        ``Σw·d²``.
    wmiss : numpy.ndarray of float64, shape (2, n_bins)
        The exact ``Σw·σ(t)`` at ``c = 0``, ``t = (1 - 2y)·z``: the mass put on the wrong label.
    wloss : numpy.ndarray of float64, shape (2, n_bins)
        The exact ``Σw·softplus(t)`` at ``c = 0``: the vanilla log-loss sum, in nats.

    Attributes
    ----------
    n_rows : int
        Rows summarised.
    n_clipped : int
        Rows whose probability was clipped.
    total_weight : float
        ``Σw`` over both labels.
    total_pos_weight : float
        ``Σw`` of the positives.
    pos_weight : numpy.ndarray of float64, shape (n_bins,)
        ``Σw`` of the positives per bin.
    wp : numpy.ndarray of float64, shape (n_bins,)
        ``Σw·σ(z)`` per bin, the predicted positives at ``c = 0`` (exact).
    centres : numpy.ndarray of float64, shape (n_bins,)
        The bin centres ``(k + ½)·h``.
    """

    bin_width: float
    bins: np.ndarray = field(repr=False)
    count: np.ndarray = field(repr=False)
    clipped: np.ndarray = field(repr=False)
    weight: np.ndarray = field(repr=False)
    m1: np.ndarray = field(repr=False)
    m2: np.ndarray = field(repr=False)
    wmiss: np.ndarray = field(repr=False)
    wloss: np.ndarray = field(repr=False)

    # ---- construction -------------------------------------------------
    @classmethod
    def empty(cls, bin_width: float = DEFAULT_BIN_WIDTH) -> BinarySummary:
        """The summary of no rows (the identity of :meth:`merge`).

        Parameters
        ----------
        bin_width : float, default 0.05
            The bin width ``h`` in logit units.

        Returns
        -------
        BinarySummary
            A summary with no bins.
        """
        z = np.zeros((2, 0))
        zi = np.zeros((2, 0), np.int64)
        return cls(bin_width, np.zeros(0, np.int64), zi, zi, z, z, z, z, z)

    @classmethod
    def from_columns(cls, bin_width: float, bins: ArrayLike, labels: ArrayLike, **cols: ArrayLike) -> BinarySummary:
        """Build from long-format rows (bin, label 0/1, and the statistics of
        :data:`ctcalc_spark.core.state.BINARY`), e.g. rows of the summaries table; rows of the same (bin, label)
        are summed.

        Parameters
        ----------
        bin_width : float
            The bin width ``h`` the rows were binned with.
        bins : array_like of int, shape (m,)
            The bin index of each row.
        labels : array_like of {0, 1}, shape (m,)
            The label of each row.
        **cols : array_like of float, shape (m,)
            One array per statistic: ``count``, ``clipped``, ``weight``, ``m1``, ``m2``, ``wmiss``, ``wloss``
            (the counts are rounded to integers after summing).

        Returns
        -------
        BinarySummary
            One bin per distinct value of ``bins``, sorted.

        Raises
        ------
        ValueError
            A label other than 0/1.
        KeyError
            A statistic missing from ``cols``.
        """
        b = np.asarray(bins, dtype=np.int64)
        lab = np.asarray(labels, dtype=np.int64)
        if lab.size and not ((lab == 0) | (lab == 1)).all():
            raise ValueError(f"Summary labels must be 0/1, got {sorted(set(lab.tolist()))[:5]}.")
        uniq, inv = np.unique(b, return_inverse=True)
        idx = lab * uniq.size + inv
        out: dict[str, np.ndarray] = {}
        for name in BINARY.names:
            summed = np.bincount(idx, weights=np.asarray(cols[name], np.float64), minlength=2 * uniq.size)
            out[name] = summed.reshape(2, uniq.size)
            if name in BINARY.counts:
                out[name] = np.rint(out[name]).astype(np.int64)
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
        """Summarise rows of labels and logits.

        Logits enter the bins clamped to ±:data:`HIST_LOGIT_LIMIT`; ``wmiss`` and ``wloss`` use the real value.

        Parameters
        ----------
        y : array_like of {0, 1}, shape (n,)
            Binary labels.
        z : array_like of float, shape (n,)
            Logits of the positive class.
        sample_weight : array_like of float, shape (n,), optional
            Finite row weights >= 0; every row weighs 1 when omitted.
        bin_width : float, default 0.05
            The bin width ``h`` in logit units.
        clipped : array_like of {0, 1}, shape (n,), optional
            Per-row flags of rows whose probability was clipped; none when omitted.

        Returns
        -------
        BinarySummary
            The summary of the rows.

        Raises
        ------
        InputError
            A label other than 0/1; a NaN/inf label, logit or weight; a length that differs from ``y``'s; a
            negative weight.
        """
        yv = validate_binary_labels(y)
        zv = validate_vector("z", z, yv.size)
        w = validate_weight(sample_weight, yv.size)
        zh = np.clip(zv, -HIST_LOGIT_LIMIT, HIST_LOGIT_LIMIT)
        k = np.floor(zh / bin_width).astype(np.int64)
        d = zh - (k + 0.5) * bin_width
        margin = (1.0 - 2.0 * yv) * zv
        cl = np.zeros(yv.size) if clipped is None else np.asarray(clipped, dtype=np.float64)
        return cls.from_columns(
            bin_width, k, yv.astype(np.int64),
            count=np.ones(yv.size), clipped=cl, weight=w, m1=w * d, m2=w * d * d,
            wmiss=w * sigmoid(margin), wloss=w * softplus(margin),
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
        """Summarise rows of probabilities, clipped to [eps, 1 - eps] (clipped rows are counted).

        Parameters
        ----------
        y : array_like of {0, 1}, shape (n,)
            Binary labels.
        p : array_like of float, shape (n,)
            Probabilities of the positive class, in [0, 1].
        sample_weight : array_like of float, shape (n,), optional
            Finite row weights >= 0; every row weighs 1 when omitted.
        bin_width : float, default 0.05
            The bin width ``h`` in logit units.
        eps : float, default CLIP_EPS (1e-15)
            Probabilities within ``eps`` of 0 or 1 are clipped to ``[eps, 1 - eps]`` and counted in ``clipped``.

        Returns
        -------
        BinarySummary
            The summary of the rows at logits ``logit(clip(p))``.

        Raises
        ------
        InputError
            A probability outside [0, 1] or NaN/inf, and everything :meth:`from_logits` rejects.
        """
        pv = validate_vector("p", p)
        z, _ = probs_to_logits(pv, eps=eps)
        return cls.from_logits(
            y, z, sample_weight=sample_weight, bin_width=bin_width, clipped=(pv < eps) | (pv > 1 - eps)
        )

    def merge(self, other: BinarySummary) -> BinarySummary:
        """Sum of two summaries (rows of both).

        Parameters
        ----------
        other : BinarySummary
            A summary of the same bin width.

        Returns
        -------
        BinarySummary
            The summary of the rows of both.

        Raises
        ------
        ValueError
            The bin widths differ.
        """
        if self.bin_width != other.bin_width:
            raise ValueError(f"Cannot merge summaries with bin widths {self.bin_width} and {other.bin_width}.")
        a, b = self.to_columns(dense=True), other.to_columns(dense=True)
        cols = {n: np.concatenate([a[n], b[n]]) for n in a}
        return BinarySummary.from_columns(self.bin_width, cols.pop("bin"), cols.pop("label"), **cols)

    def to_columns(self, dense: bool = False) -> dict[str, np.ndarray]:
        """Long-format columns (bin, label, counts, moments), the inverse of :meth:`from_columns`.

        Parameters
        ----------
        dense : bool, default False
            Keep the (bin, label) cells that hold no rows and no weight (left out by default).

        Returns
        -------
        dict of str to numpy.ndarray
            ``bin``, ``label`` and one array per statistic, all of one length, negatives first.
        """
        n = self.bins.size
        keep = np.ones(2 * n, bool) if dense else (self.count.reshape(-1) > 0) | (self.weight.reshape(-1) != 0)
        out = {"bin": np.tile(self.bins, 2)[keep], "label": np.repeat(np.arange(2), n)[keep]}
        for name in BINARY.names:
            out[name] = getattr(self, name).reshape(-1)[keep]
        return out

    # ---- totals -----------------------------------------------------------
    @property
    def n_rows(self) -> int:
        return int(self.count.sum())

    @property
    def n_clipped(self) -> int:
        return int(self.clipped.sum())

    @property
    def total_weight(self) -> float:
        """Σw of the negatives plus Σw of the positives: equal to :attr:`total_pos_weight` exactly when no
        negative has weight (one sum over both labels could round differently and make a positive-only
        group look like it had negatives)."""
        return float(self.weight[0].sum()) + float(self.weight[1].sum())

    def n_extreme(self, max_abs_logit: float = DEFAULT_MAX_ABS_LOGIT) -> int:
        """Rows whose logit is outside ``[-L, L)``, ``L`` = max_abs_logit rounded up to a multiple of the bin
        width: exact from the bins (bin k holds ``[k·h, (k+1)·h)``), no row is touched.

        Parameters
        ----------
        max_abs_logit : float, default 50.0
            The limit ``L`` before rounding, in logit units.

        Returns
        -------
        int
            The number of such rows.
        """
        k = extreme_bin(max_abs_logit, self.bin_width)
        outside = (self.bins >= k) | (self.bins < -k)
        return int(self.count[:, outside].sum())

    @property
    def total_pos_weight(self) -> float:
        return float(self.weight[1].sum())

    @property
    def pos_weight(self) -> F64:
        """Σw of the positives, per bin."""
        return self.weight[1]

    @property
    def wp(self) -> F64:
        """Σw·σ(z) per bin: the predicted positives at c = 0 (exact)."""
        return self.wmiss[0] + self.weight[1] - self.wmiss[1]

    @cached_property
    def centres(self) -> F64:
        return (self.bins + 0.5) * self.bin_width

    # ---- the loss as a function of the shift -------------------------------
    @cached_property
    def _group(self) -> BinaryGroups:
        """This summary as the one group of a :class:`~ctcalc_spark.core.batch.BinaryGroups`, which evaluates the
        expansions and solves the bias for one group as for many."""
        cols = self.to_columns(dense=True)
        return BinaryGroups(cols, [np.arange(cols["bin"].size)], self.bin_width)

    def loss_sum(self, c: float = 0.0) -> float:
        """Σ w·logloss(y, σ(z - c)); exact at c = 0, histogram-expanded elsewhere.

        Parameters
        ----------
        c : float, default 0.0
            The shift subtracted from every logit.

        Returns
        -------
        float
            The weighted log-loss sum in nats (0.0 for no rows).
        """
        return float(self._group.sums_at(np.array([c], np.float64))[0][0])

    def log_loss(self, c: float = 0.0) -> float:
        """Weighted mean log loss after shifting every logit by -c.

        Parameters
        ----------
        c : float, default 0.0
            The shift subtracted from every logit.

        Returns
        -------
        float
            :meth:`loss_sum` over :attr:`total_weight`, in nats.

        Raises
        ------
        InputError
            The total weight is not positive (no rows, or only zero weights): there is no mean.
        """
        return self.loss_sum(c) / require_positive_weight(self.total_weight, "BinarySummary.log_loss")

    def predicted_positives(self, c: float = 0.0) -> float:
        """Σ w·σ(z - c); exact at c = 0, histogram-expanded elsewhere.

        Parameters
        ----------
        c : float, default 0.0
            The shift subtracted from every logit.

        Returns
        -------
        float
            The weighted count of predicted positives.
        """
        return float(self._group.sums_at(np.array([c], np.float64))[1][0])

    def solve_bias(self) -> float:
        """c* minimising the expanded L(c), within :func:`bias_error_bound` of the exact one.

        Returns
        -------
        float
            The finite shift ``c*`` in logit units.

        Raises
        ------
        DegenerateBiasError
            ``status`` ``no_bias_rows`` (no rows, or zero total weight), ``bias_single_class_negative`` or
            ``bias_single_class_positive`` (weight in one label only), ``bias_ill_conditioned`` (float rounding
            of the weight sums can move c* by more than :data:`~ctcalc_spark.core.solvers.ROUNDING_TOL`).
        """
        (c,) = self._group.solve()
        if isinstance(c, DegenerateBiasError):
            raise c
        return c

    # ---- other views of the same bins ------------------------------------------
    def reliability(self, n_buckets: int = 10) -> dict[str, np.ndarray]:
        """Reliability diagram: fine bins grouped into equal-width probability buckets by their centre.

        Parameters
        ----------
        n_buckets : int, default 10
            Buckets of width ``1 / n_buckets`` in probability.

        Returns
        -------
        dict of str to numpy.ndarray
            Arrays of shape (n_buckets,): ``bucket_lo`` (each bucket's lower edge), ``weight`` (Σw),
            ``mean_predicted`` (Σw·σ(z) / Σw) and ``observed_rate`` (Σw·y / Σw); the last two NaN for a bucket
            without weight.
        """
        p_centre = sigmoid(self.centres)
        bucket = np.minimum((p_centre * n_buckets).astype(np.int64), n_buckets - 1)
        w = np.bincount(bucket, weights=self.weight.sum(axis=0), minlength=n_buckets)
        wp = np.bincount(bucket, weights=self.wp, minlength=n_buckets)
        pos = np.bincount(bucket, weights=self.pos_weight, minlength=n_buckets)
        with np.errstate(invalid="ignore", divide="ignore"):
            return {
                "bucket_lo": np.arange(n_buckets) / n_buckets,
                "weight": w,
                "mean_predicted": np.where(w > 0, wp / np.where(w > 0, w, 1), np.nan),
                "observed_rate": np.where(w > 0, pos / np.where(w > 0, w, 1), np.nan),
            }


def solve_biases(summaries: Sequence[BinarySummary]) -> list[float | DegenerateBiasError]:
    """:meth:`BinarySummary.solve_bias` of many summaries at once: c* or the DegenerateBiasError of each.

    The summaries of each bin width are the groups of one :class:`~ctcalc_spark.core.batch.BinaryGroups`, solved
    in lockstep.
    """
    out: list[Any] = [None] * len(summaries)
    by_width: dict[float, list[int]] = defaultdict(list)
    for i, s in enumerate(summaries):
        by_width[s.bin_width].append(i)
    for width, members in by_width.items():
        cols = [summaries[i].to_columns(dense=True) for i in members]
        sizes = np.array([c["bin"].size for c in cols], np.int64)
        starts = np.cumsum(sizes) - sizes
        merged = {n: np.concatenate([c[n] for c in cols]) for n in cols[0]}
        groups = [np.arange(start, start + size) for start, size in zip(starts.tolist(), sizes.tolist())]
        for i, c in zip(members, BinaryGroups(merged, groups, width).solve()):
            out[i] = c
    return out


@cache  # one value per bin width, read for every rolling row
def bias_error_bound(bin_width: float) -> float:
    """The module's bound on |histogram c* - exact c*|: ``e^a·(1 - a + a²/2) - 1`` with ``a = bin_width / 2``.

    Summed as its series ``Σ_{n>=3} (n-1)(n-2)/2 · a^n / n!`` (every term positive, no cancellation), up to the
    first term too small to change the sum (the terms shrink from there on, so none after it would either).

    >>> round(bias_error_bound(0.05) * 1e6, 4)
    2.6535
    """
    a = bin_width / 2.0
    term, total = 1.0, 0.0
    for n in range(1, 30):
        term *= a / n  # a^n / n!
        added = total + (n - 1) * (n - 2) / 2.0 * term
        if added == total and n > 3:
            break
        total = added
    return total


def calibrated_log_loss_bound(remain: BinarySummary, c: float) -> float:
    """The module's bound on |Δ mean calibrated log loss| for this val-remain summary at shift c."""
    h3 = (remain.bin_width / 2.0) ** 3
    resid = abs(remain.total_pos_weight - remain.predicted_positives(c)) / remain.total_weight
    return h3 / (18.0 * np.sqrt(3.0)) + resid * bias_error_bound(remain.bin_width)


def finalize_binary(bias: BinarySummary, remain: BinarySummary, *,
                    max_abs_logit: float = DEFAULT_MAX_ABS_LOGIT) -> dict[str, Any]:
    """One metrics row from the val-bias and val-remain summaries of one group: the one-group case of
    :func:`ctcalc_spark.core.batch.finalize_binary_groups`.

    ``log_loss``, ``auc``, ``normalized_entropy`` and ``calibration`` are on the
    whole validation set (bias + remain); ``calibrated_log_loss`` on val-remain at
    c*; ``log_loss_remain`` is the vanilla log loss on the same val-remain rows, so
    ``calibration_gain = log_loss_remain - calibrated_log_loss`` is the part of the
    loss a single bias shift removes. Degenerate groups get ``status`` != 'ok' and
    None (never NaN/inf) in the values that cannot be computed. ``n_extreme``: rows with a
    logit outside ``[-max_abs_logit, max_abs_logit)`` (:meth:`BinarySummary.n_extreme`).
    """
    if bias.bin_width != remain.bin_width:
        raise ValueError(f"Cannot merge summaries with bin widths {bias.bin_width} and {remain.bin_width}.")
    b, r = bias.to_columns(dense=True), remain.to_columns(dense=True)
    cols = {n: np.concatenate([b[n], r[n]]) for n in b}
    is_bias = np.arange(cols["bin"].size) < b["bin"].size
    (row,) = finalize_binary_groups(cols, [np.arange(is_bias.size)], is_bias, bin_width=bias.bin_width,
                                    max_abs_logit=max_abs_logit)
    return row


@dataclass(frozen=True)
class RegressionSummary:
    """Σ of count, w, w·r, w·r², w·p, w·y with r = y - p: exact sufficient statistics for MSE under a shift.

    Parameters
    ----------
    count : int, default 0
        Rows.
    weight : float, default 0.0
        ``Σw``.
    wr : float, default 0.0
        ``Σw·r``.
    wr2 : float, default 0.0
        ``Σw·r²``.
    wp : float, default 0.0
        ``Σw·p``.
    wy : float, default 0.0
        ``Σw·y``.

    Attributes
    ----------
    count, weight, wr, wr2, wp, wy
        The parameters, as given.
    """

    count: int = 0
    weight: float = 0.0
    wr: float = 0.0
    wr2: float = 0.0
    wp: float = 0.0
    wy: float = 0.0

    @classmethod
    def from_rows(cls, y: ArrayLike, p: ArrayLike, *, sample_weight: ArrayLike | None = None) -> RegressionSummary:
        """Summarise rows of targets and predictions.

        Parameters
        ----------
        y : array_like of float, shape (n,)
            Targets.
        p : array_like of float, shape (n,)
            Predictions.
        sample_weight : array_like of float, shape (n,), optional
            Finite row weights >= 0; every row weighs 1 when omitted.

        Returns
        -------
        RegressionSummary
            The sums over the rows (all 0 for no rows).

        Raises
        ------
        InputError
            A NaN/inf value; a length that differs from ``y``'s; a negative weight.
        """
        yv = validate_vector("y", y)
        pv = validate_vector("p", p, yv.size)
        w = validate_weight(sample_weight, yv.size)
        r = yv - pv
        return cls(
            int(yv.size),
            float(w.sum()),
            float(np.sum(w * r)),
            float(np.sum(w * r * r)),
            float(np.sum(w * pv)),
            float(np.sum(w * yv)),
        )

    @classmethod
    def from_columns(cls, **cols: ArrayLike) -> RegressionSummary:
        """The merge of summary-table rows: each statistic of :data:`ctcalc_spark.core.state.REGRESSION` by its
        merge.

        Parameters
        ----------
        **cols : array_like of float
            One array per statistic: ``count``, ``weight``, ``wr``, ``wr2``, ``wp``, ``wy``.

        Returns
        -------
        RegressionSummary
            The summary of all the rows.

        Raises
        ------
        KeyError
            A statistic missing from ``cols``.
        """
        merged = {s.name: MERGES[s.merge].reduce(np.asarray(cols[s.name], s.dtype)) for s in REGRESSION.stats}
        return cls(**{n: int(v) if n in REGRESSION.counts else float(v) for n, v in merged.items()})

    def merge(self, other: RegressionSummary) -> RegressionSummary:
        """Field-wise merge (sums).

        Parameters
        ----------
        other : RegressionSummary
            The summary of other rows.

        Returns
        -------
        RegressionSummary
            The summary of the rows of both.
        """
        return RegressionSummary.from_columns(**{f.name: [getattr(self, f.name), getattr(other, f.name)]
                                                 for f in fields(self)})

    def solve_bias(self) -> float:
        """c* = Σ w·r / Σ w, the shift of the predictions minimising the MSE.

        Returns
        -------
        float
            ``c*``, in the unit of the targets.

        Raises
        ------
        DegenerateBiasError
            ``status`` ``no_bias_rows``: no rows, or a total weight that is not positive.
        """
        return mean_shift(self.wr, self.weight, self.count)

    def mse(self, c: float = 0.0) -> float:
        """Σ w (y - p - c)² / Σ w = (Σwr² - 2cΣwr + c²Σw) / Σw.

        Parameters
        ----------
        c : float, default 0.0
            The shift added to every prediction.

        Returns
        -------
        float
            The weighted MSE at predictions ``p + c``.

        Raises
        ------
        InputError
            The total weight is not positive (no rows, or only zero weights): there is no mean.
        """
        weight = require_positive_weight(self.weight, "RegressionSummary.mse")
        return (self.wr2 - 2.0 * c * self.wr + c * c * self.weight) / weight


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
        row["status"] = STATUS_NO_BIAS_ROWS if bias.count == 0 else STATUS_ZERO_WEIGHT
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
