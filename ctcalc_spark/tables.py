"""The output tables: Delta Lake tables under ``output.path`` (written and read with ``deltalake``, no JVM), or
catalog tables (``output.database`` / ``output.tables``, through Spark's own writers).

A run replaces the partitions it computed with **one Delta commit per table** (``overwrite`` with a predicate
on the partition columns), every row carrying the run's ``run_id``, which the commit's metadata names too. A table
ctcalc creates carries the property ``ctcalc.table=<table>``; ctcalc writes no other table.

For other writers a run's tables behave as one commit (docs/storage.md#how-a-run-replaces-partitions): a run pins
every table's version as it starts; before its first commit it checks every table (ctcalc's, writable by this
deltalake, no other run's commit on its days since the pin) and stops having written nothing; a commit refused
after its earlier ones landed is followed by commits that put back the rows those replaced. So a run that fails
changes nothing, and one that succeeds keeps its rows until a later successful run replaces them.

Readers see each table before or after a commit. Between a run's commits a day's summaries and metrics come from
different runs: :meth:`OutputStore.require_one_run` waits such days out, then tells a live run (exit 1) from one
stopped between its commits (exit 4). Every deltalake or Arrow failure is one line naming the table, the version
and the cause (:func:`ctcalc_spark.delta_errors.delta_failure`).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import re
import uuid
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from ctcalc_spark.config import JobConfig, OutputConfig, parse_days
from ctcalc_spark.errors import (
    ConcurrentRunError,
    ConfigError,
    CtcalcError,
    InputError,
    RunInProgressError,
    listed,
)
from ctcalc_spark.delta_errors import check_features, first_line, named_errors
from ctcalc_spark.storage import absolute, is_local, local_path

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

PARTITIONS: dict[str, tuple[str, ...]] = {
    "metrics": ("ds",),
    "summaries": ("ds",),
    "rolling": ("window_spec", "ds"),
    "calibrated_exact": ("window_spec", "ds"),
    "stream_summaries": ("window", "batch_id"),
    "stream_counts": ("window", "batch_id"),
    "stream_metrics": ("window",),
    "stream_rolling": ("window",),
    "stream_batches": (),
}
"""Partition columns of each output table, outermost first."""

RUN_ID = "run_id"
JOB_TABLES = {"evaluate": ("summaries", "metrics", "calibrated_exact"), "rolling": ("rolling",)}
"""The tables each batch job writes (checked before its work)."""
_PARTITION_VALUE = re.compile(r"^[A-Za-z0-9_.:+-]+$")
MARK = "ctcalc.table"
"""The Delta table property that marks a table as ctcalc's and names which one (``ctcalc.table=metrics``)."""
_NO_ROWS = {"CREATE TABLE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES", "OPTIMIZE", "CHECKPOINT"}
"""Operations of a commit that changes no row a reader sees."""
_DATA_FILE = re.compile(r"^part-\d{5}-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}-c000(\.\w+)*\.parquet$")
"""The name deltalake gives the data files it writes (a run's files before its first commit look like this)."""
MID_WRITE_WAIT_S = 3.0
"""How long a reader waits for days that a run is committing to become whole."""
LIVE_GAP_S = 600.0
"""Days still mixed whose newest commit is younger than this are a live run's (see OutputStore.require_one_run)."""


def new_run_id() -> str:
    """A run id that sorts by start time: ``20261123T041512Z-1a2b3c4d``."""
    return f"{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


def arrow_table(frame: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """A driver frame as an Arrow table of ``schema`` (of :func:`ctcalc_spark.core.state.arrow_schema`); columns
    missing from ``frame`` are null. None and NaN become null (the finalizers use None for undefined values)."""
    import pandas as pd
    import pyarrow as pa

    arrays = []
    for field in schema:
        name, kind = field.name, field.type
        col = frame[name] if name in frame else pd.Series([None] * len(frame), dtype=object)
        if pa.types.is_float64(kind):
            arrays.append(pa.array(pd.to_numeric(col, errors="raise").astype("float64"), type=kind, from_pandas=True))
        elif pa.types.is_int64(kind):
            arrays.append(pa.array(pd.to_numeric(col, errors="raise").astype("Int64"), type=kind, from_pandas=True))
        elif pa.types.is_boolean(kind):
            arrays.append(pa.array(col.astype("boolean"), type=kind, from_pandas=True))
        elif pa.types.is_string(kind):
            try:
                arrays.append(pa.array(col, type=kind, from_pandas=True))
            except (pa.ArrowTypeError, pa.ArrowInvalid):  # numbers or other objects: their text
                arrays.append(pa.array(col.astype(object).where(col.notna(), None).map(
                    lambda v: v if v is None or isinstance(v, str) else str(v)), type=kind, from_pandas=True))
        else:
            raise TypeError(f"unknown column type {kind} for {name!r}")
    return pa.Table.from_arrays(arrays, schema=schema)


def _mixed_lines(mixed: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``'ds=<day>: summaries by <runs>, metrics by <runs>'`` for each day of :meth:`OutputStore._mixed_runs`."""
    return [f"ds={day}: " + ", ".join(f"{t} by {listed(r)}" for t, r in held.items()) for day, held in mixed.items()]


class OutputStore:
    """The output tables of one configuration: where they are, reading them, writing them in transactions.

    ``OutputStore(cfg)`` builds the backend the output names: a :class:`DeltaStore` (Delta tables under
    ``output.path``, through deltalake) or a :class:`CatalogStore` (catalog tables, through Spark's own readers and
    writers). What both do is here, with the handling of Delta tables, which every output has: the stream's
    ``stream_batches`` is a Delta table under ``output.path`` in both. A backend says where each table is
    (:meth:`_location`), which tables are Delta tables (:meth:`_is_delta`) and how its other tables are read.

    ``as_of``: read every path table as it was at that Delta version of the metrics table (an int) or at that
    time (a timezone-aware datetime); writes are refused.
    """

    catalog = False
    """Whether the output's tables are catalog tables."""

    def __new__(cls, cfg: JobConfig | OutputConfig | None = None, *args: Any, **kwargs: Any) -> OutputStore:
        if cls is OutputStore:
            output = cfg.output if isinstance(cfg, JobConfig) else cfg
            cls = CatalogStore if output is not None and output.catalog else DeltaStore
        return super().__new__(cls)

    def __init__(self, cfg: JobConfig | OutputConfig, spark: SparkSession | None = None, *,
                 as_of: int | dt.datetime | None = None) -> None:
        self.output = cfg.output if isinstance(cfg, JobConfig) else cfg
        self.spark = spark
        self.root = absolute(self.output.path)
        self.as_of = as_of
        self._as_of_ms: int | None = None
        self._held: dict[str, DeltaTable | None] = {}

    # ---- where -----------------------------------------------------------------------------------
    @property
    def storage_options(self) -> dict[str, str] | None:
        return dict(self.output.storage_options) or None

    def location(self, table: str) -> str:
        """The folder (path mode) or catalog name of a logical output table."""
        if table not in PARTITIONS:
            raise ConfigError(f"Unknown output table {table!r}; known: {sorted(PARTITIONS)}.")
        if table == "stream_batches":
            return f"{self.root}/_stream/batches"
        return self._location(table)

    def _location(self, table: str) -> str:
        """Where the backend keeps ``table`` (one of :data:`PARTITIONS` other than stream_batches)."""
        raise NotImplementedError

    def _openable(self, loc: str) -> str:
        """``loc``, when deltalake can open it: a local path holding '[' or ']' makes deltalake 1.6 panic."""
        if is_local(loc) and any(c in loc for c in "[]"):
            raise ConfigError(f"output.path {self.output.path!r} holds '[' or ']', which deltalake (the Delta tables' "
                              "library) cannot open a table under. Choose an output.path without them.")
        return loc

    def _is_delta(self, table: str) -> bool:
        """Whether ``table`` is a Delta table read and written with deltalake."""
        raise NotImplementedError

    def _session(self, why: str) -> SparkSession:
        if self.spark is None:
            raise ConfigError(f"{why} needs a Spark session (catalog tables).")
        return self.spark

    @contextlib.contextmanager
    def holding(self, table: str) -> Iterator[None]:
        """Inside the block, every read of Delta table ``table`` (and :meth:`delta`) is of the one version opened as it
        starts: the table is opened once, not at each read, and a commit of another run meanwhile is not seen."""
        if table in self._held or not self._is_delta(table):
            yield
            return
        self._held[table] = self.delta(table)
        try:
            yield
        finally:
            del self._held[table]

    def delta(self, table: str) -> DeltaTable | None:
        """The Delta table (at ``as_of`` where set), or None when there is none; the one held (:meth:`holding`)."""
        from deltalake import DeltaTable

        if table in self._held:
            return self._held[table]
        loc = self.location(table)
        where = self._openable(loc)
        try:
            found = DeltaTable.is_deltatable(where, storage_options=self.storage_options)
        except (OSError, ValueError, RuntimeError) as e:  # deltalake's errors of a store it cannot reach
            raise ConfigError(
                f"Cannot open the {table} table {loc!r}: {str(e).splitlines()[0][:300]}. Give deltalake what reaches "
                "that store: output.storage_options (credentials, region, endpoint) or the environment variables it "
                "reads (docs/storage.md#object-stores).") from None
        if not found:
            self._check_layout(table)
            return None
        with named_errors(table, loc):
            t = DeltaTable(loc, storage_options=self.storage_options)
            if self.as_of is None:
                return t
            return self._at(t, table)

    def _at(self, table: DeltaTable, name: str) -> DeltaTable | None:
        """``table`` as of :attr:`as_of`: its latest version committed at or before that time (a version of the
        metrics table names the time of that commit, so that every table is read at the same moment)."""
        if self._as_of_ms is None:
            self._as_of_ms = (_version_ms(self.location("metrics"), self.as_of, self.storage_options)
                              if isinstance(self.as_of, int) else round(self.as_of.timestamp() * 1000))
        limit = self._as_of_ms
        versions = [e["version"] for e in table.history() if e["timestamp"] <= limit]
        if not versions:
            return None  # the table did not exist yet then
        table.load_as_version(max(versions))
        return table

    # ---- reading ---------------------------------------------------------------------------------
    def exists(self, table: str) -> bool:
        return self.delta(table) is not None

    def partitions(self, table: str) -> list[dict[str, str]]:
        """The partitions present in a table, as {column: value} dicts, sorted."""
        parts = PARTITIONS[table]
        found = self._partition_rows(table)
        return sorted(({k: str(p[k]) for k in parts} for p in found if all(p.get(k) is not None for k in parts)),
                      key=lambda p: tuple(p[k] for k in parts))

    def _partition_rows(self, table: str) -> list[dict[str, Any]]:
        """The partitions of ``table`` as its store lists them."""
        t = self.delta(table)
        with named_errors(table, self.location(table), None if t is None else t.version()):
            return [] if t is None else t.partitions()

    def days(self, table: str, **where: str) -> list[str]:
        """The ds values present in a table (optionally within other partition values, e.g. window_spec)."""
        return sorted({p["ds"] for p in self.partitions(table) if all(p.get(k) == v for k, v in where.items())})

    def read(self, table: str, *, days: Sequence[str] | None = None,
             where: Mapping[str, Sequence[str]] | None = None, with_run_id: bool = False,
             task: str | None = None, columns: Sequence[str] | None = None,
             categories: bool = False, distinct: bool = False) -> pd.DataFrame:
        """A table (or its ``days`` / ``where`` part) as pandas, partition columns as strings; empty if absent.

        ``columns``: only these (default: all, the ``run_id`` only ``with_run_id``). ``task``: the summaries must
        be that task's (InputError naming the days another task's job wrote). ``categories``: text columns as
        pandas categoricals (a small code per row instead of a pointer to a Python string). ``distinct``: each
        combination of the ``columns``' values once (in no particular order).
        """
        conds = {k: [str(v) for v in values] for k, values in (where or {}).items()}
        if days is not None:
            conds["ds"] = [str(d) for d in days]
        also: list[str] = []
        if task is not None and table == "summaries" and columns is not None:
            from ctcalc_spark.core.finalize import SUMMARY_TYPES

            # the other tasks' own columns where the table has them, so that the check below can name the task
            own = SUMMARY_TYPES.get(task, {})
            also = [n for t, kinds in SUMMARY_TYPES.items() if t != task for n in kinds if n not in own]
        frame = self._read_rows(table, conds, with_run_id=with_run_id, columns=columns, also=also,
                                categories=categories, distinct=distinct)
        if task is not None and table == "summaries" and not frame.empty:
            self._check_summary_rows(frame, task)
        return frame

    def _read_rows(self, table: str, conds: Mapping[str, Sequence[str]], *, with_run_id: bool,
                   columns: Sequence[str] | None, categories: bool, distinct: bool,
                   also: Sequence[str] = ()) -> pd.DataFrame:
        """The rows of :meth:`read`, before its check of the summaries' task; ``also``: columns read besides
        ``columns`` where the table has them."""
        import pandas as pd

        t = self.delta(table)
        if t is None:
            return pd.DataFrame(columns=list(columns or []))
        have = [f.name for f in t.schema().fields]
        if columns is None:
            columns = [n for n in have if with_run_id or n != RUN_ID]
        else:
            columns = [*columns, *(n for n in also if n in have and n not in columns)]
        with named_errors(table, self.location(table), t.version()):
            return _read_delta(t, columns, conds, categories=categories, distinct=distinct)

    def _check_summary_rows(self, frame: pd.DataFrame, task: str) -> None:
        """InputError when summaries rows lack ``task``'s values: days written by a job of another task (an output
        shared by two tasks' configs)."""
        import numpy as np

        from ctcalc_spark.core.finalize import SUMMARY_TYPES

        if task not in SUMMARY_TYPES:
            return
        shared = {n for t, kinds in SUMMARY_TYPES.items() if t != task for n in kinds}
        names = [n for n in SUMMARY_TYPES[task] if n not in shared]  # binary: bin, label, ...; not count, weight
        missing = [n for n in names if n not in frame.columns]
        if missing:
            foreign = frame
        else:
            unset = np.logical_and.reduce([frame[n].isna().to_numpy() for n in names])
            if not unset.any():
                return
            foreign = frame[unset]
        days = sorted(foreign["ds"].astype(str).unique()) if "ds" in foreign else []
        shown = listed(days)
        other = [t for t, kinds in SUMMARY_TYPES.items() if t != task and all(  # by the columns this task lacks
            n in foreign.columns and foreign[n].notna().all() for n in kinds if n not in SUMMARY_TYPES[task])]
        by = f"a {other[0]} job" if other else "a job of another task"
        if other and len(foreign) == len(frame):  # nothing of this task at all: most likely the config's task
            raise InputError(
                f"The summaries of ds={shown or '?'} under {self.location('summaries')!r} are {other[0]} summaries, "
                f"and this config's task is {task}: if they are the outputs you mean, set task: {other[0]} (with "
                f"its columns, as the evaluate job had them); otherwise give each task its own output (output.path).")
        raise InputError(
            f"The summaries of ds={shown or '?'} under {self.location('summaries')!r} are not {task} summaries (no "
            f"{names[0]!r} values): {by} wrote those days into this output. Run `ctcalc evaluate` for them again "
            f"with this config, or give each task its own output (output.path).")

    def runs(self, table: str, days: Sequence[str] | None = None, **where: str) -> dict[str, list[str]]:
        """{ds: the run ids its rows carry} for ``table`` (a day written by one run has one). For a table
        partitioned by ``ds`` alone, from the commits' metadata (each commit names its run and days; no row is
        read), else from the rows."""
        if self._is_delta(table) and PARTITIONS[table] == ("ds",) and not where:
            found = self._runs_from_history(table, days)
            if found is not None:
                return found
        frame = self.read(table, days=days, where={k: [v] for k, v in where.items()}, columns=["ds", RUN_ID]) \
            if self._is_delta(table) else self.read(table, days=days, with_run_id=True)
        if frame.empty or RUN_ID not in frame:
            return {}
        return {str(d): sorted(set(g)) for d, g in frame.groupby("ds")[RUN_ID]}

    def _runs_from_history(self, table: str, days: Sequence[str] | None) -> dict[str, list[str]] | None:
        """{ds: [run id]} of the days the table holds, each from the latest commit that wrote it; None when a
        commit that may have written one of them does not say (not written by ctcalc)."""
        t = self.delta(table)
        if t is None:
            return {}
        with named_errors(table, self.location(table), t.version()):
            held = {p["ds"] for p in t.partitions()}
            history = t.history()
        wanted = held if days is None else held & {str(d) for d in days}
        out: dict[str, list[str]] = {}
        for entry in history:
            if entry["version"] > t.version() or str(entry.get("operation", "")) in _NO_ROWS:
                continue  # a later version than the one read (as_of), or a commit that changes no row
            try:
                written = _days_of(entry["days"]) if RUN_ID in entry and "days" in entry else None
            except ConfigError:
                written = None
            if written is None:
                return None
            for day in written:
                if day in wanted and day not in out:
                    out[day] = [entry[RUN_ID]]
            if len(out) == len(wanted):
                break
        return out if len(out) == len(wanted) else None

    def check_days(self, days: Sequence[str] | None = None,
                   tables: Sequence[str] = ("summaries", "metrics")) -> list[str]:
        """Days whose ``tables`` (those that hold the day) were written by different runs, or a table's day by
        several: a run killed between its commits, or two runs' rows. Empty when each day is one run's."""
        return _mixed_lines(self._mixed_runs(days, tables))

    def _mixed_runs(self, days: Sequence[str] | None, tables: Sequence[str]) -> dict[str, dict[str, Any]]:
        """{day: {table: its run ids of the day}} of the days :meth:`check_days` reports, in day order."""
        found = {t: self.runs(t, days) for t in tables if self.exists(t)}
        mixed = {}
        for day in sorted({d for runs in found.values() for d in runs}):
            held = {t: runs[day] for t, runs in found.items() if day in runs}
            if len({r for runs in held.values() for r in runs}) > 1:
                mixed[day] = held
        return mixed

    def require_one_run(self, days: Sequence[str] | None = None,
                        tables: Sequence[str] = ("summaries", "metrics")) -> None:
        """Wait out a live run's commits, then fail when :meth:`check_days` still finds days whose tables come from
        different runs: a reader would combine them without knowing.

        A run commits its tables one after the other within moments (its work is done before its first commit),
        so days still mixed after :data:`MID_WRITE_WAIT_S` whose newest commit is younger than
        :data:`LIVE_GAP_S` are a run that is writing now (RunInProgressError, exit 1: run the reader again);
        older, a run stopped between its commits (InputError, exit 4: evaluate those days again)."""
        import time

        mixed = self._mixed_runs(days, tables)
        waited = 0.0
        while mixed and waited < MID_WRITE_WAIT_S:
            time.sleep(0.2)
            waited += 0.2
            mixed = self._mixed_runs(days, tables)
        if not mixed:
            return
        problems, bad = _mixed_lines(mixed), list(mixed)
        from ctcalc_spark.core.windows import day_runs

        age = self._newest_commit_age(bad, tables)
        shown = f"The {' and '.join(tables)} of {len(bad)} day(s) under {self.root!r} were written by different runs " \
                f"({listed(problems, 3, '; ')})"
        if age is not None and age < LIVE_GAP_S:
            raise RunInProgressError(
                f"{shown}: a run is committing those days now (its latest commit {age:.0f} s ago). Run this command "
                "again once that run has ended; its days are then whole.")
        raise InputError(
            f"{shown}: a run stopped between its commits, or two runs' rows. Evaluate those "
            f"days again (`ctcalc evaluate --ds {day_runs(bad, shown=len(bad)).replace(', ', ',')}`), which "
            "replaces each day whole, then run this command again.")

    def _newest_commit_age(self, days: Sequence[str], tables: Sequence[str]) -> float | None:
        """Seconds since the newest commit of ``tables`` that wrote one of ``days`` (None: none says)."""
        import time

        newest = None
        for table in tables:
            if not self._is_delta(table) or self.as_of is not None:
                continue
            for entry in self.history(table, 50):
                try:
                    written = set(_days_of(entry["days"])) if "days" in entry else set()
                except ConfigError:
                    continue
                if written & set(days):
                    newest = max(newest or 0, int(entry["timestamp"]))
                    break
        return None if newest is None else max(0.0, time.time() - newest / 1000)

    def history(self, table: str, limit: int | None = None) -> list[dict[str, Any]]:
        """A path table's commits, newest first (version, timestamp, operation, run_id, job, days)."""
        t = self.delta(table) if self._is_delta(table) else None
        with named_errors(table, self.location(table)):
            return [] if t is None else t.history(limit)

    # ---- checks before work ---------------------------------------------------------------------------
    def check_databases(self) -> None:
        """For catalog outputs: fail before any work when a database the tables go to does not exist."""

    def _check_writable(self) -> None:
        """Before a job's scan: ConfigError when the backend's tables cannot be written."""

    def check_before_work(self, job: str, days: Sequence[str] = (), scope: str | None = None,
                          task: str | None = None) -> None:
        """Before a job's scan: the outputs can be written, they are Delta tables (or none yet) and they hold
        ``task``'s tables."""
        self.check_databases()
        self._check_writable()
        mine = JOB_TABLES.get(job, tuple(PARTITIONS))
        for table in PARTITIONS:
            if not self._is_delta(table):
                continue
            if table in mine:
                t = self.delta(table)  # reachable, a Delta table or none (else ConfigError: the earlier layout, ...)
                if t is not None:
                    self._check_owned(table, t)
                    check_features(table, self.location(table), t)
            elif is_local(self.root) and not os.path.isdir(
                    os.path.join(local_path(self.location(table)), "_delta_log")):
                self._check_layout(table)  # another job's table: a folder look, no table load
        if task is not None:
            self._check_task(task)

    def _check_layout(self, table: str) -> None:
        """ConfigError for a table folder in ctcalc's earlier layout (Parquet partition folders, no Delta log) or
        one that is no table; a warning for the data files of a run killed before its first commit (no table's
        rows: the first commit leaves them out, and ``ctcalc tables vacuum --apply`` removes them)."""
        if not is_local(self.root):
            return
        folder = local_path(self.location(table))
        if not os.path.isdir(folder):
            return
        entries = [e for e in os.listdir(folder) if not e.startswith((".", "_"))]
        if not entries:
            return
        keys = PARTITIONS[table]
        if keys and all(e.startswith(f"{keys[0]}=") or e.startswith("ds=") for e in entries):
            if _killed_first_run(folder):
                log.warning("The %s folder %r holds data files of a run stopped before its first commit (no Delta "
                            "log): they are no table's rows and are not read; the next commit leaves them out, and "
                            "`ctcalc tables vacuum --apply` removes them.", table, folder)
                return
            raise ConfigError(
                f"output.path {self.output.path!r} holds the {table!r} table in ctcalc's earlier layout (Parquet "
                f"partition folders without a Delta log). Convert the output once with `ctcalc tables convert "
                f"--set output.path={self.output.path}`, then run the job again.")
        raise ConfigError(
            f"output.path {self.output.path!r} has a {table!r} folder that is not a Delta table (it holds "
            f"{listed([repr(e) for e in sorted(entries)], 3)}). Set output.path to a new folder, or move it aside.")

    def _check_owned(self, table: str, t: DeltaTable) -> None:
        """ConfigError when the Delta table ``t`` is not ctcalc's ``table``: it lacks the ``ctcalc.table`` property
        (or names another table) and its shape is not ctcalc's. A table of ctcalc's shape without the property (one
        written before ctcalc marked its tables) gets it, by a commit that changes no row."""
        loc = self.location(table)
        with named_errors(table, loc, t.version()):
            meta = t.metadata()
            mark = (meta.configuration or {}).get(MARK)
            if mark == table:
                return
            names = [f.name for f in t.schema().fields]
            ours = mark is None and list(meta.partition_columns) == list(PARTITIONS[table]) and RUN_ID in names
            if ours and table in ("metrics", "summaries"):
                from ctcalc_spark.core.finalize import METRIC_TYPES, SUMMARY_TYPES, task_of_columns

                ours = task_of_columns(names, METRIC_TYPES if table == "metrics" else SUMMARY_TYPES) is not None
            if ours:
                t.alter.set_table_properties({MARK: table}, raise_if_not_exists=False)
                return
        what = f"ctcalc's {mark} table" if mark else "a Delta table ctcalc did not write (no 'ctcalc.table' property" \
            f", partitions {list(meta.partition_columns)}, {len(names)} columns)"
        raise ConfigError(
            f"The folder {loc!r} holds {what}, where this output's {table} table goes: ctcalc writes only its own "
            f"tables. Set output.path to a folder of ctcalc's own, or move that table aside.")

    def _check_task(self, task: str) -> None:
        """ConfigError when the metrics or summaries table holds another task's columns."""
        from ctcalc_spark.core.finalize import METRIC_TYPES, SUMMARY_TYPES, task_of_columns

        for table, kinds in (("metrics", METRIC_TYPES), ("summaries", SUMMARY_TYPES)):
            try:
                columns = self._columns(table)
            except ConfigError:
                raise
            except Exception as e:  # noqa: BLE001 - unreadable here: the writes themselves will say so
                log.debug("cannot read the columns of the %s table: %s", table, e)
                continue
            found = task_of_columns(columns or (), kinds)
            if found is None or found == task or (table == "summaries" and task not in kinds):
                continue
            raise ConfigError(
                f"The {table} table {self.location(table)!r} holds {found} outputs, and this job's task is {task}: "
                f"its {task} rows would replace partitions of this output, and {found} jobs reading it would then "
                "fail. Give each task its own output (output.path, or output.database / output.tables).")

    def _columns(self, table: str) -> list[str] | None:
        t = self.delta(table)
        return None if t is None else [f.name for f in t.schema().fields]

    # ---- writing ---------------------------------------------------------------------------------
    def transaction(self, job: str, scope: str | None = None) -> Transaction:
        """One run's writes: a run id, and the versions of the tables it pins (:meth:`Transaction.pin`)."""
        if self.as_of is not None:
            raise ConfigError("Outputs read as of an earlier version cannot be written.")
        return Transaction(self, job, scope)


class DeltaStore(OutputStore):
    """The output tables as Delta tables under ``output.path`` (a local folder or object storage), read and written
    with deltalake."""

    def _location(self, table: str) -> str:
        return f"{self.root}/{table}"

    def _is_delta(self, table: str) -> bool:
        return True

    def _check_writable(self) -> None:
        if is_local(self.root):
            from ctcalc_spark.pathsafe import unwritable_reason

            why = unwritable_reason(local_path(self.root))
            if why is not None:
                raise ConfigError(f"output.path {self.output.path!r} cannot hold the outputs: {why}, so the job "
                                  "would fail in its first write. Set output.path to a folder this job can create "
                                  "and write to.")


class CatalogStore(OutputStore):
    """The output tables as tables of the Spark session's catalog (``output.database`` / ``output.tables``), read
    and written with Spark's own readers and writers; ``stream_batches`` stays a Delta table under
    ``output.path``."""

    catalog = True

    def _location(self, table: str) -> str:
        if table in self.output.tables:
            return self.output.tables[table]
        return f"{self.output.database}.{self.output.table_prefix}{table}"

    def _is_delta(self, table: str) -> bool:
        return table == "stream_batches"

    def exists(self, table: str) -> bool:
        if self._is_delta(table):
            return super().exists(table)
        return bool(self._session("Checking a catalog table").catalog.tableExists(self.location(table)))

    def _partition_rows(self, table: str) -> list[dict[str, Any]]:
        if self._is_delta(table):
            return super()._partition_rows(table)
        spark = self._session("Listing catalog partitions")
        name = self.location(table)
        if not spark.catalog.tableExists(name):
            return []
        return [r.asDict() for r in spark.table(name).select(*PARTITIONS[table]).distinct().collect()]

    def _read_rows(self, table: str, conds: Mapping[str, Sequence[str]], *, with_run_id: bool,
                   columns: Sequence[str] | None, categories: bool, distinct: bool,
                   also: Sequence[str] = ()) -> pd.DataFrame:
        import pandas as pd
        from pyspark.sql import functions as F

        if self._is_delta(table):
            return super()._read_rows(table, conds, with_run_id=with_run_id, columns=columns, also=also,
                                      categories=categories, distinct=distinct)
        spark = self._session(f"Reading {table}")
        name = self.location(table)
        if not spark.catalog.tableExists(name):
            frame = pd.DataFrame()
        else:
            df = spark.table(name)
            for col, values in conds.items():
                df = df.where(F.col(col).cast("string").isin(list(values)))
            frame = (df if with_run_id else df.drop(RUN_ID)).toPandas()
        if distinct:
            frame = frame[list(columns or frame.columns)].drop_duplicates(ignore_index=True)
        if categories:
            frame = frame.astype({c: "category" for c in frame.columns if frame[c].dtype == object})
        return frame

    def _columns(self, table: str) -> list[str] | None:
        if self._is_delta(table):
            return super()._columns(table)
        if not self.exists(table):
            return None
        return list(self._session("Reading a table's schema").table(self.location(table)).columns)

    def check_databases(self) -> None:
        spark = self._session("Checking the output database")
        names = [self.location(t) for t in PARTITIONS if not self._is_delta(t)]
        databases = {n.rsplit(".", 1)[0] for n in names if "." in n}
        missing = sorted(d for d in databases if not spark.catalog.databaseExists(d))
        if missing:
            raise ConfigError(
                f"The output database(s) {missing} do not exist in the session's catalog (output.database / "
                f"output.tables). Create them first (e.g. CREATE DATABASE {missing[0]}) or name existing ones; "
                "the jobs create missing tables, not databases.")

    def write_catalog(self, plan: _Plan) -> None:
        """Replace the partitions of the catalog table of ``plan`` that its rows hold (Spark's own writers)."""
        from ctcalc_spark.spark.catalog import write_catalog

        write_catalog(self._session(f"Writing {plan.table}"), plan.loc, plan.data, PARTITIONS[plan.table],
                      self.output)


class Transaction:
    """One run's writes: each table's partitions replaced by one Delta commit (see the module docstring)."""

    def __init__(self, store: OutputStore, job: str, scope: str | None = None) -> None:
        self.store = store
        self.job = job
        self.scope = scope
        self.run_id = new_run_id()
        self.versions: dict[str, int | None] = {}

    def pin(self, *tables: str) -> None:
        """Remember the current version of ``tables`` (each written at most once by this run): a commit of
        another run on the same partitions after this moment makes this run's write of that table fail."""
        for table in tables:
            if table not in self.versions and self.store._is_delta(table):
                t = self.store.delta(table)
                self.versions[table] = None if t is None else t.version()

    def write(self, table: str, frame: pd.DataFrame, schema: pa.Schema) -> str:
        """Replace ``table``'s partitions that ``frame`` holds by its rows of ``schema`` (plus the run id);
        returns where."""
        return self.write_all([(table, frame, schema)])[0]

    def write_all(self, items: Sequence[tuple[str, pd.DataFrame, pa.Schema | None]],
                  app: tuple[str, int] | None = None, metadata: Mapping[str, str] | None = None) -> list[str]:
        """Write each (table, frame, schema) in order, one commit each; returns their locations.

        Every table is checked before the first commit: that it is ctcalc's, that this ``deltalake`` can write it,
        and that no other run committed on this run's partitions since the pin. A commit refused after this
        run's earlier ones landed (a run that committed in between) is followed by a commit of each earlier table
        that puts back the rows it replaced: a run that fails leaves its partitions as they were.

        ``app``: (application id, version) recorded in each commit (Delta app transactions: a stream's batch id);
        a table whose version for that application was already at least ``version`` when it was pinned is not
        written again (a replayed batch). ``metadata``: more entries for each commit's metadata."""
        from ctcalc_spark.spark import interrupt

        self.pin(*(t for t, _, _ in items))
        plans = []
        for table, frame, schema in items:
            if schema is None:
                raise TypeError("A frame needs its column types.")
            plans.append(self._plan(table, frame, schema, app, metadata or {}))
        with interrupt.deferred():  # a signal lets the run's commits all finish (no day of two runs), then stops it
            for plan in plans:
                if plan.data is not None and plan.delta:
                    self._check(plan)
            done: list[_Plan] = []
            for plan in plans:
                if plan.data is None:
                    continue
                try:
                    self._commit(plan)
                except CtcalcError as e:
                    if done:
                        raise type(e)(f"{e} {self._undo(done)}") from None
                    raise
                done.append(plan)
        return [p.loc for p in plans]

    def done_before(self, table: str, app: tuple[str, int]) -> bool:
        """Whether ``table`` held a commit of application ``app[0]`` at version ``app[1]`` or later when pinned."""
        self.pin(table)
        version = self.versions.get(table)
        if version is None:
            return False
        from deltalake import DeltaTable

        loc = self.store.location(table)
        with named_errors(table, loc, version):
            done = DeltaTable(loc, version=version, storage_options=self.store.storage_options) \
                .transaction_version(app[0])
        return done is not None and done >= app[1]

    def _plan(self, table: str, frame: pd.DataFrame, schema: pa.Schema,
              app: tuple[str, int] | None, metadata: Mapping[str, str]) -> _Plan:
        """What one table's commit writes and replaces (``data`` None: nothing to write): ``schema``'s columns
        other than the partition columns, the run id, then the partition columns (all text)."""
        import pyarrow as pa

        store = self.store
        loc = store.location(table)
        parts = PARTITIONS[table]
        values = frame[list(parts)].astype(str).drop_duplicates() if parts and len(frame) else None
        if values is not None:
            bad = [v for v in values.to_numpy().ravel() if not _PARTITION_VALUE.match(v)]
            if bad:
                raise InputError(f"Partition value(s) {sorted(set(bad))[:5]} of {table} are not safe folder names "
                                 "(letters, digits and _ . : + - only).")
        plan = _Plan(table, loc, store._is_delta(table))
        if frame.empty or (app is not None and plan.delta and self.done_before(table, app)):
            return plan
        full = {**{f.name: f.type for f in schema if f.name not in parts}, RUN_ID: pa.string(),
                **{p: pa.string() for p in parts}}
        plan.data = arrow_table(frame.assign(**{RUN_ID: self.run_id}), pa.schema(list(full.items())))
        plan.predicate = _predicate(values) if values is not None else None
        plan.partitions = 1 if values is None else len(values)
        plan.days = sorted(set(frame["ds"].astype(str))) if "ds" in frame and "ds" in parts else None
        plan.meta = {RUN_ID: self.run_id, "job": self.job, **({"scope": self.scope} if self.scope else {}),
                     **({"days": _day_text(plan.days)} if plan.days else {}), **metadata}
        plan.app = app
        return plan

    def _check(self, plan: _Plan) -> None:
        """Before this run's first commit: the table is ctcalc's, this deltalake can write it, and no other run
        committed on this run's days since the pin (ConcurrentRunError: nothing written yet)."""
        store, table = self.store, plan.table
        t = store.delta(table)
        if t is None:
            return
        store._check_owned(table, t)
        check_features(table, plan.loc, t)
        plan.base = t.version()
        pinned = self.versions.get(table)
        if plan.days is None or pinned == plan.base:
            return  # tables not partitioned by day: Delta's own conflict check at the commit
        with named_errors(table, plan.loc, plan.base):
            entries = t.history(plan.base - (-1 if pinned is None else pinned))
        for entry in entries:
            if entry.get(RUN_ID) == self.run_id or str(entry.get("operation", "")) in _NO_ROWS:
                continue
            scope = entry.get("scope")
            if scope is not None and self.scope is not None and scope != self.scope:
                continue  # another window spec's partitions
            try:
                theirs = set(_days_of(entry["days"])) if "days" in entry else None
            except ConfigError:
                theirs = None
            if theirs is None or theirs & set(plan.days):
                by = entry.get(RUN_ID) or "a writer other than ctcalc"
                raise self._overtaken(table, plan.loc, plan.days, f"version {entry['version']} by {by}")

    def _commit(self, plan: _Plan) -> None:
        store = self.store
        if not plan.delta:
            assert isinstance(store, CatalogStore)
            store.write_catalog(plan)
            return
        from deltalake import CommitProperties, DeltaTable, Transaction as AppTransaction, write_deltalake
        from deltalake.exceptions import CommitFailedError

        if plan.base is None:
            plan.base = self._create(plan)
        props = CommitProperties(custom_metadata=plan.meta, app_transactions=None if plan.app is None else [
            AppTransaction(plan.app[0], plan.app[1])])
        parts = list(PARTITIONS[plan.table])
        with named_errors(plan.table, plan.loc, plan.base, writing=True):
            try:
                target = DeltaTable(plan.loc, version=plan.base, storage_options=store.storage_options)
                write_deltalake(target, plan.data, mode="overwrite" if parts else "append",
                                partition_by=parts or None, predicate=plan.predicate, schema_mode="merge",
                                storage_options=store.storage_options, commit_properties=props,
                                writer_properties=_writer_properties(plan.data, plan.partitions))
            except CommitFailedError as e:
                raise self._overtaken(plan.table, plan.loc, plan.days, f"Delta said: {first_line(e)}") from None
            plan.version = _version_of(DeltaTable(plan.loc, storage_options=store.storage_options), self.run_id)

    def _create(self, plan: _Plan) -> int:
        """Create the table (version 0, no rows, marked ``ctcalc.table``) unless another run just did; its version."""
        from deltalake import DeltaTable

        store = self.store
        with named_errors(plan.table, plan.loc, None, writing=True):
            try:
                DeltaTable.create(self.store._openable(plan.loc), schema=plan.data.schema, mode="error",
                                  partition_by=list(PARTITIONS[plan.table]) or None,
                                  configuration={MARK: plan.table}, raise_if_key_not_exists=False,
                                  storage_options=store.storage_options)
            except Exception as e:  # noqa: BLE001 - another writer created it first: use theirs when it is ctcalc's
                t = store.delta(plan.table)
                if t is None:
                    raise
                log.debug("the %s table was created by another run: %s", plan.table, e)
        self._check(plan)
        return 0 if plan.base is None else plan.base

    def _undo(self, done: Sequence[_Plan]) -> str:
        """Put back, by one commit each, the rows the ``done`` commits of this run replaced; what happened, said."""
        from deltalake import CommitProperties, DeltaTable, write_deltalake

        said = []
        for plan in reversed(done):
            meta = {"job": self.job, "undoes": self.run_id, **({"days": _day_text(plan.days)} if plan.days else {}),
                    **({"scope": self.scope} if self.scope else {})}
            try:
                with named_errors(plan.table, plan.loc, plan.version, writing=True):
                    before = DeltaTable(plan.loc, version=plan.base, storage_options=self.store.storage_options)
                    names = [f.name for f in before.schema().fields]
                    rows = _query(before, f"SELECT {', '.join(map(_sql_name, names))} FROM t"
                                  + (f" WHERE {plan.predicate}" if plan.predicate else " WHERE FALSE"))
                    mine = DeltaTable(plan.loc, version=plan.version, storage_options=self.store.storage_options)
                    write_deltalake(mine, rows, mode="overwrite", predicate=plan.predicate or "TRUE",
                                    schema_mode="merge", storage_options=self.store.storage_options,
                                    commit_properties=CommitProperties(custom_metadata=meta))
                said.append(f"its {plan.table} commit (version {plan.version}) is undone")
            except Exception as e:  # noqa: BLE001 - a later run's commit on these days: its rows stand
                said.append(f"its {plan.table} commit (version {plan.version}) is not undone ({first_line(e)}): "
                            "a later run's commit of those days stands over it")
        return "Of this run's commits, " + "; ".join(said) + "."

    def _overtaken(self, table: str, loc: str, days: Sequence[str] | None, why: str) -> ConcurrentRunError:
        shown = f" ds={_day_text(days)}" if days else ""
        return ConcurrentRunError(
            f"Another run committed{shown} of the {table} table {loc!r} while this {self.job} run ({self.run_id}) "
            f"was computing it; this run wrote nothing to it. Run it again once the other has ended (a rerun of a "
            f"day replaces it). ({why})")


class _Plan:
    """One table's commit of a run: where, what (Arrow ``data``, None: nothing), which partitions (``predicate``,
    ``days``), the version it replaces (``base``) and the version it made."""

    def __init__(self, table: str, loc: str, delta: bool) -> None:
        self.table, self.loc, self.delta = table, loc, delta
        self.data: pa.Table | None = None
        self.predicate: str | None = None
        self.days: list[str] | None = None
        self.meta: dict[str, str] = {}
        self.app: tuple[str, int] | None = None
        self.base: int | None = None
        self.version: int | None = None
        self.partitions = 1


DICTIONARY_ROWS = 1000
"""Rows per partition written below which numeric columns are written without a Parquet dictionary."""


def _writer_properties(data: pa.Table, partitions: int) -> Any:
    """deltalake's writer settings for ``data`` over ``partitions`` partitions: its writer holds a dictionary encoder
    per column and partition until the commit, about 30 kB each, so a write of a rolling row per day and model-run
    over two years (761 partitions of 60 rows) held 800 MB of them; over so few rows a dictionary saves little.
    With many rows per partition the numeric columns keep theirs: without them, a month of bench_rolling.py's
    summaries (7,400 rows a day) took 16.4 MB instead of 8.6 MB."""
    import pyarrow as pa
    from deltalake import ColumnProperties, WriterProperties

    if data.num_rows >= DICTIONARY_ROWS * partitions:
        return None
    return WriterProperties(column_properties={f.name: ColumnProperties(dictionary_enabled=False)
                                               for f in data.schema if not pa.types.is_string(f.type)})


def _version_of(t: DeltaTable, run_id: str) -> int | None:
    """The latest version of ``t`` that run ``run_id`` committed."""
    for entry in t.history(20):
        if entry.get(RUN_ID) == run_id:
            return int(entry["version"])
    return None


def _query(t: DeltaTable, sql: str) -> pa.Table:
    import pyarrow as pa
    from deltalake import QueryBuilder

    return pa.table(QueryBuilder().register("t", t).execute(sql))


def _killed_first_run(folder: str) -> bool:
    """Whether every file under a table folder without a Delta log is a data file deltalake names (a first run
    stopped before its first commit), not one of ctcalc's earlier layout."""
    files = [n for _, _, names in os.walk(folder) for n in names if not n.startswith((".", "_"))]
    return bool(files) and all(_DATA_FILE.match(n) for n in files)


def _read_delta(t: DeltaTable, columns: Sequence[str], conds: Mapping[str, Sequence[str]], *,
                categories: bool = False, distinct: bool = False) -> pd.DataFrame:
    """``columns`` of the rows of Delta table ``t`` whose columns take one of ``conds``' values, as pandas (text
    columns as categoricals with ``categories``; a frame of one block per column, not copied into one 2-D block per
    type: that copy would be a third copy of the rows, beside the Arrow table and the frame).

    delta-rs reads them (``QueryBuilder``, its DataFusion engine; conditions on partition columns select the files
    before any is opened). Not ``to_pyarrow_dataset()``: that reads through a Python file system from Arrow's
    threads, and a process that had read a table so could abort as Python exited ('terminate called without an
    active exception'; docs/storage.md#reading-the-outputs, bench/bench_exit_abort.py)."""
    import pandas as pd

    terms = [f"{_sql_name(k)} IN ({', '.join(map(_sql_text, vs))})" if vs else "FALSE" for k, vs in conds.items()]
    sql = (f"SELECT {'DISTINCT ' if distinct else ''}{', '.join(map(_sql_name, columns))} FROM t"
           + (f" WHERE {' AND '.join(terms)}" if terms else ""))
    # not self_destruct=True (freeing each Arrow column once converted): deltalake's batches crash it (SIGSEGV)
    frame = _query(t, sql).to_pandas(split_blocks=True, strings_to_categorical=categories)
    for c in frame.columns if categories else ():  # sorted as the text sorts, not in the order the rows came
        cats = frame[c].cat.categories if isinstance(frame[c].dtype, pd.CategoricalDtype) else None
        if cats is not None and not cats.is_monotonic_increasing:
            frame[c] = frame[c].cat.reorder_categories(cats.sort_values())
    return frame


def vacuum(store: OutputStore, retention_hours: int, apply: bool) -> dict[str, list[str]]:
    """{table: data files no version younger than ``retention_hours`` references} of every path table: what a
    killed run left (a first run's too, in a folder without a Delta log) and what replaced partitions left behind;
    removed only when ``apply``."""
    import time

    out = {}
    for table in PARTITIONS:
        t = store.delta(table) if store._is_delta(table) else None
        folder = local_path(store.location(table))
        if t is None and is_local(store.location(table)) and os.path.isdir(folder) and _killed_first_run(folder):
            old = time.time() - retention_hours * 3600  # a first run writing now keeps its files
            files = [os.path.join(d, n) for d, _, names in os.walk(folder) for n in names
                     if _DATA_FILE.match(n) and os.path.getmtime(os.path.join(d, n)) <= old]
            if apply:
                for f in files:
                    os.remove(f)
            out[table] = files
        if t is not None:
            with named_errors(table, store.location(table), t.version(), writing=apply):
                out[table] = t.vacuum(retention_hours=retention_hours, dry_run=not apply,
                                      enforce_retention_duration=False, full=True)  # full: files no commit named
    return out


def restore_days(store: OutputStore, days: Sequence[str], as_of: int | dt.datetime) -> Transaction:
    """Write the ``days`` of the day-partitioned tables (summaries, calibrated_exact, metrics) back as they were
    ``as_of`` (a version of the metrics table, or a time), as one run; its transaction. A replaced day's files
    stay until a vacuum removes them: after that the read says which file is missing."""
    from ctcalc_spark.core.state import KINDS, arrow_schema

    old = OutputStore(store.output, as_of=as_of)
    items: list[tuple[str, pd.DataFrame, pa.Schema | None]] = []
    for table in ("summaries", "calibrated_exact", "metrics"):
        t = old.delta(table)
        if t is None:
            continue
        frame = old.read(table, days=days)
        if frame.empty:
            continue
        kinds = {f.name: str(getattr(f.type, "type", "string")) for f in t.schema().fields if f.name != RUN_ID}
        types = {n: {"integer": "long", "float": "double"}.get(k, k) for n, k in kinds.items()}
        items.append((table, frame, arrow_schema({n: (k if k in KINDS else "string") for n, k in types.items()})))
    if not items:
        raise InputError(f"No rows of ds={_day_text(list(days))} under {store.root!r} as of {as_of}: nothing to "
                         "restore (`ctcalc tables history --ds DAY` lists the versions that wrote a day).")
    tx = store.transaction("restore")
    tx.write_all(items, metadata={"restored_from": str(as_of)})
    return tx


def convert_layout(store: OutputStore) -> list[str]:
    """Convert each table folder of ctcalc's earlier Parquet layout under ``output.path`` into a Delta table in
    place (its files become the table's first version); returns the tables converted. What that layout kept beside
    the tables (run leases, commit records, staged copies of killed runs) is removed first."""
    import shutil

    from deltalake import DeltaTable, Field, Schema, convert_to_deltalake

    if store.catalog or not is_local(store.root):
        raise ConfigError("`ctcalc tables convert` converts folders under a local output.path.")
    root = local_path(store.root)
    done = []
    for table, parts in PARTITIONS.items():
        folder = local_path(store.location(table))
        if not parts or not os.path.isdir(folder) or DeltaTable.is_deltatable(folder) or _killed_first_run(folder):
            continue  # a run stopped before its first commit: its files are no rows (`ctcalc tables vacuum`)
        for dirpath, dirnames, filenames in os.walk(folder, topdown=True):
            for name in list(dirnames):
                if name.startswith((".", "_")):
                    shutil.rmtree(os.path.join(dirpath, name))
                    dirnames.remove(name)
            for name in filenames:
                if name.startswith((".", "_")):
                    os.remove(os.path.join(dirpath, name))
        if not any(files for _, _, files in os.walk(folder)):
            continue
        convert_to_deltalake(folder, partition_by=Schema([Field(p, "string") for p in parts]),
                             partition_strategy="hive")
        DeltaTable(folder).alter.set_table_properties({MARK: table}, raise_if_not_exists=False)  # ctcalc's own
        done.append(table)
    for name in ("_runs", "_commits"):
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    return done


def delta_days(location: str, storage_options: dict[str, str] | None = None) -> list[str]:
    """The ``ds`` partitions of the Delta table at ``location`` (none when there is no table)."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(location, storage_options=storage_options):
        return []
    return sorted({p["ds"] for p in DeltaTable(location, storage_options=storage_options).partitions()})


def read_delta(location: str, storage_options: dict[str, str] | None = None, **partition: str) -> pd.DataFrame | None:
    """The rows of one partition (``column=value`` for each partition column) of the Delta table at ``location``,
    without the run id; None when the table or the partition is not there."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(location, storage_options=storage_options):
        return None
    table = DeltaTable(location, storage_options=storage_options)
    if partition not in [{k: p.get(k) for k in partition} for p in table.partitions()]:
        return None
    columns = [f.name for f in table.schema().fields if f.name != RUN_ID]
    return _read_delta(table, columns, {k: [v] for k, v in partition.items()})


def _predicate(values: pd.DataFrame) -> str:
    """A SQL predicate selecting exactly the partitions in ``values`` (one row per partition, string columns)."""
    cols = list(values.columns)
    *outer, last = cols
    if all(values[c].nunique() == 1 for c in outer):
        terms = [f"{c} = {_sql_text(values[c].iloc[0])}" for c in outer]
        terms.append(f"{last} IN ({', '.join(map(_sql_text, sorted(values[last].unique())))})")
        return " AND ".join(terms)
    return " OR ".join("(" + " AND ".join(f"{c} = {_sql_text(v)}" for c, v in zip(cols, row)) + ")"
                       for row in values.itertuples(index=False, name=None))


def _sql_text(v: str) -> str:
    """``v`` as a SQL string literal."""
    return "'" + v.replace("'", "''") + "'"


def _sql_name(c: str) -> str:
    """Column ``c`` as a quoted SQL identifier (its letter case kept)."""
    return '"' + c.replace('"', '""') + '"'


def _day_text(days: Sequence[str]) -> str:
    """``days`` as runs of consecutive days ('2026-01-01..2026-03-31, 2026-04-02'): every day, compactly."""
    from ctcalc_spark.core.windows import day_runs

    return day_runs(sorted(days), shown=len(days))


def _days_of(text: str) -> list[str]:
    """The days of a :func:`_day_text` (the form ``--ds`` takes)."""
    return parse_days(str(text), "a commit's days") if str(text).strip() else []


def wrote_day(entry: Mapping[str, Any], day: str) -> bool:
    """Whether the commit ``entry`` (one of ``DeltaTable.history()``) names ``day`` among the days it wrote."""
    try:
        return "days" in entry and str(day) in _days_of(entry["days"])
    except ConfigError:
        return False


def _version_ms(location: str, version: int, storage_options: dict[str, str] | None) -> int:
    """When ``version`` of the table at ``location`` was committed (milliseconds since the epoch)."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(location, storage_options=storage_options):
        raise ConfigError(f"--as-of {version}: there is no metrics table at {location!r} to take the version from.")
    for entry in DeltaTable(location, storage_options=storage_options).history():
        if entry.get("version") == version:
            return int(entry["timestamp"])
    raise ConfigError(f"--as-of {version}: the metrics table {location!r} has no version {version} (see its "
                      "history: `ctcalc tables history`).")
