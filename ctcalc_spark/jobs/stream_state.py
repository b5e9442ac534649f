"""The streaming job's tables and state: the columns of its tables, its committed state, batch reports and error
records.

``stream_summaries`` holds the summaries table's columns
(:meth:`ctcalc_spark.core.state.SummaryState.column_types`) per window and micro-batch; ``stream_metrics`` and
``stream_rolling`` those of the metrics and rolling tables. The state (:class:`StreamState`) travels in the metadata
of each ``stream_batches`` commit, whose Delta application version (:data:`APP_ID`) is the batch id; error records
are JSON files under ``<output.path>/_stream/errors``. :class:`StreamFiles` reads and writes both, for the client
and the batch handler alike.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from ctcalc_spark import errors
from ctcalc_spark.config import JobConfig
from ctcalc_spark.core.finalize import METRIC_TYPES
from ctcalc_spark.core.state import STATES, arrow_schema
from ctcalc_spark.core.windows import ROLLING_TYPES
from ctcalc_spark.errors import CtcalcError
from ctcalc_spark.storage import FileStore
from ctcalc_spark.spark.scan import group_columns
from ctcalc_spark.tables import OutputStore

if TYPE_CHECKING:
    import pyarrow as pa

    from ctcalc_spark.tables import Transaction

# ---- table schemas ---------------------------------------------------------------------------------

WINDOW_TYPES = {"ds": "string", "window_start": "string", "window_end": "string"}
STREAM_EXTRA = {"n_late": "long", "finalized_batch_id": "long", "finalized_at": "string"}


def summary_schema(cfg: JobConfig) -> pa.Schema:
    """Columns of stream_summaries: the window, the summary group, the summaries-table columns, the batch."""
    return arrow_schema({**WINDOW_TYPES, **{g: "string" for g in group_columns(cfg)},
                         **STATES[cfg.task].column_types(), "window": "string", "batch_id": "long"})


def count_schema(cfg: JobConfig) -> pa.Schema:
    """Columns of stream_counts: rows in no summary, by kind (and file, for unreadable files)."""
    return arrow_schema({**WINDOW_TYPES, **{g: "string" for g in group_columns(cfg)}, "kind": "string",
                         "reason": "string", "file": "string", "n_rows": "long", "window": "string",
                         "batch_id": "long"})


def metric_schema(task: str) -> pa.Schema:
    """Columns of stream_metrics: the metrics table's (METRIC_TYPES) plus the window and its finalisation."""
    return arrow_schema({"ds": "string", "task": "string", "window_start": "string", "window_end": "string",
                         "model": "string", "run": "string", "slice_name": "string", "slice_value": "string",
                         **METRIC_TYPES[task], **STREAM_EXTRA, "window": "string"})


def rolling_schema() -> pa.Schema:
    """Columns of stream_rolling: the rolling table's (ROLLING_TYPES, ``window`` = the window key) plus extras."""
    return arrow_schema({"ds": "string", "window_spec": "string", **ROLLING_TYPES, "n_invalid": "long",
                         **STREAM_EXTRA})


# ---- state, reports and errors -------------------------------------------------------------------

@dataclass
class StreamState:
    """What the stream has committed: last batch id, event time, watermark, windows (micros), counters."""

    seq: int = 0
    batch_id: int = -1
    max_event_us: int | None = None
    watermark_us: int | None = None
    first_window_us: int | None = None
    open_windows: list[int] = field(default_factory=list)
    rows: int = 0
    late_rows: int = 0
    quarantined_files: int = 0
    kafka_next: dict[str, int] = field(default_factory=dict)
    """Kafka: the offset after the last message read, per ``<topic>:<partition>`` (to tell which were lost)."""


@dataclass(frozen=True)
class StreamPaths:
    """Where the stream keeps its tables (folders or catalog names), state, reports, errors and checkpoint."""

    summaries: str
    counts: str
    metrics: str
    rolling: str
    batches: str
    errors: str
    checkpoint: str


class StreamBatchError(CtcalcError, RuntimeError):
    """A micro-batch failed; ``error_type`` is the original exception's class, the message its text."""

    def __init__(self, message: str, error_type: str = "RuntimeError") -> None:
        super().__init__(message)
        self.error_type = error_type


APP_ID = "ctcalc-stream"
"""The Delta application id of a stream's commits (one stream per output): each carries the batch id as its version,
so a replayed batch finds what it committed before (``DeltaTable.transaction_version``)."""
BATCH_TYPES = {"batch_id": "long", "seq": "long", "token": "string", "report": "string"}


class StreamFiles:
    """The stream's state and batch reports (the ``stream_batches`` Delta table: a row per committed batch, its
    commit's metadata the state) and its error records (files), for the client and the handler alike."""

    keep_errors = 100

    def __init__(self, store: OutputStore, cfg: JobConfig) -> None:
        root = f"{store.root}/_stream"
        self.store = store
        checkpoint = cfg.stream.checkpoint or f"{root}/checkpoint"
        self.paths = StreamPaths(
            summaries=store.location("stream_summaries"), counts=store.location("stream_counts"),
            metrics=store.location("stream_metrics"), rolling=store.location("stream_rolling"),
            batches=store.location("stream_batches"), errors=f"{root}/errors", checkpoint=checkpoint,
        )

    @property
    def files(self) -> FileStore:
        return FileStore(self.store.root)

    def _names(self, folder: str, prefix: str) -> list[str]:
        return [e.name for e in self.files.list(folder) if e.name.startswith(prefix) and e.name.endswith(".json")]

    def committed_batch(self) -> int:
        """The last batch id whose commit the stream made (-1 if none)."""
        table = self.store.delta("stream_batches")
        version = None if table is None else table.transaction_version(APP_ID)
        return -1 if version is None else int(version)

    def load_state(self) -> StreamState:
        table = self.store.delta("stream_batches")
        if table is None:
            return StreamState()
        for entry in table.history(1):
            if "stream_state" in entry:
                return StreamState(**json.loads(entry["stream_state"]))
        return StreamState()

    def commit_state(self, tx: Transaction, state: StreamState, report: dict[str, Any] | None = None,
                     batch: bool = True) -> None:
        """A row in stream_batches whose commit carries the new state and, for a batch (``batch``), its id as the
        stream's application version: from then on a replay of that batch is skipped."""
        state.seq += 1
        row = pd.DataFrame([{"batch_id": state.batch_id, "seq": state.seq, "token": (report or {}).get("token"),
                             "report": json.dumps(report) if report is not None else None}])
        tx.write_all([("stream_batches", row, arrow_schema(BATCH_TYPES))],
                     app=(APP_ID, state.batch_id) if batch else None,
                     metadata={"stream_state": json.dumps(dataclasses.asdict(state))})

    def reports(self, token: str) -> list[dict[str, Any]]:
        """Reports of the batches committed by the run ``token``, in batch order."""
        rows = self.store.read("stream_batches", columns=["batch_id", "token", "report"])
        if rows.empty:
            return []
        rows = rows[(rows["token"] == token) & rows["report"].notna()].sort_values("batch_id")
        return [json.loads(r) for r in rows["report"]]

    def write_error(self, token: str, batch_id: int, error: BaseException) -> None:
        record = {"token": token, "batch_id": batch_id, "type": type(error).__name__, "message": str(error),
                  "traceback": traceback.format_exc(), "at": dt.datetime.now(dt.timezone.utc).isoformat()}
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        self.files.write_text(f"{self.paths.errors}/error-{stamp}-{batch_id:012d}.json", json.dumps(record))
        for name in self._names(self.paths.errors, "error-")[:-self.keep_errors]:
            self.files.delete(f"{self.paths.errors}/{name}")

    def error(self, token: str) -> CtcalcError | None:
        """The last error of the run ``token`` as raised by the handler: the package's own errors keep their
        class; any other is a :class:`StreamBatchError` naming the original class."""
        records = []
        for name in self._names(self.paths.errors, "error-"):
            record = json.loads(self.files.read_text(f"{self.paths.errors}/{name}"))
            if record.get("token") == token:
                records.append(record)
        if not records:
            return None
        last = records[-1]
        cls = getattr(errors, last["type"], None)
        if isinstance(cls, type) and issubclass(cls, CtcalcError) and cls is not errors.DegenerateBiasError:
            return cls(last["message"])
        return StreamBatchError(f"Stream batch {last['batch_id']} failed with {last['type']}: {last['message']}",
                                last["type"])
