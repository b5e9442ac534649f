"""The output tables (ctcalc_spark/tables.py): Delta tables written and read with deltalake, one commit per table
and run; concurrent runs; tables of different runs; the earlier layout; readers other than ctcalc."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
import pytest

from ctcalc_spark.config import config_from_dict
from ctcalc_spark.errors import ConcurrentRunError, ConfigError, InputError
from ctcalc_spark.tables import RUN_ID, OutputStore

TYPES = {"model": "string", "run": "string", "value": "double", "n": "long", "ds": "string"}


def _store(tmp_path: Path, **output) -> OutputStore:
    return OutputStore(config_from_dict({"input": {"path": str(tmp_path / "in")},
                                         "output": {"path": str(tmp_path / "out"), **output}}))


def _rows(days, value: float = 1.0) -> pd.DataFrame:
    return pd.DataFrame([{"model": m, "run": r, "value": value + i, "n": i, "ds": d}
                         for i, (d, m, r) in enumerate((d, m, r) for d in days for m in "ab" for r in "12")])


def test_a_run_replaces_exactly_its_days_in_one_commit_per_table(tmp_path):
    from deltalake import DeltaTable

    store = _store(tmp_path)
    first = store.transaction("evaluate")
    first.write_all([("summaries", _rows(["2026-11-14", "2026-11-15"]), TYPES),
                     ("metrics", _rows(["2026-11-14", "2026-11-15"]), TYPES)])
    second = store.transaction("evaluate")
    second.write("metrics", _rows(["2026-11-15"], value=10.0), TYPES)
    got = store.read("metrics", with_run_id=True).sort_values(["ds", "model", "run"]).reset_index(drop=True)
    assert store.days("metrics") == ["2026-11-14", "2026-11-15"]
    assert got.groupby("ds")[RUN_ID].unique().map(list).to_dict() == {"2026-11-14": [first.run_id],
                                                                        "2026-11-15": [second.run_id]}
    assert got.loc[got["ds"] == "2026-11-15", "value"].tolist() == [10.0, 11.0, 12.0, 13.0]
    assert got.loc[got["ds"] == "2026-11-14", "value"].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert list(store.read("metrics", days=["2026-11-15"]).columns) == ["model", "run", "value", "n", "ds"]
    history = DeltaTable(str(tmp_path / "out" / "metrics")).history()
    assert [h["version"] for h in history] == [2, 1, 0]  # one commit per run, after the table's creation
    assert history[2]["operation"] == "CREATE TABLE"
    assert DeltaTable(str(tmp_path / "out" / "metrics")).metadata().configuration == {"ctcalc.table": "metrics"}
    assert history[0][RUN_ID] == second.run_id and history[0]["job"] == "evaluate" and history[0]["days"] == "2026-11-15"
    assert store.check_days() == ["ds=2026-11-15: summaries by " + first.run_id + ", metrics by " + second.run_id]
    with pytest.raises(InputError, match=r"ds=2026-11-15: summaries by .*Evaluate those days again \(`ctcalc "
                                         r"evaluate --ds 2026-11-15`\)"):
        store.require_one_run(["2026-11-14", "2026-11-15"])
    store.require_one_run(["2026-11-14"])  # a day both tables have from one run


def test_a_partition_table_of_two_columns_and_a_new_column(tmp_path):
    store = _store(tmp_path)
    types = {"model": "string", "value": "double", "window_spec": "string", "ds": "string"}
    rows = pd.DataFrame({"model": ["a", "a", "b"], "value": [1.0, 2.0, 3.0], "window_spec": ["day", "day", "week"],
                         "ds": ["2026-11-14", "2026-11-15", "2026-11-15"]})
    store.transaction("rolling").write("rolling", rows, types)
    # a later version's extra column: earlier rows read it as null; a rerun of one spec keeps the other
    store.transaction("rolling").write("rolling", rows.iloc[:2].assign(extra=[5.0, 6.0], value=[7.0, 8.0]),
                                       {**types, "extra": "double"})
    got = store.read("rolling").sort_values(["window_spec", "ds"]).reset_index(drop=True)
    assert got["value"].tolist() == [7.0, 8.0, 3.0] and got["extra"].isna().tolist() == [False, False, True]
    assert store.days("rolling", window_spec="week") == ["2026-11-15"]
    assert store.read("rolling", days=["2026-11-15"], where={"window_spec": ["week"]})["value"].tolist() == [3.0]
    assert store.read("rolling", days=[]).empty and store.read("metrics").empty  # nothing asked; no table
    with pytest.raises(InputError, match=r"not safe folder names"):
        store.transaction("rolling").write("rolling", rows.assign(ds="2026/11/15"), types)


def test_two_live_runs_of_one_day_the_second_to_commit_stops_and_writes_nothing(tmp_path):
    """Each run pins the tables' versions as it starts: a commit of another run on its days after that makes its
    first write fail with one clear error, before it has written anything; runs on other days both land."""
    store = _store(tmp_path)
    store.transaction("evaluate").write_all([("summaries", _rows(["2026-11-15", "2026-11-16"]), TYPES),
                                             ("metrics", _rows(["2026-11-15", "2026-11-16"]), TYPES)])
    slow, other_day = store.transaction("evaluate", ["2026-11-15"]), store.transaction("evaluate", ["2026-11-16"])
    for tx in (slow, other_day):
        tx.pin("summaries", "metrics")
    fast = store.transaction("evaluate", ["2026-11-15"])
    fast.write_all([("summaries", _rows(["2026-11-15"], 5.0), TYPES), ("metrics", _rows(["2026-11-15"], 5.0), TYPES)])
    other_day.write_all([("summaries", _rows(["2026-11-16"], 7.0), TYPES),
                         ("metrics", _rows(["2026-11-16"], 7.0), TYPES)])
    with pytest.raises(ConcurrentRunError, match=r"^Another run committed ds=2026-11-15 of the summaries table "
                                                 r"'.*/out/summaries' while this evaluate run \(.*\) was computing it; "
                                                 r"this run wrote nothing to it\. Run it again"):
        slow.write_all([("summaries", _rows(["2026-11-15"], 9.0), TYPES), ("metrics", _rows(["2026-11-15"], 9.0), TYPES)])
    assert ConcurrentRunError.exit_code == 1
    runs = {t: store.runs(t) for t in ("summaries", "metrics")}
    assert runs["summaries"] == runs["metrics"] == {"2026-11-15": [fast.run_id], "2026-11-16": [other_day.run_id]}
    assert store.check_days() == []
    again = store.transaction("evaluate", ["2026-11-15"])  # a rerun once the other has ended replaces the day
    again.write("metrics", _rows(["2026-11-15"], 9.0), TYPES)
    assert store.runs("metrics")["2026-11-15"] == [again.run_id]


def test_an_evaluate_that_another_run_overtakes_on_its_day_stops_with_one_line(spark, demo_config, tmp_path,
                                                                                monkeypatch):
    """The real job: while one evaluate of a day scans, another evaluate of the same day runs to the end. The first
    stops at its first write (ConcurrentRunError naming the day and the table); the day's tables are the second
    run's, whole. Nested the other way round, a run of another day lands beside it."""
    import ctcalc_spark.jobs.evaluate as job
    from ctcalc_spark.demo import generate_demo_eval

    generate_demo_eval(n_examples_per_day=400, n_runs=2, n_days=2, start_ds="2026-11-15").to_parquet(
        tmp_path / "eval", partition_cols=["ds"], index=False)
    cfg = demo_config()
    real = job.read_input
    inner: dict[str, object] = {}

    def overtaken(day):  # type: ignore[no-untyped-def]
        def read(*args, **kwargs):  # type: ignore[no-untyped-def]
            if not inner:
                inner["result"] = "running"
                inner["result"] = job.evaluate(spark, cfg, day)
            return real(*args, **kwargs)
        return read

    monkeypatch.setattr(job, "read_input", overtaken("2026-11-15"))
    with pytest.raises(ConcurrentRunError, match=r"Another run committed ds=2026-11-15 of the summaries table"):
        job.evaluate(spark, cfg, "2026-11-15")
    store = OutputStore(cfg)
    winner = inner["result"].run_id  # type: ignore[attr-defined]
    assert store.runs("summaries") == store.runs("metrics") == {"2026-11-15": [winner]}
    inner.clear()
    monkeypatch.setattr(job, "read_input", overtaken("2026-11-16"))
    outer = job.evaluate(spark, cfg, "2026-11-15")
    assert store.runs("metrics") == {"2026-11-15": [outer.run_id], "2026-11-16": [inner["result"].run_id]}


def test_an_output_in_the_earlier_parquet_layout_is_named_and_converted(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path / "out"
    for day in ("2026-11-14", "2026-11-15"):
        part = out / "metrics" / f"ds={day}"
        part.mkdir(parents=True)
        pq.write_table(pa.table({"model": ["a"], "value": [1.0], RUN_ID: ["r1"]}), part / "part-0.parquet")
        (part / "_SUCCESS").touch()
    (out / "metrics" / ".ctcalc-staging-r2-metrics" / "ds=2026-11-15").mkdir(parents=True)  # a killed run's copy
    (out / "_commits").mkdir()
    (out / "_commits" / "r1.json").write_text("{}")
    store = _store(tmp_path)
    with pytest.raises(ConfigError, match=r"holds the 'metrics' table in ctcalc's earlier layout .* `ctcalc tables "
                                          r"convert --set output.path=.*/out`"):
        store.check_before_work("evaluate", ["2026-11-15"])
    from ctcalc_spark.cli.main import main

    assert main(["tables", "convert", "--set", f"output.path={out}"]) == 0
    assert store.read("metrics").sort_values("ds")["ds"].tolist() == ["2026-11-14", "2026-11-15"]
    assert not (out / "_commits").exists()
    store.check_before_work("evaluate", ["2026-11-15"])
    (out / "summaries").mkdir()
    (out / "summaries" / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match=r"a 'summaries' folder that is not a Delta table \(it holds 'notes.txt'\)"):
        store.check_before_work("evaluate", ["2026-11-15"])


def test_outputs_read_as_of_an_earlier_version_or_time(tmp_path):
    store = _store(tmp_path)
    store.transaction("evaluate").write_all([("summaries", _rows(["2026-11-15"]), TYPES),
                                             ("metrics", _rows(["2026-11-15"]), TYPES)])
    between = dt.datetime.now(dt.timezone.utc)
    store.transaction("evaluate").write_all([("summaries", _rows(["2026-11-15"], 5.0), TYPES),
                                             ("metrics", _rows(["2026-11-15", "2026-11-16"], 5.0), TYPES)])
    old = OutputStore(store.output, as_of=1)  # version 0 creates the table
    assert old.read("metrics")["value"].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert old.read("summaries")["value"].tolist() == [1.0, 2.0, 3.0, 4.0]  # the same moment in every table
    assert OutputStore(store.output, as_of=between).days("metrics") == ["2026-11-15"]
    assert OutputStore(store.output, as_of=2).days("metrics") == ["2026-11-15", "2026-11-16"]
    with pytest.raises(ConfigError, match=r"has no version 7 .*ctcalc tables history"):
        OutputStore(store.output, as_of=7).read("metrics")
    with pytest.raises(ConfigError, match="cannot be written"):
        old.transaction("evaluate")


def test_a_delta_output_reads_the_same_in_duckdb(tmp_path):
    """What a user's own tools see: DuckDB over the table's Arrow dataset gives the rows ctcalc reads."""
    duckdb = pytest.importorskip("duckdb")
    from deltalake import DeltaTable
    from pyarrow.fs import LocalFileSystem, SubTreeFileSystem

    store = _store(tmp_path)
    store.transaction("evaluate").write("metrics", _rows(["2026-11-14", "2026-11-15"]), TYPES)
    store.transaction("evaluate").write("metrics", _rows(["2026-11-15"], 3.0), TYPES)  # replaced files stay on disk
    where = str(tmp_path / "out" / "metrics")  # with Arrow's own file system, as docs/storage.md says
    dataset = DeltaTable(where).to_pyarrow_dataset(filesystem=SubTreeFileSystem(where, LocalFileSystem()))  # noqa: F841
    got = duckdb.sql("select ds, model, run, value from dataset order by ds, model, run").df()
    want = store.read("metrics")[["ds", "model", "run", "value"]].sort_values(["ds", "model", "run"])
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True), check_dtype=False)
    assert len(pd.read_parquet(tmp_path / "out" / "metrics")) == 12  # the folder holds the replaced files too


def test_a_read_keeps_quotes_in_values_and_spaces_and_capitals_in_column_names(tmp_path):
    """OutputStore.read asks delta-rs one SQL query: values holding quotes, and a column whose name holds a space and
    capitals, are selected as written; an empty list of values selects nothing."""
    store = _store(tmp_path)
    names = ["o'brien", 'say "hi"', "plain"]
    rows = pd.DataFrame({"Pipeline Model": names, "value": [1.0, 2.0, 3.0], "ds": ["2026-11-15"] * 3})
    types = {"Pipeline Model": "string", "value": "double", "ds": "string"}
    store.transaction("evaluate").write("metrics", rows, types)
    got = store.read("metrics", days=["2026-11-15"], where={"Pipeline Model": names[:2]})
    assert sorted(got["Pipeline Model"]) == sorted(names[:2]) and set(got.columns) == {"Pipeline Model", "value", "ds"}
    assert got.set_index("Pipeline Model")["value"].to_dict() == {"o'brien": 1.0, 'say "hi"': 2.0}
    assert store.read("metrics", where={"Pipeline Model": []}).empty
    assert store.read("metrics", days=["2026-11-16"]).empty


def test_vacuum_lists_then_removes_files_no_version_references(tmp_path, capsys):
    from ctcalc_spark.cli.main import main

    store = _store(tmp_path)
    for value in (1.0, 2.0):
        store.transaction("evaluate").write("metrics", _rows(["2026-11-15"], value), TYPES)
    argv = ["tables", "vacuum", "--set", f"output.path={tmp_path / 'out'}", "--retention-hours", "0"]
    assert main(argv) == 0
    assert "metrics: would remove (run again with --apply) 1 file(s)" in capsys.readouterr().out
    assert main([*argv, "--apply"]) == 0
    assert "metrics: removed 1 file(s)" in capsys.readouterr().out
    assert len(pd.read_parquet(tmp_path / "out" / "metrics")) == 4
    assert store.read("metrics")["value"].tolist() == [2.0, 3.0, 4.0, 5.0]
    assert main(["tables", "history", "--set", f"output.path={tmp_path / 'out'}"]) == 0
    assert "version 1" in capsys.readouterr().out


def test_two_output_tables_of_one_catalog_name_are_refused():
    with pytest.raises(ConfigError, match=r"'output.tables' names 'db.t' for both 'metrics' and 'summaries'"):
        config_from_dict({"input": {"path": "x"}, "output": {"tables": {t: "db.t" if t in ("metrics", "summaries")
                                                                        else f"db.{t}" for t in (
            "metrics", "summaries", "rolling", "calibrated_exact", "stream_summaries", "stream_counts",
            "stream_metrics", "stream_rolling")}}})
    with pytest.raises(ConfigError, match=r"names 'db.ctcalc_summaries' for both 'summaries' and 'metrics'|names "
                                          r"'db.ctcalc_summaries' for both"):
        config_from_dict({"input": {"path": "x"}, "output": {"database": "db",
                                                              "tables": {"metrics": "db.ctcalc_summaries"}}})


def test_a_missing_output_database_fails_before_any_work(spark, demo_config, tmp_path):
    """The jobs create missing tables, not databases: a database that does not exist is a config error raised
    before the scan (the input here does not exist either, and is never reached); a stream's before it starts."""
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
    assert not (tmp_path / "out").exists()  # no checkpoint, batch log or table
    named = demo_config(output={"path": str(tmp_path / "out"), "database": "default",
                                "tables": {"metrics": "elsewhere.m"}})
    with pytest.raises(ConfigError, match=r"\['elsewhere'\] do not exist"):
        OutputStore(named, spark).check_databases()
    OutputStore(demo_config(output={"path": str(tmp_path / "out"), "database": "default"}), spark).check_databases()
    OutputStore(demo_config(), spark).check_databases()  # folders: nothing to check


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_a_catalog_table_ctcalc_creates_keeps_the_codec_for_spark_overwrites(spark, tmp_path, codec):
    """A catalog table is created with output.compression as its own option, so Spark's own partition overwrite
    (insertInto, which takes no writer options) writes its files with that codec too."""
    import uuid

    import pyarrow.parquet as pq

    prefix = f"codec_{uuid.uuid4().hex[:8]}_"
    output = {"path": str(tmp_path / "out"), "database": "default", "table_prefix": prefix,
              **({"compression": codec} if codec else {})}
    store = OutputStore(config_from_dict({"input": {"path": str(tmp_path / "in")}, "output": output}), spark)
    name = store.location("metrics")
    try:
        for value in (1.0, 2.0):
            store.transaction("t").write("metrics", pd.DataFrame({"model": ["m"], "value": [value],
                                                                  "ds": ["2026-11-15"]}),
                                         {"model": "string", "value": "double", "ds": "string"})
        assert store.read("metrics")["value"].tolist() == [2.0]
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


def test_readers_refuse_days_whose_tables_come_from_different_runs(tmp_path, capsys):
    """A run killed between its commits leaves days whose summaries are newer than their metrics: rolling, report
    and compare (no Spark for path outputs) stop with exit 4 naming the days and the command that repairs them,
    instead of combining the two runs without a word."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from _drift_data import binary_drift_summaries, day_range
    from _frames import write_outputs

    from ctcalc_spark.cli.main import main
    from ctcalc_spark.core.finalize import metrics_from_summaries
    from ctcalc_spark.errors import EXIT_INPUT

    days = day_range("2026-01-05", 14)
    summaries = binary_drift_summaries(days, runs=2, n=400, seed=3)
    metrics = metrics_from_summaries(summaries, "binary", keys=["ds", "model", "run"], bin_width=0.1)
    out = tmp_path / "out"
    write_outputs(out, {"summaries": summaries, "metrics": metrics.assign(task="binary")})
    common = ["--set", f"output.path={out}", "--set", "rolling.window=week"]
    assert main(["-q", "rolling", "--ds", f"{days[0]}..{days[-1]}", *common]) == 0
    late = summaries[summaries["ds"] == days[9]]
    write_outputs(out, {"summaries": late})  # a later run whose metrics commit never came
    capsys.readouterr()
    for argv in (["rolling", "--ds", f"{days[7]}..{days[-1]}"], ["report", "--ds", f"{days[0]}..{days[-1]}"],
                 ["compare", "--a", "ctr_a", "--b", "ctr_b", "--ds", f"{days[7]}..{days[-1]}", "--rolling",
                  "--window", "week"]):
        assert main(["-q", *argv, *common]) == EXIT_INPUT, argv
        err = capsys.readouterr().err
        assert f"ds={days[9]}: summaries by" in err and f"`ctcalc evaluate --ds {days[9]}`" in err, (argv, err)
