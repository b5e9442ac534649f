"""Score evaluation rows with trained CTR models into the evaluation table the metric engine reads.

Evaluation table (one row per model, run and example)::

    model string, run int, ds string, example_id long, label int, logit double

Input contract for scoring: categorical ids ``c*`` (a null or out-of-range id
scores as the field's out-of-vocabulary row) and numerics ``n*`` (a null or
NaN numeric gives a NaN logit, left for the metric engine to flag).
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import torch

from ctcalc_spark.upstream.models import CtrModel
from ctcalc_spark.upstream.train import load_model, resolve_device, torch_threads
from ctcalc_spark.errors import InputError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame as SparkDataFrame
    from pyspark.sql import SparkSession

SCORE_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("run", pa.int32()),
        ("ds", pa.string()),
        ("example_id", pa.int64()),
        ("label", pa.int32()),
        ("logit", pa.float64()),
    ]
)
SCORE_SCHEMA_DDL = "model string, run int, ds string, example_id long, label int, logit double"
KEY_COLUMNS: tuple[str, ...] = ("example_id", "ds", "label")

# One loaded model per (path, file mtime, device) per Python process: Spark
# reuses Python workers across tasks, so each worker loads each model once.
_MODEL_CACHE: dict[tuple[str, int, str], CtrModel] = {}

ModelRef = str | os.PathLike[str] | CtrModel


def score_frame(
    model: CtrModel,
    df: pd.DataFrame,
    *,
    batch_size: int = 65_536,
    device: str | torch.device | None = None,
    num_threads: int | None = 1,
) -> np.ndarray:
    """Raw logits ``z = model(c*, n*)`` as float64 ``[len(df)]``, in batches under ``torch.no_grad()``.

    ``device`` defaults to CUDA when available, else CPU; the model is moved there.
    ``num_threads`` sets torch's CPU threads for the call (``None``: torch's current
    setting); 1 by default because spinning OpenMP threads slow down many-fold
    on a busy machine (``None`` or more threads pay off on an idle many-core one).

    Example: ``z = score_frame(model, eval_df, batch_size=65_536)``; ``p = 1 / (1 + exp(-z))``.
    """
    missing = [c for c in model.cat_fields + model.num_fields if c not in df.columns]
    if missing:
        raise InputError(
            f"Expected input columns {missing} for this model; the frame has {list(df.columns)}. "
            "Score with the same columns the model was trained on."
        )
    n = len(df)
    cat = df[model.cat_fields].fillna(-1).to_numpy(dtype=np.int64) if model.cat_fields else np.zeros((n, 0), np.int64)
    num = df[model.num_fields].to_numpy(dtype=np.float32) if model.num_fields else np.zeros((n, 0), np.float32)
    with torch_threads(num_threads):
        return _score_arrays(model, cat, num, batch_size=batch_size, device=resolve_device(device))


def write_scores(
    models: Mapping[tuple[str, int], ModelRef],
    eval_df: pd.DataFrame | str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    batch_size: int = 65_536,
    device: str | torch.device | None = None,
    overwrite: bool = True,
    num_threads: int | None = 1,
) -> Path:
    """Write the evaluation table for ``{(model_name, run): model file or model}`` as Parquet partitioned by ``ds``.

    Rows of one model are written before the next is scored, so memory holds
    the evaluation frame plus one model's scores. ``out_path`` is replaced when
    ``overwrite``. The ``ds`` values live in ``ds=YYYY-MM-DD`` directory names:
    read them back as strings (in Spark set
    ``spark.sql.sources.partitionColumnTypeInference.enabled=false`` or cast).

    Example: ``write_scores({('deepfm', 0): 'm0.pt', ('deepfm', 1): 'm1.pt'}, 'eval.parquet', 'scores/')``.
    """
    if not models:
        raise InputError("Expected at least one (model_name, run) -> model entry, got an empty mapping.")
    df = pd.read_parquet(eval_df) if isinstance(eval_df, (str, os.PathLike)) else eval_df
    _require_columns(df.columns, KEY_COLUMNS, what="evaluation frame")
    out = Path(out_path)
    if out.exists():
        if not overwrite:
            raise InputError(f"Output {str(out)!r} exists; pass overwrite=True or choose another path.")
        if out.is_dir():
            shutil.rmtree(out)
        else:
            out.unlink()
    dev = resolve_device(device)
    keys = {
        "ds": pa.array(df["ds"].astype(str).to_numpy(dtype=object), pa.string()),
        "example_id": pa.array(df["example_id"].to_numpy(dtype=np.int64), pa.int64()),
        "label": pa.array(df["label"].to_numpy(dtype=np.int32), pa.int32()),
    }
    for k, ((name, run), ref) in enumerate(models.items()):
        model = _cached_model(ref, dev) if not isinstance(ref, CtrModel) else ref
        logits = score_frame(model, df, batch_size=batch_size, device=dev, num_threads=num_threads)
        table = _score_table(str(name), int(run), keys["ds"], keys["example_id"], keys["label"], logits)
        pads.write_dataset(
            table,
            out,
            format="parquet",
            partitioning=pads.partitioning(pa.schema([("ds", pa.string())]), flavor="hive"),
            basename_template=f"part-{k:05d}-{{i}}.parquet",
            existing_data_behavior="overwrite_or_ignore",
        )
    return out


def score_spark(
    spark: SparkSession,
    eval_sdf: SparkDataFrame,
    model_paths: Mapping[tuple[str, int], str | os.PathLike[str]],
    *,
    batch_size: int = 65_536,
    num_threads: int = 1,
    device: str | None = None,
) -> SparkDataFrame:
    """Score a Spark table of any size with ``mapInArrow``: one input scan, every model per Arrow batch.

    Each Python worker loads each model once (module-level cache keyed by path)
    and runs torch with ``num_threads`` threads, since Spark already runs one
    worker per core. Model files must be readable at the same path by the
    workers. Returns a DataFrame with schema ``SCORE_SCHEMA_DDL``.

    Example: ``score_spark(spark, spark.read.parquet('eval.parquet'), {('dcn', 0): '/m/dcn0.pt'})``.
    """
    import functools

    from pyspark.sql import functions as F

    if not model_paths:
        raise InputError("Expected at least one (model_name, run) -> model path, got an empty mapping.")
    entries = [(str(name), int(run), os.path.abspath(os.fspath(p))) for (name, run), p in model_paths.items()]
    cat_cols: set[str] = set()
    num_cols: set[str] = set()
    for _, _, path in entries:  # load on the driver once: fails early on a bad path, gives the input columns
        m = _cached_model(path, torch.device("cpu"))
        cat_cols.update(m.cat_fields)
        num_cols.update(m.num_fields)
    _require_columns(eval_sdf.columns, list(KEY_COLUMNS) + sorted(cat_cols | num_cols), what="evaluation DataFrame")
    selected = eval_sdf.select(
        F.col("example_id").cast("long"),
        F.col("ds").cast("string"),
        F.col("label").cast("int"),
        *[F.col(c).cast("long") for c in sorted(cat_cols)],
        *[F.col(c).cast("double") for c in sorted(num_cols)],
    )
    fn = functools.partial(
        _score_arrow_batches, entries=entries, batch_size=batch_size, num_threads=num_threads, device=device
    )
    return selected.mapInArrow(fn, SCORE_SCHEMA_DDL)


def clear_model_cache() -> None:
    """Forget the models cached in this process (e.g. after rewriting a model file in place)."""
    _MODEL_CACHE.clear()


def _score_arrow_batches(
    batches: Iterator[pa.RecordBatch],
    *,
    entries: list[tuple[str, int, str]],
    batch_size: int,
    num_threads: int,
    device: str | None,
) -> Iterator[pa.RecordBatch]:
    torch.set_num_threads(max(1, int(num_threads)))
    dev = resolve_device(device)
    models = [(name, run, _cached_model(path, dev)) for name, run, path in entries]
    for batch in batches:
        if batch.num_rows == 0:
            continue
        ds, example_id, label = batch.column("ds"), batch.column("example_id"), batch.column("label")
        for name, run, model in models:
            cat = _arrow_matrix(batch, model.cat_fields, np.int64, fill=-1)
            num = _arrow_matrix(batch, model.num_fields, np.float32, fill=None)
            logits = _score_arrays(model, cat, num, batch_size=batch_size, device=dev)
            yield _score_table(name, run, ds, example_id, label, logits).to_batches()[0]


def _arrow_matrix(batch: pa.RecordBatch, cols: list[str], dtype: type, fill: int | None) -> np.ndarray:
    out = np.empty((batch.num_rows, len(cols)), dtype=dtype)
    for j, c in enumerate(cols):
        arr = batch.column(c)
        if fill is not None:
            arr = pc.fill_null(arr, fill)
        out[:, j] = arr.to_numpy(zero_copy_only=False)  # nulls in numerics become NaN
    return out


def _score_arrays(
    model: CtrModel, cat: np.ndarray, num: np.ndarray, *, batch_size: int, device: torch.device
) -> np.ndarray:
    if batch_size < 1:
        raise InputError(f"Expected batch_size >= 1, got {batch_size}.")
    model.to(device).eval()
    n = cat.shape[0]
    out = np.empty(n, dtype=np.float64)
    cat_t, num_t = torch.from_numpy(np.ascontiguousarray(cat)), torch.from_numpy(np.ascontiguousarray(num))
    with torch.no_grad():
        for start in range(0, n, batch_size):
            sl = slice(start, start + batch_size)
            z = model(cat_t[sl].to(device, non_blocking=True), num_t[sl].to(device, non_blocking=True))
            out[sl] = z.double().cpu().numpy()
    return out


def _score_table(name: str, run: int, ds: Any, example_id: Any, label: Any, logits: np.ndarray) -> pa.Table:
    n = len(logits)
    return pa.Table.from_arrays(
        [
            pa.array(np.full(n, name, dtype=object), pa.string()),
            pa.array(np.full(n, run, dtype=np.int32), pa.int32()),
            ds,
            example_id,
            label,
            pa.array(logits, pa.float64()),
        ],
        schema=SCORE_SCHEMA,
    )


def _cached_model(ref: ModelRef, device: torch.device) -> CtrModel:
    if isinstance(ref, CtrModel):
        return ref
    path = os.path.abspath(os.fspath(ref))
    try:
        mtime = os.stat(path).st_mtime_ns
    except FileNotFoundError as e:
        raise InputError(f"Expected a model file written by save_model at {path!r}; it does not exist.") from e
    key = (path, mtime, str(device))
    model = _MODEL_CACHE.get(key)
    if model is None:
        model = load_model(path, device=device)[0]
        _MODEL_CACHE[key] = model
    return model


def _require_columns(present: Any, required: Any, *, what: str) -> None:
    present_list = list(present)
    missing = [c for c in required if c not in present_list]
    if missing:
        raise InputError(f"The {what} is missing columns {missing}; it has {present_list}.")
