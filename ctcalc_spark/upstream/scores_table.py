"""The scorer's evaluation table as a Delta Lake table: data files written in place, days replaced in one commit.

Both scoring engines write their Parquet files under new names inside the table's folder (``ds=<day>/`` for a
dated table), where no reader of the table looks yet, then one Delta commit adds them and removes the files of
the days they replace (``mode='partitions'``), of the whole table (``'overwrite'``). A reader of the table sees
the version before the commit or the one after it, never a day missing or doubled; Spark's Parquet reader on
the folder itself would also read the replaced files (docs/storage.md). A write that fails before its commit
removes its files; the replaced files stay until a vacuum (``ctcalc tables vacuum`` or ``DeltaTable.vacuum``).
"""
from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ctcalc_spark.errors import InputError

DS = "ds"


@dataclass(frozen=True)
class WrittenFile:
    """A data file written inside the table's folder, not yet in its log."""

    path: str  # relative to the table's folder, '/'-separated
    day: str | None  # its ds partition; None in an undated table
    rows: int


def new_token() -> str:
    """A part of the new files' names no other write uses."""
    return uuid.uuid4().hex[:12]


def is_table(out: Path) -> bool:
    return (out / "_delta_log").is_dir()


def write_day_files(out: Path, day: str | None, table: pa.Table, files: int, token: str) -> list[WrittenFile]:
    """``table`` (without its ds column) as ``files`` Parquet files in the day's partition folder of ``out`` (the
    folder itself for an undated table), under names with ``token``."""
    import numpy as np

    sub = "" if day is None else f"{DS}={day}/"
    (out / sub).mkdir(parents=True, exist_ok=True)
    k = max(1, min(files, table.num_rows))
    bounds = np.linspace(0, table.num_rows, k + 1).astype(np.int64)
    written = []
    for i in range(k):
        name = f"{sub}part-{token}-{i:05d}.parquet"
        part = table.slice(int(bounds[i]), int(bounds[i + 1] - bounds[i]))
        pq.write_table(part, out / name, row_group_size=1_000_000)
        written.append(WrittenFile(name, day, part.num_rows))
    return written


def commit(out: Path, written: Sequence[WrittenFile], schema: pa.Schema, mode: str, days: Iterable[str],
           undated: bool) -> None:
    """One Delta commit adding ``written`` to the table at ``out`` (created by it when new): replacing ``days``
    (mode 'partitions' of a dated table) or the whole table; the files are removed when the commit fails."""
    from deltalake import DeltaTable, write_deltalake
    from deltalake.transaction import AddAction

    partition_by = None if undated else [DS]
    full = schema if undated else schema.append(pa.field(DS, pa.string()))
    try:
        if not is_table(out):  # version 0: the table's schema and partitioning, no rows
            write_deltalake(str(out), full.empty_table(), partition_by=partition_by, mode="error")
        table = DeltaTable(str(out))
        if sorted(table.metadata().partition_columns) != sorted(partition_by or []):
            have = "a dated table (ds partitions)" if table.metadata().partition_columns else \
                "an undated table (no ds partitions)"
            raise InputError(f"Output {str(out)!r} holds {have}; this write is {'undated' if undated else 'dated'}. "
                             "Use another path, or remove the table first.")
        actions = [AddAction(f.path, os.path.getsize(out / f.path), {} if f.day is None else {DS: f.day},
                             int(time.time() * 1000), True, json.dumps({"numRecords": f.rows})) for f in written]
        filters = [(DS, "in", sorted(set(days)))] if mode == "partitions" and not undated else None
        table.create_write_transaction(actions, "overwrite", full, partition_by=partition_by,
                                       partition_filters=filters)
    except BaseException:
        for f in written:
            (out / f.path).unlink(missing_ok=True)
        raise


def table_files(out: Path) -> list[tuple[str | None, str]]:
    """(day, file URI) of each data file of the table's current version."""
    from deltalake import DeltaTable

    table = DeltaTable(str(out))
    actions = table.get_add_actions(flatten=True).to_pylist()
    key = f"partition.{DS}"
    return [(a.get(key), a["path"]) for a in actions]
