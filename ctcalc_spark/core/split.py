"""The deterministic val-bias / val-remain split, in pure Python (the Spark layer computes the same in-engine).

A row is val-bias when the low 32 bits of its split hash are below
``bias_fraction · 2³²``. The split hash is Spark's ``xxhash64`` (XXH64, seed 42):
of ``example_id XOR salt_key(salt)`` for integer ids (one long per row: the
cheapest form in the engine), and of ``(salt, example_id)`` for any other id,
hashed as a UTF-8 string. Every model scored on the same rows gets the same
split, and reruns are identical. :func:`xxhash64` reproduces Spark's function
bit for bit (tested), so :func:`bias_mask` gives the split without Spark.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

TWO_POW_32 = 2**32
SPARK_HASH_SEED = 42
_M = (1 << 64) - 1
_P1, _P2, _P3 = 11400714785074694791, 14029467366897019727, 1609587929392839161
_P4, _P5 = 9650029242287828579, 2870177450012600261


def bias_threshold(bias_fraction: float) -> int:
    """The 32-bit hash threshold below which a row is val-bias."""
    return int(bias_fraction * TWO_POW_32)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M, 31) * _P1) & _M


def _avalanche(h: int) -> int:
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    return h ^ (h >> 32)


def _xxh64_bytes(data: bytes, seed: int) -> int:
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed, (seed - _P1) & _M]
        while i + 32 <= n:
            for j in range(4):
                v[j] = _round(v[j], int.from_bytes(data[i + 8 * j: i + 8 * j + 8], "little"))
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for lane in v:
            h = ((h ^ _round(0, lane)) * _P1 + _P4) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        h = (_rotl(h ^ _round(0, int.from_bytes(data[i:i + 8], "little")), 27) * _P1 + _P4) & _M
        i += 8
    if i + 4 <= n:
        h = (_rotl(h ^ ((int.from_bytes(data[i:i + 4], "little") * _P1) & _M), 23) * _P2 + _P3) & _M
        i += 4
    while i < n:
        h = (_rotl(h ^ ((data[i] * _P5) & _M), 11) * _P1) & _M
        i += 1
    return _avalanche(h)


def xxhash64(values: Iterable[object], seed: int = SPARK_HASH_SEED) -> int:
    """Spark's ``xxhash64(v1, v2, ...)`` as an unsigned 64-bit int: each value hashed with the previous hash as seed."""
    h = seed & _M
    for v in values:
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            h = _xxh64_bytes(int(v).to_bytes(8, "little", signed=True), h)
        else:
            h = _xxh64_bytes(str(v).encode("utf-8"), h)
    return h


def salt_key(salt: str) -> int:
    """The salt as a signed 64-bit long, XOR-ed into integer ids before hashing."""
    h = xxhash64((salt,))
    return h - (1 << 64) if h >= 1 << 63 else h


def split_hash(example_id: object, salt: str) -> int:
    """The unsigned 64-bit split hash of one id (see the module docstring)."""
    if isinstance(example_id, (int, np.integer)) and not isinstance(example_id, bool):
        return xxhash64((int(example_id) ^ salt_key(salt),))
    return xxhash64((salt, example_id))


def bias_mask(example_ids: Iterable[object], *, salt: str, bias_fraction: float) -> np.ndarray:
    """Boolean val-bias flags for example ids, identical to the Spark job's split."""
    t = bias_threshold(bias_fraction)
    return np.fromiter(((split_hash(e, salt) & 0xFFFFFFFF) < t for e in example_ids), dtype=bool)
