"""The deterministic val-bias / val-remain split, in pure Python (the Spark layer computes the same in-engine).

A row is val-bias when ``crc32(f"{salt}:{example_id}") < bias_fraction · 2³²``,
so every model scored on the same rows gets the same split and reruns are identical.
"""
from __future__ import annotations

import zlib
from typing import Iterable

import numpy as np

TWO_POW_32 = 2**32


def bias_threshold(bias_fraction: float) -> int:
    """The crc32 threshold below which a row is val-bias."""
    return int(bias_fraction * TWO_POW_32)


def bias_mask(example_ids: Iterable[object], *, salt: str, bias_fraction: float) -> np.ndarray:
    """Boolean val-bias flags for example ids (rendered with str(), as Spark casts them to string)."""
    t = bias_threshold(bias_fraction)
    return np.fromiter((zlib.crc32(f"{salt}:{e}".encode()) < t for e in example_ids), dtype=bool)
