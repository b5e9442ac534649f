"""Train a CTR model for a fixed number of epochs (one by default), reproducibly by seed; save and load it."""
from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import torch
from torch import nn
from tqdm.auto import tqdm

from ctcalc_spark.core.windows import day_runs
from ctcalc_spark.errors import ConfigError, InputError
from ctcalc_spark.upstream.config import EncodingConfig, TableColumns
from ctcalc_spark.upstream.data import categorical_columns, numeric_columns
from ctcalc_spark.upstream.models import ARCHS, CtrModel, ModelSpec, build_model
from ctcalc_spark.upstream.table import (
    OTHER_DAYS,
    Encoder,
    check_columns,
    fit_encoder,
    label_values,
    near_constant_features,
    select_days,
)

logger = logging.getLogger(__name__)

MODEL_FORMAT = "ctcalc_spark.upstream/1"


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """``device`` if given, else ``cuda`` when available, else ``cpu``. A device this torch cannot use (``cuda``
    with a CPU build or no GPU visible, ``mps`` off Apple silicon, a typo) is a ConfigError naming what there is;
    torch itself failed later with `AssertionError: Torch not compiled with CUDA enabled`."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ConfigError(f"Unknown torch device {str(device)!r} ({str(e).splitlines()[0]}); use cpu, cuda or "
                          "cuda:<index>.") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            why = ("this torch is a CPU build" if torch.version.cuda is None
                   else f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU")
            raise ConfigError(f"Device {str(device)!r} asked for, but {why}: use --device cpu (or leave it out: cuda "
                              "when available, else cpu), or run where a GPU and torch's CUDA build are.")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(f"Device {str(device)!r} asked for, but torch sees {torch.cuda.device_count()} GPU(s) "
                              f"(cuda:0..cuda:{torch.cuda.device_count() - 1}).")
    elif dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ConfigError(f"Device {str(device)!r} asked for, but MPS is not available here; use --device cpu.")
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"Device {str(device)!r}: ctcalc trains and scores on cpu, cuda or mps.")
    return dev


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(n)`` and restore the previous count; ``None`` changes nothing."""
    if n is None:
        yield
        return
    if n < 1:
        raise ConfigError(f"Expected num_threads >= 1 or None, got {n}.")
    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train_model(
    spec: ModelSpec,
    train_df: pd.DataFrame,
    *,
    seed: int,
    device: str | torch.device | None = None,
    progress: bool = True,
    field_cardinalities: Mapping[str, int] | None = None,
    init_bias: bool = True,
    num_threads: int | None = 1,
) -> tuple[CtrModel, dict[str, Any]]:
    """Train on a synthetic-layout frame: integer ids in ``c0..``, numerics in ``n0..``, 0/1 ``label``.

    ``field_cardinalities`` defaults to ``max(id) + 1`` per ``c*`` column. For a table with other column
    names or non-integer categories, use :func:`train_table_models`. The other arguments are those of
    :func:`train_arrays`.

    Example: ``model, meta = train_model(ModelSpec(arch='fm'), df, seed=3, progress=False)``.
    """
    cat_cols, num_cols = categorical_columns(train_df), numeric_columns(train_df)
    labels = _validate_frame(train_df, cat_cols + num_cols, need_label=True)
    if field_cardinalities is None:
        field_cardinalities = {c: int(train_df[c].max()) + 1 for c in cat_cols}
    missing = sorted(set(field_cardinalities) - set(cat_cols))
    if missing:
        raise InputError(
            f"field_cardinalities names {missing}, missing from train_df columns {list(train_df.columns)}."
        )
    cat_fields = list(field_cardinalities)
    cat = train_df[cat_fields].to_numpy(dtype=np.int64) if cat_fields else np.zeros((len(train_df), 0), np.int64)
    num = train_df[num_cols].to_numpy(dtype=np.float32) if num_cols else np.zeros((len(train_df), 0), np.float32)
    return train_arrays(spec, cat, num, labels, field_cardinalities=field_cardinalities, numeric_fields=num_cols,
                        seed=seed, device=device, progress=progress, init_bias=init_bias, num_threads=num_threads)


def train_arrays(
    spec: ModelSpec,
    cat: np.ndarray,
    num: np.ndarray,
    labels: np.ndarray,
    *,
    field_cardinalities: Mapping[str, int],
    numeric_fields: Sequence[str],
    seed: int,
    device: str | torch.device | None = None,
    progress: bool = True,
    init_bias: bool = True,
    num_threads: int | None = 1,
    numeric_stats: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[CtrModel, dict[str, Any]]:
    """Minimise mean BCE-with-logits with Adam for ``spec.epochs`` epochs on encoded inputs.

    ``cat`` holds ids ``[n, len(field_cardinalities)]`` (columns in the mapping's order; ids outside
    ``[0, cardinality)`` train the field's out-of-vocabulary row), ``num`` raw numerics
    ``[n, len(numeric_fields)]``, ``labels`` 0/1. ``seed`` fixes the initialisation, dropout and the data
    order, so on CPU the same seed gives bit-identical weights. With ``init_bias`` the global intercept
    starts at ``logit(mean(label))``. ``numeric_stats`` (mean, std of ``symlog(x)`` per numeric field)
    defaults to the statistics of ``num``. ``num_threads`` sets torch's CPU threads for the call (``None``:
    leave as is); 1 is the default because these small models gain little from more, and spinning OpenMP
    threads slow down many-fold on a busy machine. Returns ``(model, meta)`` with ``model`` in eval mode on
    ``device``.
    """
    numeric_fields = list(numeric_fields)
    cat_fields = list(field_cardinalities)
    if cat.shape != (len(labels), len(cat_fields)) or num.shape != (len(labels), len(numeric_fields)):
        raise InputError(
            f"Expected cat [{len(labels)}, {len(cat_fields)}] and num [{len(labels)}, {len(numeric_fields)}], "
            f"got {list(cat.shape)} and {list(num.shape)}."
        )
    if len(labels) == 0:
        raise InputError("Expected a non-empty training set, got 0 rows.")
    dev = resolve_device(device)
    init_seed, order_seed = (int(s) for s in np.random.SeedSequence(int(seed)).generate_state(2))
    cuda_devices = [dev.index or 0] if dev.type == "cuda" else []
    n = len(labels)
    start = time.perf_counter()
    with torch.random.fork_rng(devices=cuda_devices), torch_threads(num_threads):
        torch.manual_seed(init_seed)
        model = build_model(spec, field_cardinalities, numeric_fields)
        cat_idx = [cat_fields.index(f) for f in model.cat_fields]
        num_idx = [numeric_fields.index(f) for f in model.num_fields]
        cat_t = torch.from_numpy(np.ascontiguousarray(cat[:, cat_idx], dtype=np.int64))
        num_t = torch.from_numpy(np.ascontiguousarray(num[:, num_idx], dtype=np.float32))
        y_t = torch.from_numpy(np.asarray(labels, dtype=np.float32))
        if num_idx:
            if numeric_stats is None:  # symlog mean and std of this training set (as the model's input sees it)
                x = np.asarray(num[:, num_idx], dtype=np.float32).astype(np.float64)
                t = np.sign(x) * np.log1p(np.abs(x))
                mean, std = t.mean(axis=0), t.std(axis=0)
            else:
                mean, std = numeric_stats[0][num_idx], numeric_stats[1][num_idx]
            model.set_numeric_stats(torch.from_numpy(np.asarray(mean)).float(),
                                    torch.from_numpy(np.asarray(std)).float())
        rate = float(np.mean(labels))
        if init_bias and 0.0 < rate < 1.0:
            with torch.no_grad():
                model.bias.fill_(float(np.log(rate / (1.0 - rate))))
        model.to(dev)
        cat_t, num_t, y_t = cat_t.to(dev), num_t.to(dev), y_t.to(dev)
        optimizer = torch.optim.Adam(_param_groups(model, spec.l2), lr=spec.lr)
        loss_fn = nn.BCEWithLogitsLoss()
        order_gen = torch.Generator().manual_seed(order_seed)
        steps_per_epoch = (n + spec.batch_size - 1) // spec.batch_size
        model.train()
        steps, loss_sum, loss_rows = 0, torch.zeros((), device=dev, dtype=torch.float64), 0
        bar = tqdm(total=steps_per_epoch * spec.epochs, disable=not progress, desc=f"train {spec.arch}", unit="batch")
        for epoch in range(spec.epochs):
            perm = torch.randperm(n, generator=order_gen).to(dev)
            if epoch == spec.epochs - 1:
                loss_sum.zero_()
                loss_rows = 0
            for b in range(steps_per_epoch):
                idx = perm[b * spec.batch_size : (b + 1) * spec.batch_size]
                if spec.batch_norm and idx.numel() < 2:
                    continue  # BatchNorm cannot train on one row; drop a 1-row tail batch
                loss = loss_fn(model(cat_t[idx], num_t[idx]), y_t[idx])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                steps += 1
                if epoch == spec.epochs - 1:
                    loss_sum += loss.detach().double() * idx.numel()
                    loss_rows += idx.numel()
                bar.update(1)
                if progress and steps % 50 == 0:
                    bar.set_postfix(loss=f"{loss.item():.4f}")
        bar.close()
        model.eval()
    seconds = time.perf_counter() - start
    meta: dict[str, Any] = {
        "seed": int(seed),
        "n_train_rows": int(n),
        "train_seconds": round(seconds, 3),
        "steps": steps,
        "train_base_rate": rate,
        "last_epoch_train_log_loss": float(loss_sum.item() / max(loss_rows, 1)),
        "final_bias": float(model.bias.detach().cpu().item()),
        "device": str(dev),
        "torch_version": torch.__version__,
    }
    return model, meta


def save_model(
    path: str | Path,
    model: CtrModel,
    spec: ModelSpec,
    meta: Mapping[str, Any] | None = None,
    *,
    encoder: Encoder | None = None,
) -> Path:
    """Write ``{format, spec, config, state_dict, meta[, encoder]}`` with ``torch.save`` (atomic rename).

    ``encoder`` (column declarations, vocabularies, numeric statistics and fills) makes the file enough to
    score a new table; without it the model reads integer ids from the columns it was built with.
    Returns the path.

    Example: ``save_model('/tmp/m.pt', model, spec, meta)`` then ``load_model('/tmp/m.pt')``.
    """
    try:
        plain_meta = json.loads(json.dumps(dict(meta or {})))
    except TypeError as e:
        raise ConfigError(f"Expected meta of JSON-plain values (str, int, float, bool, None, list, dict): {e}") from e
    payload = {
        "format": MODEL_FORMAT,
        "spec": spec.to_dict(),
        "config": model.config,
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "meta": plain_meta,
    }
    if encoder is not None:
        payload["encoder"] = encoder.to_dict()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    torch.save(payload, tmp)
    os.replace(tmp, out)
    return out


@dataclass
class TableModel:
    """A model with what it needs to score a table: its spec, its encoder and its training record."""

    model: CtrModel
    spec: ModelSpec
    encoder: Encoder
    meta: dict[str, Any]


def load_model(
    path: str | Path, *, device: str | torch.device | None = None
) -> tuple[CtrModel, ModelSpec, dict[str, Any]]:
    """Load with ``torch.load(weights_only=True)``; returns ``(model in eval mode on device, spec, meta)``."""
    loaded = load_table_model(path, device=device)
    return loaded.model, loaded.spec, loaded.meta


def load_table_model(path: str | Path, *, device: str | torch.device | None = None) -> TableModel:
    """The model of a file from :func:`save_model` with its encoder (a raw-id encoder for files without one)."""
    try:
        payload = torch.load(Path(path), map_location="cpu", weights_only=True)
    except FileNotFoundError as e:
        raise InputError(f"Expected a model file written by save_model at {str(path)!r}; it does not exist.") from e
    if not isinstance(payload, dict) or payload.get("format") != MODEL_FORMAT:
        got = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise InputError(f"Expected a {MODEL_FORMAT!r} file from save_model at {str(path)!r}, got format {got!r}.")
    spec = ModelSpec.from_dict(payload["spec"])
    cfg = payload["config"]
    model = build_model(spec, cfg["field_cardinalities"], cfg["numeric_fields"])
    model.load_state_dict(payload["state_dict"])
    model.to(resolve_device(device)).eval()
    if "encoder" in payload:
        encoder = Encoder.from_dict(payload["encoder"])
    else:
        encoder = Encoder.raw_ids(list(cfg["field_cardinalities"]), list(cfg["numeric_fields"]))
    return TableModel(model, spec, encoder, dict(payload["meta"]))


def model_file(models_dir: str | Path, name: str, seed: int) -> Path:
    """Where the model of pipeline ``name`` trained with ``seed`` lives: ``<dir>/<name>/run<seed>.pt``."""
    return Path(models_dir) / name / f"run{int(seed)}.pt"


def train_table_models(
    specs: Mapping[str, ModelSpec],
    table: pa.Table,
    columns: TableColumns,
    *,
    seeds: Sequence[int],
    encoding: EncodingConfig | None = None,
    encoder: Encoder | None = None,
    models_dir: str | Path | None = None,
    device: str | torch.device | None = None,
    num_threads: int | None = 1,
    progress: bool = False,
    log: Any = None,
    days: Sequence[str] | None = None,
) -> dict[tuple[str, int], TableModel]:
    """Train every pipeline of ``specs`` once per seed on a table with declared columns (any names).

    ``days`` keeps the rows of those days (``columns.ds``; ``--ds``). Rows with a null label are dropped
    (counted in ``meta['counts']``); the encoder (vocabularies, numeric statistics: see
    :mod:`ctcalc_spark.upstream.table`) is fitted once on the remaining rows unless given, and the table is
    encoded once for every model. Features constant or nearly so over those rows are named in a warning and in
    ``meta['near_constant']``. With ``models_dir`` each model is saved to ``<models_dir>/<name>/run<seed>.pt``
    with its encoder. Returns ``{(name, seed): TableModel}``.

    Example: ``train_table_models({'fm': ModelSpec(arch='fm')}, read_table(src), cols, seeds=[0, 1, 2])``.
    """
    if not specs or not seeds:
        raise ConfigError(f"Expected at least one pipeline and one seed, got {list(specs)} and {list(seeds)}.")
    check_columns(table.column_names, [*columns.features, columns.label], what="training table")
    rows_in = table.num_rows
    table, other_days = select_days(table, columns.ds, days, what="training table")
    labels = label_values(table.column(columns.label), columns)
    keep = ~np.isnan(labels)
    kept = table.filter(pa.array(keep))
    encoder = encoder or fit_encoder(kept, columns, encoding)
    flat = near_constant_features(kept, columns)
    if flat:
        logger.warning("%d feature(s) constant or nearly so over the %s training rows: %s. They teach the model "
                    "nothing, and a numeric one's std is floored at 1e-6, so another value at scoring gives an "
                    "extreme logit. Drop them from columns.categorical / columns.numeric, or train on days where "
                    "they vary.", len(flat), f"{kept.num_rows:,}", "; ".join(f"{c!r} ({w})" for c, w in flat.items()))
    cat_fields = list(encoder.cardinalities)
    cat, num, counts = encoder.encode(kept, cat_fields, list(columns.numeric))
    counts.update({"rows_in": rows_in, OTHER_DAYS: other_days, "dropped: null label": int((~keep).sum())})
    labels = labels[keep]
    stats = encoder.numeric_stats(columns.numeric)
    out: dict[tuple[str, int], TableModel] = {}
    for name, spec in specs.items():
        for seed in seeds:
            model, meta = train_arrays(spec, cat, num, labels, field_cardinalities=encoder.cardinalities,
                                       numeric_fields=columns.numeric, seed=seed, device=device, progress=progress,
                                       num_threads=num_threads, numeric_stats=stats)
            meta.update(model_name=name, counts=dict(counts), near_constant=flat,
                        train_days=None if days is None else day_runs(list(days), shown=10),
                        vocab_sizes={c: len(v or ()) for c, v in encoder.vocab.items()})
            if models_dir is not None:
                save_model(model_file(models_dir, name, seed), model, spec, meta, encoder=encoder)
            if log is not None:
                t = meta["train_seconds"]
                log(f"      {name} seed {seed}: {t:.{2 if t < 1 else 1}f} s, last-epoch train log loss "
                    f"{meta['last_epoch_train_log_loss']:.4f}")
            out[(name, int(seed))] = TableModel(model, spec, encoder, meta)
    return out


def _validate_frame(df: pd.DataFrame, feature_cols: list[str], *, need_label: bool) -> np.ndarray:
    if len(df) == 0:
        raise InputError("Expected a non-empty training frame, got 0 rows.")
    if need_label and "label" not in df.columns:
        raise InputError(f"Expected a 'label' column with values 0/1; the frame has {list(df.columns)}.")
    labels = df["label"].to_numpy()
    distinct = np.unique(labels)
    if not np.isin(distinct, [0, 1]).all():
        raise InputError(
            f"Expected column 'label' with values 0/1, got {len(distinct)} distinct values: {distinct[:10].tolist()}."
        )
    if not feature_cols:
        raise InputError(f"Expected feature columns c0.. and/or n0..; the frame has {list(df.columns)}.")
    nan_cols = [c for c in feature_cols if df[c].isna().any()]
    if nan_cols:
        raise InputError(
            f"Expected no missing values in feature columns, found some in {nan_cols}; fill or drop them first."
        )
    return labels


def _param_groups(model: nn.Module, l2: float) -> list[dict[str, Any]]:
    bn = {id(p) for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) for p in m.parameters()}
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        # Biases, batch-norm affine parameters and the global intercept are not regularised.
        if id(p) in bn or name == "bias" or name.endswith(".bias") or name.startswith("cross_b"):
            no_decay.append(p)
        else:
            decay.append(p)
    return [{"params": decay, "weight_decay": l2}, {"params": no_decay, "weight_decay": 0.0}]


def _main(argv: list[str] | None = None) -> None:
    """Time one training run on generated data: ``python -m ctcalc_spark.upstream.train --n-rows 200000``."""
    import argparse

    from ctcalc_spark.upstream.data import generate_ctr

    parser = argparse.ArgumentParser(description=_main.__doc__)
    parser.add_argument("--n-rows", type=int, default=200_000)
    parser.add_argument("--arch", default=ModelSpec.arch, choices=list(ARCHS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    df = generate_ctr(args.n_rows, seed=args.seed)
    spec = ModelSpec(arch=args.arch)
    _, meta = train_model(spec, df, seed=args.seed, device=args.device, progress=True)
    print(f"trained {spec.arch} on {args.n_rows} rows in {meta['train_seconds']:.2f} s on {meta['device']} "
          f"(last-epoch train log loss {meta['last_epoch_train_log_loss']:.4f})")


if __name__ == "__main__":
    _main()
