"""Streaming: calibrated metrics per event-time window as soon as the window closes.

The same summaries and finalizers as the batch jobs, driven by Structured
Streaming's ``foreachBatch``. One micro-batch ``id``:

1. every row gets its tumbling window ``start = floor(event_time / window)`` and
   ``late`` = that window already closed (its end <= the watermark at the start of
   the batch). One native aggregation (:func:`summary_aggregation` with the window
   and the late flag as extra keys) yields the batch's summaries.
2. on-time valid summary rows are written to
   ``stream_summaries/window=<w>/batch_id=<id>`` (the batch summaries-table
   columns plus ``ds``, ``window_start``, ``window_end``); late, invalid and
   event-time-less rows are counted in ``stream_counts/window=<w>/batch_id=<id>``
   (``kind``, ``n_rows``) — never dropped silently.
3. the watermark ``max event time seen - watermark delay`` advances; each open
   window whose end it passed is closed: its summaries are summed over batches and
   finalised twice into ``stream_metrics/window=<w>``: ``mode='same_window'`` (the
   hash split, identical to the batch evaluate job on the same rows) and
   ``mode='rolling'`` (bias fitted on all of the previous window, applied to all
   of this one). Windows that receive late rows get their metrics rewritten with
   the new ``n_late`` (values unchanged: late rows are not in the summaries).
4. the stream state (last batch id, max event time, watermark, open windows) is
   committed last, as a new versioned file under ``_stream/state``.

Exactly once: Spark replays an uncommitted batch with the same id and rows after
a failure; the replay overwrites the same folders (each written to staging and
renamed into place), and a batch id at or below the committed one is skipped.
A row is *late* only when its window has closed; rows older than the watermark
whose window is still open are counted normally (Spark's own semantics).
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import pandas as pd

from ctcalc_spark.config import JobConfig, duration_seconds
from ctcalc_spark.errors import ConfigError, InputError
from ctcalc_spark.core.finalize import ALL, METRIC_TYPES, SUMMARY_TYPES, finalize_pair, metrics_from_summaries, spark_schema
from ctcalc_spark.spark.storage import check_columns, pandas_to_spark, required_columns
from ctcalc_spark.spark.scan import INVALID_REASONS, group_columns, summary_aggregation

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)

KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
"""The connector matching our Spark (4.2.0, Scala 2.13): spark-submit --packages <this>."""

MODES = ("same_window", "rolling")
STATUS_NO_PREVIOUS_WINDOW = "no_previous_window"
WINDOW_TYPES = {"ds": "string", "window_start": "string", "window_end": "string"}
STREAM_METRIC_EXTRA = {"n_late": "long", "finalized_batch_id": "long", "finalized_at": "string"}
COUNT_KINDS = ("late", "invalid", "no_event_time")
NO_WINDOW = "none"
_ROLLING_FROM_SHIFT = {
    "binary": ("n_bias", "log_loss_remain", "calibrated_log_loss", "calibration_gain", "bias",
               "calibrated_normalized_entropy", "status"),
    "regression": ("n_bias", "mse_remain", "calibrated_mse", "calibration_gain", "bias", "status"),
}
_CALIBRATED = {
    "binary": ("calibrated_log_loss", "calibration_gain", "bias", "calibrated_normalized_entropy"),
    "regression": ("calibrated_mse", "calibration_gain", "bias"),
}
US = 1_000_000
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


# ---- windows ---------------------------------------------------------------------------------

def window_key(start_us: int) -> str:
    """Folder key of a window: its UTC start as YYYYMMDDTHHMMSS."""
    return (_EPOCH + dt.timedelta(microseconds=int(start_us))).strftime("%Y%m%dT%H%M%S")


def window_text(us: int) -> str:
    """A window bound as 'YYYY-MM-DD HH:MM:SS' (UTC)."""
    return (_EPOCH + dt.timedelta(microseconds=int(us))).strftime("%Y-%m-%d %H:%M:%S")


def window_micros(cfg: JobConfig) -> tuple[int, int]:
    """(window length, watermark delay) in microseconds."""
    s = cfg.stream
    return duration_seconds(s.window, "stream.window") * US, duration_seconds(s.watermark, "stream.watermark") * US


# ---- pure finalisation of one window ------------------------------------------------------------

def finalize_rolling(task: str, prev_rows: pd.DataFrame | None, cur_rows: pd.DataFrame, bin_width: float) -> dict[str, Any]:
    """Rolling metrics of one group: bias fitted on all of the previous window, applied to all of this one.

    Whole-window values (n_rows, log_loss/mse, auc, ...) are this window's; ``n_bias``
    is the previous window's row count, ``bias`` its fitted shift, ``calibrated_*`` the
    vanilla metric of this window's shifted predictions. No previous window:
    status 'no_previous_window' and no calibrated value.
    """
    none = cur_rows.iloc[0:0]
    row = finalize_pair(task, none, cur_rows, bin_width)
    for name in _CALIBRATED[task]:
        row[name] = None
    if prev_rows is None or prev_rows.empty:
        row.update(n_bias=0, status=STATUS_NO_PREVIOUS_WINDOW)
        return row
    shifted = finalize_pair(task, prev_rows, cur_rows, bin_width)
    row.update({k: shifted[k] for k in _ROLLING_FROM_SHIFT[task]})
    return row


def rolling_metrics_from_summaries(
    prev: pd.DataFrame, cur: pd.DataFrame, task: str, *, keys: Sequence[str], slices: Sequence[str] = (),
    bin_width: float = 0.05,
) -> pd.DataFrame:
    """One rolling metrics row per (keys, slice) of ``cur``, shaped like :func:`metrics_from_summaries`."""
    out: list[dict[str, Any]] = []
    for slice_name, col in [(ALL, None)] + [(s, s) for s in slices]:
        by = list(keys) + ([col] if col else [])
        prev_groups = {} if prev.empty else {
            (k if isinstance(k, tuple) else (k,)): g for k, g in prev.groupby(by, sort=True, dropna=False)
        }
        for key_vals, grp in cur.groupby(by, sort=True, dropna=False):
            key_vals = key_vals if isinstance(key_vals, tuple) else (key_vals,)
            row: dict[str, Any] = dict(zip(by, key_vals))
            row.update(finalize_rolling(task, prev_groups.get(key_vals), grp, bin_width))
            row["slice_name"] = slice_name
            row["slice_value"] = ALL if col is None else row.pop(col)
            out.append(row)
    return pd.DataFrame(out, columns=list(keys) + ["slice_name", "slice_value"] + list(METRIC_TYPES[task]))


def _count_for(counts: pd.DataFrame, kind: str, by: Sequence[str], key_vals: Sequence[Any]) -> int:
    if counts.empty:
        return 0
    sel = (counts["kind"] == kind).to_numpy()
    for k, v in zip(by, key_vals):
        sel &= (counts[k].astype(object) == v).to_numpy()
    return int(counts.loc[sel, "n_rows"].sum())


def window_metrics(
    cfg: JobConfig, prev: pd.DataFrame, cur: pd.DataFrame, counts: pd.DataFrame
) -> pd.DataFrame:
    """Both modes' metrics of one window from its summary rows (and the previous window's), with n_invalid/n_late."""
    c = cfg.columns
    keys = [c.model, c.run]
    h = cfg.histogram.bin_width
    invalid = counts[counts["kind"] == "invalid"].rename(columns={"n_rows": "n_invalid"}) if not counts.empty else None
    same = metrics_from_summaries(cur, cfg.task, keys=keys, slices=list(c.slices), bin_width=h, invalid_counts=invalid)
    rolling = rolling_metrics_from_summaries(prev, cur, cfg.task, keys=keys, slices=list(c.slices), bin_width=h)
    rolling["n_invalid"] = same["n_invalid"].to_numpy()  # same groups, same order
    frames = []
    for mode, frame in (("same_window", same), ("rolling", rolling)):
        frame = frame.copy()
        n_late = []
        for _, r in frame.iterrows():
            by = keys + ([] if r["slice_name"] == ALL else [r["slice_name"]])
            vals = [r[c.model], r[c.run]] + ([] if r["slice_name"] == ALL else [r["slice_value"]])
            n_late.append(_count_for(counts, "late", by, vals))
        frame["n_late"] = n_late
        frame.insert(0, "mode", mode)
        frames.append(frame)
    records = [r for frame in frames for r in frame.to_dict("records")]  # concat would warn on all-None columns
    return pd.DataFrame(records, columns=frames[0].columns).rename(columns={c.model: "model", c.run: "run"})


# ---- Hadoop file system helpers (work on local, HDFS, S3 paths alike) ----------------------------

class _Fs:
    def __init__(self, spark: SparkSession) -> None:
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _p(self, path: str):  # type: ignore[no-untyped-def]
        jp = self._jvm.org.apache.hadoop.fs.Path(path)
        return jp.getFileSystem(self._conf), jp

    def exists(self, path: str) -> bool:
        fs, jp = self._p(path)
        return bool(fs.exists(jp))

    def delete(self, path: str) -> None:
        fs, jp = self._p(path)
        if fs.exists(jp):
            fs.delete(jp, True)

    def mkdirs(self, path: str) -> None:
        fs, jp = self._p(path)
        fs.mkdirs(jp)

    def names(self, path: str) -> list[str]:
        fs, jp = self._p(path)
        if not fs.exists(jp):
            return []
        return [st.getPath().getName() for st in fs.listStatus(jp)]

    def move(self, src: str, dst: str) -> None:
        """Rename src to dst, replacing dst (a replayed batch rewrites the same folder)."""
        fs, jsrc = self._p(src)
        _, jdst = self._p(dst)
        if fs.exists(jdst):
            fs.delete(jdst, True)
        fs.mkdirs(jdst.getParent())
        if not fs.rename(jsrc, jdst):
            raise OSError(f"Could not move {src} to {dst}.")

    def read_text(self, path: str) -> str:
        fs, jp = self._p(path)
        stream = fs.open(jp)
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def write_text_new(self, path: str, text: str) -> None:
        """Write a new file atomically: a temporary file renamed to a name that does not exist yet."""
        fs, jp = self._p(path)
        _, jtmp = self._p(f"{path}.{uuid.uuid4().hex[:8]}.tmp")
        out = fs.create(jtmp, True)
        try:
            out.write(bytearray(text.encode("utf-8")))
        finally:
            out.close()
        if not fs.rename(jtmp, jp):
            fs.delete(jtmp, False)
            raise OSError(f"Could not commit {path} (does it exist already?).")


# ---- the job -----------------------------------------------------------------------------------

@dataclass
class StreamState:
    """What the stream has committed: last batch id, max event time, watermark, open windows (micros)."""

    seq: int = 0
    batch_id: int = -1
    max_event_us: int | None = None
    watermark_us: int | None = None
    open_windows: list[int] = field(default_factory=list)
    rows: int = 0
    late_rows: int = 0


@dataclass
class StreamPaths:
    summaries: str
    counts: str
    metrics: str
    state: str
    checkpoint: str
    staging: str


def stream_paths(cfg: JobConfig) -> StreamPaths:
    """Where the stream writes its tables, state and (by default) its checkpoint."""
    root = cfg.output.path.rstrip("/")
    return StreamPaths(
        summaries=f"{root}/stream_summaries",
        counts=f"{root}/stream_counts",
        metrics=f"{root}/stream_metrics",
        state=f"{root}/_stream/state",
        checkpoint=cfg.stream.checkpoint or f"{root}/_stream/checkpoint",
        staging=f"{root}/_stream/staging",
    )


class StreamJob:
    """The foreachBatch handler and window finaliser of one streaming query (see the module docstring)."""

    keep_states = 20

    def __init__(self, spark: SparkSession, cfg: JobConfig, *, after_write: Callable[[int], None] | None = None) -> None:
        if cfg.task not in ("binary", "regression"):
            raise ConfigError(f"The stream supports task binary/regression, got {cfg.task!r} (multiclass needs its "
                              "val-bias rows, not mergeable summaries; use the batch evaluate job).")
        self.spark = spark
        self.cfg = cfg
        self.paths = stream_paths(cfg)
        self.window_us, self.delay_us = window_micros(cfg)
        self.fs = _Fs(spark)
        self.after_write = after_write  # test hook: called after a batch's files are written, before its commit
        self.reports: list[dict[str, Any]] = []
        self.error: BaseException | None = None

    # ---- state ----------------------------------------------------------------
    def load_state(self) -> StreamState:
        names = sorted(n for n in self.fs.names(self.paths.state) if n.startswith("state-") and n.endswith(".json"))
        if not names:
            return StreamState()
        data = json.loads(self.fs.read_text(f"{self.paths.state}/{names[-1]}"))
        return StreamState(**data)

    def commit_state(self, state: StreamState) -> None:
        state.seq += 1
        self.fs.write_text_new(f"{self.paths.state}/state-{state.seq:012d}.json", json.dumps(state.__dict__))
        old = sorted(n for n in self.fs.names(self.paths.state) if n.startswith("state-") and n.endswith(".json"))
        for name in old[: -self.keep_states]:
            self.fs.delete(f"{self.paths.state}/{name}")

    def check_checkpoint(self) -> None:
        """Refuse to pair committed stream state with a fresh checkpoint (batch ids would restart at 0)."""
        state = self.load_state()
        if state.batch_id >= 0 and not self.fs.exists(f"{self.paths.checkpoint}/offsets"):
            raise ConfigError(
                f"{self.cfg.output.path!r} already holds stream state up to batch {state.batch_id}, but the "
                f"checkpoint {self.paths.checkpoint!r} has no offsets: restore that checkpoint, or use a new "
                "'output.path' for a new stream."
            )

    # ---- one micro-batch --------------------------------------------------------
    def process_batch(self, batch_df: DataFrame, batch_id: int) -> None:
        """foreachBatch handler; records the error so that the caller can re-raise the real one."""
        try:
            self._process(batch_df, int(batch_id))
        except BaseException as e:
            self.error = e
            raise

    def _process(self, batch_df: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        t0 = time.perf_counter()
        state = self.load_state()
        if batch_id <= state.batch_id:
            log.info("batch %d already committed (replay after a restart): skipped", batch_id)
            return
        ev = F.unix_micros(F.col(self.cfg.stream.event_time).cast("timestamp"))
        wstart = ev - F.pmod(ev, F.lit(self.window_us))
        wm = state.watermark_us
        late = (wstart + F.lit(self.window_us) <= F.lit(wm)) if wm is not None else F.lit(False)
        rows = batch_df.withColumn("_window_us", wstart).withColumn("_late", late)
        agg = None
        phase: dict[str, float] = {}
        try:
            # the input is not cached: this reads the event-time column only (the aggregation reads its own columns)
            stats = batch_df.agg(F.count(F.lit(1)).alias("n"), F.max(ev).alias("mx")).first()
            n_rows, max_ev = int(stats["n"]), stats["mx"]
            phase["stats"] = time.perf_counter() - t0
            report: dict[str, Any] = {"batch_id": batch_id, "rows": n_rows, "on_time": 0, "late": 0, "invalid": 0,
                                      "no_event_time": 0, "closed": [], "refreshed": []}
            new_windows: list[int] = []
            if n_rows:
                agg = summary_aggregation(rows, self.cfg, extra_keys=["_window_us", "_late"]).persist()
                tally = self._tally(agg)
                phase["aggregate"] = time.perf_counter() - t0 - sum(phase.values())
                counts = tally[tally["kind"] != "on_time"]
                self._check_invalid(counts, batch_id)
                for kind in ("on_time", *COUNT_KINDS):
                    report[kind] = int(tally.loc[tally["kind"] == kind, "n_rows"].sum())
                new_windows = sorted({int(w) for w in tally.loc[tally["kind"] == "on_time", "_window_us"]})
                if new_windows:
                    self._write_summaries(agg, batch_id, new_windows)
                if not counts.empty:
                    self._write_counts(counts, batch_id)
                phase["write"] = time.perf_counter() - t0 - sum(phase.values())
            if self.after_write is not None:
                self.after_write(batch_id)
            if max_ev is not None:
                state.max_event_us = int(max_ev) if state.max_event_us is None else max(state.max_event_us, int(max_ev))
                cand = state.max_event_us - self.delay_us
                state.watermark_us = cand if state.watermark_us is None else max(state.watermark_us, cand)
            open_windows = sorted(set(state.open_windows) | set(new_windows))
            to_close = [w for w in open_windows if state.watermark_us is not None
                        and w + self.window_us <= state.watermark_us]
            for w in to_close:
                self.finalize_window(w, batch_id)
            report["closed"] = [window_text(w) for w in to_close]
            phase["close"] = time.perf_counter() - t0 - sum(phase.values())
            if report["late"]:
                late_windows = self._late_windows(batch_id)
                for w in sorted(set(late_windows) - set(to_close)):
                    if self.fs.exists(f"{self.paths.metrics}/window={window_key(w)}"):
                        self.finalize_window(w, batch_id)
                        report["refreshed"].append(window_text(w))
                log.warning("batch %d: %d late row(s) for closed window(s) %s, counted in %s", batch_id,
                            report["late"], [window_text(w) for w in sorted(late_windows)], self.paths.counts)
            state.open_windows = [w for w in open_windows if w not in to_close]
            state.batch_id = batch_id
            state.rows += n_rows
            state.late_rows += report["late"]
            self.commit_state(state)
            report["watermark"] = window_text(state.watermark_us) if state.watermark_us is not None else None
            report["seconds"] = time.perf_counter() - t0
            report["phase_seconds"] = {k: round(v, 3) for k, v in phase.items()}
            self.reports.append(report)
            log.info("batch %d: %s", batch_id, report)
        finally:
            if agg is not None:
                agg.unpersist()

    def _tally(self, agg: DataFrame) -> pd.DataFrame:
        """Rows per (window, group, kind): on_time (in the summaries), late, invalid, no_event_time."""
        from pyspark.sql import functions as F

        gcols = group_columns(self.cfg)
        w = F.col("_window_us")
        kind = (F.when(w.isNull(), "no_event_time").when(F.col("_late") == "true", "late")
                .when(F.col("invalid") != 0, "invalid").otherwise("on_time"))
        pdf = (agg.withColumn("kind", kind)
               .groupBy(w.cast("long").alias("_window_us"), "kind", "invalid", *gcols)
               .agg(F.sum("count").alias("n_rows")).toPandas())
        return pdf

    def _check_invalid(self, counts: pd.DataFrame, batch_id: int) -> None:
        if self.cfg.on_invalid != "error":
            return
        bad = counts[counts["kind"].isin(["invalid", "no_event_time"])]
        if bad.empty:
            return
        parts = []
        for (kind, code), n in bad.groupby(["kind", "invalid"])["n_rows"].sum().items():
            reason = f"null or unparsable '{self.cfg.stream.event_time}'" if kind == "no_event_time" else \
                INVALID_REASONS[int(code)]
            parts.append(f"{int(n)} rows: {reason}")
        raise InputError(f"Invalid rows in stream batch {batch_id}: " + "; ".join(parts) + ". Fix the producer, or "
                         "set on_invalid: drop to exclude them and count them in stream_counts and n_invalid.")

    def _write_summaries(self, agg: DataFrame, batch_id: int, windows: list[int]) -> None:
        """On-time valid summary rows -> stream_summaries/window=<w>/batch_id=<id> for each of ``windows``."""
        from pyspark.sql import functions as F

        cfg = self.cfg
        wl = F.col("_window_us").cast("long")
        start = F.timestamp_micros(wl)
        ok = agg.where((F.col("invalid") == 0) & (F.col("_late") == "false") & wl.isNotNull())
        types = SUMMARY_TYPES[cfg.task]
        numeric = [n for n in types if n not in ("split", "bin", "bin_width")]
        cols = [
            F.date_format(start, "yyyyMMdd'T'HHmmss").alias("window"),
            F.date_format(start, "yyyy-MM-dd").alias("ds"),
            F.date_format(start, "yyyy-MM-dd HH:mm:ss").alias("window_start"),
            F.date_format(F.timestamp_micros(wl + F.lit(self.window_us)), "yyyy-MM-dd HH:mm:ss").alias("window_end"),
            *[F.col(g) for g in group_columns(cfg)],
            F.when(F.col("is_bias"), "bias").otherwise("remain").alias("split"),
        ]
        if cfg.task == "binary":
            cols.append(F.col("bin"))
        cols += [F.coalesce(F.col(n), F.lit(0)).cast("long" if types[n] == "long" else "double").alias(n)
                 for n in numeric]
        if cfg.task == "binary":
            cols.append(F.lit(cfg.histogram.bin_width).alias("bin_width"))
        staging = f"{self.paths.staging}/summaries-{batch_id}-{uuid.uuid4().hex[:8]}"
        ok.select(*cols).coalesce(1).write.mode("overwrite").partitionBy("window").parquet(staging)
        for w in windows:
            key = window_key(w)
            self.fs.move(f"{staging}/window={key}", f"{self.paths.summaries}/window={key}/batch_id={batch_id}")
        self.fs.delete(staging)

    def _write_counts(self, counts: pd.DataFrame, batch_id: int) -> None:
        """Late / invalid / no-event-time counts -> stream_counts/window=<w>/batch_id=<id>."""
        gcols = group_columns(self.cfg)
        pdf = counts.groupby(["_window_us", "kind", *gcols], dropna=False)["n_rows"].sum().reset_index()
        wus = pdf.pop("_window_us")
        pdf["window"] = [NO_WINDOW if pd.isna(w) else window_key(int(w)) for w in wus]
        pdf["ds"] = [None if pd.isna(w) else window_text(int(w))[:10] for w in wus]
        pdf["window_start"] = [None if pd.isna(w) else window_text(int(w)) for w in wus]
        pdf["window_end"] = [None if pd.isna(w) else window_text(int(w) + self.window_us) for w in wus]
        types = {"window": "string", **WINDOW_TYPES, **{g: "string" for g in gcols}, "kind": "string",
                 "n_rows": "long"}
        staging = f"{self.paths.staging}/counts-{batch_id}-{uuid.uuid4().hex[:8]}"
        frame = pandas_to_spark(self.spark, pdf, spark_schema(types))
        frame.coalesce(1).write.mode("overwrite").partitionBy("window").parquet(staging)
        for key in sorted(set(pdf["window"])):
            self.fs.move(f"{staging}/window={key}", f"{self.paths.counts}/window={key}/batch_id={batch_id}")
        self.fs.delete(staging)

    def _late_windows(self, batch_id: int) -> list[int]:
        """Windows that got late rows in this batch (from the counts just written)."""
        out = []
        for name in self.fs.names(self.paths.counts):
            key = name.split("=", 1)[1]
            if key != NO_WINDOW and self.fs.exists(f"{self.paths.counts}/{name}/batch_id={batch_id}"):
                out.append(int((dt.datetime.strptime(key, "%Y%m%dT%H%M%S").replace(tzinfo=dt.timezone.utc)
                                - _EPOCH) / dt.timedelta(microseconds=1)))
        return out

    # ---- closing a window --------------------------------------------------------
    def _read(self, path: str) -> pd.DataFrame:
        if not self.fs.exists(path):
            return pd.DataFrame()
        pdf = self.spark.read.parquet(path).toPandas()
        return pdf.drop(columns=[c for c in ("batch_id", "window") if c in pdf.columns])

    def finalize_window(self, start_us: int, batch_id: int) -> pd.DataFrame:
        """Sum a window's summaries over batches, finalise both modes, replace its metrics folder atomically."""
        key = window_key(start_us)
        cur = self._read(f"{self.paths.summaries}/window={key}")
        prev = self._read(f"{self.paths.summaries}/window={window_key(start_us - self.window_us)}")
        counts = self._read(f"{self.paths.counts}/window={key}")
        metrics = window_metrics(self.cfg, prev, cur, counts)
        metrics.insert(0, "window_end", window_text(start_us + self.window_us))
        metrics.insert(0, "window_start", window_text(start_us))
        metrics.insert(0, "task", self.cfg.task)
        metrics.insert(0, "ds", window_text(start_us)[:10])
        metrics["finalized_batch_id"] = batch_id
        metrics["finalized_at"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")
        numeric = metrics.select_dtypes(include=[np.number])
        if not np.isfinite(numeric.to_numpy(dtype=np.float64, na_value=0.0)).all():
            raise AssertionError("A metric came out non-finite; this is a bug, please report it with the input.")
        types = metric_types(self.cfg.task)
        staging = f"{self.paths.staging}/metrics-{key}-{uuid.uuid4().hex[:8]}"
        pandas_to_spark(self.spark, metrics, spark_schema(types)).coalesce(1).write.mode("overwrite").parquet(staging)
        self.fs.move(staging, f"{self.paths.metrics}/window={key}")
        return metrics

    def close_open_windows(self) -> list[str]:
        """Finalise every open window now (end of a backfill); later rows for them count as late."""
        state = self.load_state()
        if not state.open_windows:
            return []
        for w in state.open_windows:
            self.finalize_window(w, state.batch_id)
        end = max(state.open_windows) + self.window_us
        state.watermark_us = end if state.watermark_us is None else max(state.watermark_us, end)
        closed = [window_text(w) for w in state.open_windows]
        state.open_windows = []
        self.commit_state(state)
        return closed


def metric_types(task: str) -> dict[str, str]:
    """Columns of the stream metrics table, in order."""
    return {"ds": "string", "task": "string", "window_start": "string", "window_end": "string", "mode": "string",
            "model": "string", "run": "string", "slice_name": "string", "slice_value": "string",
            **METRIC_TYPES[task], **STREAM_METRIC_EXTRA}


# ---- the source and the query --------------------------------------------------------------------

def default_schema(cfg: JobConfig) -> str:
    """DDL of the rows when the source cannot tell (JSON files, Kafka values): keys as strings, scores as doubles."""
    c = cfg.columns
    cols = [(c.model, "STRING"), (c.run, "STRING"), (c.label, "DOUBLE"), (c.logit, "DOUBLE"),
            (c.prediction, "DOUBLE"), (c.weight, "DOUBLE"), (c.example_id, "STRING"), (c.split, "STRING"),
            *[(s, "STRING") for s in c.slices], (cfg.stream.event_time, "TIMESTAMP")]
    if cfg.task == "multiclass":
        cols[3] = (c.logit, "ARRAY<DOUBLE>")
    seen: set[str] = set()
    parts = []
    for name, kind in cols:
        if name is not None and name not in seen:
            seen.add(name)
            parts.append(f"`{name}` {kind}")
    return ", ".join(parts)


def read_stream(spark: SparkSession, cfg: JobConfig) -> DataFrame:
    """The streaming rows: files landing in ``stream.path`` (Parquet/JSON) or JSON values of a Kafka topic."""
    from pyspark.sql import functions as F

    s = cfg.stream
    if s.source == "file":
        if not s.path:
            raise ConfigError("A file stream needs 'stream.path' (the folder where Parquet/JSON files land).")
        fs = _Fs(spark)
        fs.mkdirs(s.path)
        schema = s.schema
        if schema is None and s.format == "parquet":
            try:
                schema = spark.read.parquet(s.path).schema  # type: ignore[assignment]
            except Exception as e:  # no files yet: nothing to infer from
                raise ConfigError(f"No Parquet files in {s.path!r} to take the schema from; set 'stream.schema' "
                                  f"(DDL), e.g. {default_schema(cfg)!r}.") from e
        reader = spark.readStream.format(s.format).schema(schema or default_schema(cfg))
        if s.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", s.max_files_per_trigger)
        df = reader.load(s.path)
    else:
        reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", s.kafka_bootstrap_servers)
                  .option("subscribe", s.kafka_topic).option("startingOffsets", s.kafka_starting_offsets)
                  .option("failOnDataLoss", "true"))
        if s.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", s.max_offsets_per_trigger)
        for k, v in dict(s.kafka_options).items():
            reader = reader.option(k, str(v))
        try:
            raw = reader.load()
        except Exception as e:
            if "kafka" in str(e).lower():
                raise ConfigError(f"The Kafka source is not available: {str(e).splitlines()[0]} Start the job with "
                                  f"spark-submit --packages {KAFKA_PACKAGE}.") from e
            raise
        parsed = F.from_json(F.col("value").cast("string"), s.schema or default_schema(cfg))
        df = raw.select(parsed.alias("_r")).select("_r.*")
    need = [n for n in required_columns(cfg) if n != cfg.columns.ds] + [s.event_time]
    check_columns(df.columns, need)
    return df


def start_stream(
    spark: SparkSession, cfg: JobConfig, *, trigger: str | None = None, after_write: Callable[[int], None] | None = None
) -> tuple[StreamingQuery, StreamJob]:
    """Start the query (``trigger`` overrides ``stream.trigger``); returns it and its job (reports, errors)."""
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # window keys and bounds are UTC
    job = StreamJob(spark, cfg, after_write=after_write)
    job.check_checkpoint()
    df = read_stream(spark, cfg)
    writer = (df.writeStream.foreachBatch(job.process_batch)
              .option("checkpointLocation", job.paths.checkpoint).queryName(f"ctcalc-stream-{uuid.uuid4().hex[:6]}"))
    trig = trigger or cfg.stream.trigger
    if trig == "availableNow":
        writer = writer.trigger(availableNow=True)
    elif trig == "once":
        writer = writer.trigger(once=True)
    else:
        duration_seconds(trig, "trigger")
        writer = writer.trigger(processingTime=trig)
    return writer.start(), job


@dataclass
class StreamResult:
    """What one run of the streaming job did."""

    batches: list[dict[str, Any]]
    closed_at_end: list[str]
    paths: StreamPaths


def run_stream(
    spark: SparkSession, cfg: JobConfig, *, trigger: str | None = None, timeout_s: float | None = None,
    close_at_end: bool = False,
) -> StreamResult:
    """Run the query until it ends (availableNow/once) or ``timeout_s`` passes; optionally close open windows."""
    query, job = start_stream(spark, cfg, trigger=trigger)
    try:
        query.awaitTermination(timeout_s) if timeout_s else query.awaitTermination()
    except Exception as e:
        if job.error is not None:
            raise job.error from e
        raise
    finally:
        if query.isActive:
            query.stop()
    if job.error is not None:
        raise job.error
    closed = job.close_open_windows() if close_at_end else []
    return StreamResult(job.reports, closed, job.paths)


def read_stream_metrics(spark: SparkSession, cfg: JobConfig) -> pd.DataFrame:
    """The stream metrics table (every closed window, both modes) as pandas."""
    path = stream_paths(cfg).metrics
    if not _Fs(spark).exists(path):
        return pd.DataFrame(columns=list(metric_types(cfg.task)))
    return spark.read.parquet(path).drop("window").toPandas()


def read_stream_counts(spark: SparkSession, cfg: JobConfig) -> pd.DataFrame:
    """The late / invalid / no-event-time counts table as pandas (one row per window, group, kind, batch)."""
    path = stream_paths(cfg).counts
    if not _Fs(spark).exists(path):
        return pd.DataFrame(columns=["window_start", "kind", "n_rows"])
    return spark.read.parquet(path).toPandas()


# ---- generated data ------------------------------------------------------------------------------

def write_stream_demo_files(
    path: str, *, n_examples_per_day: int = 4000, n_runs: int = 3, n_days: int = 3, files_per_day: int = 4,
    seed: int = 7, start_ds: str = "2026-11-15", first_mtime: float | None = None,
) -> pd.DataFrame:
    """The demo evaluation table with an ``event_time`` per example, written as Parquet files in time order.

    File ``part-<day>-<chunk>.parquet`` holds every (model, run) row of the examples in
    that chunk of the day; modification times increase file by file, so a file source
    reads them in event-time order. Returns all rows written.
    """
    import os
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    from ctcalc_spark.demo import generate_demo_eval

    df = generate_demo_eval(n_examples_per_day=n_examples_per_day, n_runs=n_runs, n_days=n_days, seed=seed,
                            start_ds=start_ds)
    rng = np.random.default_rng(seed + 1)
    # examples of a day have consecutive ids; give them sorted times within the day, so time follows the id
    n = n_examples_per_day
    pos = (df["example_id"].to_numpy() % n).astype(np.int64)
    day = (df["example_id"].to_numpy() // n).astype(np.int64)
    seconds = np.sort(rng.uniform(0.0, 86_400.0, (n_days, n)), axis=1)[day, pos]
    df["event_time"] = pd.to_datetime(df["ds"]).dt.tz_localize("UTC") + pd.to_timedelta(seconds, unit="s")
    df["_chunk"] = pos * files_per_day // n
    df = df.sort_values(["event_time", "model", "run"], kind="stable").reset_index(drop=True)
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    t = time.time() - 3600 if first_mtime is None else first_mtime
    for i, ((ds, chunk), grp) in enumerate(df.groupby(["ds", "_chunk"], sort=True)):
        f = out / f"part-{ds}-{int(chunk):03d}.parquet"
        table = pa.Table.from_pandas(grp.drop(columns=["_chunk"]), preserve_index=False)
        pq.write_table(table, str(f), coerce_timestamps="us", allow_truncated_timestamps=True)
        os.utime(f, (t + i, t + i))
    return df.drop(columns=["_chunk"])
