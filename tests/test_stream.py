"""The streaming job: exactly once across a stop and a crash, late rows, quarantined files, the batch jobs'
numbers (same-window metrics and rolling rows), Spark Connect."""
from __future__ import annotations

import dataclasses
import gzip
import json
import os
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from ctcalc_spark.core.summary import BinarySummary
from ctcalc_spark.core.windows import (
    WindowSpec,
    finalize_windows,
    fixed_window,
    previous_window,
    rolling_metrics,
    sum_windows,
    window_of,
    window_start_us,
    windows_between,
)
from ctcalc_spark.errors import ConfigError, InputError
from ctcalc_spark.jobs.evaluate import evaluate
from ctcalc_spark.jobs.rolling import compute_rolling
from ctcalc_spark.jobs.stream_source import KAFKA_PACKAGE, default_schema, read_stream
from ctcalc_spark.jobs.stream import (
    read_stream_counts,
    read_stream_metrics,
    read_stream_rolling,
    read_stream_state,
    read_stream_table,
    run_stream,
    start_stream,
    window_micros,
    window_spec,
    write_stream_demo_files,
)
from ctcalc_spark.jobs.stream_state import APP_ID, StreamBatchError
from tests._frames import read_delta_table

TOL = 1e-12
SAME_COLS = ["n_rows", "n_bias", "n_remain", "log_loss", "log_loss_remain", "calibrated_log_loss", "bias", "auc",
             "calibration", "normalized_entropy"]
ROLLING_COLS = ["n_rows", "prev_n_rows", "weight", "prev_weight", "vanilla", "calibrated", "calibrated_bound",
                "calibration_gain", "best_shift_gain", "bias", "prev_bias", "bias_change", "calibration",
                "mean_prediction", "mean_label"]
DAYS = ["2026-11-15", "2026-11-16", "2026-11-17"]


def _stream_config(demo_config, src: Path, out: Path | None = None, **stream):
    over = {"output__path": str(out)} if out is not None else {}
    return demo_config(input__path=str(src), stream={"path": str(src), "window": "1 day", "watermark": "1 hour",
                                                     "max_files_per_trigger": 1, **stream}, **over)


def _move_files(files: list[Path], dst: Path, first_mtime: float) -> None:
    """Land files in the source folder one by one, with increasing modification times (the read order)."""
    dst.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(files):
        target = dst / f.name
        shutil.copy(f, target)
        os.utime(target, (first_mtime + i, first_mtime + i))


def _wait_for(pred, timeout: float = 90.0) -> None:
    t0 = time.time()
    while not pred():
        if time.time() - t0 > timeout:
            raise AssertionError("timed out waiting for the stream")
        time.sleep(0.2)


def _drain(spark, cfg, *, timeout: float = 180, expect_error: bool = False, **kw):
    """Run an availableNow query over what has landed, always stopping it; returns its StreamRun."""

    query, run = start_stream(spark, cfg, trigger="availableNow", **kw)
    try:
        if expect_error:
            with pytest.raises(Exception):
                query.awaitTermination(timeout)
        else:
            query.awaitTermination(timeout)
    finally:
        if query.isActive:
            query.stop()
    return run


def _batch_reference(spark, demo_config, src: Path, out: Path, days: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The batch evaluate and rolling (day windows) jobs over the same rows: (metrics, rolling) frames."""
    cfg = demo_config(input__path=str(src), output__path=str(out))
    metrics = evaluate(spark, cfg, days).metrics
    return metrics.assign(run=metrics["run"].astype(str)), compute_rolling(cfg, days).table


def _close(a: pd.DataFrame, b: pd.DataFrame, cols: list[str], what: str) -> None:
    for col in cols:  # None and NaN both mean 'not computed' here and must agree
        np.testing.assert_allclose(a[col].to_numpy(float), b[col].to_numpy(float), rtol=0, atol=TOL,
                                   equal_nan=True, err_msg=f"{what}: {col}")


def _assert_same_as_batch(metrics: pd.DataFrame, rolling: pd.DataFrame, reference: tuple[pd.DataFrame, pd.DataFrame],
                          days: list[str]) -> None:
    """Stream tables == the batch jobs: same-window rows == evaluate, rolling rows == rolling (day windows)."""
    batch_metrics, batch_rolling = reference
    key = ["model", "run", "slice_name", "slice_value"]
    for i, ds in enumerate(days):
        batch = batch_metrics[batch_metrics["ds"] == ds].sort_values(key).reset_index(drop=True)
        same = metrics[metrics["ds"] == ds].sort_values(key).reset_index(drop=True)
        assert len(same) == len(batch) > 0
        assert same[key + ["status"]].equals(batch[key + ["status"]])
        _close(same, batch, SAME_COLS, f"same-window {ds}")
        broll = batch_rolling[batch_rolling["ds"] == ds].sort_values(key).reset_index(drop=True)
        sroll = rolling[rolling["ds"] == ds].sort_values(key).reset_index(drop=True)
        assert len(sroll) == len(broll) > 0
        assert sroll[key + ["status", "bias_status", "metric"]].equals(broll[key + ["status", "bias_status", "metric"]])
        assert set(sroll["status"]) == ({"first_window"} if i == 0 else {"ok"})
        assert (sroll["window_kind"] == "fixed").all() and (sroll["window_spec"] == "fixed_86400s").all()
        assert (sroll["window_start"] == f"{ds} 00:00:00").all() and sroll["n_days"].isna().all()
        _close(sroll, broll, ROLLING_COLS, f"rolling {ds}")


def test_restart_exactly_once_equals_batch(spark, demo_config, tmp_path):
    """Stop mid-stream, crash inside a batch after its tables are written, restart: batch-job numbers, no row twice."""

    gen, src = tmp_path / "gen", tmp_path / "src"
    rows = write_stream_demo_files(str(gen), n_examples_per_day=600, n_runs=2, n_days=3, files_per_day=2)
    files = sorted(gen.glob("*.parquet"))
    assert len(files) == 6
    t0 = time.time() - 600
    _move_files(files[:4], src, t0)  # days 1-2 have landed
    cfg = _stream_config(demo_config, src)

    # 1. processing-time query, stopped after two committed batches (day 1 read, day 2 not yet complete)
    query, run = start_stream(spark, cfg, trigger="1 second")
    try:
        _wait_for(lambda: len(run.reports) >= 2 or query.exception() is not None)
    finally:
        query.stop()
    assert query.exception() is None, run.error
    assert len(run.reports) >= 2  # stop() may interrupt the batch in flight (an error file): replayed later
    done_before = run.load_state().batch_id
    assert 1 <= done_before <= 3

    # 2. day 3 lands; restart with a crash after the next batch's tables are written but before its commit
    _move_files(files[4:], src, t0 + 100)
    crash_at = done_before + 1

    def crash(batch_id: int) -> None:
        if batch_id == crash_at:
            raise RuntimeError("simulated crash after the batch's summaries were written")

    run = _drain(spark, cfg, expect_error=True, after_write=crash)
    assert isinstance(run.error, StreamBatchError) and run.error.error_type == "RuntimeError"
    assert "simulated crash" in str(run.error) and f"batch {crash_at}" in str(run.error)
    assert run.load_state().batch_id == done_before  # the crashed batch is not committed ...
    # ... though its summaries are: one Delta commit, which carries the batch id as the stream's version
    summaries = DeltaTable(run.paths.summaries)
    assert summaries.transaction_version(APP_ID) == crash_at
    crashed = read_delta_table(run.paths.summaries, batch_id=str(crash_at))
    assert len(crashed) > 0 and crashed["run_id"].nunique() == 1

    # 3. restart cleanly: Spark replays the crashed batch id, the job overwrites it, then reads the rest
    run = _drain(spark, cfg)
    assert run.error is None
    assert run.reports[0]["batch_id"] == crash_at  # replayed with the same id
    # the replay did not write the crashed batch's summaries again: the same rows of the same commit
    again = read_delta_table(run.paths.summaries, batch_id=str(crash_at))
    pd.testing.assert_frame_equal(again.sort_values(list(again.columns)).reset_index(drop=True),
                                  crashed.sort_values(list(crashed.columns)).reset_index(drop=True))
    assert run.close_open_windows() == ["2026-11-17 00:00:00"]
    state = run.load_state()
    assert state.rows == len(rows) and state.late_rows == 0  # every row once: nothing lost, nothing twice

    metrics, rolling = read_stream_metrics(spark, cfg), read_stream_rolling(spark, cfg)
    assert sorted(metrics["ds"].unique()) == DAYS and "mode" not in metrics
    assert int(metrics.loc[metrics["slice_name"] == "__all__", "n_rows"].sum()) == len(rows)
    _assert_same_as_batch(metrics, rolling, _batch_reference(spark, demo_config, gen, tmp_path / "batch", DAYS), DAYS)
    # a second run on the same checkpoint finds nothing new and changes nothing
    run = _drain(spark, cfg, timeout=60)
    assert run.reports == [] and run.load_state().rows == len(rows)


def test_late_rows_counted_not_dropped(spark, demo_config, tmp_path):
    """Rows for a closed window are counted per window and group, reported in n_late, and kept out of its metrics."""

    gen, src, ontime = tmp_path / "gen", tmp_path / "src", tmp_path / "ontime"
    rows = write_stream_demo_files(str(gen), n_examples_per_day=400, n_runs=2, n_days=2, files_per_day=1)
    files = sorted(gen.glob("*.parquet"))
    late = rows[rows["ds"] == "2026-11-15"].iloc[:90].copy()
    late["example_id"] += 1_000_000  # new examples of day 1 whose labels arrive after day 1 closed
    late = late.assign(label=late["label"].astype(np.int32))
    pq.write_table(pa.Table.from_pandas(late, preserve_index=False), str(gen / "zz-late.parquet"),
                   coerce_timestamps="us", allow_truncated_timestamps=True)
    t0 = time.time() - 600
    _move_files(files + [gen / "zz-late.parquet"], src, t0)
    _move_files(files, ontime, t0)
    cfg = _stream_config(demo_config, src)

    res = run_stream(spark, cfg, trigger="availableNow", close_at_end=True)
    assert [r["late"] for r in res.batches] == [0, 0, 90]
    assert res.batches[1]["closed"] == ["2026-11-15 00:00:00"]
    assert res.batches[2]["refreshed"] == ["2026-11-15 00:00:00"]

    counts = read_stream_counts(spark, cfg)
    assert set(counts["kind"]) == {"late"} and int(counts["n_rows"].sum()) == 90
    assert set(counts["window_start"]) == {"2026-11-15 00:00:00"} and set(counts["window"]) == {"20261115T000000"}
    metrics, rolling = read_stream_metrics(spark, cfg), read_stream_rolling(spark, cfg)
    expected = late.groupby(["model", "run"]).size()
    for table in (metrics, rolling):
        day1 = table[(table["ds"] == "2026-11-15") & (table["slice_name"] == "__all__")]
        assert len(day1) == 6
        for _, r in day1.iterrows():
            assert r["n_late"] == expected.get((r["model"], int(r["run"])), 0)
        assert int(table.loc[table["ds"] == "2026-11-16", "n_late"].sum()) == 0
        assert (table.loc[table["ds"] == "2026-11-15", "finalized_batch_id"] == 2).all()  # rewritten by batch 2
    # values are those of the on-time rows alone: the batch jobs over the files without the late one
    days = ["2026-11-15", "2026-11-16"]
    _assert_same_as_batch(metrics, rolling, _batch_reference(spark, demo_config, ontime, tmp_path / "batch", days),
                          days)


def _partly_corrupt(rows: pd.DataFrame, path: Path, only: str | None = None) -> int:
    """A Parquet file whose footer is intact but whose last row group's data page headers are overwritten (only
    column ``only``'s when given)."""
    pq.write_table(pa.Table.from_pandas(rows, preserve_index=False), str(path), row_group_size=len(rows) // 3,
                   coerce_timestamps="us", allow_truncated_timestamps=True)
    meta = pq.read_metadata(str(path))
    last = meta.row_group(meta.num_row_groups - 1)
    offsets = [last.column(j).data_page_offset for j in range(last.num_columns)
               if only is None or last.column(j).path_in_schema == only]
    assert offsets
    data = bytearray(path.read_bytes())
    for off in offsets:
        data[off:off + 24] = b"\xff" * 24
    path.write_bytes(bytes(data))
    assert pq.read_metadata(str(path)).num_rows == len(rows)
    return len(rows)


def test_corrupt_files_are_quarantined_and_never_stop_the_stream(spark, demo_config, tmp_path):
    """Garbage, truncated and partly corrupt Parquet files land between good ones: the stream goes on, a restart
    goes on, later good files are read, every good row counts once, no row of a quarantined file counts."""

    gen, src, bad = tmp_path / "gen", tmp_path / "src", tmp_path / "bad"
    rows = write_stream_demo_files(str(gen), n_examples_per_day=300, n_runs=1, n_days=2, files_per_day=2)
    good = sorted(gen.glob("*.parquet"))
    bad.mkdir()
    (bad / "part-x-garbage.parquet").write_bytes(os.urandom(3000))
    data = good[0].read_bytes()
    (bad / "part-x-truncated.parquet").write_bytes(data[: len(data) // 2])
    extra = rows[rows["ds"] == "2026-11-15"].assign(example_id=lambda f: f["example_id"] + 10**6)
    n_partial = _partly_corrupt(extra, bad / "part-x-partial.parquet")
    # corrupt in the logit column only: a check that read fewer columns than the scan would let it through
    _partly_corrupt(extra.assign(example_id=lambda f: f["example_id"] + 10**6), bad / "part-x-logit.parquet", "logit")
    t0 = time.time() - 600
    _move_files([good[0], bad / "part-x-garbage.parquet", good[1], bad / "part-x-truncated.parquet",
                 bad / "part-x-partial.parquet", bad / "part-x-logit.parquet"], src, t0)
    cfg = _stream_config(demo_config, src)

    first = run_stream(spark, cfg, trigger="availableNow")
    assert len(first.batches) == 6
    quarantined = {Path(q["file"]).name: q for b in first.batches for q in b["quarantined"]}
    assert set(quarantined) == {"part-x-garbage.parquet", "part-x-truncated.parquet", "part-x-partial.parquet",
                                "part-x-logit.parquet"}
    assert "footer" in quarantined["part-x-garbage.parquet"]["reason"]
    partial = re.search(r"Spark read (\d+) of the (\d+) rows", quarantined["part-x-partial.parquet"]["reason"])
    assert partial is not None and 0 < int(partial[1]) < int(partial[2]) == n_partial  # rows read, then left out

    _move_files(good[2:], src, t0 + 100)  # later good files, read by a restarted stream
    second = run_stream(spark, cfg, trigger="availableNow", close_at_end=True)
    assert [b["rows"] for b in second.batches] == [len(rows) // 4] * 2 and second.closed_at_end
    state = read_stream_state(cfg)
    assert state.rows == len(rows) and state.quarantined_files == 4

    counts = read_stream_counts(spark, cfg)
    listed = counts[counts["kind"] == "unreadable_file"]
    assert sorted(Path(f).name for f in listed["file"]) == sorted(quarantined)
    assert (listed["window"] == "none").all() and listed["reason"].notna().all()
    assert int(listed.loc[listed["file"].str.endswith("partial.parquet"), "n_rows"].iloc[0]) == n_partial
    metrics, rolling = read_stream_metrics(spark, cfg), read_stream_rolling(spark, cfg)
    days = ["2026-11-15", "2026-11-16"]
    _assert_same_as_batch(metrics, rolling, _batch_reference(spark, demo_config, gen, tmp_path / "batch", days), days)


def test_malformed_json_lines_and_unreadable_json_files(spark, demo_config, tmp_path):
    """JSON source: malformed lines are counted per file and left out; an undecodable file is quarantined."""

    gen, src = tmp_path / "gen", tmp_path / "src"
    rows = write_stream_demo_files(str(gen), n_examples_per_day=300, n_runs=1, n_days=2, files_per_day=1)
    src.mkdir()
    t0 = time.time() - 600
    for i, (ds, day) in enumerate(rows.groupby("ds")):
        day = day.assign(event_time=day["event_time"].dt.strftime("%Y-%m-%d %H:%M:%S.%f"))
        lines = [json.dumps(r) for r in day.to_dict("records")]  # floats as repr: they read back exactly
        if i == 0:
            lines[10:10] = ['{"model": "baseline", "run": 0, "label": ', "not json at all", '{"logit": 1.5']
        (src / f"day-{ds}.json").write_text("\n".join(lines) + "\n")
        os.utime(src / f"day-{ds}.json", (t0 + 2 * i, t0 + 2 * i))
    (src / "day-x-broken.json.gz").write_bytes(gzip.compress(b'{"model": "m"}\n' * 500)[:40])
    os.utime(src / "day-x-broken.json.gz", (t0 + 1, t0 + 1))
    schema = "model STRING, run BIGINT, ds STRING, example_id BIGINT, label INT, logit DOUBLE, event_time TIMESTAMP"
    cfg = _stream_config(demo_config, src, format="json", schema=schema)

    res = run_stream(spark, cfg, trigger="availableNow", close_at_end=True)
    assert [b["malformed_record"] for b in res.batches] == [3, 0, 0]
    assert [b["unreadable_file"] for b in res.batches] == [0, 1, 0]
    assert sum(b["rows"] for b in res.batches) == len(rows)
    counts = read_stream_counts(spark, cfg)
    malformed = counts[counts["kind"] == "malformed_record"]
    assert malformed["file"].str.endswith("day-2026-11-15.json").all() and int(malformed["n_rows"].sum()) == 3
    assert counts.loc[counts["kind"] == "unreadable_file", "file"].str.endswith("broken.json.gz").all()
    metrics = read_stream_metrics(spark, cfg)
    batch_metrics, _ = _batch_reference(spark, demo_config, gen, tmp_path / "batch", ["2026-11-15", "2026-11-16"])
    key = ["ds", "model", "run", "slice_name"]
    _close(metrics.sort_values(key).reset_index(drop=True), batch_metrics.sort_values(key).reset_index(drop=True),
           SAME_COLS, "json stream vs batch")


def test_csv_files_stream_like_the_batch_job_and_bad_ones_are_quarantined(spark, demo_config, tmp_path):
    """CSV landing files (refused before: only Parquet and JSON): the schema comes from the first file's header,
    malformed lines are counted and left out, a file with its columns in another order is quarantined (Spark reads
    CSV by position), a file of only a header is no problem, and the metrics equal the batch job's to 1e-12."""
    gen, src = tmp_path / "gen", tmp_path / "src"
    rows = write_stream_demo_files(str(gen), n_examples_per_day=300, n_runs=1, n_days=2, files_per_day=1)
    src.mkdir()
    t0 = time.time() - 600
    landed = []
    for i, (ds, day) in enumerate(rows.groupby("ds")):
        day = day.assign(event_time=day["event_time"].dt.strftime("%Y-%m-%d %H:%M:%S.%f"))
        text = day.to_csv(index=False)  # floats as repr: they read back exactly
        if i == 0:
            lines = text.splitlines()
            lines[10:10] = ["baseline,0,2026-11-15,1,0,not-a-number,2026-11-15 01:00:00",
                            "baseline,0,2026-11-15,2,zero,0.5,2026-11-15 01:00:00"]
            text = "\n".join(lines) + "\n"
            landed.append(("day-a-reordered.csv", day[list(day.columns[::-1])].head(50).to_csv(index=False)))
            landed.append(("day-b-header-only.csv", ",".join(day.columns) + "\n"))
        landed.append((f"day-{ds}.csv", text))
    for i, (name, text) in enumerate(landed):
        (src / name).write_text(text)
        os.utime(src / name, (t0 + i, t0 + i))
    (src / "day-x-broken.csv.gz").write_bytes(gzip.compress(",".join(rows.columns).encode() + b"\n" + b"m,1\n" * 500)[:40])
    os.utime(src / "day-x-broken.csv.gz", (t0 + 1.5, t0 + 1.5))
    cfg = _stream_config(demo_config, src, format="csv")

    res = run_stream(spark, cfg, trigger="availableNow", close_at_end=True)
    assert sum(b["malformed_record"] for b in res.batches) == 2
    assert sum(b["rows"] for b in res.batches) == len(rows)
    counts = read_stream_counts(spark, cfg)
    malformed = counts[counts["kind"] == "malformed_record"]
    assert malformed["file"].str.endswith("day-2026-11-15.csv").all() and int(malformed["n_rows"].sum()) == 2
    assert set(malformed["reason"]) == {"malformed CSV line(s)"}
    quarantined = counts[counts["kind"] == "unreadable_file"]
    quarantined = quarantined.set_index(quarantined["file"].str.rsplit("/", n=1).str[-1])
    assert sorted(quarantined.index) == ["day-a-reordered.csv", "day-x-broken.csv.gz"]
    assert quarantined.loc["day-a-reordered.csv", "reason"].startswith(
        "its header has columns ['event_time', 'logit', 'label', 'example_id', 'ds', 'run', 'model'] where the stream "
        "reads ['model', 'run', 'ds', 'example_id', 'label', 'logit', 'event_time'] (CSV columns are read by position)")
    assert quarantined.loc["day-x-broken.csv.gz", "reason"].startswith("unreadable file (")
    metrics = read_stream_metrics(spark, cfg)
    batch_metrics, _ = _batch_reference(spark, demo_config, gen, tmp_path / "batch", ["2026-11-15", "2026-11-16"])
    key = ["ds", "model", "run", "slice_name"]
    _close(metrics.sort_values(key).reset_index(drop=True), batch_metrics.sort_values(key).reset_index(drop=True),
           SAME_COLS, "csv stream vs batch")

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match=r"No CSV file with a header line in .* set 'stream.schema' to the files' "
                                          r"columns in their order \(DDL\), e.g. '`model` STRING, `run` STRING"):
        read_stream(spark, _stream_config(demo_config, empty, format="csv"))
    semicolons = tmp_path / "semicolons"
    semicolons.mkdir()
    (semicolons / "a.csv").write_text((src / "day-2026-11-16.csv").read_text().replace(",", ";"))
    with pytest.raises(InputError, match=r"The stream's schema lacks column\(s\) .* the file is delimited by ';', not "
                                         r"by commas: set stream.options: \{sep: ';'\}\."):  # said input.options
        read_stream(spark, _stream_config(demo_config, semicolons, format="csv"))
    assert "logit" in read_stream(spark, _stream_config(demo_config, semicolons, format="csv",
                                                        options={"sep": ";"}))[1].fieldNames()
    with pytest.raises(ConfigError, match="A CSV stream without header lines needs 'stream.schema'"):
        read_stream(spark, _stream_config(demo_config, src, format="csv", options={"header": "false"}))


def _csv_days(tmp_path: Path, change, n_runs: int = 1) -> tuple[Path, Path, pd.DataFrame]:
    """Two days of the stream demo's rows in tmp_path/gen as the batch job reads them, and in tmp_path/src as
    one CSV file a day, each day's rows passed through ``change`` first; returns gen, src, rows."""
    gen, src = tmp_path / "gen", tmp_path / "src"
    rows = write_stream_demo_files(str(gen), n_examples_per_day=300, n_runs=n_runs, n_days=2, files_per_day=1)
    src.mkdir()
    t0 = time.time() - 600
    for i, (ds, day) in enumerate(rows.groupby("ds")):
        day = change(day.assign(event_time=day["event_time"].dt.strftime("%Y-%m-%d %H:%M:%S.%f")))
        (src / f"day-{ds}.csv").write_text(day.to_csv(index=False))
        os.utime(src / f"day-{ds}.csv", (t0 + i, t0 + i))
    return gen, src, rows


def test_text_labels_with_class_names_stream_like_the_batch_job(spark, demo_config, tmp_path):
    """columns.class_names reads text labels in the stream as in the batch job: labels 'neg'/'pos' give the
    metrics of 0/1 labels to 1e-12. (The CSV stream's schema fixed the label as DOUBLE, so every line was a
    malformed record: 1,800 of 1,800.)"""
    gen, src, rows = _csv_days(tmp_path, lambda day: day.assign(label=np.where(day["label"] == 1, "pos", "neg")))
    cfg = _stream_config(demo_config, src, format="csv")
    cfg = dataclasses.replace(cfg, columns=dataclasses.replace(cfg.columns, class_names=("neg", "pos")))
    res = run_stream(spark, cfg, trigger="availableNow", close_at_end=True)
    assert sum(b["rows"] for b in res.batches) == len(rows)
    metrics = read_stream_metrics(spark, cfg)
    batch_metrics, _ = _batch_reference(spark, demo_config, gen, tmp_path / "batch", ["2026-11-15", "2026-11-16"])
    key = ["ds", "model", "run", "slice_name"]
    _close(metrics.sort_values(key).reset_index(drop=True), batch_metrics.sort_values(key).reset_index(drop=True),
           SAME_COLS, "class_names stream vs batch")


def test_rows_without_event_time_alone_stop_an_error_mode_batch_with_their_count():
    """A batch whose only bad rows had no event time (no invalid-row tally, so no 'reason' column) ended in
    KeyError: 'reason' instead of the batch's InputError. The error counts them with the tally's invalid rows."""
    from ctcalc_spark.core.findings import ERROR, render, stream_invalid_rows

    tally = pd.DataFrame({"invalid": [11, 2, 11, 0], "count": [3, 1, 2, 9]})
    f = stream_invalid_rows(tally.iloc[:0], 2, batch=7, event_time="event_time")
    assert (f.code, f.severity, f.counts) == ("stream_invalid_rows", ERROR, {"no_event_time": 2})
    assert render(f).startswith("Invalid rows in stream batch 7: 2 rows: null or unparsable 'event_time'. Fix the")
    f = stream_invalid_rows(tally, 4, batch=7, event_time="ts")
    assert f.counts == {"score_not_finite": 1, "null_label": 5, "no_event_time": 4}
    assert stream_invalid_rows(tally.iloc[3:], 0, batch=7, event_time="ts") is None


@pytest.mark.slow
def test_stream_on_spark_connect_equals_classic(spark, connect_spark, demo_config, tmp_path, monkeypatch):
    """On a Connect server the handler runs server-side: same tables as a classic session, a batch's error comes
    back through the error files, a quarantined file is listed the same way."""

    gen, src = tmp_path / "gen", tmp_path / "src"
    write_stream_demo_files(str(gen), n_examples_per_day=300, n_runs=2, n_days=2, files_per_day=2)
    good = sorted(gen.glob("*.parquet"))
    (gen / "part-x-garbage.parquet").write_bytes(b"not parquet" * 300)
    _move_files([good[0], gen / "part-x-garbage.parquet", *good[1:]], src, time.time() - 600)
    on_connect = _stream_config(demo_config, src, tmp_path / "connect")
    classic = _stream_config(demo_config, src, tmp_path / "classic")

    def crash(batch_id: int) -> None:
        if batch_id == 1:
            raise RuntimeError("simulated crash on the server")

    tables = ("stream_metrics", "stream_rolling", "stream_counts", "stream_summaries")
    with monkeypatch.context() as classic_mode:  # the classic session's part: functions build classic columns
        classic_mode.delenv("SPARK_CONNECT_MODE_ENABLED")
        run_stream(spark, classic, trigger="availableNow", close_at_end=True)
        expected = {t: read_stream_table(spark, classic, t) for t in tables}

    run = _drain(connect_spark, on_connect, expect_error=True, after_write=crash)
    error = run.error
    assert isinstance(error, StreamBatchError) and error.error_type == "RuntimeError"
    assert "simulated crash on the server" in str(error)
    assert run.load_state().batch_id == 0
    res = run_stream(connect_spark, on_connect, trigger="availableNow", close_at_end=True)
    assert res.batches[0]["batch_id"] == 1 and res.batches[0]["unreadable_file"] == 1

    skip = {"run_id", "finalized_at", "file", "reason"}
    for table in tables:
        a, b = read_stream_table(connect_spark, on_connect, table), expected[table]
        assert len(a) == len(b) > 0 and list(a.columns) == list(b.columns), table
        for col in a.columns:
            if col in skip:
                continue
            if pd.api.types.is_numeric_dtype(b[col]):
                _close(a, b, [col], table)
            else:
                assert a[col].astype(str).tolist() == b[col].astype(str).tolist(), (table, col)
    for counts in (expected["stream_counts"], read_stream_table(connect_spark, on_connect, "stream_counts")):
        assert counts["file"].dropna().str.endswith("part-x-garbage.parquet").tolist() == [True]


def test_fixed_windows_share_the_batch_finalizer():
    """Pure: a day as a 1-day fixed (event-time) window gives the batch day window's rolling rows and statuses."""
    spec = WindowSpec("fixed", seconds=3600)
    w = fixed_window(1_763_168_123_000_000, spec)  # 2025-11-15 00:55:23 UTC
    assert (w.start, w.end, w.label) == ("2025-11-15 00:00:00", "2025-11-15 01:00:00", "20251115T000000")
    assert previous_window(w, spec).label == "20251114T230000" and spec.label == "fixed_3600s"
    assert window_start_us(w) == 1_763_164_800_000_000
    with pytest.raises(ConfigError, match="event time"):
        window_of("2025-11-15", spec)

    rng = np.random.default_rng(5)
    days = ["2026-11-15", "2026-11-16", "2026-11-18", "2026-11-19"]  # 11-17 missing: missing_previous_window
    parts = []
    for i, ds in enumerate(days):
        for run in ("0", "1"):
            for split in ("bias", "remain"):
                z = rng.normal(-1.5 + 0.1 * i, 1.0, 400)
                y = (rng.random(400) < 1 / (1 + np.exp(-z - 0.2 * i))).astype(float)
                parts.append(pd.DataFrame(BinarySummary.from_logits(y, z).to_columns()).assign(
                    ds=ds, model="m", run=run, split=split, bin_width=0.05))
    rows = pd.concat(parts, ignore_index=True)
    day = WindowSpec("day")
    batch = rolling_metrics(rows, "binary", windows_between(days[0], days[-1], day), day, first_ds=days[0])

    day_fixed = WindowSpec("fixed", seconds=86_400)
    start = {ds: pd.Timestamp(ds, tz="UTC").value // 1000 for ds in days}
    labelled = rows.assign(window=[fixed_window(start[d], day_fixed).label for d in rows["ds"]]).drop(columns="ds")
    wins = sorted({fixed_window(s, day_fixed) for s in start.values()})
    stream = finalize_windows(sum_windows(labelled, "binary"), "binary",
                              [(x, previous_window(x, day_fixed)) for x in wins], day_fixed,
                              first={wins[0].label})
    assert batch["status"].tolist() == stream["status"].tolist()
    assert batch["status"].tolist() == ["first_window"] * 2 + ["ok"] * 2 + ["missing_previous_window"] * 2 + ["ok"] * 2
    _close(batch, stream, ROLLING_COLS, "day vs 1-day fixed windows")
    assert stream["n_days"].isna().all() and (stream["window_kind"] == "fixed").all()


def test_stream_config_validation(demo_config):
    with pytest.raises(ConfigError, match="stream.window"):
        demo_config(stream={"window": "1 fortnight"})
    with pytest.raises(ConfigError, match="kafka_topic"):
        demo_config(stream={"source": "kafka"})
    with pytest.raises(ConfigError, match="stream.trigger"):
        demo_config(stream={"trigger": "soon"})
    cfg = demo_config(stream={"window": "15 minutes", "watermark": "2 hours"})

    assert window_micros(cfg) == (900 * 10**6, 7200 * 10**6)
    assert window_spec(cfg).label == "fixed_900s"
    # JSON files and Kafka values without stream.schema: the score columns of columns.model_scores, as doubles
    wide = demo_config(columns={"model_scores": {"a": ["pa0", "pa1"], "b": ["pb0", "pb1"]}})
    assert default_schema(wide) == ("`label` DOUBLE, `example_id` STRING, `event_time` TIMESTAMP, "
                                    "`pa0` DOUBLE, `pa1` DOUBLE, `pb0` DOUBLE, `pb1` DOUBLE")


def test_kafka_without_connector_names_the_package(spark, demo_config):

    cfg = demo_config(stream={"source": "kafka", "kafka_bootstrap_servers": "localhost:9092", "kafka_topic": "scores"})
    with pytest.raises(ConfigError, match="spark-sql-kafka-0-10_2.13:4.2.0"):
        read_stream(spark, cfg)
    assert KAFKA_PACKAGE.endswith(":4.2.0")


@pytest.mark.slow
def test_stream_cli_logs_each_batch_as_it_ends_and_prints_what_it_wrote(tmp_path):
    """``ctcalc stream`` as a user runs it (its own process, the packaged example config): one readable progress
    line per batch on stderr as the batch ends (it was a dump of the report dict, and the readable lines came
    only on stdout after the query ended: never, for a stream that runs until it is stopped); on stdout a line
    for the run, the windows closed at the end and the table of closed windows, equal to what it wrote."""
    from tests._cli import run_cli

    out = tmp_path / "out"
    args = ["stream", "--config", "conf/stream_demo.yaml", "--trigger", "availableNow",
            "--set", f"output.path={out}", "--set", f"stream.path={tmp_path / 'landing'}"]
    first = run_cli([*args, "--generate-demo", "2", "--close-at-end"], timeout=300)
    progress = re.findall(r"INFO ctcalc_spark\.jobs\.stream: (batch \d+: .*)", first.stderr)
    assert len(progress) == 4, first.stderr  # 8 files landed, 2 a batch
    assert all(re.fullmatch(r"batch \d: 18,000 rows \(18,000 on time\), watermark 2026-11-1[56] \S+"
                            r"(; closed 2026-11-15 00:00:00)?  \[\d+\.\d s\]", line) for line in progress), progress
    assert "{'batch_id'" not in first.stderr and "is not supported in streaming" not in first.stderr
    assert re.search(r"^4 batches \(0\.\.3\): 72,000 rows \(72,000 on time\), watermark 2026-11-16 \S+; "
                     r"closed 2026-11-15 00:00:00  \[", first.stdout, re.M), first.stdout
    assert "closed at end: 2026-11-16 00:00:00" in first.stdout

    metrics = read_delta_table(out / "stream_metrics")
    metrics = metrics[metrics["slice_name"] == "__all__"]
    for (start, model), group in metrics.groupby(["window_start", "model"]):
        row = re.search(rf"^{pd.Timestamp(start):%Y-%m-%d %H:%M:%S}\s+{model}\s+3\s+(\S+)\s+(\S+)\s", first.stdout,
                        re.M)
        assert row is not None, (start, model, first.stdout)
        assert float(row.group(1)) == pytest.approx(group["log_loss"].mean(), abs=5e-6)  # printed to 5 decimals
        assert float(row.group(2)) == pytest.approx(group["calibrated_log_loss"].mean(), abs=5e-6)
    assert len(metrics.groupby(["window_start", "model"])) == 6

    from ctcalc_spark.jobs.stream import batches_line

    empty = {"batch_id": 0, "rows": 2, "on_time": 0, "no_event_time": 2, "watermark": None, "closed": [], "seconds": 0.5}
    assert batches_line([empty]) == ("batch 0: 2 rows (0 on time, 2 no_event_time), watermark none yet (no row with "
                                     "an event time)  [0.5 s]")  # printed 'watermark None'
    again = run_cli(args, timeout=300)  # nothing new landed
    assert again.stdout.startswith("no new batches (nothing landed since the last committed batch)\n")
    assert "INFO ctcalc_spark.jobs.stream: batch" not in again.stderr


def test_models_trained_once_stream_without_a_run_column(spark, demo_config, tmp_path):
    """``columns.run: null`` in a stream: files without a run column give the batch job's metrics of run 0."""
    gen, src, rows = _csv_days(tmp_path, lambda day: day.drop(columns="run"))
    cfg = _stream_config(demo_config, src, format="csv")
    cfg = dataclasses.replace(cfg, columns=dataclasses.replace(cfg.columns, run=None))
    assert cfg.columns.one_run
    res = run_stream(spark, cfg, trigger="availableNow", close_at_end=True)
    assert sum(b["rows"] for b in res.batches) == len(rows) and not any(b["invalid"] for b in res.batches)
    metrics = read_stream_metrics(spark, cfg)
    batch_metrics, _ = _batch_reference(spark, demo_config, gen, tmp_path / "batch", ["2026-11-15", "2026-11-16"])
    assert set(metrics["run"]) == set(batch_metrics["run"]) == {"0"}
    key = ["ds", "model", "run", "slice_name"]
    _close(metrics.sort_values(key).reset_index(drop=True), batch_metrics.sort_values(key).reset_index(drop=True),
           SAME_COLS, "run: null stream vs batch")


def test_one_score_column_per_model_streams_like_the_batch_job(spark, demo_config, tmp_path):
    """``columns.model_scores`` in a stream: CSV files of one row per example with a score column per model and
    run give the batch job's metrics of the same rows stacked (1e-12), each landed row counted once per column.
    (The stream refused the mapping: 'is read by the batch jobs'.) A model column beside the mapping is named
    before any batch runs."""
    def wide(day: pd.DataFrame) -> pd.DataFrame:
        keys = ["ds", "example_id", "label", "event_time"]
        table = day.pivot_table(index=keys, columns=["model", "run"], values="logit").reset_index()
        table.columns = [f"{m}_{r}" if r != "" else m for m, r in table.columns]
        assert len(table) * 6 == len(day)  # one label per example: every (model, run) row fits in one wide row
        return table

    gen, src, rows = _csv_days(tmp_path, wide, n_runs=2)
    models = sorted(rows["model"].unique())
    assert len(models) == 3
    cfg = _stream_config(demo_config, src, format="csv")
    mapping = {m: [f"{m}_0", f"{m}_1"] for m in models}
    cfg = dataclasses.replace(cfg, columns=dataclasses.replace(cfg.columns, model_scores=mapping))
    res = run_stream(spark, cfg, trigger="availableNow", close_at_end=True)
    assert sum(b["rows"] for b in res.batches) == len(rows) and not any(b["invalid"] for b in res.batches)
    metrics = read_stream_metrics(spark, cfg)
    batch_metrics, _ = _batch_reference(spark, demo_config, gen, tmp_path / "batch", ["2026-11-15", "2026-11-16"])
    key = ["ds", "model", "run", "slice_name"]
    got, want = (t.sort_values(key).reset_index(drop=True) for t in (metrics, batch_metrics))
    assert got[key + ["status"]].equals(want[key + ["status"]]) and len(got) == 2 * 3 * 2
    _close(got, want, SAME_COLS, "model_scores stream vs batch")
    (tmp_path / "src2").mkdir()
    (tmp_path / "src2" / "a.csv").write_text((src / "day-2026-11-15.csv").read_text().replace("ds,", "model,", 1))
    other = dataclasses.replace(cfg, stream=dataclasses.replace(cfg.stream, path=str(tmp_path / "src2")))
    with pytest.raises(InputError, match=r"has the column\(s\) \['model'\] besides those columns\.model_scores names"):
        read_stream(spark, other)


def test_landed_text_that_is_not_utf8_fails_the_batch_until_read_with_its_encoding(spark, demo_config, tmp_path):
    """CSV files from a Windows exporter (cp1252) with a slice 'Köln': the stream wrote the slice 'K\ufffdln'
    without a word. Now the batch fails before its write, naming the values and stream.options' encoding; started
    again with it, the batch is read again and the slice is 'Köln'."""
    gen, src, rows = _csv_days(tmp_path, lambda d: d.assign(city=np.resize(["Köln", "Zürich"], len(d))))
    for i, f in enumerate(sorted(src.glob("*.csv"))):
        f.write_bytes(f.read_text().encode("cp1252"))
        os.utime(f, (time.time() - 600 + i, time.time() - 600 + i))
    cfg = _stream_config(demo_config, src, format="csv")
    cfg = dataclasses.replace(cfg, columns=dataclasses.replace(cfg.columns, slices=("city",)))
    run = _drain(spark, cfg, expect_error=True)
    assert isinstance(run.error, InputError) and run.load_state().batch_id < 0  # nothing committed
    assert ("Stream batch 0: Text in the evaluation rows is not UTF-8, the encoding Spark reads CSV with: 'city': "
            "['K\ufffdln', 'Z\ufffdrich']") in str(run.error)
    assert "Set stream.options: {encoding: 'ISO-8859-1'}" in str(run.error)
    latin = dataclasses.replace(cfg, stream=dataclasses.replace(cfg.stream, options={"encoding": "ISO-8859-1"}))
    run = _drain(spark, latin)
    assert run.error is None and run.load_state().rows == len(rows)
    metrics = read_stream_metrics(spark, latin)
    assert set(metrics["slice_value"]) == {"__all__", "Köln", "Zürich"}


def test_a_file_landing_under_a_temporary_name_is_not_read_twice(spark, demo_config, tmp_path):
    """A writer that writes `day.csv.tmp` and renames it to `day.csv` when done: the stream read the half-written
    .tmp file and then the renamed one, rows of the day counted up to twice, without a word. A temporary name is
    now quarantined with the reason (the renamed file is read); stream.options' pathGlobFilter keeps such names
    from being listed at all."""
    gen, src, rows = _csv_days(tmp_path, lambda d: d)
    first = sorted(src.glob("*.csv"))[0]
    text = first.read_text()
    partial = src / (first.name + ".tmp")
    partial.write_text(text[: len(text) // 2].rsplit("\n", 1)[0] + "\n")
    t0 = first.stat().st_mtime
    os.utime(partial, (t0 - 10, t0 - 10))  # listed first, as it was written first
    cfg = _stream_config(demo_config, src, format="csv", max_files_per_trigger=None)
    res = run_stream(spark, cfg, trigger="availableNow", close_at_end=True)
    assert sum(b["rows"] for b in res.batches) == len(rows)
    quarantined = [q for b in res.batches for q in b["quarantined"]]
    assert [Path(q["file"]).name for q in quarantined] == [partial.name]
    assert quarantined[0]["reason"].startswith("a temporary name (.tmp): a file still being written")
    metrics = read_stream_metrics(spark, cfg)
    batch_metrics, _ = _batch_reference(spark, demo_config, gen, tmp_path / "batch", ["2026-11-15", "2026-11-16"])
    key = ["ds", "model", "run", "slice_name"]
    _close(metrics.sort_values(key).reset_index(drop=True), batch_metrics.sort_values(key).reset_index(drop=True),
           SAME_COLS, "a .tmp file beside the stream's files")
    filtered = _stream_config(demo_config, src, tmp_path / "filtered", format="csv", max_files_per_trigger=None,
                              options={"pathGlobFilter": "*.csv"})
    res = run_stream(spark, filtered, trigger="availableNow", close_at_end=True)
    assert sum(b["rows"] for b in res.batches) == len(rows) and not any(b["quarantined"] for b in res.batches)


def test_files_landing_in_day_folders_stream_like_the_batch_job(spark, demo_config, tmp_path, caplog):
    """A writer that lands each day's CSV in a dt=<day>/ folder: every file was quarantined ('its header has
    columns [...] where the stream reads [..., 'dt']': Spark adds the folder's key as a column, which the file
    does not hold), and without stream.schema the stream found 'no CSV file with a header line'. Files in plain
    folders (2026/11/15/) are not listed by Spark's file source at all: the stream said only 'nothing landed'. A
    folder named 'dt [v2]' is a glob pattern to Spark, which found no file in it."""
    import logging

    gen, flat, rows = _csv_days(tmp_path, lambda d: d)
    batch_metrics, _ = _batch_reference(spark, demo_config, gen, tmp_path / "batch", DAYS[:2])
    key = ["ds", "model", "run", "slice_name"]
    for name, layout in (("dt [v2]", "dt={ds}"), ("ymd", "{y}/{m}/{d}")):  # [v2]: a glob to Spark, escaped
        src = tmp_path / name
        for f in sorted(flat.glob("day-*.csv")):
            ds = f.stem[4:]
            y, m, d = ds.split("-")
            folder = src / layout.format(ds=ds, y=y, m=m, d=d)
            folder.mkdir(parents=True)
            shutil.copy2(f, folder / f.name)
        options = {} if layout.startswith("dt") else {"recursiveFileLookup": "true"}
        if options:  # without the option: a warning naming the files, and nothing read
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="ctcalc_spark.jobs.stream"):
                res = run_stream(spark, _stream_config(demo_config, src, tmp_path / "unread", format="csv"),
                                 trigger="availableNow", close_at_end=True)
            assert sum(b["rows"] for b in res.batches) == 0
            assert (f"2 file(s) below the stream's folder {src} lie in folders that are not key=value folders "
                    f"(2026/11/15/day-2026-11-15.csv, 2026/11/16/day-2026-11-16.csv): Spark's file source lists only "
                    "the folder's own files and those of key=value folders (dt=2026-01-05/), so the stream does not "
                    "read them. Set stream.options: {recursiveFileLookup: 'true'}") in caplog.text
        out = tmp_path / f"out_{src.name.split()[0]}"  # out_dt, out_ymd: deltalake cannot open a path with [ ]
        cfg = _stream_config(demo_config, src, out, format="csv", options=options)
        res = run_stream(spark, cfg, trigger="availableNow", close_at_end=True)
        assert sum(b["rows"] for b in res.batches) == len(rows), layout
        assert not any(b["quarantined"] for b in res.batches), res.batches
        metrics = read_stream_metrics(spark, cfg)
        _close(metrics.sort_values(key).reset_index(drop=True), batch_metrics.sort_values(key).reset_index(drop=True),
               SAME_COLS, f"files in {layout} folders")
    # the folder's key is a column the rows carry, with each file's value (a slice here)
    cfg = _stream_config(demo_config, tmp_path / "dt [v2]", tmp_path / "sliced", format="csv")
    cfg = dataclasses.replace(cfg, columns=dataclasses.replace(cfg.columns, slices=("dt",)))
    run_stream(spark, cfg, trigger="availableNow", close_at_end=True)
    sliced = read_stream_metrics(spark, cfg)
    by_dt = sliced[sliced["slice_name"] == "dt"]
    assert sorted(set(zip(by_dt["ds"], by_dt["slice_value"]))) == [(d, d) for d in DAYS[:2]]
    from ctcalc_spark.jobs.stream import _partition_keys  # a key=value folder above the stream's is no partition

    assert _partition_keys("file:/data/team=ml/land/dt=2026-11-15/a.csv", "/data/team=ml/land") == {"dt"}
    assert _partition_keys("file:///data/team=ml/land/a.csv", "/data/team=ml/land/") == set()


def test_a_landed_csv_with_quotes_written_twice_is_quarantined_until_read_with_escape(spark, demo_config, tmp_path):
    """pandas writes 'Blue "XL" shoe' as "Blue ""XL"" shoe", which Spark's reader (a backslash before a quote by
    default) read into the slice '"Blue ""XL"" shoe"' without a word, as the batch job did."""
    gen, src, rows = _csv_days(tmp_path, lambda d: d.assign(title=np.where(d["example_id"] % 4 == 0,
                                                                          'Blue "XL" shoe, wide', "Red hat")))
    cfg = _stream_config(demo_config, src, tmp_path / "plain", format="csv", max_files_per_trigger=None)
    cfg = dataclasses.replace(cfg, columns=dataclasses.replace(cfg.columns, slices=("title",)))
    res = run_stream(spark, cfg, trigger="availableNow", close_at_end=True)
    quarantined = [q for b in res.batches for q in b["quarantined"]]
    assert len(quarantined) == 2 and sum(b["rows"] for b in res.batches) == 0
    assert quarantined[0]["reason"].startswith("a quote inside a quoted field written twice ('Blue \"XL\" shoe, wide' "
                                               "in column 'title', as pandas")
    assert quarantined[0]["reason"].endswith("stream.options: {escape: '\"'} reads it")
    read = _stream_config(demo_config, src, tmp_path / "escaped", format="csv", max_files_per_trigger=None,
                          options={"escape": '"'})
    read = dataclasses.replace(read, columns=dataclasses.replace(read.columns, slices=("title",)))
    res = run_stream(spark, read, trigger="availableNow", close_at_end=True)
    assert sum(b["rows"] for b in res.batches) == len(rows) and not any(b["quarantined"] for b in res.batches)
    metrics = read_stream_metrics(spark, read)
    assert set(metrics["slice_value"]) == {"__all__", 'Blue "XL" shoe, wide', "Red hat"}
