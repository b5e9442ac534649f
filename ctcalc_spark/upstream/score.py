"""Score evaluation rows with trained CTR models into the evaluation table the metric engine reads.

Evaluation table (one row per model, run and example; a Delta Lake table partitioned by ``ds``)::

    model string, run int, ds string, example_id long, label int, logit double [, passthrough columns]

A table without a ds column, scored without a day given for it, is a fixed set: its evaluation table has no ds
column and no partitions (``part-*.parquet`` in the folder), and each write replaces it whole. Every write is one
Delta commit (:mod:`ctcalc_spark.upstream.scores_table`): a reader sees the table before it or after it.

Two engines, one per-batch function (:func:`score_rows`), so both give the same logits:

* :func:`score_table` (local, pyarrow + torch): reads the table, scores one ds at a time with every model
  and writes each ds partition as ``files_per_partition`` files (default 1) under new names in the table's
  folder, then one commit replaces the days.
* :func:`score_spark` + :func:`write_spark_scores` (Spark ``mapInArrow``, every model per Arrow batch):
  the input is hash-partitioned by (ds, bucket of ``files_per_partition``) so each ds partition gets at
  most that many files, written by Spark into a new folder of the table, then one commit replaces the days.

Write modes: ``partitions`` replaces the ds partitions present in the input and keeps the others;
``overwrite`` replaces the whole table; ``error`` refuses an existing table.

Both engines count, per model and run, the logits outside ``[-max_abs_logit, max_abs_logit)``
(``sanity.max_abs_logit``): :meth:`ScoreReport.extreme_lines` warns about them.

How columns become inputs (null and unseen categories, missing numerics, labels, ids, days) is stated
once in :mod:`ctcalc_spark.upstream.table`. Models trained on the synthetic ``c*``/``n*`` tables read
integer ids (a null or out-of-range id scores as the field's out-of-vocabulary row) and numerics as they
are (a null numeric gives a NaN logit, left for the metric engine to flag).
"""
from __future__ import annotations

import dataclasses
import functools
import os
import shlex
import shutil
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch

from ctcalc_spark.core.summary import DEFAULT_MAX_ABS_LOGIT
from ctcalc_spark.errors import InputError
from ctcalc_spark.storage import absolute, is_local, literal_path, local_path
from ctcalc_spark.upstream import scores_table
from ctcalc_spark.upstream.config import OUTPUT_COLUMNS, WRITE_MODES, TableColumns, TableSource
from ctcalc_spark.upstream.models import CtrModel
from ctcalc_spark.upstream.table import (
    OTHER_DAYS,
    ArrowTable,
    Encoder,
    Keys,
    check_columns,
    evaluation_keys,
    load_table_for,
    named_files,
    no_rows_error,
    require_ds_column,
)
from ctcalc_spark.upstream.train import TableModel, load_table_model, resolve_device, torch_threads

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

# One loaded model per (path, file mtime, device) per Python process: Spark
# reuses Python workers across tasks, so each worker loads each model once.
_MODEL_CACHE: dict[tuple[str, int, str], TableModel] = {}

ModelRef = str | os.PathLike[str] | CtrModel | TableModel
Entry = tuple[str, int, TableModel]
UNDATED = "undated"
"""The key of :class:`ScoreReport`'s per-day counts for an undated table (no ds column, no partitions)."""


@dataclass
class ScoreReport:
    """What a scoring call wrote: days, rows and files per day, dropped rows and per-column counts."""

    path: str
    models: list[tuple[str, int]]
    rows_per_day: dict[str, int] = field(default_factory=dict)
    files_per_day: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    whole_table: bool = False
    """True when the rows and files are those of the whole output table after the call (the Spark engine reads
    the table back), not only of the partitions this call wrote."""
    passthrough: tuple[str, ...] = ()
    """The columns copied from the input beside the scores (candidates for the evaluate job's slices)."""
    extreme: dict[tuple[str, int], tuple[int, int, float, float]] = field(default_factory=dict)
    """Per (model, run): (rows with a logit outside [-max_abs_logit, max_abs_logit), rows, lowest, highest logit)."""
    max_abs_logit: float = DEFAULT_MAX_ABS_LOGIT

    @property
    def undated(self) -> bool:
        """Whether the table written is undated (no ds column, no partitions)."""
        return UNDATED in self.rows_per_day

    @property
    def days(self) -> list[str]:
        """The ds partitions written, sorted (none for an undated table)."""
        return sorted(d for d in self.rows_per_day if d != UNDATED)

    def add_extreme(self, name: str, run: int, logits: np.ndarray) -> None:
        """Count the extreme logits of one model's scored rows (added to what the model has so far)."""
        limit = self.max_abs_logit
        n_out = int(np.count_nonzero((logits < -limit) | (logits >= limit)))
        finite = logits[np.isfinite(logits)]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (np.inf, -np.inf)
        self.merge_extreme(name, run, n_out, len(logits), lo, hi)

    def merge_extreme(self, name: str, run: int, n_extreme: int, n_rows: int, lo: float, hi: float) -> None:
        """Add one part's counts (extreme rows, rows, lowest and highest logit) to the model's."""
        old = self.extreme.get((name, run), (0, 0, np.inf, -np.inf))
        self.extreme[(name, run)] = (old[0] + n_extreme, old[1] + n_rows, min(old[2], lo), max(old[3], hi))

    def extreme_lines(self) -> list[str]:
        """The warning when some model scored logits outside [-max_abs_logit, max_abs_logit); else none."""
        from ctcalc_spark.core.findings import render
        from ctcalc_spark.core.sanity import scored_extreme

        return [render(f) for f in [scored_extreme(self.extreme, self.max_abs_logit)] if f]

    def next_step(self) -> str | None:
        """The evaluate command for the days written (the evaluation table has the evaluate job's default column
        names, so no config file is needed), and how passthrough columns become slices; None when nothing was
        written."""
        days = self.days
        if not days and not self.undated:
            return None
        span = "YYYY-MM-DD"
        if days:
            first, last = date.fromisoformat(days[0]), date.fromisoformat(days[-1])
            span = (days[0] if len(days) == 1 else f"{days[0]}..{days[-1]}" if (last - first).days + 1 == len(days)
                    else ",".join(days))
        if "://" in self.path:  # a URI: PurePath would fold its '//'
            base = self.path.rstrip("/")
            out = (base.rsplit("/", 1)[0] if base.count("/") > 2 else base) + "/eval"
        else:
            out = str(PurePath(self.path).parent / "eval")
        undated = " --set columns.ds=null" if self.undated else ""
        line = (f"next: ctcalc evaluate --set {shlex.quote('input.path=' + self.path)} "
                f"--set {shlex.quote('output.path=' + out)}{undated} --ds {span}")
        if self.undated:
            line += "\n  (the table has no dates: the one day you give to evaluate labels its output partitions)"
        if self.passthrough:
            slices = shlex.quote(f"columns.slices=[{', '.join(self.passthrough)}]")
            line += f"\n  (add --set {slices} for a metrics row per value of the passthrough columns)"
        return line

    def summary(self) -> str:
        """A few lines for a terminal."""
        days = self.days
        files = sorted(set(self.files_per_day.values()))
        where = (f"undated (no ds column), files {files}" if self.undated else
                 f"in {len(days)} ds partition(s) {days[0] if days else ''}..{days[-1] if days else ''}, files per "
                 f"partition {files}")
        lines = [
            ("the table now holds " if self.whole_table else "")
            + f"{sum(self.rows_per_day.values()):,} rows ({len(self.models)} models) {where} -> {self.path} "
            f"[{self.seconds:.2f} s]"
        ]
        if self.counts.get(OTHER_DAYS):
            lines.append(f"  input rows of other days left out (--ds): {self.counts[OTHER_DAYS]:,}")
        dropped = {k: v for k, v in self.counts.items() if k.startswith("dropped") and v}
        if dropped:
            lines.append("  input rows dropped: " + ", ".join(f"{k[9:]} {v:,}" for k, v in sorted(dropped.items())))
        other = {k: v for k, v in self.counts.items() if not k.startswith(("dropped", "rows_in", "left out")) and v}
        if other:
            lines.append("  per column (null/unseen values scored by policy): "
                         + ", ".join(f"{k} {v:,}" for k, v in sorted(other.items())))
        return "\n".join(lines)


# ---------------------------------------------------------------- one batch, both engines


def score_frame(
    model: CtrModel,
    df: pd.DataFrame,
    *,
    batch_size: int = 65_536,
    device: str | torch.device | None = None,
    num_threads: int | None = 1,
) -> np.ndarray:
    """Raw logits ``z = model(c*, n*)`` of a synthetic-layout frame as float64 ``[len(df)]``.

    ``device`` defaults to CUDA when available, else CPU; the model is moved there.
    ``num_threads`` sets torch's CPU threads for the call (``None``: torch's current
    setting); 1 by default because spinning OpenMP threads slow down many-fold
    on a busy machine (``None`` or more threads pay off on an idle many-core one).

    Example: ``z = score_frame(model, eval_df, batch_size=65_536)``; ``p = 1 / (1 + exp(-z))``.
    """
    check_columns(list(df.columns), model.cat_fields + model.num_fields, what="frame to score")
    table = pa.Table.from_pandas(df[model.cat_fields + model.num_fields], preserve_index=False)
    cat, num, _ = Encoder.raw_ids(model.cat_fields, model.num_fields).encode(table, model.cat_fields, model.num_fields)
    with torch_threads(num_threads):
        return _score_arrays(model, cat, num, batch_size=batch_size, device=resolve_device(device))


def score_rows(
    table: ArrowTable,
    keys: Keys,
    entries: Sequence[Entry],
    *,
    passthrough: Sequence[str] = (),
    batch_size: int = 65_536,
    device: torch.device,
) -> tuple[list[pa.Table], Counter[str]]:
    """One output table per model for the kept rows ``table`` (already filtered by ``keys.keep``).

    Models sharing an encoder (one training call) share one encoding of the rows. Per-column counts are
    the largest among the models' encoders (equal when they share one).
    """
    encoded: dict[tuple[str, tuple[str, ...], tuple[str, ...]], tuple[np.ndarray, np.ndarray]] = {}
    counts: Counter[str] = Counter()
    extra = [table.column(c) for c in passthrough]
    out = []
    for name, run, tm in entries:
        m = tm.model
        key = (tm.encoder.fingerprint, tuple(m.cat_fields), tuple(m.num_fields))
        if key not in encoded:
            cat, num, c = tm.encoder.encode(table, m.cat_fields, m.num_fields)
            encoded[key] = (cat, num)
            counts |= c
        cat, num = encoded[key]
        logits = _score_arrays(m, cat, num, batch_size=batch_size, device=device)
        out.append(_score_table(name, run, keys, logits, passthrough, extra))
    return out, counts


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


def _score_table(
    name: str, run: int, keys: Keys, logits: np.ndarray, passthrough: Sequence[str], extra: Sequence[Any]
) -> pa.Table:
    n = len(logits)
    arrays = [
        pa.array(np.full(n, name, dtype=object), pa.string()),
        pa.array(np.full(n, run, dtype=np.int32), pa.int32()),
        keys.ds,
        keys.example_id,
        keys.label,
        pa.array(logits, pa.float64()),
        *extra,
    ]
    return pa.Table.from_arrays(arrays, names=[*OUTPUT_COLUMNS, *passthrough])


# ---------------------------------------------------------------- models and their declarations


def _resolve(models: Mapping[tuple[str, int], ModelRef], device: torch.device) -> list[Entry]:
    if not models:
        raise InputError("Expected at least one (model_name, run) -> model entry, got an empty mapping.")
    entries = []
    for (name, run), ref in models.items():
        if isinstance(ref, TableModel):
            tm = ref
        elif isinstance(ref, CtrModel):
            tm = TableModel(ref, ref.spec, Encoder.raw_ids(ref.cat_fields, ref.num_fields), {})
        else:
            tm = _cached_model(ref, device)
        entries.append((str(name), int(run), tm))
    return entries


def key_columns(entries: Sequence[Entry], passthrough: Sequence[str] | None = None) -> TableColumns:
    """The models' declarations of the label, id and ds columns, with ``passthrough`` (default: the models').

    Models scored into one table must agree on them, since they share the table's rows and keys.
    """
    first = entries[0][2].encoder.columns
    for name, run, tm in entries[1:]:
        if tm.encoder.columns.keys() != first.keys():
            raise InputError(
                f"Models scored together must declare the same label/id/ds columns: {entries[0][0]} run "
                f"{entries[0][1]} has {first.keys()}, {name} run {run} has {tm.encoder.columns.keys()}. "
                "Score them in separate calls (ctcalc score --pipeline NAME ...)."
            )
    return first if passthrough is None else dataclasses.replace(first, passthrough=tuple(passthrough))


def required_columns(entries: Sequence[Entry], keys: TableColumns) -> list[str]:
    """Every input column the models and the key declarations name."""
    needed = [keys.label, *([keys.example_id] if keys.example_id else []), *([keys.ds] if keys.ds else []),
              *keys.passthrough]
    for _, _, tm in entries:
        needed += tm.model.cat_fields + tm.model.num_fields
    return list(dict.fromkeys(needed))


def _cached_model(ref: str | os.PathLike[str], device: torch.device) -> TableModel:
    path = os.path.abspath(os.fspath(ref))
    try:
        mtime = os.stat(path).st_mtime_ns
    except FileNotFoundError as e:
        raise InputError(f"Expected a model file written by save_model at {path!r}; it does not exist.") from e
    key = (path, mtime, str(device))
    model = _MODEL_CACHE.get(key)
    if model is None:
        model = load_table_model(path, device=device)
        _MODEL_CACHE[key] = model
    return model


def find_models(
    models_dir: str | os.PathLike[str], pipelines: Sequence[str] | None = None
) -> dict[tuple[str, int], Path]:
    """``{(name, seed): path}`` of the files ``<models_dir>/<name>/run<seed>.pt`` (as ``ctcalc train`` writes them)."""
    root = Path(models_dir)
    found: dict[tuple[str, int], Path] = {}
    for path in sorted(root.glob("*/run*.pt")):
        digits = path.stem[3:]
        if digits.isdigit() and (pipelines is None or path.parent.name in pipelines):
            found[(path.parent.name, int(digits))] = path
    if not found:
        which = f" for pipelines {list(pipelines)}" if pipelines else ""
        raise InputError(f"Expected model files <name>/run<seed>.pt under {str(root)!r}{which}, found none; "
                         "train them with 'ctcalc train' or point --models-dir at them.")
    return found


# ---------------------------------------------------------------- local engine


def score_table(
    models: Mapping[tuple[str, int], ModelRef],
    table: pa.Table | pd.DataFrame | TableSource | str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    passthrough: Sequence[str] | None = None,
    ds_value: str | None = None,
    days: Sequence[str] | None = None,
    files_per_partition: int = 1,
    mode: str = "partitions",
    batch_size: int = 65_536,
    device: str | torch.device | None = None,
    num_threads: int | None = 1,
    max_abs_logit: float = DEFAULT_MAX_ABS_LOGIT,
) -> ScoreReport:
    """Score ``table`` with ``{(model_name, run): model file or model}`` into the evaluation table at ``out_path``.

    The table is read once; each ds is scored with every model and written as ``files_per_partition``
    files under new names in ``<out_path>/ds=<day>/``, then one Delta commit adds them and replaces the days.
    The label/id/ds columns are those the models declare; ``passthrough`` columns (default: the models'
    declaration) are copied; ``ds_value`` is the day of every row when no ds column is declared (without
    it such a table is written undated, replacing the output whole). ``days`` (default: a TableSource's
    ``days``) keeps the rows of those days. Logits outside ``[-max_abs_logit, max_abs_logit)`` are counted
    per model (``report.extreme``). Memory holds the table plus one day's scores of every model.

    Example: ``score_table(find_models('models/'), TableSource('eval.csv', format='csv'), 'scores/')``.
    """
    start = time.perf_counter()
    _check_mode(mode, files_per_partition)
    out = Path(out_path)
    _refuse_existing(out, mode)
    dev = resolve_device(device)
    entries = _resolve(models, dev)
    keys_decl = key_columns(entries, passthrough)
    if days is None and isinstance(table, TableSource):
        days = table.days
    require_ds_column(keys_decl.ds, days, "the models")
    undated = keys_decl.ds is None and ds_value is None
    _refuse_mixed_layout(out, undated, mode)
    data = load_table_for(table)
    check_columns(data.column_names, required_columns(entries, keys_decl), what="evaluation table")
    keys = evaluation_keys(data, keys_decl, ds_value=ds_value, days=days)
    if days is not None and not keys.keep.any():
        raise no_rows_error(data, keys_decl.ds, days, "evaluation table")
    data = data.filter(pa.array(keys.keep)) if not keys.keep.all() else data
    report = ScoreReport(str(out), [(n, r) for n, r, _ in entries], counts=dict(keys.counts),
                         passthrough=tuple(keys_decl.passthrough), max_abs_logit=max_abs_logit)
    token = scores_table.new_token()
    counts: Counter[str] = Counter()
    written: list[scores_table.WrittenFile] = []
    schema: pa.Schema | None = None
    try:
        with torch_threads(num_threads):
            for day, day_rows, day_keys in _by_day(data, keys):
                tables, c = score_rows(day_rows, day_keys, entries, passthrough=keys_decl.passthrough,
                                       batch_size=batch_size, device=dev)
                counts.update(c)
                for (name, run, _), t in zip(entries, tables):
                    report.add_extreme(name, run, t.column("logit").to_numpy())
                day_table = pa.concat_tables(tables).drop_columns(["ds"])
                schema = day_table.schema
                key = UNDATED if day is None else day
                files = scores_table.write_day_files(out, day, day_table, files_per_partition, token)
                written += files
                report.files_per_day[key] = len(files)
                report.rows_per_day[key] = day_table.num_rows
        if schema is not None:
            scores_table.commit(out, written, schema, mode, report.days, undated)
    except BaseException:
        for f in written:
            (out / f.path).unlink(missing_ok=True)
        raise
    report.counts.update(counts)
    report.seconds = time.perf_counter() - start
    return report


def write_scores(
    models: Mapping[tuple[str, int], ModelRef],
    eval_df: pd.DataFrame | str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    batch_size: int = 65_536,
    device: str | torch.device | None = None,
    mode: str = "overwrite",
    files_per_partition: int = 1,
    num_threads: int | None = 1,
) -> Path:
    """:func:`score_table` on a frame or Parquet path, replacing the whole table by default; returns the path.

    The ``ds`` values live in ``ds=YYYY-MM-DD`` directory names: read them back as strings (in Spark set
    ``spark.sql.sources.partitionColumnTypeInference.enabled=false`` or cast).

    Example: ``write_scores({('deepfm', 0): 'm0.pt', ('deepfm', 1): 'm1.pt'}, 'eval.parquet', 'scores/')``.
    """
    score_table(models, eval_df, out_path, files_per_partition=files_per_partition, mode=mode,
                batch_size=batch_size, device=device, num_threads=num_threads)
    return Path(out_path)


def score_day(
    models: Mapping[tuple[str, int], ModelRef],
    table: pa.Table | pd.DataFrame | str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    day: str,
    **kwargs: Any,
) -> ScoreReport:
    """:func:`score_table` of one day's rows (a day's folder, file or frame) into the evaluation table at ``out_path``,
    replacing that day in one commit and keeping the others: every row is scored as the day ``day``, whatever day
    column it carries (the models' declared one is set to ``day``; without one the rows get ``day``).
    ``kwargs`` go to :func:`score_table` (not ``ds_value``, ``days`` or ``mode``).

    Example: ``score_day({('lr', 0): 'm0.pt'}, '/landing/features/2026-11-02', '/data/eval', '2026-11-02')``.
    """
    from ctcalc_spark.upstream.config import check_ds_value

    day = check_ds_value(day, "ds")
    column = key_columns(_resolve(models, resolve_device(kwargs.get("device")))).ds
    data = load_table_for(table)
    if column is not None:
        values = pa.array([day] * data.num_rows, pa.string())
        data = (data.set_column(data.schema.get_field_index(column), column, values) if column in data.column_names
                else data.append_column(column, values))
    return score_table(models, data, out_path, ds_value=day, mode="partitions", **kwargs)


def _by_day(data: pa.Table, keys: Keys) -> Iterator[tuple[str | None, pa.Table, Keys]]:
    """(ds, rows, keys) per day, days in order (one sort of the table when it holds several days); an undated
    table is one group with ds None."""
    if data.num_rows == 0:
        return
    counted = pc.value_counts(keys.ds)
    if len(counted) > 1:
        order = pc.sort_indices(keys.ds)
        data = data.take(order)
        keys = Keys(keys.keep, keys.ds.take(order), keys.example_id.take(order), keys.label.take(order), keys.counts)
        counted = pc.value_counts(keys.ds)  # in order of first appearance: sorted
    start = 0
    for day, n in zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist()):
        day_keys = Keys(keys.keep, keys.ds.slice(start, n), keys.example_id.slice(start, n),
                        keys.label.slice(start, n), keys.counts)
        yield day, data.slice(start, n), day_keys
        start += n


def _check_mode(mode: str, files_per_partition: int) -> None:
    if mode not in WRITE_MODES:
        raise InputError(f"Expected mode in {list(WRITE_MODES)}, got {mode!r}.")
    if files_per_partition < 1:
        raise InputError(f"Expected files_per_partition >= 1, got {files_per_partition}.")


def _refuse_existing(out: Path, mode: str) -> None:
    if not out.exists():
        return
    if mode == "error" and (out.is_file() or any(out.iterdir())):
        raise InputError(f"Output {str(out)!r} exists; use mode 'partitions' or 'overwrite', or another path.")
    if out.is_file():
        if mode != "overwrite":
            raise InputError(
                f"Output {str(out)!r} is a file, expected a table folder; remove it or use mode 'overwrite'."
            )
        out.unlink()


def _visible(out: Path) -> list[Path]:
    """The entries of a table folder that readers see (Spark and pyarrow leave out '_' and '.' names)."""
    return [p for p in out.iterdir() if not p.name.startswith(("_", "."))] if out.is_dir() else []


def _refuse_mixed_layout(out: Path, undated: bool, mode: str) -> None:
    """InputError for dated partitions written beside an undated table's files (mode 'partitions' keeps what is
    there, and the folder would then read as neither)."""
    if undated or mode != "partitions":
        return
    files = [p.name for p in _visible(out) if p.is_file()]
    if files:
        raise InputError(f"Output {str(out)!r} holds an undated table ({files[0]}, …: no ds= partitions); dated "
                         "partitions cannot join it. Use mode 'overwrite' (--mode overwrite) or another path.")


# ---------------------------------------------------------------- Spark engine


def score_spark(
    spark: SparkSession,
    eval_sdf: SparkDataFrame,
    model_paths: Mapping[tuple[str, int], str | os.PathLike[str]],
    *,
    passthrough: Sequence[str] | None = None,
    ds_value: str | None = None,
    days: Sequence[str] | None = None,
    files_per_partition: int | None = None,
    batch_size: int = 65_536,
    num_threads: int = 1,
    device: str | None = None,
) -> SparkDataFrame:
    """Score a Spark table of any size with ``mapInArrow``: one input scan, every model per Arrow batch.

    Each Python worker loads each model once (module-level cache keyed by path) and runs torch with
    ``num_threads`` threads, since Spark already runs one worker per core. Model files must be readable
    at the same path by the workers. With ``files_per_partition`` the input rows are first
    hash-partitioned by (day, bucket of the id) so that writing the result partitioned by ds gives at
    most that many files per ds. ``days`` keeps the rows of those days (chosen in the workers, by the rules
    of the local engine). Returns a DataFrame with the columns of ``SCORE_SCHEMA`` plus the passthrough
    columns, without ``ds`` when no ds column is declared and no ``ds_value`` given (an undated set).

    Example: ``score_spark(spark, spark.read.parquet('eval.parquet'), {('dcn', 0): '/m/dcn0.pt'})``.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import from_arrow_schema

    from ctcalc_spark.spark.names import col

    if not model_paths:
        raise InputError("Expected at least one (model_name, run) -> model path, got an empty mapping.")
    paths = [(str(name), int(run), os.path.abspath(os.fspath(p))) for (name, run), p in model_paths.items()]
    # Load on the driver once: fails early on a bad path, gives the declarations and input columns.
    entries = [(n, r, _cached_model(p, torch.device("cpu"))) for n, r, p in paths]
    keys_decl = key_columns(entries, passthrough)
    needed = required_columns(entries, keys_decl)
    check_columns(eval_sdf.columns, needed, what="evaluation DataFrame")
    require_ds_column(keys_decl.ds, days, "the models")
    if keys_decl.ds is None and ds_value is not None:
        from ctcalc_spark.upstream.config import check_ds_value

        check_ds_value(ds_value, "ds")
    # Without an id column the id hashes the whole row: every column goes to the workers. Columns travel
    # under plain positional names (mapInArrow cannot resolve names with dots) and get theirs back there.
    names = list(needed if keys_decl.example_id else eval_sdf.columns)
    source = eval_sdf
    if files_per_partition is not None:
        if files_per_partition < 1:
            raise InputError(f"Expected files_per_partition >= 1, got {files_per_partition}.")
        day = F.substring(col(keys_decl.ds).cast("string"), 1, 10) if keys_decl.ds else F.lit(ds_value)
        row_key = [col(keys_decl.example_id)] if keys_decl.example_id else [col(c) for c in names]
        source = eval_sdf.repartition(day, F.pmod(F.xxhash64(*row_key), F.lit(files_per_partition)))
    selected = source.select(*[col(c).alias(f"_in{i}") for i, c in enumerate(names)])
    by_name = {f.name: f for f in eval_sdf.schema.fields}
    schema = T.StructType(from_arrow_schema(SCORE_SCHEMA).fields
                          + [T.StructField(c, by_name[c].dataType, True) for c in keys_decl.passthrough])
    fn = functools.partial(
        _score_arrow_batches, entries=paths, names=names, keys_decl=keys_decl, ds_value=ds_value,
        days=None if days is None else tuple(days), batch_size=batch_size, num_threads=num_threads, device=device,
    )
    scored = selected.mapInArrow(fn, schema)
    return scored.drop("ds") if keys_decl.ds is None and ds_value is None else scored


def read_spark_table(spark: SparkSession, source: TableSource) -> SparkDataFrame:
    """The table of ``source`` read by Spark as :func:`~ctcalc_spark.upstream.table.read_table` reads it locally
    (CSV: every column a string, an unquoted empty field null, ``_c0, _c1, ...`` without a header; with a header,
    each file's header is checked against the table's columns: Spark reads CSV columns by position, and a file
    with its columns in another order fails instead of being read into the wrong columns)."""
    if source.path is None:
        raise InputError("Expected a table path, got none; set the table's 'path' in the config or pass it as a flag.")
    reader = spark.read.format(source.format)
    path = absolute(str(source.path))
    named = named_files(local_path(path), source.format) if is_local(path) else None
    if source.format == "csv":
        # escape: a quote inside a quoted field written twice ("Blue ""XL"" shoe"), as pyarrow reads it locally
        reader = reader.options(header=source.csv_header, sep=source.csv_delimiter, inferSchema=False,
                                enforceSchema=not source.csv_header, encoding=source.csv_encoding, escape='"')
    try:  # with a README beside the files: the same files as read_table reads
        return (reader.load(literal_path(path)) if named is None
                else reader.option("basePath", path).load([literal_path(n) for n in named]))
    except Exception as e:  # AnalysisException: path missing or unreadable
        raise InputError(f"Cannot read {source.path!r} as {source.format}: {str(e).splitlines()[0]}") from e


def write_spark_scores(scored: SparkDataFrame, out_path: str, *, mode: str = "partitions") -> None:
    """Write :func:`score_spark`'s result into the Delta table at ``out_path`` (a local folder): Spark writes the
    files partitioned by ds in a new ``spark-<token>/`` folder of the table, then one commit adds them and
    replaces the days they hold (``partitions``) or the whole table; an undated result (no ds column) replaces
    the whole table."""
    from urllib.parse import unquote

    from pyspark.sql.pandas.types import to_arrow_schema

    _check_mode(mode, 1)
    dated = "ds" in scored.columns
    out = Path(absolute(str(out_path)))
    if not is_local(str(out_path)):
        raise InputError(f"The Spark engine writes the evaluation table to a local or shared folder, got {out_path!r}; "
                         "score with --engine local for an object store path.")
    _refuse_existing(out, mode)
    _refuse_mixed_layout(out, not dated, mode)
    sub = f"spark-{scores_table.new_token()}"
    writer = scored.write.partitionBy("ds") if dated else scored.write
    writer.mode("append").parquet(str(out / sub))  # a new folder; Spark Connect takes no "errorifexists"
    written = []
    for folder, _, names in os.walk(out / sub):
        for name in sorted(n for n in names if n.endswith(".parquet") and not n.startswith(("_", "."))):
            rel = os.path.relpath(os.path.join(folder, name), out).replace(os.sep, "/")
            day = next((unquote(p[3:]) for p in rel.split("/") if p.startswith("ds=")), None)
            written.append(scores_table.WrittenFile(rel, day, pq.read_metadata(out / rel).num_rows))
    schema = to_arrow_schema(scored.drop("ds").schema if dated else scored.schema)
    try:
        scores_table.commit(out, written, schema, mode, {f.day for f in written if f.day}, not dated)
    except BaseException:
        shutil.rmtree(out / sub, ignore_errors=True)
        raise


def spark_table_report(spark: SparkSession, out_path: str, models: Sequence[tuple[str, int]], *,
                       max_abs_logit: float = DEFAULT_MAX_ABS_LOGIT) -> ScoreReport:
    """Rows and files per ds partition, and extreme logits per model and run, of the whole evaluation table at
    ``out_path`` after a write (one native aggregation, public APIs); with mode ``partitions`` it also counts days
    this call did not write, and says so."""
    from pyspark.sql import functions as F

    from ctcalc_spark.spark.delta_input import read_delta

    table = read_delta(spark, spark.read, absolute(str(out_path)))
    dated = "ds" in table.columns
    logit, limit = F.col("logit"), float(max_abs_logit)
    groups = table.groupBy(*(["ds"] if dated else []), "model", "run").agg(
        F.count(F.lit(1)).alias("n"), F.sum(((logit < -limit) | (logit >= limit)).cast("long")).alias("n_extreme"),
        F.min(logit).alias("lo"), F.max(logit).alias("hi")).collect()
    report = ScoreReport(out_path, list(models), whole_table=True, max_abs_logit=max_abs_logit,
                         passthrough=tuple(c for c in table.columns if c not in (*OUTPUT_COLUMNS, "ds")))
    rows: Counter[str] = Counter()
    for g in groups:
        rows[str(g["ds"]) if dated else UNDATED] += int(g["n"])
        report.merge_extreme(g["model"], int(g["run"]), int(g["n_extreme"] or 0), int(g["n"]), float(g["lo"]),
                             float(g["hi"]))
    files: Counter[str] = Counter()
    for f in table.inputFiles():
        part = next((p for p in f.split("/") if p.startswith("ds=")), None)
        if part is not None or not dated:
            files[part[3:] if part is not None else UNDATED] += 1
    report.rows_per_day, report.files_per_day = dict(rows), dict(files)
    return report


def _score_arrow_batches(
    batches: Iterator[pa.RecordBatch],
    *,
    entries: list[tuple[str, int, str]],
    names: list[str],
    keys_decl: TableColumns,
    ds_value: str | None,
    days: tuple[str, ...] | None,
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
        batch = pa.RecordBatch.from_arrays(batch.columns, names=names)
        keys = evaluation_keys(batch, keys_decl, ds_value=ds_value, days=days)
        rows = batch.filter(pa.array(keys.keep)) if not keys.keep.all() else batch
        if rows.num_rows == 0:
            continue
        tables, _ = score_rows(rows, keys, models, passthrough=keys_decl.passthrough, batch_size=batch_size,
                               device=dev)
        for t in tables:
            yield from t.to_batches()
