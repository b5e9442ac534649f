"""The streaming job: exactly once across a stop and a crash, late-row accounting, parity with the batch job."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ctcalc_spark.errors import ConfigError

TOL = 1e-12
SAME_COLS = ["n_rows", "n_bias", "n_remain", "log_loss", "log_loss_remain", "calibrated_log_loss", "bias", "auc",
             "calibration", "normalized_entropy"]


def _stream_config(demo_config, src: Path, **stream):
    return demo_config(input__path=str(src), stream={"path": str(src), "window": "1 day", "watermark": "1 hour",
                                                     "max_files_per_trigger": 1, **stream})


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


def _drain(spark, cfg, *, timeout: float = 120, expect_error: bool = False, **kw):
    """Run an availableNow query over what has landed, always stopping it; returns the job."""
    from ctcalc_spark.jobs.stream import start_stream

    query, job = start_stream(spark, cfg, trigger="availableNow", **kw)
    try:
        if expect_error:
            with pytest.raises(Exception):
                query.awaitTermination(timeout)
        else:
            query.awaitTermination(timeout)
    finally:
        if query.isActive:
            query.stop()
    return job


def _assert_same_as_batch(spark, cfg, metrics: pd.DataFrame, days: list[str]) -> None:
    """same_window rows == the batch evaluate job; rolling rows == bias of day d-1 applied to day d (batch summaries)."""
    from ctcalc_spark.jobs.evaluate import evaluate
    from ctcalc_spark.core.finalize import binary_summary_of

    results = {ds: evaluate(spark, cfg, ds, write=False) for ds in days}
    for i, ds in enumerate(days):
        batch = results[ds].metrics.sort_values(["model", "run"]).reset_index(drop=True)
        sm = metrics[(metrics["ds"] == ds) & (metrics["mode"] == "same_window")]
        sm = sm.sort_values(["model", "run"]).reset_index(drop=True)
        assert len(sm) == len(batch) > 0
        assert (sm["model"] == batch["model"]).all() and (sm["run"] == batch["run"].astype(str)).all()
        assert (sm["status"] == batch["status"]).all()
        for col in SAME_COLS:
            np.testing.assert_allclose(sm[col].to_numpy(float), batch[col].to_numpy(float), rtol=0, atol=TOL,
                                       err_msg=f"{ds} {col}")
        roll = metrics[(metrics["ds"] == ds) & (metrics["mode"] == "rolling")].sort_values(["model", "run"])
        assert len(roll) == len(batch)
        if i == 0:
            assert (roll["status"] == "no_previous_window").all() and roll["calibrated_log_loss"].isna().all()
            continue
        cur_s, prev_s = results[ds].summaries, results[days[i - 1]].summaries
        for _, r in roll.iterrows():
            pick = lambda s: s[(s["model"] == r["model"]) & (s["run"].astype(str) == r["run"])]  # noqa: E731
            cur, prev = binary_summary_of(pick(cur_s), 0.05), binary_summary_of(pick(prev_s), 0.05)
            c = prev.solve_bias()
            assert r["status"] == "ok" and r["n_bias"] == prev.n_rows and r["n_rows"] == cur.n_rows
            assert abs(r["bias"] - c) <= TOL
            assert abs(r["calibrated_log_loss"] - cur.log_loss(c)) <= TOL
            assert abs(r["log_loss"] - cur.log_loss()) <= TOL


def test_restart_exactly_once_equals_batch(spark, demo_config, tmp_path):
    """Stop mid-stream, crash inside a batch after its files are written, restart: batch-job numbers, no row twice."""
    from ctcalc_spark.jobs.stream import StreamJob, read_stream_metrics, start_stream, write_stream_demo_files

    gen, src = tmp_path / "gen", tmp_path / "src"
    rows = write_stream_demo_files(str(gen), n_examples_per_day=600, n_runs=2, n_days=3, files_per_day=2)
    files = sorted(gen.glob("*.parquet"))
    assert len(files) == 6
    t0 = time.time() - 600
    _move_files(files[:4], src, t0)  # days 1-2 have landed
    cfg = _stream_config(demo_config, src)

    # 1. processing-time query, stopped after two committed batches (day 1 read, day 2 not yet complete)
    query, job = start_stream(spark, cfg, trigger="1 second")
    try:
        _wait_for(lambda: len(job.reports) >= 2 or job.error is not None)
    finally:
        query.stop()
    assert len(job.reports) >= 2  # stop() may interrupt the batch in flight: it is replayed on restart
    done_before = job.load_state().batch_id
    assert 1 <= done_before <= 3

    # 2. day 3 lands; restart with a crash after the next batch's files are written but before its commit
    _move_files(files[4:], src, t0 + 100)
    crash_at = done_before + 1

    def crash(batch_id: int) -> None:
        if batch_id == crash_at:
            raise RuntimeError("simulated crash after the batch's summaries were written")

    job = _drain(spark, cfg, expect_error=True, after_write=crash)
    assert isinstance(job.error, RuntimeError)
    assert job.load_state().batch_id == done_before  # the crashed batch is not committed ...
    assert any(Path(job.paths.summaries).glob(f"window=*/batch_id={crash_at}"))  # ... though its files were written

    # 3. restart cleanly: Spark replays the crashed batch id, the job overwrites it, then reads the rest
    job = _drain(spark, cfg)
    assert job.error is None
    assert job.reports[0]["batch_id"] == crash_at  # replayed with the same id
    closed = job.close_open_windows()
    assert closed == ["2026-11-17 00:00:00"]
    state = job.load_state()
    assert state.rows == len(rows) and state.late_rows == 0  # every row once: nothing lost, nothing twice

    metrics = read_stream_metrics(spark, cfg)
    days = ["2026-11-15", "2026-11-16", "2026-11-17"]
    assert sorted(metrics["ds"].unique()) == days
    all_rows = metrics[(metrics["mode"] == "same_window")]
    assert int(all_rows["n_rows"].sum()) == len(rows)
    _assert_same_as_batch(spark, cfg, metrics, days)
    # a second run on the same checkpoint finds nothing new and changes nothing
    job = _drain(spark, cfg, timeout=60)
    assert job.reports == [] and job.load_state().rows == len(rows)


def test_late_rows_counted_not_dropped(spark, demo_config, tmp_path):
    """Rows for a closed window are counted per window and group, reported in n_late, and kept out of its metrics."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ctcalc_spark.jobs.stream import read_stream_counts, read_stream_metrics, run_stream, write_stream_demo_files

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
    assert set(counts["window_start"]) == {"2026-11-15 00:00:00"}
    metrics = read_stream_metrics(spark, cfg)
    day1 = metrics[metrics["ds"] == "2026-11-15"]
    expected = late.groupby(["model", "run"]).size()
    for _, r in day1.iterrows():
        assert r["n_late"] == expected.get((r["model"], int(r["run"])), 0)
    assert int(metrics.loc[metrics["ds"] == "2026-11-16", "n_late"].sum()) == 0
    # values are those of the on-time rows alone: the batch job over the files without the late one
    _assert_same_as_batch(spark, demo_config(input__path=str(ontime)), metrics, ["2026-11-15", "2026-11-16"])


def test_rolling_finalizer_matches_summary_math():
    """Pure: rolling = bias fitted on all of the previous window's rows, applied to all of this window's rows."""
    from ctcalc_spark.core.finalize import binary_summary_of
    from ctcalc_spark.jobs.stream import finalize_rolling
    from ctcalc_spark.core.summary import BinarySummary

    rng = np.random.default_rng(3)

    def rows(n: int, shift: float) -> pd.DataFrame:
        z = rng.normal(-1.5 + shift, 1.0, n)
        y = (rng.random(n) < 1 / (1 + np.exp(-z + shift))).astype(float)
        s = BinarySummary.from_logits(y, z)
        return pd.DataFrame(s.to_columns())

    prev, cur = rows(3000, 0.0), rows(2000, 0.3)
    r = finalize_rolling("binary", prev, cur, 0.05)
    p, c = binary_summary_of(prev, 0.05), binary_summary_of(cur, 0.05)
    assert r["status"] == "ok" and r["n_bias"] == 3000 and r["n_rows"] == r["n_remain"] == 2000
    assert r["bias"] == pytest.approx(p.solve_bias(), abs=1e-14)
    assert r["calibrated_log_loss"] == pytest.approx(c.log_loss(p.solve_bias()), abs=1e-14)
    assert r["log_loss"] == pytest.approx(c.log_loss(), abs=1e-14)
    first = finalize_rolling("binary", None, cur, 0.05)
    assert first["status"] == "no_previous_window" and first["calibrated_log_loss"] is None
    assert first["log_loss"] == pytest.approx(c.log_loss(), abs=1e-14)


def test_stream_config_validation(demo_config):
    with pytest.raises(ConfigError, match="stream.window"):
        demo_config(stream={"window": "1 fortnight"})
    with pytest.raises(ConfigError, match="kafka_topic"):
        demo_config(stream={"source": "kafka"})
    with pytest.raises(ConfigError, match="stream.trigger"):
        demo_config(stream={"trigger": "soon"})
    cfg = demo_config(stream={"window": "15 minutes", "watermark": "2 hours"})
    from ctcalc_spark.jobs.stream import window_micros

    assert window_micros(cfg) == (900 * 10**6, 7200 * 10**6)


def test_kafka_without_connector_names_the_package(spark, demo_config):
    from ctcalc_spark.jobs.stream import KAFKA_PACKAGE, read_stream

    cfg = demo_config(stream={"source": "kafka", "kafka_bootstrap_servers": "localhost:9092", "kafka_topic": "scores"})
    with pytest.raises(ConfigError, match="spark-sql-kafka-0-10_2.13:4.2.0"):
        read_stream(spark, cfg)
    assert KAFKA_PACKAGE.endswith(":4.2.0")
