"""Upstream torch side: synthetic CTR data, your own tables, CTR models, training and scoring.

Every name loads its module on first use (``from ctcalc_spark.upstream import train_model``), so
importing this package for the data generator does not import torch, and
``python -m ctcalc_spark.upstream.data`` runs without the package having loaded it first.
"""
from __future__ import annotations

import importlib
from typing import Any

_MODULES = {
    "ctcalc_spark.upstream.data": ("generate_ctr", "make_world", "write_ctr_tables", "generate_census_like",
                                   "write_census_like"),
    "ctcalc_spark.upstream.config": ("TableColumns", "TableSource", "EncodingConfig", "UpstreamConfig"),
    "ctcalc_spark.upstream.table": ("Encoder", "fit_encoder", "read_table"),
    "ctcalc_spark.upstream.models": ("ModelSpec", "CtrModel", "build_model"),
    "ctcalc_spark.upstream.train": ("train_model", "train_arrays", "train_table_models", "TableModel", "save_model",
                                    "load_model", "load_table_model"),
    "ctcalc_spark.upstream.score": ("score_frame", "score_table", "score_day", "write_scores", "score_spark",
                                    "write_spark_scores", "find_models"),
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ctcalc_spark.upstream' has no attribute {name!r}")
