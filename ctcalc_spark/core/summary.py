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
associative and commutative up to float rounding.

Regression (MSE): with ``r = y - p``, ``Σw``, ``Σw·r``, ``Σw·r²`` give c* and
the calibrated MSE exactly (:class:`RegressionSummary`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any, Sequence

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
    PaddedSide,
    _check_binary_bias_set,
    bias_or_error,
    lockstep_solve,
    logit_shift_bracket,
    sigmoid_pair,
)

DEFAULT_BIN_WIDTH = 0.05


HIST_LOGIT_LIMIT = 1e9
"""Logits enter the histogram clamped to +-1e9 (the exact vanilla sums use the real value). The loss and
missed mass of such a row are linear or flat in any shift a solve can reach, so the calibrated numbers do
not change; the clamp keeps bin indices (and the scan's packed group key) far from overflow."""

DEFAULT_MAX_ABS_LOGIT = 50.0
"""Logits outside [-50, 50) are counted as extreme (``n_extreme``): no trained model of calibrated data puts a
probability within 2e-22 of 0 or 1, so such values mean broken inputs (e.g. constant or unscaled features)."""


def extreme_bin(max_abs_logit: float, bin_width: float) -> int:
    """K such that bins ``k >= K`` and ``k < -K`` hold exactly the logits outside ``[-K·h, K·h)``.

    ``K·h`` is ``max_abs_logit`` rounded up to a multiple of the bin width (equal to it when it is one).
    """
    return max(1, int(np.ceil(max_abs_logit / bin_width - 1e-9)))


STATUS_OK = "ok"
STATUS_NO_REMAIN_ROWS = "no_remain_rows"

BINARY_KEYS = ("bin", "label")
"""Keys of a binary summary row below its group: the logit bin and the label (0/1)."""
BINARY_MOMENTS = ("weight", "m1", "m2", "wmiss", "wloss")
"""Float per-(bin, label) sums of :class:`BinarySummary`, in table-column order."""
BINARY_COUNTS = ("count", "clipped")
"""Integer per-(bin, label) counts of :class:`BinarySummary`."""


@dataclass(frozen=True)
class BinarySummary:
    """Logit histogram with per-bin, per-label moments; see the module docstring for the fields and the bound.

    Every per-bin array has shape ``(2, n_bins)``: row 0 the negatives, row 1 the positives.
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
        """The summary of no rows (the identity of :meth:`merge`)."""
        z = np.zeros((2, 0))
        zi = np.zeros((2, 0), np.int64)
        return cls(bin_width, np.zeros(0, np.int64), zi, zi, z, z, z, z, z)

    @classmethod
    def from_columns(cls, bin_width: float, bins: ArrayLike, labels: ArrayLike, **cols: ArrayLike) -> BinarySummary:
        """Build from long-format rows (bin, label 0/1, and the :data:`BINARY_COUNTS` and :data:`BINARY_MOMENTS`
        columns), e.g. rows of the summaries table; rows of the same (bin, label) are summed."""
        b = np.asarray(bins, dtype=np.int64)
        lab = np.asarray(labels, dtype=np.int64)
        if lab.size and not ((lab == 0) | (lab == 1)).all():
            raise ValueError(f"Summary labels must be 0/1, got {sorted(set(lab.tolist()))[:5]}.")
        uniq, inv = np.unique(b, return_inverse=True)
        idx = lab * uniq.size + inv
        out: dict[str, np.ndarray] = {}
        for name in BINARY_COUNTS + BINARY_MOMENTS:
            summed = np.bincount(idx, weights=np.asarray(cols[name], np.float64), minlength=2 * uniq.size)
            out[name] = summed.reshape(2, uniq.size)
            if name in BINARY_COUNTS:
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
        """Summarise rows of labels and logits (``clipped``: optional per-row flags from probability clipping)."""
        yv = _validate_binary_labels(y)
        zv = _validate_vector("z", z, yv.size)
        w = _validate_weight(sample_weight, yv.size)
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
        a, b = self.to_columns(dense=True), other.to_columns(dense=True)
        cols = {n: np.concatenate([a[n], b[n]]) for n in a}
        return BinarySummary.from_columns(self.bin_width, cols.pop("bin"), cols.pop("label"), **cols)

    def to_columns(self, dense: bool = False) -> dict[str, np.ndarray]:
        """Long-format columns (bin, label, counts, moments), the inverse of :meth:`from_columns`; (bin, label)
        cells without rows are left out unless ``dense``."""
        n = self.bins.size
        keep = np.ones(2 * n, bool) if dense else (self.count.reshape(-1) > 0) | (self.weight.reshape(-1) != 0)
        out = {"bin": np.tile(self.bins, 2)[keep], "label": np.repeat(np.arange(2), n)[keep]}
        for name in BINARY_COUNTS + BINARY_MOMENTS:
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
        width: exact from the bins (bin k holds ``[k·h, (k+1)·h)``), no row is touched."""
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
    # A solve evaluates these per-bin expansions a dozen times per summary, and a range job solves thousands of
    # summaries, so the arithmetic is written to share work: one exp per bin gives σ(x), σ(-x), softplus(±x),
    # with the same operations, in the same order, as the functions of _math (the results are bit-identical).
    @cached_property
    def _live(self) -> tuple[tuple[F64, F64, F64, F64], ...]:
        """Per label: (centres, w, s·m1, m2) of the bins with weight, s = 1 - 2·label."""
        out = []
        for label in (0, 1):
            live = self.weight[label] > 0
            sign = 1.0 - 2.0 * label
            out.append((self.centres[live], self.weight[label][live], sign * self.m1[label][live],
                        self.m2[label][live]))
        return tuple(out)

    @cached_property
    def _loss_at_zero(self) -> tuple[float, float]:
        """Per label, the expanded loss sum at c = 0 (the reference that loss_sum adds differences to)."""
        return float(np.sum(self._side(0, 0.0)[3])), float(np.sum(self._side(1, 0.0)[3]))

    def _side(self, label: int, c: float) -> tuple[F64, F64, F64, F64, F64]:
        """Per bin, for one label at shift c: x = s·(m - c) (the centre's margin), σ(x), σ(-x), the expanded
        loss sum, and A = (expanded missed mass) / σ(x), which is > 0 for h <= 0.5."""
        sign = 1.0 - 2.0 * label
        x = sign * (self.centres - c)
        s, sc, l1p = sigmoid_pair(x)
        w, m1, m2 = self.weight[label], sign * self.m1[label], self.m2[label]
        loss = w * (np.maximum(x, 0.0) + l1p) + m1 * s + 0.5 * m2 * s * sc
        a = w + m1 * sc + 0.5 * m2 * sc * (sc - s)
        return x, s, sc, loss, a

    def loss_sum(self, c: float = 0.0) -> float:
        """Σ w·logloss(y, σ(z - c)); exact at c = 0, histogram-expanded elsewhere."""
        exact0 = float(self.wloss.sum())
        if c == 0.0:
            return exact0
        ref = self._loss_at_zero
        return exact0 + sum(float(np.sum(self._side(lab, c)[3]) - ref[lab]) for lab in (0, 1))

    def log_loss(self, c: float = 0.0) -> float:
        """Weighted mean log loss after shifting every logit by -c."""
        return self.loss_sum(c) / self.total_weight

    def predicted_positives(self, c: float = 0.0) -> float:
        """Σ w·σ(z - c); exact at c = 0."""
        if c == 0.0:
            return float(self.wp.sum())
        neg, pos = self._side(0, c), self._side(1, c)
        return float(np.sum(neg[1] * neg[4])) + self.total_pos_weight - float(np.sum(pos[1] * pos[4]))

    def solve_bias(self) -> float:
        """c* minimising the expanded L(c); raises DegenerateBiasError for empty or single-class rows.

        The one-summary case of :func:`solve_biases` (:func:`ctcalc_spark.core.solvers.lockstep_solve`).
        """
        (c,) = solve_biases([self])
        if isinstance(c, DegenerateBiasError):
            raise c
        return c

    def _solve_start(self) -> tuple[float, float, float]:
        """(lo, hi, x0) of a bias solve: the bracket from the live bins' logit range and the base rate, and the
        start, mean logit minus logit(base rate). Needs weight in both labels (checked by the caller)."""
        total, pos = self.total_weight, self.total_pos_weight
        per_bin = self.weight.sum(axis=0)
        live = per_bin > 0
        z_lo = float(self.bins[live].min()) * self.bin_width
        z_hi = float(self.bins[live].max() + 1) * self.bin_width
        lo, hi = logit_shift_bracket(z_lo, z_hi, pos / total)
        return lo, hi, float(np.sum(per_bin * self.centres) / total) - float(logit(pos / total))

    # ---- other metrics from the same bins ------------------------------------
    def auc(self) -> tuple[float, float]:
        """(bucketed AUC, bound): pairs in the same bin count one half; |AUC - exact AUC| <= bound."""
        neg, pos = self.weight[0], self.weight[1]
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


SOLVE_CELLS = 1 << 18
"""Bins (summaries x the widest one's bins) that :func:`solve_biases` solves together in one lockstep."""


def solve_biases(summaries: Sequence[BinarySummary]) -> list[float | DegenerateBiasError]:
    """:meth:`BinarySummary.solve_bias` of many summaries at once: c* or the DegenerateBiasError of each.

    One safeguarded Newton iteration (:func:`ctcalc_spark.core.solvers.lockstep_solve`) runs in lockstep on
    arrays of many summaries' bins (a range job solves thousands of small summaries, and one solve at a time
    spends most of its time in numpy's per-call overhead); it stops at a step below 1e-13·(1+|c|).
    """
    out: list[Any] = [None] * len(summaries)
    todo: list[tuple[int, int]] = []
    for i, s in enumerate(summaries):
        try:
            _check_binary_bias_set(s.total_pos_weight, s.total_weight, s.n_rows)
        except DegenerateBiasError as e:
            out[i] = e
            continue
        todo.append((max(s._live[0][0].size, s._live[1][0].size, 1), i))
    todo.sort()  # similar widths together, so that little padding is summed
    start = 0
    while start < len(todo):
        end = start + 1
        while end < len(todo) and (end + 1 - start) * todo[end][0] <= SOLVE_CELLS:
            end += 1
        chunk = [i for _, i in todo[start:end]]
        for i, c in zip(chunk, _solve_chunk([summaries[i] for i in chunk])):
            out[i] = bias_or_error(c)
        start = end
    return out


def _padded_side(summaries: Sequence[BinarySummary], label: int) -> PaddedSide:
    """One label's live bins of ``summaries``, moved to the left of each row (padding has zero weight)."""
    sides = [s._live[label] for s in summaries]
    width = max(1, max(side[0].size for side in sides))
    centres, w, m1, m2 = (np.zeros((len(sides), width)) for _ in range(4))
    live = np.zeros((len(sides), width), bool)
    for r, (c_r, w_r, m1_r, m2_r) in enumerate(sides):
        n = c_r.size
        centres[r, :n], w[r, :n], m1[r, :n], m2[r, :n] = c_r, w_r, m1_r, m2_r
        live[r, :n] = True
    return PaddedSide(1.0 - 2.0 * label, centres, w, m1, m2, live)


def _solve_chunk(summaries: Sequence[BinarySummary]) -> F64:
    """c* of summaries that each hold both labels."""
    lo, hi, x0 = np.array([s._solve_start() for s in summaries]).T.copy()
    return lockstep_solve(_padded_side(summaries, 0), _padded_side(summaries, 1), lo, hi, x0)


def bias_error_bound(bin_width: float) -> float:
    """The module's bound on |histogram c* - exact c*|: ``e^a·(1 - a + a²/2) - 1`` with ``a = bin_width / 2``.

    Summed as its series ``Σ_{n>=3} (n-1)(n-2)/2 · a^n / n!`` (every term positive, no cancellation).

    >>> round(bias_error_bound(0.05) * 1e6, 4)
    2.6535
    """
    a = bin_width / 2.0
    term, total = 1.0, 0.0
    for n in range(1, 30):
        term *= a / n  # a^n / n!
        total += (n - 1) * (n - 2) / 2.0 * term
    return total


def calibrated_log_loss_bound(remain: BinarySummary, c: float) -> float:
    """The module's bound on |Δ mean calibrated log loss| for this val-remain summary at shift c."""
    h3 = (remain.bin_width / 2.0) ** 3
    resid = abs(remain.total_pos_weight - remain.predicted_positives(c)) / remain.total_weight
    return h3 / (18.0 * np.sqrt(3.0)) + resid * bias_error_bound(remain.bin_width)


def finalize_binary(bias: BinarySummary, remain: BinarySummary, *,
                    max_abs_logit: float = DEFAULT_MAX_ABS_LOGIT,
                    solved: float | DegenerateBiasError | None = None) -> dict[str, Any]:
    """One metrics row from the val-bias and val-remain summaries of one group.

    ``log_loss``, ``auc``, ``normalized_entropy`` and ``calibration`` are on the
    whole validation set (bias + remain); ``calibrated_log_loss`` on val-remain at
    c*; ``log_loss_remain`` is the vanilla log loss on the same val-remain rows, so
    ``calibration_gain = log_loss_remain - calibrated_log_loss`` is the part of the
    loss a single bias shift removes. Degenerate groups get ``status`` != 'ok' and
    None (never NaN/inf) in the values that cannot be computed. ``n_extreme``: rows with a
    logit outside ``[-max_abs_logit, max_abs_logit)`` (:meth:`BinarySummary.n_extreme`). ``solved``: the
    val-bias summary's c* or DegenerateBiasError when already solved (:func:`solve_biases`).
    """
    whole = bias.merge(remain)
    row: dict[str, Any] = {
        "n_rows": whole.n_rows,
        "n_bias": bias.n_rows,
        "n_remain": remain.n_rows,
        "n_clipped": whole.n_clipped,
        "n_extreme": whole.n_extreme(max_abs_logit),
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
        if isinstance(solved, DegenerateBiasError):
            raise solved
        c = bias.solve_bias() if solved is None else solved
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
