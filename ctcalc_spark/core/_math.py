"""Numerically stable scalar functions of logits (numpy only)."""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

F64 = NDArray[np.float64]


def softplus(x: ArrayLike) -> F64:
    """log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|)."""
    x = np.asarray(x, dtype=np.float64)
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def sigmoid(x: ArrayLike) -> F64:
    """1 / (1 + e^-x) without overflow for large |x|."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def logit(p: ArrayLike) -> F64:
    """log(p / (1 - p)); callers clip p away from 0 and 1 first."""
    p = np.asarray(p, dtype=np.float64)
    return np.log(p) - np.log1p(-p)


def logsumexp_rows(z: F64) -> F64:
    """Row-wise log Σ exp(z) of a 2-D array, shifted by the row max."""
    m = np.max(z, axis=1, keepdims=True)
    return (m + np.log(np.sum(np.exp(z - m), axis=1, keepdims=True)))[:, 0]


def binary_entropy(p: float) -> float:
    """-p log p - (1-p) log(1-p), 0 at p in {0, 1}."""
    if p <= 0.0 or p >= 1.0:
        return 0.0
    return float(-p * np.log(p) - (1.0 - p) * np.log1p(-p))
