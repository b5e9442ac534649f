"""The storage layer's own rules: commit records, recovery of what killed runs left, leases, atomic exchange."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ctcalc_spark.config import config_from_dict
from ctcalc_spark.errors import InputError
from ctcalc_spark.spark.files import FileStore, supports_exchange
from ctcalc_spark.spark.storage import COMPACT_AT, OutputStore, lease_is_live, recover_root


def _store(tmp_path: Path, **output) -> OutputStore:
    return OutputStore(config_from_dict({"input": {"path": str(tmp_path / "in")},
                                         "output": {"path": str(tmp_path / "out"), **output}}))


def _touch(path: Path, text: str = "x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_commit_records_keep_the_latest_run_per_partition_and_stay_few(tmp_path):
    store = _store(tmp_path)
    store.write_commit("r1", "evaluate", [{"table": "metrics", "partition": "ds=2026-11-15", "ds": "2026-11-15",
                                           "n_rows": 4}])
    store.write_commit("r2", "evaluate", [{"table": "metrics", "partition": "ds=2026-11-15", "ds": "2026-11-15",
                                           "n_rows": 5}])
    folder = tmp_path / "out" / "_commits"
    assert sorted(p.name for p in folder.iterdir()) == ["r2.json"]  # r1 was replaced everywhere: dropped
    # a stream commits new partitions every batch: records are folded into one past COMPACT_AT
    for i in range(COMPACT_AT + 30):
        store.write_commit(f"b{i:04d}", "stream", [{"table": "stream_summaries", "partition": f"window=w/batch_id={i}",
                                                    "ds": None, "n_rows": i}])
    assert len(list(folder.glob("*.json"))) <= 31
    commits = store.commits()
    assert len(commits) == COMPACT_AT + 31
    got = commits.set_index("partition")
    assert got.loc["ds=2026-11-15", "run_id"] == "r2" and got.loc["ds=2026-11-15", "n_rows"] == 5
    assert got.loc["window=w/batch_id=7", "run_id"] == "b0007" and got.loc["window=w/batch_id=7", "job"] == "stream"


def test_recovery_rolls_forward_a_complete_spark_staging_and_clears_the_rest(tmp_path):
    root = tmp_path / "metrics"
    _touch(root / "ds=2026-11-14" / "part-0.parquet", "kept")
    # a writer died inside Spark's swap: ds=2026-11-15 deleted, its complete copy still staged (_SUCCESS)
    _touch(root / ".spark-staging-a" / "_SUCCESS", "")
    _touch(root / ".spark-staging-a" / "ds=2026-11-15" / "part-0.parquet", "new")
    _touch(root / ".spark-staging-a" / "ds=2026-11-14" / "part-0.parquet", "not swapped yet")
    # a writer died before its tasks were merged: nothing complete
    _touch(root / ".spark-staging-b" / "_temporary" / "0" / "x.parquet")
    _touch(root / "_temporary" / "0" / "y")
    # the earlier layout: a crash between its two renames left the day aside under a visible wrong name
    _touch(root / "ds=2026-11-13.old.abc123" / "part-0.parquet", "old")
    done = recover_root(FileStore(str(tmp_path)), str(root), 1)
    assert sorted(p.name for p in root.iterdir()) == ["ds=2026-11-13", "ds=2026-11-14", "ds=2026-11-15"]
    assert (root / "ds=2026-11-15" / "part-0.parquet").read_text() == "new"
    assert (root / "ds=2026-11-14" / "part-0.parquet").read_text() == "kept"
    assert (root / "ds=2026-11-13" / "part-0.parquet").read_text() == "old"
    assert any("rolled forward" in d for d in done)


def test_leftovers_of_dead_runs_go_those_of_live_runs_stay(tmp_path):
    store = _store(tmp_path)
    metrics = tmp_path / "out" / "metrics"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    for run, pid in (("20261123T000000Z-deadbeef", dead_pid), ("20261123T000001Z-11ve0000", os.getpid())):
        _touch(tmp_path / "out" / "_runs" / f"{run}.json", json.dumps(
            {"run_id": run, "host": socket.gethostname(), "pid": pid, "heartbeat_at": time.time()}))
        _touch(metrics / f".ctcalc-staging-{run}-metrics" / "ds=2026-11-15" / "part-0.parquet")
    _touch(metrics / ".spark-staging-z" / "_temporary" / "0" / "x")
    store.recover()
    left = sorted(p.name for p in metrics.iterdir())
    # the dead run's staging is gone; the live run's stays, and so does Spark's (a live run may own it)
    assert left == [".ctcalc-staging-20261123T000001Z-11ve0000-metrics", ".spark-staging-z"]
    assert sorted(p.name for p in (tmp_path / "out" / "_runs").iterdir()) == [
        "20261123T000000Z-deadbeef.json", "20261123T000001Z-11ve0000.json"]  # nothing else touched while live
    (tmp_path / "out" / "_runs" / "20261123T000001Z-11ve0000.json").unlink()  # the live run ends
    store.recover()
    assert not metrics.exists() or sorted(p.name for p in metrics.iterdir()) == []
    assert list((tmp_path / "out" / "_runs").iterdir()) == []


def test_lease_liveness():
    now = time.time()
    me = {"host": socket.gethostname(), "pid": os.getpid(), "heartbeat_at": now - 10_000}
    assert lease_is_live(me, 600, now)  # same host: the process decides, not the heartbeat
    assert not lease_is_live({**me, "pid": 2 ** 22 + 12345}, 600, now)
    other = {"host": "elsewhere", "pid": 1, "heartbeat_at": now - 30}
    assert lease_is_live(other, 600, now) and not lease_is_live({**other, "heartbeat_at": now - 601}, 600, now)


def test_atomic_exchange_swaps_two_folders(tmp_path):
    files = FileStore(str(tmp_path))
    _touch(tmp_path / "a" / "new")
    _touch(tmp_path / "b" / "old")
    assert supports_exchange(str(tmp_path))
    files.exchange(str(tmp_path / "a"), str(tmp_path / "b"))
    assert os.listdir(tmp_path / "b") == ["new"] and os.listdir(tmp_path / "a") == ["old"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".ctcalc-probe")]


@pytest.mark.parametrize("swap", ["exchange", "spark"])
def test_both_swap_modes_replace_exactly_their_partitions(spark, tmp_path, swap):
    store = OutputStore(config_from_dict({"input": {"path": str(tmp_path / "in")},
                                          "output": {"path": str(tmp_path / "out"), "swap": swap}}), spark)
    types = {"model": "string", "value": "double", "ds": "string"}
    day = {"2026-11-15": 1.0, "2026-11-16": 2.0}
    with store.transaction("t") as tx:
        tx.write("metrics", pd.DataFrame({"model": "m", "value": list(day.values()), "ds": list(day)}), types)
    with store.transaction("t") as again:
        again.write("metrics", pd.DataFrame({"model": ["m"], "value": [9.0], "ds": ["2026-11-16"]}), types)
    got = store.read("metrics", with_run_id=True).sort_values("ds")
    assert got["value"].tolist() == [1.0, 9.0] and got["run_id"].tolist() == [tx.run_id, again.run_id]
    assert store.check_days(list(day), tables=("metrics",)) == []
    assert not [p for p in (tmp_path / "out" / "metrics").iterdir() if p.name.startswith((".", "_"))]


@pytest.mark.parametrize(("swap", "codec"), [("exchange", None), ("spark", None), ("exchange", "zstd")])
def test_output_files_are_written_with_the_configured_codec(spark, tmp_path, swap, codec):
    """output.compression reaches Spark's writer in both swap modes: none by default (the tables are small
    aggregates, no smaller with a codec), or the one configured."""
    import pyarrow.parquet as pq

    output = {"path": str(tmp_path / "out"), "swap": swap, **({"compression": codec} if codec else {})}
    store = OutputStore(config_from_dict({"input": {"path": str(tmp_path / "in")}, "output": output}), spark)
    types = {"model": "string", "value": "double", "ds": "string"}
    with store.transaction("t") as tx:
        tx.write("metrics", pd.DataFrame({"model": "m", "value": [1.0, 2.0], "ds": ["2026-11-15", "2026-11-16"]}),
                 types)
    files = sorted((tmp_path / "out" / "metrics").glob("ds=*/*.parquet"))
    assert len(files) == 2
    meta = [pq.ParquetFile(f).metadata for f in files]
    codecs = {m.row_group(0).column(i).compression for m in meta for i in range(m.num_columns)}
    assert codecs == {(codec or "uncompressed").upper()}


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_a_catalog_table_ctcalc_creates_keeps_the_codec_for_spark_overwrites(spark, tmp_path, codec):
    """A catalog table is created with output.compression as its own option, so Spark's own partition overwrite
    (insertInto, which takes no writer options) writes its files with that codec too."""
    import uuid

    import pyarrow.parquet as pq

    prefix = f"codec_{uuid.uuid4().hex[:8]}_"
    output = {"path": str(tmp_path / "out"), "swap": "spark", "database": "default", "table_prefix": prefix,
              **({"compression": codec} if codec else {})}
    store = OutputStore(config_from_dict({"input": {"path": str(tmp_path / "in")}, "output": output}), spark)
    name = store.location("metrics")
    try:
        with store.transaction("t") as tx:
            tx.write("metrics", pd.DataFrame({"model": ["m"], "value": [1.0], "ds": ["2026-11-15"]}),
                     {"model": "string", "value": "double", "ds": "string"})
        where = {r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}["Location"]
        files = list(Path(where.removeprefix("file:")).glob("ds=*/*.parquet"))
        assert len(files) == 1
        assert pq.ParquetFile(files[0]).metadata.row_group(0).column(0).compression == (codec or "uncompressed").upper()
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


@pytest.mark.parametrize(("output", "options"), [
    ({}, {"compression": "none"}), ({"format": "json"}, {"compression": "none"}),
    ({"format": "orc", "compression": "zstd"}, {"compression": "zstd"}),
    ({"format": "avro"}, {}),  # a format whose writer may not know 'none' keeps its own default
    ({"format": "avro", "compression": "deflate"}, {"compression": "deflate"}),
])
def test_the_codec_option_goes_to_writers_that_take_it(output, options):
    from ctcalc_spark.config import codec_options

    assert codec_options(config_from_dict({"input": {"path": "x"}, "output": output}).output) == options


def test_a_runs_tables_are_staged_side_by_side_and_land_together_or_not_at_all(spark, tmp_path, monkeypatch):
    """write_all stages several tables at once (threads of its own); when one write fails, no table's partitions
    are swapped in, the old ones stay readable and nothing staged is left behind."""
    import threading

    from ctcalc_spark.spark import storage

    store = OutputStore(config_from_dict({"input": {"path": str(tmp_path / "in")},
                                          "output": {"path": str(tmp_path / "out"), "swap": "exchange"}}), spark)
    types = {"model": "string", "value": "double", "ds": "string"}
    r_types = {**types, "window_spec": "string"}
    days = ["2026-11-15", "2026-11-16"]

    def tables(value: float) -> list:
        metrics = pd.DataFrame({"model": "m", "value": value, "ds": days})
        return [("metrics", metrics, types), ("rolling", metrics.assign(window_spec="week"), r_types)]

    real, seen = storage._one_file_per_partition, []

    def recorded(frame, parts, n_partitions, n_rows):
        seen.append((tuple(parts), threading.current_thread().name))
        if fail and tuple(parts) == storage.PARTITIONS["rolling"]:
            raise RuntimeError("disk full")
        return real(frame, parts, n_partitions, n_rows)

    monkeypatch.setattr(storage, "_one_file_per_partition", recorded)
    fail = False
    with store.transaction("t") as tx:
        tx.write_all(tables(1.0))
    assert {table for table, _ in seen} == {("ds",), ("window_spec", "ds")}
    assert all(name.startswith("ctcalc-write") for _, name in seen)
    fail = True
    with pytest.raises(RuntimeError, match="disk full"):
        with store.transaction("t") as again:
            again.write_all(tables(2.0))
    for table in ("metrics", "rolling"):
        got = store.read(table, with_run_id=True)
        assert got["value"].tolist() == [1.0, 1.0] and set(got["run_id"]) == {tx.run_id}, table
        assert not [p for p in (tmp_path / "out" / table).iterdir() if p.name.startswith((".", "_"))], table
    assert store.check_days(days, tables=("metrics", "rolling")) == []


def test_a_table_staged_early_is_written_beside_the_runs_work_and_dropped_if_the_run_fails(spark, tmp_path,
                                                                                         monkeypatch):
    """Transaction.stage starts a staged write at once, on a write thread, while the run goes on (a range job
    computes its metrics meanwhile); it lands with the run's other tables. If the run then fails, nothing is
    swapped in, nothing staged is left, and an output folder the run created is removed. Where partitions are
    replaced in place (swap: spark) nothing starts early."""
    import threading

    from ctcalc_spark.spark import storage

    def store_at(name: str, swap: str = "exchange") -> OutputStore:
        return OutputStore(config_from_dict({"input": {"path": str(tmp_path / "in")},
                                             "output": {"path": str(tmp_path / name), "swap": swap}}), spark)

    types = {"model": "string", "value": "double", "ds": "string"}
    days = ["2026-11-15", "2026-11-16"]
    rows = pd.DataFrame({"model": "m", "value": [1.0, 2.0], "ds": days})
    real, threads, returned = storage._one_file_per_partition, [], threading.Event()

    def recorded(frame, parts, n_partitions, n_rows):
        threads.append((threading.current_thread().name, returned.wait(timeout=30)))
        return real(frame, parts, n_partitions, n_rows)

    monkeypatch.setattr(storage, "_one_file_per_partition", recorded)
    store = store_at("out")
    with store.transaction("t", days) as tx:
        assert tx.stage("summaries", rows, types) is True
        returned.set()  # the write waits for stage() to return: it runs beside the caller, not in stage()
        tx.write_all([("metrics", rows.assign(value=rows["value"] * 10), types)])
    for table, values in (("summaries", [1.0, 2.0]), ("metrics", [10.0, 20.0])):
        got = store.read(table, with_run_id=True).sort_values("ds")
        assert got["value"].tolist() == values and set(got["run_id"]) == {tx.run_id}, table
    assert store.check_days(days) == []
    assert threads[0][0].startswith("ctcalc-write") and threads[0][1], threads

    fresh = store_at("fresh")
    with pytest.raises(InputError, match="bad metrics"):
        with fresh.transaction("t", days) as failed:
            failed.stage("summaries", rows, types)
            raise InputError("bad metrics")
    assert not (tmp_path / "fresh").exists()  # it did not exist before the run
    with pytest.raises(InputError, match="bad metrics"):
        with store.transaction("t", days) as failed:
            failed.stage("summaries", rows.assign(value=5.0), types)
            raise InputError("bad metrics")
    assert store.read("summaries").sort_values("ds")["value"].tolist() == [1.0, 2.0]
    assert not [p for p in (tmp_path / "out" / "summaries").iterdir() if p.name.startswith((".", "_"))]

    in_place = store_at("in_place", swap="spark")
    with in_place.transaction("t", days) as tx:
        assert tx.stage("summaries", rows, types) is False
        assert not (tmp_path / "in_place" / "summaries").exists()


@pytest.mark.parametrize("rows_per_task,files_per_task", [(None, None), (1000, None), (None, 10)])
def test_a_write_leaves_one_file_per_partition_in_one_task_or_sized_by_spark(spark, tmp_path, monkeypatch,
                                                                              rows_per_task, files_per_task):
    """Small frames of few partitions are written by one task, small frames of many partitions hashed into
    just enough tasks (FILES_PER_WRITE_TASK partitions each), larger ones shuffled by the partition columns:
    each partition gets exactly one file and every row."""
    from ctcalc_spark.spark import storage

    if rows_per_task is not None:
        monkeypatch.setattr(storage, "ROWS_PER_WRITE_TASK", rows_per_task)
    if files_per_task is not None:
        monkeypatch.setattr(storage, "FILES_PER_WRITE_TASK", files_per_task)
    store = OutputStore(config_from_dict({"input": {"path": str(tmp_path / "in")},
                                          "output": {"path": str(tmp_path / "out")}}), spark)
    days = [f"2026-10-{d:02d}" for d in range(1, 31)]
    frame = pd.DataFrame({"model": "m", "value": np.arange(30_000.0), "ds": np.repeat(days, 1000)})
    frame = frame.sample(frac=1.0, random_state=0)  # days mixed over the rows, as a range job's are
    with store.transaction("t") as tx:
        tx.write("metrics", frame, {"model": "string", "value": "double", "ds": "string"})
    writers = set()
    for day in days:
        files = list((tmp_path / "out" / "metrics" / f"ds={day}").glob("*.parquet"))
        assert len(files) == 1, day
        writers.add(files[0].name.split("-")[1])  # part-<task partition>-...
    if rows_per_task is None and files_per_task is None:
        assert writers == {"00000"}  # one task wrote every partition
    if files_per_task is not None:
        assert len(writers) == 3, writers  # 30 partitions, 10 a task: three tasks wrote them
    got = store.read("metrics").sort_values("value")
    assert got["value"].tolist() == list(np.arange(30_000.0))
    assert (got["ds"].to_numpy() == np.repeat(days, 1000)).all()


def test_a_read_of_some_days_opens_no_other_partition(tmp_path):
    """A local read selects partitions by folder name before opening files: a damaged file in another day
    does not touch a read of the days asked for (it opened one file of every partition to unify schemas);
    reading that day names the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "out" / "metrics"
    for day in ("2026-11-14", "2026-11-15", "2026-11-16"):
        (root / f"ds={day}").mkdir(parents=True)
        pq.write_table(pa.table({"model": ["m"], "value": [float(day[-2:])]}), root / f"ds={day}" / "part-0.parquet")
    (root / "ds=2026-11-14" / "part-0.parquet").write_bytes(b"not parquet")
    store = _store(tmp_path)
    got = store.read("metrics", days=["2026-11-15", "2026-11-16"])
    assert got.sort_values("ds")["value"].tolist() == [15.0, 16.0]
    assert store.read("metrics", days=["2026-11-17"]).empty
    with pytest.raises(pa.ArrowInvalid, match="part-0.parquet"):
        store.read("metrics", days=["2026-11-14"])


def test_a_missing_output_database_fails_before_any_work(spark, demo_config, tmp_path):
    """The jobs create missing tables, not databases: a database that does not exist is a config error raised
    before the scan (the input here does not exist either, and is never reached), not Spark's SCHEMA_NOT_FOUND
    at the write; a stream's before it starts (not in its first batch), with no checkpoint or state written."""
    from ctcalc_spark.errors import ConfigError
    from ctcalc_spark.jobs.evaluate import evaluate
    from ctcalc_spark.jobs.rolling import run_rolling
    from ctcalc_spark.jobs.stream import start_stream

    (tmp_path / "landing").mkdir()  # a stream source that exists: the stream would start
    missing = demo_config(output={"path": str(tmp_path / "out"), "database": "no_such_db"},
                          stream={"path": str(tmp_path / "landing"), "window": "1 day"})
    jobs = (lambda: evaluate(spark, missing, "2026-11-15"), lambda: run_rolling(spark, missing, "2026-11-15"),
            lambda: start_stream(spark, missing, trigger="availableNow"))
    for job in jobs:
        with pytest.raises(ConfigError, match=r"\['no_such_db'\] do not exist .* CREATE DATABASE no_such_db"):
            job()
    assert not (tmp_path / "out").exists()  # no checkpoint, state or staging folder
    named = demo_config(output={"path": str(tmp_path / "out"), "database": "default",
                                "tables": {"metrics": "elsewhere.m"}})
    with pytest.raises(ConfigError, match=r"\['elsewhere'\] do not exist"):
        OutputStore(named, spark).check_databases()
    OutputStore(demo_config(output={"path": str(tmp_path / "out"), "database": "default"}), spark).check_databases()
    OutputStore(demo_config(), spark).check_databases()  # folders: nothing to check


def test_a_second_live_run_of_the_same_job_and_day_stops_before_writing(spark, demo_config, tmp_path):
    """Two runs of one day would swap their partitions in turn (metrics of one run, summaries of the other, and
    a commit record claiming both). A live lease of the same job on a shared day stops a run before it writes;
    another day, another job, another rolling window spec or a dead holder does not."""
    from ctcalc_spark.errors import EXIT_RUNTIME, ConcurrentRunError
    from ctcalc_spark.jobs.evaluate import evaluate
    from ctcalc_spark.jobs.rolling import run_rolling

    from ctcalc_spark.demo import generate_demo_eval

    generate_demo_eval(n_examples_per_day=400, n_runs=2, n_days=3, start_ds="2026-11-14").to_parquet(
        tmp_path / "eval", partition_cols=["ds"], index=False)
    out = tmp_path / "out"
    cfg = demo_config(output={"path": str(out)})
    runs = out / "_runs"
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)

    def holder(name: str, job: str, days: list[str], pid: int = os.getpid(), scope: str | None = None) -> Path:
        path = runs / f"{name}.json"
        _touch(path, json.dumps({"run_id": name, "job": job, "host": socket.gethostname(), "pid": pid,
                                 "started_at": "2026-11-24T00:00:00Z", "heartbeat_at": time.time(), "days": days,
                                 "scope": scope}))
        return path

    other = holder("20261124T000000Z-0ther000", "evaluate", ["2026-11-14", "2026-11-15"])
    with pytest.raises(ConcurrentRunError, match=r"Another evaluate run is writing ds=2026-11-15 of .*: run 2026"
                                                 r"1124T000000Z-0ther000 \(pid \d+ on .*\); its process is running"):
        evaluate(spark, cfg, "2026-11-15..2026-11-16")
    assert ConcurrentRunError.exit_code == EXIT_RUNTIME  # a scheduler's retry runs it again later
    with pytest.raises(ConcurrentRunError):  # checked before the scan too: its input is never opened
        evaluate(spark, demo_config(input__path=str(tmp_path / "no_such_input"), output={"path": str(out)}),
                 "2026-11-15")
    assert not (out / "metrics").exists() and [p.name for p in runs.iterdir()] == [other.name]  # its lease went
    assert evaluate(spark, cfg, "2026-11-16").days == ["2026-11-16"]  # another day: not shared
    other.unlink()
    holder("20261124T000001Z-0ther001", "rolling", ["2026-11-16"], scope="window_spec=week")  # another spec
    assert run_rolling(spark, cfg, "2026-11-16").spec == "day"
    holder("20261124T000002Z-0ther002", "rolling", ["2026-11-16", "2026-11-20"], scope="window_spec=day")
    with pytest.raises(ConcurrentRunError, match=r"Another rolling run \(window_spec=day\) is writing ds=2026-11-16"):
        run_rolling(spark, cfg, "2026-11-16")
    with pytest.raises(ConcurrentRunError):  # before reading the summaries, which that day does not have
        run_rolling(spark, cfg, "2026-11-20")
    holder("20261124T000003Z-0ther003", "evaluate", ["2026-11-15"], pid=dead)  # its process has ended
    assert evaluate(spark, cfg, "2026-11-15").days == ["2026-11-15"]


def test_a_transaction_narrows_its_lease_to_fewer_days_and_only_that(tmp_path, caplog):
    """A range run gives back the days its scan found without rows (Transaction.narrow): the lease file says so at
    once, another run may take those days, and narrowing cannot add a day."""
    from ctcalc_spark.errors import ConcurrentRunError

    store = _store(tmp_path)
    with store.transaction("evaluate", ["2026-11-15", "2026-11-16", "2026-11-17"]) as tx:
        lease = tmp_path / "out" / "_runs" / f"{tx.run_id}.json"
        with pytest.raises(ConcurrentRunError):
            store.check_no_concurrent_run("other", "evaluate", ["2026-11-15"])
        tx.narrow(["2026-11-17", "2026-11-16"])
        assert json.loads(lease.read_text())["days"] == tx.days == ["2026-11-16", "2026-11-17"]
        store.check_no_concurrent_run("other", "evaluate", ["2026-11-15"])
        with pytest.raises(ConcurrentRunError):
            store.check_no_concurrent_run("other", "evaluate", ["2026-11-17"])
        with pytest.raises(ValueError, match=r"can only drop days: \['2026-11-15'\] were not held"):
            tx.narrow(["2026-11-15", "2026-11-16"])
        lease.unlink()
        lease.mkdir()  # the lease can no longer be written: a warning, and the run goes on
        with caplog.at_level("WARNING", logger="ctcalc_spark.spark.storage"):
            tx.narrow(["2026-11-17"])
        assert tx.days == ["2026-11-17"]
        assert any(r.getMessage().startswith(f"could not narrow the lease {lease}") for r in caplog.records)
        lease.rmdir()
    assert not lease.exists()


def test_a_concurrent_run_on_another_host_is_judged_by_its_heartbeat(tmp_path):
    from ctcalc_spark.errors import ConcurrentRunError

    store = _store(tmp_path)
    lease = tmp_path / "out" / "_runs" / "20261124T000000Z-remote00.json"
    record = {"run_id": "r", "job": "evaluate", "host": "worker-7", "pid": 1, "started_at": "t", "days": None,
              "scope": None, "heartbeat_at": time.time() - 42}
    _touch(lease, json.dumps(record))  # days unknown (None): every day counts as shared
    with pytest.raises(ConcurrentRunError, match=r"on worker-7, started t\); its lease was renewed 4\d s ago \(a "
                                                 r"lease counts for output.lease_timeout_s = 600 s"):
        store.check_no_concurrent_run("mine", "evaluate", ["2026-11-15"])
    _touch(lease, json.dumps({**record, "heartbeat_at": time.time() - 601}))  # stale: a killed run's
    store.check_no_concurrent_run("mine", "evaluate", ["2026-11-15"])
