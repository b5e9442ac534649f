"""Upstream torch side: synthetic CTR data, CTR models, training and scoring into the evaluation table.

``data`` needs numpy and pandas only; the torch modules load on first use of
their names (``from ctcalc_spark.upstream import train_model``), so importing this
package for the data generator does not import torch.
"""
from __future__ import annotations

import importlib
from typing import Any

from ctcalc_spark.upstream.data import generate_ctr, make_world, write_ctr_tables

_LAZY = {
    "ModelSpec": "ctcalc_spark.upstream.models",
    "CtrModel": "ctcalc_spark.upstream.models",
    "build_model": "ctcalc_spark.upstream.models",
    "train_model": "ctcalc_spark.upstream.train",
    "save_model": "ctcalc_spark.upstream.train",
    "load_model": "ctcalc_spark.upstream.train",
    "score_frame": "ctcalc_spark.upstream.score",
    "write_scores": "ctcalc_spark.upstream.score",
    "score_spark": "ctcalc_spark.upstream.score",
}

__all__ = ["generate_ctr", "make_world", "write_ctr_tables", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ctcalc_spark.upstream' has no attribute {name!r}")
