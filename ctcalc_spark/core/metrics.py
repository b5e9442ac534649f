"""Vanilla metrics on rows (numpy only).

Conventions, decided once:
* weights default to 1 and must be finite and >= 0 with a positive total;
* probabilities must lie in [0, 1]; values within ``CLIP_EPS`` of 0 or 1
  (exactly 0 or 1 included) are clipped to ``[CLIP_EPS, 1 - CLIP_EPS]``,
  i.e. to logits of about +-34.5, and counted by :func:`clip_probabilities`;
* binary labels must be 0 or 1; NaN/inf inputs raise :class:`InputError`.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ctcalc_spark.core._math import F64, binary_entropy, logit, logsumexp_rows, sigmoid, softplus
from ctcalc_spark.errors import InputError

CLIP_EPS = 1e-15
"""Probabilities are clipped to [CLIP_EPS, 1 - CLIP_EPS] before taking the logit."""


def validate_vector(name: str, x: ArrayLike, n: int | None = None) -> F64:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise InputError(f"Expected '{name}' to be 1-D, got shape {arr.shape}; pass a flat array.")
    if n is not None and arr.shape[0] != n:
        raise InputError(f"Expected '{name}' to have {n} rows like the labels, got {arr.shape[0]}.")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InputError(
            f"'{name}' has {int(bad.sum())} NaN/inf values (first at row {int(np.argmax(bad))}); "
            "drop or repair those rows before computing metrics."
        )
    return arr


def validate_weight(sample_weight: ArrayLike | None, n: int) -> F64:
    if sample_weight is None:
        return np.ones(n, dtype=np.float64)
    w = validate_vector("sample_weight", sample_weight, n)
    if (w < 0).any():
        raise InputError(
            f"'sample_weight' has {int((w < 0).sum())} negative values (min {w.min():g}); "
            "weights must be >= 0."
        )
    return w


def validate_binary_labels(y: ArrayLike) -> F64:
    arr = validate_vector("y", y)
    bad = (arr != 0) & (arr != 1)
    if bad.any():
        distinct = np.unique(arr)
        raise InputError(
            f"Expected binary labels with values 0/1, got {distinct.size} distinct values: "
            f"{distinct[:10].tolist()}; map the labels to 0/1."
        )
    return arr


def _total_weight(w: F64, what: str) -> float:
    return require_positive_weight(float(w.sum()), what)


def require_positive_weight(total: float, what: str) -> float:
    """``total`` when it is > 0; else an :class:`InputError` that names ``what`` (nothing to average over)."""
    if not total > 0:
        raise InputError(f"{what}: total weight is {total:g}; need at least one row with positive weight.")
    return total


def clip_probabilities(p: ArrayLike, *, eps: float = CLIP_EPS) -> tuple[F64, int]:
    """Validate p in [0, 1], clip to [eps, 1 - eps]; return (clipped p, number of rows clipped)."""
    arr = validate_vector("p", p)
    out = (arr < 0) | (arr > 1)
    if out.any():
        raise InputError(
            f"Expected probabilities in [0, 1], got {int(out.sum())} values outside "
            f"(min {arr.min():g}, max {arr.max():g}); pass logits via 'logit' if these are scores."
        )
    clipped = (arr < eps) | (arr > 1 - eps)
    return np.clip(arr, eps, 1 - eps), int(clipped.sum())


def probs_to_logits(p: ArrayLike, *, eps: float = CLIP_EPS) -> tuple[F64, int]:
    """Logits of clipped probabilities and the clipped-row count."""
    pc, n_clipped = clip_probabilities(p, eps=eps)
    return logit(pc), n_clipped


def log_loss_from_logits(y: ArrayLike, z: ArrayLike, *, sample_weight: ArrayLike | None = None) -> float:
    """Weighted mean binary log loss from logits.

    ``Σ w·(softplus(z) - y·z) / Σ w``, which equals ``-Σ w·(y log σ(z) + (1-y) log(1-σ(z))) / Σ w``, computed
    without overflow for any finite logit.

    Parameters
    ----------
    y : array_like of {0, 1}, shape (n,)
        Binary labels.
    z : array_like of float, shape (n,)
        Logits (natural log odds) of the positive class.
    sample_weight : array_like of float, shape (n,), optional
        Finite row weights >= 0 with a positive total; every row weighs 1 when omitted.

    Returns
    -------
    float
        The mean log loss in nats, >= 0.

    Raises
    ------
    InputError
        A label other than 0/1; a NaN/inf label, logit or weight; a length that differs from ``y``'s; a
        negative weight; a total weight that is not positive (empty input included).

    Examples
    --------
    >>> round(log_loss_from_logits([1, 0], [0.0, 0.0]), 6)
    0.693147
    """
    yv = validate_binary_labels(y)
    zv = validate_vector("z", z, yv.size)
    w = validate_weight(sample_weight, yv.size)
    return float(np.sum(w * (softplus(zv) - yv * zv)) / _total_weight(w, "log loss"))


def log_loss_from_probs(
    y: ArrayLike, p: ArrayLike, *, sample_weight: ArrayLike | None = None, eps: float = CLIP_EPS
) -> float:
    """Weighted mean binary log loss from probabilities clipped to [eps, 1 - eps].

    The probabilities are turned into logits (:func:`probs_to_logits`) and passed to
    :func:`log_loss_from_logits`.

    Parameters
    ----------
    y : array_like of {0, 1}, shape (n,)
        Binary labels.
    p : array_like of float, shape (n,)
        Probabilities of the positive class, in [0, 1] (0 and 1 included: they are clipped).
    sample_weight : array_like of float, shape (n,), optional
        Finite row weights >= 0 with a positive total; every row weighs 1 when omitted.
    eps : float, default CLIP_EPS (1e-15)
        Probabilities within ``eps`` of 0 or 1 are clipped to ``[eps, 1 - eps]``.

    Returns
    -------
    float
        The mean log loss in nats, >= 0.

    Raises
    ------
    InputError
        A probability outside [0, 1], and everything :func:`log_loss_from_logits` rejects.
    """
    z, _ = probs_to_logits(p, eps=eps)
    return log_loss_from_logits(y, z, sample_weight=sample_weight)


def mean_squared_error(y: ArrayLike, p: ArrayLike, *, sample_weight: ArrayLike | None = None) -> float:
    """Weighted mean squared error ``Σ w (y - p)² / Σ w``.

    Parameters
    ----------
    y : array_like of float, shape (n,)
        Targets (any finite numbers).
    p : array_like of float, shape (n,)
        Predictions.
    sample_weight : array_like of float, shape (n,), optional
        Finite row weights >= 0 with a positive total; every row weighs 1 when omitted.

    Returns
    -------
    float
        The mean squared error, in the squared unit of ``y``.

    Raises
    ------
    InputError
        A NaN/inf value; a length that differs from ``y``'s; a negative weight; a total weight that is not
        positive (empty input included).
    """
    yv = validate_vector("y", y)
    pv = validate_vector("p", p, yv.size)
    w = validate_weight(sample_weight, yv.size)
    return float(np.sum(w * (yv - pv) ** 2) / _total_weight(w, "MSE"))


def validate_multiclass(y: ArrayLike, z: ArrayLike) -> tuple[np.ndarray, F64]:
    zv = np.asarray(z, dtype=np.float64)
    if zv.ndim != 2 or zv.shape[1] < 2:
        raise InputError(f"Expected multiclass logits of shape (n, k>=2), got {zv.shape}.")
    if not np.isfinite(zv).all():
        raise InputError(f"Multiclass logits have {int((~np.isfinite(zv)).sum())} NaN/inf entries.")
    yv = np.asarray(y)
    if yv.shape != (zv.shape[0],):
        raise InputError(f"Expected {zv.shape[0]} class labels, got shape {yv.shape}.")
    yi = yv.astype(np.int64)
    if (yi != yv).any() or (yi < 0).any() or (yi >= zv.shape[1]).any():
        raise InputError(
            f"Expected class labels as integers in [0, {zv.shape[1] - 1}], got values "
            f"{np.unique(yv)[:10].tolist()}."
        )
    return yi, zv


def multiclass_log_loss(
    y: ArrayLike, z: ArrayLike, *, sample_weight: ArrayLike | None = None, temperature: float = 1.0
) -> float:
    """Weighted mean cross-entropy of ``softmax(z / T)``: ``Σ w (logsumexp(z/T) - z_y/T) / Σ w``.

    Parameters
    ----------
    y : array_like of int, shape (n,)
        Class indices in ``[0, k - 1]`` (floats with integer values are accepted).
    z : array_like of float, shape (n, k), k >= 2
        Logits of the ``k`` classes per row.
    sample_weight : array_like of float, shape (n,), optional
        Finite row weights >= 0 with a positive total; every row weighs 1 when omitted.
    temperature : float, default 1.0
        ``T``, the divisor of every logit: finite and > 0.

    Returns
    -------
    float
        The mean cross-entropy in nats, >= 0.

    Raises
    ------
    InputError
        ``z`` not of shape (n, k >= 2) or with NaN/inf entries; ``y`` not of shape (n,) or not integers in
        ``[0, k - 1]``; a NaN/inf or negative weight; a total weight that is not positive (no rows included);
        a ``temperature`` that is not a finite number > 0.
    """
    yi, zv = validate_multiclass(y, z)
    w = validate_weight(sample_weight, yi.size)
    if not (math.isfinite(temperature) and temperature > 0):
        raise InputError(f"temperature must be a finite number > 0 (the divisor of every logit), got {temperature!r}.")
    zt = zv / temperature
    per_row = logsumexp_rows(zt) - zt[np.arange(yi.size), yi]
    return float(np.sum(w * per_row) / _total_weight(w, "multiclass log loss"))


def auc_score(y: ArrayLike, score: ArrayLike, *, sample_weight: ArrayLike | None = None) -> float:
    """Weighted ROC AUC = P(score_pos > score_neg) + ½ P(tie), by sorting (ties count one half).

    Parameters
    ----------
    y : array_like of {0, 1}, shape (n,)
        Binary labels.
    score : array_like of float, shape (n,)
        Any score that ranks the rows (a logit, a probability): only its order matters.
    sample_weight : array_like of float, shape (n,), optional
        Finite row weights >= 0 with a positive total; every row weighs 1 when omitted.

    Returns
    -------
    float
        The AUC, in [0, 1]; 0.5 for a score that does not rank.

    Raises
    ------
    InputError
        A label other than 0/1; a NaN/inf label, score or weight; a length that differs from ``y``'s; a
        negative weight; no positive or no negative label with positive weight (empty input included).
    """
    yv = validate_binary_labels(y)
    s = validate_vector("score", score, yv.size)
    w = validate_weight(sample_weight, yv.size)
    pos_w, neg_w = float(np.sum(w * yv)), float(np.sum(w * (1 - yv)))
    if pos_w <= 0 or neg_w <= 0:
        raise InputError("AUC needs both positive and negative labels with positive weight.")
    uniq, inv = np.unique(s, return_inverse=True)
    pos = np.bincount(inv, weights=w * yv, minlength=uniq.size)
    neg = np.bincount(inv, weights=w * (1 - yv), minlength=uniq.size)
    neg_below = np.cumsum(neg) - neg
    return float(np.sum(pos * (neg_below + 0.5 * neg)) / (pos_w * neg_w))


def normalized_entropy(y: ArrayLike, z: ArrayLike, *, sample_weight: ArrayLike | None = None) -> float:
    """Log loss divided by the entropy of the weighted base rate (He et al. 2014); < 1 beats the prior.

    Parameters
    ----------
    y : array_like of {0, 1}, shape (n,)
        Binary labels.
    z : array_like of float, shape (n,)
        Logits of the positive class.
    sample_weight : array_like of float, shape (n,), optional
        Finite row weights >= 0 with a positive total; every row weighs 1 when omitted.

    Returns
    -------
    float
        :func:`log_loss_from_logits` over the binary entropy (nats) of the weighted base rate ``Σ w·y / Σ w``;
        >= 0, and 1 for a model that predicts the base rate on every row.

    Raises
    ------
    InputError
        Everything :func:`log_loss_from_logits` rejects, and labels all of one class (entropy 0).
    """
    yv = validate_binary_labels(y)
    w = validate_weight(sample_weight, yv.size)
    base = float(np.sum(w * yv) / _total_weight(w, "normalized entropy"))
    h = binary_entropy(base)
    if h == 0.0:
        raise InputError("Normalized entropy is undefined when every label is the same class.")
    return log_loss_from_logits(yv, z, sample_weight=w) / h


def calibration_ratio(y: ArrayLike, z: ArrayLike, *, sample_weight: ArrayLike | None = None) -> float:
    """Σ w·σ(z) / Σ w·y: predicted over observed positives (1 is calibrated on average).

    Parameters
    ----------
    y : array_like of {0, 1}, shape (n,)
        Binary labels.
    z : array_like of float, shape (n,)
        Logits of the positive class.
    sample_weight : array_like of float, shape (n,), optional
        Finite row weights >= 0 with a positive total; every row weighs 1 when omitted.

    Returns
    -------
    float
        The ratio, >= 0: above 1 the model predicts more positives than there are, below 1 fewer.

    Raises
    ------
    InputError
        A label other than 0/1; a NaN/inf label, logit or weight; a length that differs from ``y``'s; a
        negative weight; no positive label with positive weight (empty input included).
    """
    yv = validate_binary_labels(y)
    zv = validate_vector("z", z, yv.size)
    w = validate_weight(sample_weight, yv.size)
    pos = float(np.sum(w * yv))
    if pos <= 0:
        raise InputError("Calibration ratio is undefined with no positive labels.")
    return float(np.sum(w * sigmoid(zv)) / pos)
