"""Streaming: calibrated metrics per fixed-length event-time window as soon as the window closes.

Structured Streaming drives a ``foreachBatch`` function (:class:`BatchHandler`); docs/streaming.md has the
tables, the exactly-once argument, late data, quarantined files and Spark Connect. One micro-batch ``id``:

1. **rows**. File source: the stream is the list of files that landed (Spark's ``binaryFile`` source, the
   contents not read); the handler reads them with the batch reader, skipping unreadable files
   (``ignoreCorruptFiles``), and accounts for every file: rows read per file (``_metadata.file_path``)
   against the Parquet footer, so that a corrupt, truncated or partly readable file is quarantined (no row
   of it used, listed in ``stream_counts`` with kind ``unreadable_file``) and never stops the stream.
   Malformed JSON lines are counted per file (kind ``malformed_record``). Kafka: the batch's rows.
2. **summaries**. Every row gets its window ``start = event_time - event_time mod length`` and ``late`` =
   its window had closed before this batch. One native aggregation (:func:`summary_aggregation`) yields
   the summaries; on-time valid ones go to ``stream_summaries`` (window, batch_id), late / invalid /
   event-time-less rows are counted in ``stream_counts`` — never dropped silently.
3. **windows**. The watermark (max event time seen - ``stream.watermark``) advances; each open window whose
   end it passed is closed: its summaries are summed over batches and finalised into ``stream_metrics``
   (the hash split, identical to the batch evaluate job, METRIC_TYPES) and ``stream_rolling`` (bias of
   all of the previous window applied to all of this one, by :func:`finalize_windows` like the batch rolling
   job, ROLLING_TYPES). A closed window that gets late rows is finalised again with the new ``n_late``.
4. **commit**. Every table write above is one Delta commit carrying the batch id as the stream's application
   version (:data:`APP_ID`); the batch's row in ``stream_batches`` (its report), whose commit carries the new
   state (last batch id, watermark, open windows), is committed last.

Exactly once: Spark replays an uncommitted batch with the same id and files. A replayed batch whose row is in
``stream_batches`` is skipped; otherwise each table that already holds a commit of that batch is not written
again, and the others are written as the first attempt would have.

The handler holds no session and shares no memory with the client: on Spark Connect it is pickled and
runs in a server-side Python process with the batch's own session. Reports (``stream_batches``) and error records
(files under ``<output.path>/_stream/errors``) are what the client (:class:`StreamRun`) reads.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence
from urllib.parse import unquote

import numpy as np
import pandas as pd

from ctcalc_spark.config import ONE_RUN, JobConfig, duration_seconds
from ctcalc_spark.core.finalize import ALL, SUMMARY_TYPES, metrics_from_summaries
from ctcalc_spark.core.windows import (
    US,
    WindowSpec,
    finalize_windows,
    fixed_window,
    instant_text,
    previous_window,
    sum_windows,
    window_start_us,
)
from ctcalc_spark.errors import ConfigError, CtcalcError, InputError
from ctcalc_spark.jobs.evaluate import check_finite
from ctcalc_spark.filekind import (
    own_encoding,
    temporary_suffix,
)
from ctcalc_spark.storage import FileStore, absolute, csv_first_record, is_local, literal_path, local_path
from ctcalc_spark.spark import names
from ctcalc_spark.core.findings import NOTE, ROW_REASONS, Finding, render, stream_invalid_rows
from ctcalc_spark.spark.scan import decode_aggregate, group_columns, summary_aggregation
from ctcalc_spark.tables import OutputStore
from ctcalc_spark.jobs.stream_state import (
    APP_ID,
    StreamFiles,
    StreamPaths,
    StreamState,
    count_schema,
    metric_schema,
    rolling_schema,
    summary_schema,
)
from ctcalc_spark.jobs.stream_source import (
    CORRUPT_RECORD,
    FILE_COLUMN,
    RECORD_FORMATS,
    base_path,
    check_stream_task,
    has_csv_header,
    kafka_checkpoint_offsets,
    kafka_required,
    needed_columns,
    read_stream,
    reader_options,
    source_csv_sep,
)
from ctcalc_spark.spark.input_hints import CSV_SAMPLE_BYTES, csv_quoting_problems
from ctcalc_spark.spark.inputs import stack_model_scores

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.types import StructType

    from ctcalc_spark.tables import Transaction

log = logging.getLogger(__name__)


JOB = "stream"
NO_WINDOW = "none"
"""``window`` partition of the counts that belong to no window (no event time, quarantined files)."""
COUNT_KINDS = ("late", "invalid", "no_event_time", "unreadable_file", "malformed_record", "lost_offsets")


def batch_line(report: Mapping[str, Any]) -> str:
    """One line on a batch's report (the job's progress line): rows, on time and each non-zero count, the
    watermark, the windows it closed."""
    return f"batch {report['batch_id']}: {_rows_text([report])}  [{report['seconds']:.1f} s]"


def batches_line(reports: Sequence[Mapping[str, Any]]) -> str:
    """One line on the batches of a run: how many, their rows and counts, the last watermark, windows closed."""
    if not reports:
        return "no new batches (nothing landed since the last committed batch)"
    ids = f"batch {reports[0]['batch_id']}" if len(reports) == 1 else \
        f"{len(reports)} batches ({reports[0]['batch_id']}..{reports[-1]['batch_id']})"
    return f"{ids}: {_rows_text(reports)}  [{sum(r['seconds'] for r in reports):.1f} s]"


def _rows_text(reports: Sequence[Mapping[str, Any]]) -> str:
    def total(key: str) -> int:
        return sum(int(r.get(key) or 0) for r in reports)

    extra = "".join(f", {total(k):,} {k}" for k in COUNT_KINDS if total(k))
    closed = [w for r in reports for w in r.get("closed") or []]
    watermark = reports[-1]["watermark"] or "none yet (no row with an event time)"
    return (f"{total('rows'):,} rows ({total('on_time'):,} on time{extra}), watermark {watermark}"
            + (f"; closed {', '.join(closed)}" if closed else ""))

def window_micros(cfg: JobConfig) -> tuple[int, int]:
    """(window length, watermark delay) in microseconds."""
    s = cfg.stream
    return duration_seconds(s.window, "stream.window") * US, duration_seconds(s.watermark, "stream.watermark") * US


def window_spec(cfg: JobConfig) -> WindowSpec:
    """The stream's windows: fixed-length, ``stream.window`` long, aligned to the Unix epoch."""
    return WindowSpec("fixed", seconds=window_micros(cfg)[0] // US)


# ---- closing windows --------------------------------------------------------------------------------

def _attach_counts(frame: pd.DataFrame, counts: pd.DataFrame, kind: str, name: str, cfg: JobConfig) -> None:
    """Column ``name``: the rows of ``kind`` in stream_counts for each output row's window, model, run, slice."""
    c = cfg.columns
    out = np.zeros(len(frame), dtype=np.int64)
    sel = counts[counts["kind"] == kind] if not counts.empty else counts
    for view in [ALL, *c.slices]:
        mask = (frame["slice_name"] == view).to_numpy()
        if sel.empty or not mask.any():
            continue
        by = [c.model, c.run] + ([] if view == ALL else [view])
        sums = sel.groupby(["window", *by], dropna=False)["n_rows"].sum()
        keys = frame.loc[mask, ["window", "model", "run"] + ([] if view == ALL else ["slice_value"])]
        out[mask] = [int(sums.get(k, 0)) for k in keys.itertuples(index=False, name=None)]
    frame[name] = out


class WindowCloser:
    """Finalises closed windows from stream_summaries/stream_counts into stream_metrics and stream_rolling."""

    def __init__(self, store: OutputStore, cfg: JobConfig) -> None:
        self.store = store
        self.cfg = cfg
        self.spec = window_spec(cfg)

    def finalize(self, starts: Sequence[int], batch_id: int, first_window_us: int | None) -> tuple[
            pd.DataFrame, pd.DataFrame]:
        """(stream_metrics rows, stream_rolling rows) of the windows starting at ``starts`` (micros)."""
        cfg, c = self.cfg, self.cfg.columns
        pairs = [(w, previous_window(w, self.spec)) for w in sorted({fixed_window(s, self.spec) for s in starts})]
        labels = sorted({x.label for pair in pairs for x in pair})
        rows = self.store.read("stream_summaries", where={"window": labels})
        if rows.empty:
            return pd.DataFrame(), pd.DataFrame()
        rows = rows[["window", *group_columns(cfg), *SUMMARY_TYPES[cfg.task]]]
        counts = self.store.read("stream_counts", where={"window": [w.label for w, _ in pairs]})
        now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")
        by_label = {w.label: w for w, _ in pairs}

        current = rows[rows["window"].isin(list(by_label))]
        same = metrics_from_summaries(current, cfg.task, keys=["window", c.model, c.run], slices=list(c.slices),
                                      bin_width=cfg.histogram.bin_width, max_abs_logit=cfg.sanity.max_abs_logit,
                                      min_bias_rows=cfg.split.min_bias_rows)
        same = same.rename(columns={c.model: "model", c.run: "run"})
        same = same.assign(ds=[by_label[x].start[:10] for x in same["window"]], task=cfg.task,
                           window_start=[by_label[x].start for x in same["window"]],
                           window_end=[by_label[x].end for x in same["window"]])

        first = {w.label for w, pw in pairs if first_window_us is None or window_start_us(pw) < first_window_us}
        rolling = finalize_windows(sum_windows(rows, cfg.task), cfg.task, pairs, self.spec, model=c.model, run=c.run,
                                   slices=list(c.slices), bin_width=cfg.histogram.bin_width, first=first)
        rolling = rolling.assign(ds=rolling["window_start"].str[:10], window_spec=self.spec.label)
        for frame in (same, rolling):
            _attach_counts(frame, counts, "invalid", "n_invalid", cfg)
            _attach_counts(frame, counts, "late", "n_late", cfg)
            frame["finalized_batch_id"] = batch_id
            frame["finalized_at"] = now
            check_finite(frame)
        return same, rolling

    def write(self, tx: Transaction, starts: Sequence[int], batch_id: int, first_window_us: int | None,
              app: tuple[str, int] | None = None) -> list[int]:
        """Finalise and write the windows (one commit per table); returns the starts of those that had summaries."""
        if not starts:
            return []
        same, rolling = self.finalize(starts, batch_id, first_window_us)
        if same.empty:
            return []
        tx.write_all([("stream_metrics", same, metric_schema(self.cfg.task)),
                      ("stream_rolling", rolling, rolling_schema())], app=app)
        done = set(same["window"])
        return [s for s in starts if fixed_window(s, self.spec).label in done]


# ---- one micro-batch ----------------------------------------------------------------------------------

def _concat(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The non-empty frames one under the other (an empty frame if none)."""
    kept = [f for f in frames if not f.empty]
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame()


def _latest(a: int | None, b: int | None) -> int | None:
    """The larger of two optional instants."""
    return b if a is None else a if b is None else max(a, b)


def _temporary_reason(path: str, fmt: str) -> str | None:
    """Why a landed file is not read because of its name (None: it is read): a temporary name, whose file its
    writer renames when done, so its rows land again (complete) under the new name."""
    suffix = temporary_suffix(unquote(path.rstrip("/").rsplit("/", 1)[-1]))
    if suffix is None:
        return None
    return (f"a temporary name ({suffix}): a file still being written, which its writer renames when done (the "
            "renamed file is read). Land files under a name starting with '.' or '_' and rename them, or set "
            f"stream.options: {{pathGlobFilter: '*.{fmt}'}} so such names are not listed")


def _partition_keys(path: str, root: str) -> set[str]:
    """The keys of the ``key=value`` folders a landed file lies in below the stream's folder ``root`` (``dt`` of
    ``landing/dt=2026-01-05/a.csv``): columns Spark's partition discovery adds to the stream's rows, which the
    file itself does not hold. Folders above ``root`` (``/data/team=ml/landing``) are not partitions."""
    file, top = _file_key(path), _file_key(root).rstrip("/")
    below = file[len(top) + 1:] if file.startswith(top + "/") else file
    return {seg.split("=", 1)[0] for seg in below.split("/")[:-1] if "=" in seg}


def _file_key(path: str) -> str:
    """A file's identity across Spark's spellings (file:/x, file:///x, percent-encoded names)."""
    path = unquote(path)
    return os.path.normpath(local_path(path)) if is_local(path) else path


@dataclass
class _BatchRows:
    """The rows of one micro-batch and what reading them found."""

    frame: DataFrame | None
    n_rows: int = 0
    max_event_us: int | None = None
    quarantined: list[dict[str, Any]] = field(default_factory=list)
    malformed: list[dict[str, Any]] = field(default_factory=list)
    offsets: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Kafka: the first and last offset read per ``<topic>:<partition>``."""
    cached: DataFrame | None = None
    """A frame the handler cached for the batch's passes (Kafka), released once the summaries are aggregated."""

    def release(self) -> None:
        if self.cached is not None:
            self.cached.unpersist()
            self.cached = None


MALFORMED_LISTED = 1000
"""Malformed Kafka messages of one batch listed one by one in stream_counts (by topic, partition, offset); the
rest of a batch's are counted per partition and reason, with their first and last offset."""


REPORT_MESSAGES = 20
"""Malformed Kafka messages a batch's report (and the command's summary) lists; stream_counts has them all."""


def message_name(topic: str, partition: int, offset: int | str) -> str:
    """A Kafka message as stream_counts' ``file`` names it: ``<topic>-<partition>@<offset>``."""
    return f"{topic}-{partition}@{offset}"


class BatchHandler:
    """The ``foreachBatch`` function: picklable, no session or client state (see the module docstring).

    ``schema``: the rows' schema for a file source, the DDL a Kafka message's value is parsed with;
    ``token``: the run that started the query, stamped on its reports and errors; ``after_write``: a test
    hook called after a batch's summaries and counts are written, before its windows and commit.
    """

    def __init__(self, cfg: JobConfig, *, token: str, schema: StructType | str | None = None,
                 after_write: Callable[[int], None] | None = None) -> None:
        check_stream_task(cfg)
        self.cfg = cfg
        self.token = token
        self.schema = schema
        self.after_write = after_write
        self.window_us, self.delay_us = window_micros(cfg)

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        store = OutputStore(self.cfg, batch_df.sparkSession)
        files = StreamFiles(store, self.cfg)
        try:
            self._process(store, files, batch_df, int(batch_id))
        except BaseException as e:
            try:
                files.write_error(self.token, int(batch_id), e)
            except Exception as record_error:  # noqa: BLE001 - the batch's own error is the one to raise
                log.error("could not record the error of batch %s: %s", batch_id, record_error)
            raise

    # ---- reading ----------------------------------------------------------------------------------------
    def _event_us(self) -> Any:
        from pyspark.sql import functions as F

        return F.unix_micros(names.col(self.cfg.stream.event_time).cast("timestamp"))

    def _read(self, batch_df: DataFrame) -> _BatchRows:
        """The batch's usable rows, with every landed file accounted for."""
        from pyspark.sql import functions as F

        s = self.cfg.stream
        if s.source != "file":
            return self._read_kafka(batch_df)
        landed = [(r["path"], int(r["length"])) for r in batch_df.select("path", "length").collect()]
        reasons = {p: _temporary_reason(p, s.format) for p, _ in landed}
        temporary = [{"file": p, "reason": why, "n_rows": None} for p, why in reasons.items() if why]
        landed = [(p, n) for p, n in landed if not reasons[p]]
        if not landed:
            return _BatchRows(None, quarantined=temporary)
        spark = batch_df.sparkSession
        reader = (spark.read.format(s.format).schema(self.schema).options(**reader_options(s))
                  .option("ignoreCorruptFiles", "true").option("ignoreMissingFiles", "true"))
        if base_path(s) is not None:  # files landed in key=value folders (dt=…/) get those columns' values
            reader = reader.option("basePath", base_path(s))
        text_source = s.format in RECORD_FORMATS  # text records: a line that does not parse is counted, not fatal
        if text_source:
            reader = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT_RECORD)
        frame = reader.load([literal_path(p) for p, _ in landed])
        frame = frame.withColumn(FILE_COLUMN, F.col("_metadata.file_path"))
        # The hash makes this pass read every column the scan reads: a file corrupt in one column only (say the
        # logit's page) yields fewer rows here too, so it is quarantined instead of silently half-read.
        read_all = F.hash(*[names.col(n) for n in needed_columns(self.cfg)])
        aggs = [F.count(F.lit(1)).alias("n"), F.max(self._event_us()).alias("mx"), F.max(read_all).alias("_h")]
        if text_source:
            aggs.append(F.count(CORRUPT_RECORD).alias("malformed"))
        per_file = {_file_key(r[FILE_COLUMN]): r.asDict() for r in frame.groupBy(FILE_COLUMN).agg(*aggs).collect()}
        out = _BatchRows(frame, quarantined=temporary)
        excluded = []
        try:
            footers: FileStore | str = FileStore(str(s.path))
        except ConfigError as e:  # a file system pyarrow cannot reach: Spark's counts are all there is
            footers = str(e).splitlines()[0]
        for path, length in landed:
            got = per_file.get(_file_key(path), {"n": 0, "mx": None, "malformed": 0})
            reason, footer = self._unreadable(footers, path, length, int(got["n"]))
            if reason is not None:
                out.quarantined.append({"file": path, "reason": reason, "n_rows": footer})
                if got["n"]:
                    excluded.append(got[FILE_COLUMN])
                continue
            bad = int(got.get("malformed") or 0)
            if bad:
                out.malformed.append({"file": path, "reason": f"malformed {s.format.upper()} line(s)", "n_rows": bad})
            out.n_rows += int(got["n"]) - bad
            out.max_event_us = _latest(out.max_event_us, None if got["mx"] is None else int(got["mx"]))
        if excluded:
            frame = frame.where(~F.col(FILE_COLUMN).isin(excluded))
        if text_source:
            frame = frame.where(F.col(CORRUPT_RECORD).isNull())
        out.frame = frame
        return out

    def _malformed_reason(self, value: Any, parsed: Any, fields: Sequence[str]) -> Any:
        """Why a message gives no row (a string column; null for a good one): a null value, a value over
        ``stream.kafka_max_value_bytes``, a value that does not parse (JSON: not an object, or a field of the
        wrong type; CSV: a line that does not fit ``stream.schema``), or a required field missing or null."""
        from pyspark.sql import functions as F

        s = self.cfg.stream
        size = F.octet_length(value)
        text = value.cast("string")
        if s.kafka_format == "json":
            wrong = F.concat_ws(", ", F.array_compact(F.array(*[
                F.when(parsed[n].isNull() & F.get_json_object(text, f"$['{n}']").isNotNull(), F.lit(n))
                for n in fields])))
            unparsed = (F.when(F.json_object_keys(text).isNull(), F.lit("not a JSON object"))
                        .when(wrong == "", F.lit("a JSON object that does not parse with stream.schema"))
                        .otherwise(F.concat(F.lit("a field of the wrong type ("), wrong, F.lit(") for stream.schema"))))
        else:
            unparsed = F.lit("a CSV line that does not fit stream.schema (fields or their types)")
        missing = [F.when(parsed[n].isNull(), F.lit(n)) for n in kafka_required(self.cfg)]
        return (F.when(value.isNull(), F.lit("null value"))
                .when(size > F.lit(s.kafka_max_value_bytes),
                      F.concat(F.lit("a value of "), size.cast("string"),
                               F.lit(f" bytes, over stream.kafka_max_value_bytes ({s.kafka_max_value_bytes})")))
                .when(parsed[CORRUPT_RECORD].isNotNull(), unparsed)
                .when(F.size(F.array_compact(F.array(*missing))) > 0,
                      F.concat(F.lit("missing or null field(s): "),
                               F.concat_ws(", ", F.array_compact(F.array(*missing))))))

    def _read_kafka(self, batch_df: DataFrame) -> _BatchRows:
        """The batch's messages parsed (cached for the batch's passes); a message that gives no row is counted
        and listed by topic, partition and offset (kind ``malformed_record``), and never enters a window."""
        from pyspark.sql import functions as F

        s = self.cfg.stream
        value = F.col("value")
        small = F.when(F.octet_length(value) <= F.lit(s.kafka_max_value_bytes), value.cast("string"))
        opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_RECORD}
        parse = F.from_csv if s.kafka_format == "csv" else F.from_json
        parsed = batch_df.select("topic", "partition", "offset", "value", parse(small, str(self.schema), opts)
                                 .alias("_r"))
        fields = [n for n in parsed.select("_r.*").columns if n != CORRUPT_RECORD]
        reason = self._malformed_reason(F.col("value"), F.col("_r"), fields)
        frame = parsed.select("topic", "partition", "offset", reason.alias("_reason"), "_r.*").drop(CORRUPT_RECORD)
        frame = frame.persist()
        by = frame.groupBy("topic", "partition", "_reason").agg(
            F.count(F.lit(1)).alias("n"), F.min("offset").alias("first"), F.max("offset").alias("last"),
            F.max(self._event_us()).alias("mx")).collect()
        out = _BatchRows(None, cached=frame)
        bad = [r for r in by if r["_reason"] is not None]
        for r in by:
            key = f"{r['topic']}:{int(r['partition'])}"
            first, last = out.offsets.get(key, (int(r["first"]), int(r["last"])))
            out.offsets[key] = (min(first, int(r["first"])), max(last, int(r["last"])))
            if r["_reason"] is None:
                out.n_rows += int(r["n"])
                out.max_event_us = _latest(out.max_event_us, None if r["mx"] is None else int(r["mx"]))
        if bad:
            listed = (frame.where(F.col("_reason").isNotNull()).select("topic", "partition", "offset", "_reason")
                      .orderBy("topic", "partition", "offset").limit(MALFORMED_LISTED).collect())
            shown: dict[tuple[str, int, str], int] = {}
            for m in listed:
                group = (m["topic"], int(m["partition"]), m["_reason"])
                shown[group] = shown.get(group, 0) + 1
                out.malformed.append({"file": message_name(m["topic"], int(m["partition"]), int(m["offset"])),
                                      "reason": m["_reason"], "n_rows": 1})
            for r in bad:
                rest = int(r["n"]) - shown.get((r["topic"], int(r["partition"]), r["_reason"]), 0)
                if rest > 0:
                    out.malformed.append({"file": message_name(r["topic"], int(r["partition"]),
                                                               f"{int(r['first'])}..{int(r['last'])}"),
                                          "reason": f"{r['_reason']} ({rest} more not listed one by one)",
                                          "n_rows": rest})
            log.warning("%d malformed Kafka message(s) quarantined, e.g. %s: %s", sum(int(r["n"]) for r in bad),
                        out.malformed[0]["file"], out.malformed[0]["reason"])
        out.frame = frame.where(F.col("_reason").isNull()).drop("topic", "partition", "offset", "_reason")
        return out

    def _lost_offsets(self, state: StreamState, got: _BatchRows, checkpoint: str, batch_id: int) -> list[
            dict[str, Any]]:
        """stream_counts rows (kind ``lost_offsets``) of the Kafka messages the stream never read, and the state's
        next offsets moved on. Only with ``failOnDataLoss: false``: otherwise Spark fails the query instead of
        skipping them. A batch that starts past the offset after the last one read skipped the messages between
        (gone under retention before the stream read them). A partition whose offsets went back (its end offset
        in the checkpoint's offset log for this batch is below the previous batch's, as when the topic was deleted
        and created again) is not read in this batch, and Spark goes on from its new end offset: the offsets below
        that were never read, nor were the old partition's messages after those the stream had read (how many is
        unknowable); its row says both."""
        if str(dict(self.cfg.stream.kafka_options).get("failOnDataLoss", "true")).strip().lower() != "false":
            state.kafka_next.update({k: last + 1 for k, (_, last) in got.offsets.items()})
            return []
        lost = []
        ends = kafka_checkpoint_offsets(checkpoint, batch_id) or {}
        starts = (kafka_checkpoint_offsets(checkpoint, batch_id - 1) if batch_id > 0 else None) or {}
        for key, end in sorted(ends.items()):
            reached = starts.get(key, state.kafka_next.get(key))
            if reached is None or end >= reached:
                continue
            topic, partition = key.rsplit(":", 1)
            skipped = f"offsets 0..{end - 1} were skipped, and " if end else ""
            lost.append({"file": message_name(topic, int(partition), f"0..{end - 1}" if end else f"{reached}.."),
                         "n_rows": end or None,
                         "reason": f"offsets went back from {reached} to {end} (the stream had read up to {reached}; "
                                   f"the partition now ends at {end}): topic deleted and created again? The stream "
                                   f"goes on from offset {end}: {skipped}the old partition's messages from offset "
                                   f"{reached} on, if it had any, were never read (how many is unknowable) "
                                   "(failOnDataLoss: false)"})
            state.kafka_next[key] = end
        for key, (first, last) in sorted(got.offsets.items()):
            topic, partition = key.rsplit(":", 1)
            expected = state.kafka_next.get(key)
            if expected is not None and first > expected:
                lost.append({"file": message_name(topic, int(partition), f"{expected}..{first - 1}"),
                             "n_rows": first - expected,
                             "reason": f"offsets {expected}..{first - 1} were gone from Kafka (retention, or deleted "
                                       "records) before the stream read them; skipped (failOnDataLoss: false)"})
            elif expected is not None and first < expected:  # the offset log unreadable: the first offset read shows it
                lost.append({"file": message_name(topic, int(partition), f"{expected}.."), "n_rows": None,
                             "reason": f"the partition's offsets went back from {expected} to {first}: the topic was "
                                       "deleted and created again (or its offsets reset); its messages from offset "
                                       f"{expected} on were never read (failOnDataLoss: false)"})
            state.kafka_next[key] = last + 1
        for item in lost:
            log.warning("Kafka messages lost: %s: %s", item["file"], item["reason"])
        return lost

    def _stacked(self, got: _BatchRows) -> _BatchRows:
        """With ``columns.model_scores``, a landed row per model (and run) column, as the batch job reads it:
        the batch's rows counted as evaluation rows, one per score column of a landed row."""
        if not self.cfg.columns.model_scores or got.frame is None:
            return got
        width = len(self.cfg.columns.model_score_columns())
        return dataclasses.replace(got, frame=stack_model_scores(got.frame, self.cfg), n_rows=got.n_rows * width)

    def _unreadable(self, footers: FileStore | str, path: str, length: int, read: int) -> tuple[
            str | None, int | None]:
        """(why the file is quarantined or None, its footer row count if known) from the rows Spark read.

        ``footers``: the FileStore to read Parquet footers (and CSV headers) with, or why there is none."""
        if self.cfg.stream.format == "csv" and not isinstance(footers, str):
            return self._csv_problem(footers, path, length, read), None
        if self.cfg.stream.format != "parquet":
            return (f"no records read from a {length}-byte file", None) if read == 0 and length > 0 else (None, None)
        footer: int | None = None
        if isinstance(footers, str):
            problem = footers
        else:
            try:
                footer, problem = footers.parquet_rows(path), ""
            except Exception as e:  # noqa: BLE001 - ArrowInvalid, OSError: the footer itself is unreadable
                problem = f"unreadable Parquet footer ({str(e).splitlines()[0][:200]})"
        if footer is not None:
            if read == footer:
                return None, footer
            try:  # a file of other column types reads as short as a damaged one: tell them apart
                why = footers.parquet_type_clash(path, self.schema) if self.schema is not None else None
            except Exception:  # noqa: BLE001 - the footer was read just above; a reason is all this adds
                why = None
            return f"Spark read {read} of the {footer} rows its footer lists ({why or 'corrupt or truncated data'})", \
                footer
        if read == 0 and length > 0:
            return f"no rows read from a {length}-byte file: {problem}", None
        return None, None

    def _csv_problem(self, files: FileStore, path: str, length: int, read: int) -> str | None:
        """Why a landed CSV file is quarantined, or None. Spark reads CSV columns by position, so a file whose
        header names other columns, or the same in another order, would be read into the wrong ones; a file of
        only a header holds no rows and is fine."""
        s = self.cfg.stream
        try:  # one read: the header, and the start the quoting is judged on
            data = files.head(path, CSV_SAMPLE_BYTES + 1)
        except Exception as e:  # noqa: BLE001 - OSError, ArrowInvalid: a corrupt .gz, say
            return f"unreadable file ({str(e).splitlines()[0][:200]})"
        head, more = csv_first_record(data, source_csv_sep(s))
        if has_csv_header(s):
            folders = _partition_keys(path, str(s.path))  # a key=value folder's column is not in the file
            want = [f.name for f in (self.schema.fields if self.schema is not None else [])
                    if f.name != CORRUPT_RECORD and f.name not in folders]
            if head != want:
                return (f"its header has columns {head} where the stream reads {want} (CSV columns are read by "
                        "position): land files with the same columns in the same order")
        elif head:
            more = True
        if read == 0 and more:
            return f"no records read from a {length}-byte file"
        found = csv_quoting_problems(data[:CSV_SAMPLE_BYTES], reader_options(s), "stream.options",
                                     cut=len(data) > CSV_SAMPLE_BYTES)
        return render(Finding("csv_quoting_problems", NOTE, {}, {"found": found})) if found else None

    # ---- one batch ----------------------------------------------------------------------------------------
    def _process(self, store: OutputStore, files: StreamFiles, batch_df: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        t0 = time.perf_counter()
        if batch_id <= files.committed_batch():
            log.info("batch %d already committed (replay after a restart): skipped", batch_id)
            return
        state = files.load_state()
        phase: dict[str, float] = {}

        def lap(name: str) -> None:
            phase[name] = round(time.perf_counter() - t0 - sum(phase.values()), 3)

        got = self._stacked(self._read(batch_df))
        try:
            lap("read")
            report: dict[str, Any] = {"batch_id": batch_id, "token": self.token, "rows": got.n_rows, "on_time": 0,
                                      **{k: 0 for k in COUNT_KINDS}, "quarantined": got.quarantined, "closed": [],
                                      "refreshed": []}
            report["unreadable_file"] = len(got.quarantined)
            report["malformed_record"] = sum(m["n_rows"] for m in got.malformed)
            if self.cfg.stream.source == "kafka":  # the messages by topic, partition and offset (a few listed)
                report["malformed_messages"] = got.malformed[:REPORT_MESSAGES]
            summaries, counts = pd.DataFrame(), [self._file_counts(got, batch_id)]
            if self.cfg.stream.source == "kafka":
                lost = self._lost_offsets(state, got, files.paths.checkpoint, batch_id)
                report["lost_offsets"] = sum(int(x["n_rows"] or 0) for x in lost)
                report["lost"] = lost
                if lost:
                    counts.append(pd.DataFrame(lost).assign(kind="lost_offsets", window=NO_WINDOW,
                                                            batch_id=batch_id, _window_us=None))
            if got.n_rows and got.frame is not None:
                ev = self._event_us()
                start = ev - F.pmod(ev, F.lit(self.window_us))
                wm = state.watermark_us
                late = (start + F.lit(self.window_us) <= F.lit(wm)) if wm is not None else F.lit(False)
                rows = got.frame.withColumn("_window_us", start).withColumn("_late", late)
                if self.cfg.columns.one_run:  # columns.run: null, each model trained once
                    rows = rows.withColumn(self.cfg.columns.run, F.lit(ONE_RUN))
                agg = summary_aggregation(rows, self.cfg, extra_keys=["_window_us", "_late"]).toPandas()
                lap("aggregate")
                summaries, row_counts = self._split(agg, batch_id, report)
                self._check_encoding(summaries, batch_id)
                counts.append(row_counts)
        finally:
            got.release()
        counts = _concat(counts)

        closer = WindowCloser(store, self.cfg)
        new_windows = sorted({int(w) for w in summaries.get("_window_us", [])})
        app = (APP_ID, batch_id)  # a replay of this batch skips each table it committed before
        tx = store.transaction(JOB)
        tables = []
        if not summaries.empty:
            tables.append(("stream_summaries", summaries.drop(columns="_window_us"), summary_schema(self.cfg)))
        if not counts.empty:
            tables.append(("stream_counts", counts, count_schema(self.cfg)))
        tx.write_all(tables, app=app)
        lap("write")
        if self.after_write is not None:
            self.after_write(batch_id)
        # Closing windows reads the rows just committed; the batch's row in stream_batches, committed last with the
        # new state, marks the batch done (a replay of a batch that has it is skipped whole).
        state.max_event_us = _latest(state.max_event_us, got.max_event_us)
        if state.max_event_us is not None:
            state.watermark_us = _latest(state.watermark_us, state.max_event_us - self.delay_us)
        if new_windows:
            first = state.first_window_us
            state.first_window_us = new_windows[0] if first is None else min(first, new_windows[0])
        open_windows = sorted(set(state.open_windows) | set(new_windows))
        closing = [w for w in open_windows if state.watermark_us is not None
                   and w + self.window_us <= state.watermark_us]
        late_windows = sorted({int(w) for w in counts.loc[counts["kind"] == "late", "_window_us"]}) \
            if report["late"] else []
        refresh = [w for w in late_windows if w not in closing]
        done = set(closer.write(tx, closing + refresh, batch_id, state.first_window_us, app=app))
        report["closed"] = [instant_text(w) for w in closing]
        report["refreshed"] = [instant_text(w) for w in refresh if w in done]
        lap("close")
        if report["late"]:
            log.warning("batch %d: %d late row(s) for closed window(s) %s, counted in %s", batch_id, report["late"],
                        [instant_text(w) for w in late_windows], files.paths.counts)
        if got.quarantined:
            log.warning("batch %d: quarantined %s", batch_id, got.quarantined)
        state.open_windows = [w for w in open_windows if w not in closing]
        state.batch_id = batch_id
        state.rows += got.n_rows
        state.late_rows += report["late"]
        state.quarantined_files += len(got.quarantined)
        report["watermark"] = instant_text(state.watermark_us) if state.watermark_us is not None else None
        report["seconds"] = round(time.perf_counter() - t0, 3)
        report["phase_seconds"] = phase
        report["run_id"] = tx.run_id
        files.commit_state(tx, state, report)
        log.info("%s", batch_line(report))
        log.debug("batch %d: %s", batch_id, report)

    def _check_encoding(self, summaries: pd.DataFrame, batch_id: int) -> None:
        """InputError (the batch fails before its write, and its replay until the files are read right) when
        the model, run or slice values of landed CSV/JSON files are not UTF-8, as in the batch job."""
        from ctcalc_spark.core.sanity import not_utf8, undecoded_values

        s, c = self.cfg.stream, self.cfg.columns
        if s.source != "file" or s.format not in RECORD_FORMATS or own_encoding(s.options):
            return
        found = undecoded_values(summaries, {c.model: c.model, c.run: c.run, **{n: n for n in c.slices}})
        if found:
            raise InputError(render(not_utf8(found, s.format, "stream.options", batch=batch_id)))

    def _window_columns(self, frame: pd.DataFrame) -> pd.DataFrame:
        """window, ds, window_start, window_end from the ``_window_us`` column (None: no window)."""
        spec = window_spec(self.cfg)
        wins = {w: fixed_window(int(w), spec) for w in set(frame["_window_us"].dropna())}

        def pick(attr: str, none: str | None) -> list[str | None]:
            return [none if pd.isna(w) else getattr(wins[w], attr) for w in frame["_window_us"]]

        return frame.assign(window=pick("label", NO_WINDOW), ds=[None if x is None else x[:10]
                                                                  for x in pick("start", None)],
                            window_start=pick("start", None), window_end=pick("end", None))

    def _split(self, agg: pd.DataFrame, batch_id: int, report: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(on-time summaries, counts of late / invalid / event-time-less rows) of the collected aggregate."""
        gcols = group_columns(self.cfg)
        window = agg["_window_us"]
        kind = np.select([window.isna().to_numpy(), (agg["_late"] == "true").to_numpy(),
                          (agg["invalid"] != 0).to_numpy()], ["no_event_time", "late", "invalid"], "on_time")
        kept = agg[np.isin(kind, ["on_time", "invalid"])].drop(columns="_late")
        summaries, tally = decode_aggregate(kept, self.cfg, extra=["_window_us"])
        uncounted = np.isin(kind, ["late", "no_event_time"])
        other = agg[uncounted].assign(kind=kind[uncounted])
        other = other.groupby(["_window_us", "kind", *gcols], dropna=False)["count"].sum().reset_index()
        tally = tally.assign(kind="invalid", reason=[ROW_REASONS[int(x)][1] for x in tally["invalid"]])
        counts = _concat([other, tally.drop(columns="invalid")]).rename(columns={"count": "n_rows"})
        for k in ("on_time", "late", "invalid", "no_event_time"):
            report[k] = int(agg.loc[kind == k, "count"].sum())
        if self.cfg.on_invalid == "error" and (bad := stream_invalid_rows(
                tally, report["no_event_time"], batch=batch_id, event_time=self.cfg.stream.event_time)):
            raise InputError(render(bad))
        summaries = self._window_columns(summaries).assign(batch_id=batch_id)
        if counts.empty:
            return summaries, counts
        if "reason" not in counts:
            counts["reason"] = None
        return summaries, self._window_columns(counts).assign(batch_id=batch_id, file=None)

    def _file_counts(self, got: _BatchRows, batch_id: int) -> pd.DataFrame:
        """stream_counts rows of quarantined files and malformed records (window 'none', no group)."""
        items = [{**q, "kind": "unreadable_file"} for q in got.quarantined] + \
            [{**m, "kind": "malformed_record"} for m in got.malformed]
        if not items:
            return pd.DataFrame()
        return pd.DataFrame(items).assign(window=NO_WINDOW, batch_id=batch_id, _window_us=None)


# ---- the query -------------------------------------------------------------------------------------------


def resolved(cfg: JobConfig) -> JobConfig:
    """The config with its output, source and checkpoint paths absolute (as the client sees them): the handler
    may run in another process with another working folder (Spark Connect)."""
    s = cfg.stream
    return dataclasses.replace(
        cfg, output=dataclasses.replace(cfg.output, path=absolute(cfg.output.path)),
        stream=dataclasses.replace(s, path=s.path and absolute(s.path),
                                   checkpoint=s.checkpoint and absolute(s.checkpoint)),
    )


class StreamRun:
    """The client's view of one started query: its reports, error, state and window closing, all from files."""

    def __init__(self, spark: SparkSession, cfg: JobConfig, token: str) -> None:
        self.spark = spark
        self.cfg = cfg
        self.token = token
        self.store = OutputStore(cfg, spark)
        self.files = StreamFiles(self.store, cfg)
        self.paths = self.files.paths

    @property
    def reports(self) -> list[dict[str, Any]]:
        """Reports of the batches this run committed, in order."""
        return self.files.reports(self.token)

    @property
    def error(self) -> CtcalcError | None:
        """The last error a batch of this run failed with (None if none did). A batch interrupted by
        ``query.stop()`` leaves one too; ``query.exception()`` tells whether the query itself failed."""
        return self.files.error(self.token)

    def load_state(self) -> StreamState:
        return self.files.load_state()

    def check_checkpoint(self) -> None:
        """Refuse to pair committed stream state with a fresh checkpoint (batch ids would restart at 0)."""
        state = self.load_state()
        checkpoint = self.paths.checkpoint
        try:
            has_offsets = FileStore(checkpoint).exists(f"{checkpoint}/offsets")
        except ConfigError:  # not reachable from here: Spark will tell
            return
        if state.batch_id >= 0 and not has_offsets:
            raise ConfigError(
                f"{self.cfg.output.path!r} already holds stream state up to batch {state.batch_id}, but the "
                f"checkpoint {checkpoint!r} has no offsets: restore that checkpoint, or use a new "
                "'output.path' for a new stream."
            )

    def close_open_windows(self) -> list[str]:
        """Finalise every open window now (end of a backfill); later rows for them count as late."""
        state = self.load_state()
        if not state.open_windows:
            return []
        window_us = window_micros(self.cfg)[0]
        tx = self.store.transaction(JOB)
        WindowCloser(self.store, self.cfg).write(tx, state.open_windows, state.batch_id, state.first_window_us)
        end = max(state.open_windows) + window_us
        state.watermark_us = max(end, state.watermark_us or end)
        closed = [instant_text(w) for w in state.open_windows]
        state.open_windows = []
        self.files.commit_state(tx, state, batch=False)
        return closed


def start_stream(
    spark: SparkSession, cfg: JobConfig, *, trigger: str | None = None, after_write: Callable[[int], None] | None = None
) -> tuple[StreamingQuery, StreamRun]:
    """Start the query (``trigger`` overrides ``stream.trigger``); returns it and its :class:`StreamRun`."""
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # window keys and bounds are UTC
    cfg = resolved(cfg)
    token = uuid.uuid4().hex[:12]
    run = StreamRun(spark, cfg, token)
    run.store.check_databases()
    run.check_checkpoint()
    df, schema = read_stream(spark, cfg)
    handler = BatchHandler(cfg, token=token, schema=schema, after_write=after_write)
    writer = (df.writeStream.foreachBatch(handler).option("checkpointLocation", run.paths.checkpoint)
              .queryName(f"ctcalc-stream-{token[:6]}"))
    trig = trigger or cfg.stream.trigger
    if trig == "availableNow":
        writer = writer.trigger(availableNow=True)
    elif trig == "once":
        writer = writer.trigger(once=True)
    else:
        duration_seconds(trig, "trigger")
        writer = writer.trigger(processingTime=trig)
    return writer.start(), run


@dataclass
class StreamResult:
    """What one run of the streaming job did."""

    batches: list[dict[str, Any]]
    closed_at_end: list[str]
    paths: StreamPaths


STOP_POLL_S = 0.5


def run_stream(
    spark: SparkSession, cfg: JobConfig, *, trigger: str | None = None, timeout_s: float | None = None,
    close_at_end: bool = False, stop_requested: Callable[[], bool] | None = None,
) -> StreamResult:
    """Run the query until it ends (availableNow/once) or ``timeout_s`` passes; optionally close open windows.

    ``stop_requested`` (asked every half second, e.g. whether Ctrl-C came): when it says so, the batch in flight
    ends first, then the query stops, and the run returns as at a timeout.
    A failed batch fails the query: its own error is raised (read from the error files). A batch that the stop
    after ``timeout_s`` interrupts is not an error: Spark replays it on the next start.
    """
    py4j_log = logging.getLogger("py4j.clientserver")
    reported = _KafkaDataLossFilter()
    py4j_log.addFilter(reported)
    try:
        return _run_stream(spark, cfg, trigger, timeout_s, close_at_end, stop_requested)
    finally:
        py4j_log.removeFilter(reported)


def _run_stream(spark: SparkSession, cfg: JobConfig, trigger: str | None, timeout_s: float | None,
                close_at_end: bool, stop_requested: Callable[[], bool] | None) -> StreamResult:
    query, run = start_stream(spark, cfg, trigger=trigger)
    try:
        if stop_requested is None:
            query.awaitTermination(timeout_s) if timeout_s else query.awaitTermination()
        else:
            _await_or_stop(query, timeout_s, stop_requested)
    except Exception as e:
        error = run.error
        loss = kafka_data_loss(f"{error or ''}\n{e}") if cfg.stream.source == "kafka" else None
        if loss is not None:
            raise loss from e
        if error is not None:
            raise error from e
        raise
    finally:
        if query.isActive:
            stop_query(query)
    closed = run.close_open_windows() if close_at_end else []
    return StreamResult(run.reports, closed, run.paths)


KAFKA_LOSS_DETAILS = (
    (r"offset=(\d+)[^\n]*? is out of range for partition (\S+)", "offset {0} of {1} is no longer in Kafka"),
    (r"Cannot fetch offset (\d+) \(GroupId: [^,]*, TopicPartition: ([^)]+)\)",
     "offset {0} of {1} is no longer in Kafka"),
    (r"Partition (\S+?)(?:'s)? offset was changed from (\d+) to (\d+)", "the offsets of {0} went from {1} to {2}"),
    (r"(\S+-\d+) (?:has been|were|was) deleted", "{0} was deleted"),
)
"""Spark's and the Kafka client's ways of naming the lost partition and offsets, and how the error says them."""


def kafka_data_loss(text: str) -> InputError | None:
    """The one-line error for Spark's Kafka data-loss failure (offsets gone under retention, a topic deleted and
    created again) found in an exception's text, naming the partition and offsets Spark names; None if none."""
    import re

    if not any(m in text for m in ("KAFKA_DATA_LOSS", "data may have been lost", "OffsetOutOfRangeException")):
        return None
    details = []
    for pattern, say in KAFKA_LOSS_DETAILS:
        for found in re.finditer(pattern, text):
            line = say.format(*found.groups())
            if line not in details:
                details.append(line)
    detail = "; ".join(details[:5]) or "Spark's Kafka source reports lost data (-v prints its log)"
    if "offset was changed from" in text:  # Spark's PARTITION_OFFSET_CHANGED: a partition's latest offset is
        # below the offset the checkpoint goes on from, as when the topic was deleted and created again
        what = ("A Kafka partition's offsets went back below the stream's checkpoint ({0}): the topic was deleted "
                "and created again (or its offsets reset), so the old topic's messages after those the stream read "
                "are gone, and the new topic's messages up to the checkpoint's offset would be skipped.")
    else:
        what = ("Kafka messages the stream has not read are gone ({0}): removed by retention, or the topic was "
                "deleted, before the stream read them.")
    return InputError(what.format(detail) + " The stream stops rather than skip them (failOnDataLoss: true). To go "
                      "on past them, set stream.kafka_options: {failOnDataLoss: 'false'} and start it again: the "
                      "skipped offsets are then counted in stream_counts (kind lost_offsets); or start a new stream "
                      "(new output.path and checkpoint).")


class _InterruptedBatchFilter(logging.Filter):
    """Drops py4j's ERROR record, with its Python and Java tracebacks, of a batch that ``query.stop()``
    interrupted (a ``java.lang.InterruptedException`` in the foreachBatch call): expected when stopping, and
    Spark replays that batch at the next start. One INFO line says so instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is not None and "java.lang.InterruptedException" in str(error):
            log.info("the batch that had just started was interrupted by the stop; Spark replays it at the next "
                     "start")
            return False
        return True


class _KafkaDataLossFilter(logging.Filter):
    """Drops py4j's ERROR record, with its Python and Java tracebacks, of a batch that failed on Kafka data loss:
    the query fails with it, and :func:`run_stream` reports it in one line naming the partition and offsets. Any
    other failure of a batch still logs its tracebacks."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return error is None or kafka_data_loss(str(error)) is None


def stop_query(query: Any) -> None:
    """``query.stop()`` without py4j's traceback for a batch the stop interrupts (a stop requested while the
    query was idle can still meet a batch its trigger starts at that moment)."""
    py4j_log = logging.getLogger("py4j.clientserver")
    quiet = _InterruptedBatchFilter()
    py4j_log.addFilter(quiet)
    try:
        query.stop()
    finally:
        py4j_log.removeFilter(quiet)


def _await_or_stop(query: Any, timeout_s: float | None, stop_requested: Callable[[], bool]) -> None:
    """Wait as ``awaitTermination(timeout_s)`` does; once ``stop_requested()``, wait for the batch in flight."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        left = STOP_POLL_S if deadline is None else min(STOP_POLL_S, deadline - time.monotonic())
        if left <= 0 or query.awaitTermination(left):
            return
        if stop_requested():
            break
    log.info("stopping the stream after the batch in flight (again to stop at once; Spark replays a batch "
             "stopped midway at the next start)")
    last = _progress_batch(query)
    while query.isActive and query.status.get("isTriggerActive") and _progress_batch(query) == last:
        time.sleep(0.1)  # Spark reports a batch's progress once its offsets are committed


def _progress_batch(query: Any) -> int | None:
    progress = query.lastProgress
    return None if progress is None else progress.get("batchId")


def read_stream_table(spark: SparkSession | None, cfg: JobConfig, table: str) -> pd.DataFrame:
    """One of the stream's tables (stream_metrics, stream_rolling, stream_counts, stream_summaries) as pandas."""
    frame = OutputStore(resolved(cfg), spark).read(table)
    if frame.empty:
        return frame
    keys = ("window", "batch_id", "kind", "file", "model", "run", *group_columns(cfg), "slice_name", "slice_value",
            "split", "bin", "label")
    order = [c for c in dict.fromkeys(keys) if c in frame]
    return frame.sort_values(order, kind="stable").reset_index(drop=True)


def read_stream_state(cfg: JobConfig) -> StreamState:
    """The stream's last committed state (read from its state files; no Spark needed)."""
    cfg = resolved(cfg)
    return StreamFiles(OutputStore(cfg), cfg).load_state()


def read_stream_metrics(spark: SparkSession | None, cfg: JobConfig) -> pd.DataFrame:
    """Same-window metrics of every closed window (the hash split; the metrics table's columns)."""
    return read_stream_table(spark, cfg, "stream_metrics")


def read_stream_rolling(spark: SparkSession | None, cfg: JobConfig) -> pd.DataFrame:
    """Rolling (previous-window bias) rows of every closed window (the rolling table's columns)."""
    return read_stream_table(spark, cfg, "stream_rolling")


def read_stream_counts(spark: SparkSession | None, cfg: JobConfig) -> pd.DataFrame:
    """Rows in no summary, by kind (late, invalid, no_event_time, malformed_record) and unreadable files."""
    return read_stream_table(spark, cfg, "stream_counts")


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
