"""The output tables (ctcalc_spark/tables.py): Delta tables written and read with deltalake, one commit per table
and run; concurrent runs; tables of different runs; the earlier layout; readers other than ctcalc."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
import pytest

from ctcalc_spark.config import config_from_dict
from ctcalc_spark.core.state import arrow_schema
from ctcalc_spark.errors import ConcurrentRunError, ConfigError, InputError
from ctcalc_spark.tables import RUN_ID, OutputStore

TYPES = arrow_schema({"model": "string", "run": "string", "value": "double", "n": "long", "ds": "string"})


def _store(tmp_path: Path, **output) -> OutputStore:
    return OutputStore(config_from_dict({"input": {"path": str(tmp_path / "in")},
                                         "output": {"path": str(tmp_path / "out"), **output}}))


def _rows(days, value: float = 1.0) -> pd.DataFrame:
    return pd.DataFrame([{"model": m, "run": r, "value": value + i, "n": i, "ds": d}
                         for i, (d, m, r) in enumerate((d, m, r) for d in days for m in "ab" for r in "12")])


def test_a_run_replaces_exactly_its_days_in_one_commit_per_table(tmp_path, monkeypatch):
    from deltalake import DeltaTable

    import ctcalc_spark.tables as tables

    monkeypatch.setattr(tables, "MID_WRITE_WAIT_S", 0.0)
    monkeypatch.setattr(tables, "LIVE_GAP_S", 0.0)  # a run stopped between its commits, not one committing now

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
    store.transaction("rolling").write("rolling", rows, arrow_schema(types))
    # a later version's extra column: earlier rows read it as null; a rerun of one spec keeps the other
    store.transaction("rolling").write("rolling", rows.iloc[:2].assign(extra=[5.0, 6.0], value=[7.0, 8.0]),
                                       arrow_schema({**types, "extra": "double"}))
    got = store.read("rolling").sort_values(["window_spec", "ds"]).reset_index(drop=True)
    assert got["value"].tolist() == [7.0, 8.0, 3.0] and got["extra"].isna().tolist() == [False, False, True]
    assert store.days("rolling", window_spec="week") == ["2026-11-15"]
    assert store.read("rolling", days=["2026-11-15"], where={"window_spec": ["week"]})["value"].tolist() == [3.0]
    assert store.read("rolling", days=[]).empty and store.read("metrics").empty  # nothing asked; no table
    with pytest.raises(InputError, match=r"not safe folder names"):
        store.transaction("rolling").write("rolling", rows.assign(ds="2026/11/15"), arrow_schema(types))


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
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, QueryBuilder

    store = _store(tmp_path)
    store.transaction("evaluate").write("metrics", _rows(["2026-11-14", "2026-11-15"]), TYPES)
    store.transaction("evaluate").write("metrics", _rows(["2026-11-15"], 3.0), TYPES)  # replaced files stay on disk
    where = str(tmp_path / "out" / "metrics")  # the routes docs/storage.md shows
    metrics = pa.table(QueryBuilder().register("m", DeltaTable(where)).execute("select * from m"))  # noqa: F841
    got = duckdb.sql("select ds, model, run, value from metrics order by ds, model, run").df()
    want = store.read("metrics")[["ds", "model", "run", "value"]].sort_values(["ds", "model", "run"])
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True), check_dtype=False)
    listed = pq.ParquetDataset(DeltaTable(where).file_uris()).read()  # Spark without delta-spark reads this list
    assert listed.num_rows == 8
    assert len(pd.read_parquet(tmp_path / "out" / "metrics")) == 12  # the folder holds the replaced files too


def test_a_read_keeps_quotes_in_values_and_spaces_and_capitals_in_column_names(tmp_path):
    """OutputStore.read asks delta-rs one SQL query: values holding quotes, and a column whose name holds a space and
    capitals, are selected as written; an empty list of values selects nothing."""
    store = _store(tmp_path)
    names = ["o'brien", 'say "hi"', "plain"]
    rows = pd.DataFrame({"Pipeline Model": names, "value": [1.0, 2.0, 3.0], "ds": ["2026-11-15"] * 3})
    types = arrow_schema({"Pipeline Model": "string", "value": "double", "ds": "string"})
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
                                         arrow_schema({"model": "string", "value": "double", "ds": "string"}))
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


def test_readers_refuse_days_whose_tables_come_from_different_runs(tmp_path, capsys, monkeypatch):
    """A run killed between its commits leaves days whose summaries are newer than their metrics: rolling, report
    and compare (no Spark for path outputs) stop with exit 4 naming the days and the command that repairs them,
    instead of combining the two runs without a word."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from _rows import binary_drift_summaries, day_range
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
    import ctcalc_spark.tables as tables

    monkeypatch.setattr(tables, "MID_WRITE_WAIT_S", 0.0)
    capsys.readouterr()
    # just written: as a run committing now is seen, exit 1 and the reader run again, not a second evaluate
    assert main(["-q", "report", "--ds", f"{days[0]}..{days[-1]}", *common]) == 1
    err = capsys.readouterr().err
    assert "a run is committing those days now" in err and "ctcalc evaluate" not in err, err
    monkeypatch.setattr(tables, "LIVE_GAP_S", 0.0)  # long stopped: not a run committing now
    for argv in (["rolling", "--ds", f"{days[7]}..{days[-1]}"], ["report", "--ds", f"{days[0]}..{days[-1]}"],
                 ["compare", "--a", "ctr_a", "--b", "ctr_b", "--ds", f"{days[7]}..{days[-1]}", "--rolling",
                  "--window", "week"]):
        assert main(["-q", *argv, *common]) == EXIT_INPUT, argv
        err = capsys.readouterr().err
        assert f"ds={days[9]}: summaries by" in err and f"`ctcalc evaluate --ds {days[9]}`" in err, (argv, err)


# ---- a run's tables as one commit; commit failures by cause; only ctcalc's tables ------------------------------

def _pair(days, value):
    return [("summaries", _rows(days, value), TYPES), ("metrics", _rows(days, value), TYPES)]


def _owners(store, table):
    """{ds: run ids} read from the rows (not the commits' metadata)."""
    frame = store.read(table, columns=["ds", RUN_ID])
    return {} if frame.empty else {d: sorted(set(g)) for d, g in frame.groupby("ds")[RUN_ID]}


def test_a_run_pinned_between_another_runs_commits_writes_nothing_and_the_other_keeps_its_days(tmp_path,
                                                                                             monkeypatch):
    """The straddle: run C (days 19-21) has committed its summaries, not yet its metrics, when run B (days 19-20)
    pins its tables. C then commits its metrics and reports success. B is refused before its first commit, so
    C's summaries and metrics of every day stay C's."""
    from ctcalc_spark.tables import Transaction

    store = _store(tmp_path)
    days_c, days_b = ["2026-11-19", "2026-11-20", "2026-11-21"], ["2026-11-19", "2026-11-20"]
    c, b = store.transaction("evaluate"), store.transaction("evaluate")
    real = Transaction._commit

    def commit(self, plan):  # type: ignore[no-untyped-def]
        real(self, plan)
        if self is c and plan.table == "summaries":
            b.pin("summaries", "metrics")  # B starts in C's gap

    monkeypatch.setattr(Transaction, "_commit", commit)
    c.write_all(_pair(days_c, 1.0))
    with pytest.raises(ConcurrentRunError, match=r"ds=2026-11-19..2026-11-20 of the metrics table .* this run "
                                                 r"wrote nothing"):
        b.write_all(_pair(days_b, 9.0))
    for table in ("summaries", "metrics"):
        assert _owners(store, table) == {d: [c.run_id] for d in days_c}, table


def test_a_run_refused_after_its_first_commit_puts_back_what_it_replaced(tmp_path, monkeypatch):
    """The narrower race: B's checks pass, then C commits its metrics before B's first commit. B's summaries land,
    its metrics commit is refused, and B puts back C's summaries by a commit of its own: C keeps every row."""
    from ctcalc_spark.tables import Transaction

    store = _store(tmp_path)
    days = ["2026-11-19", "2026-11-20"]
    c, b = store.transaction("evaluate"), store.transaction("evaluate")
    c_plans = [c._plan(t, f, ty, None, {}) for t, f, ty in _pair(days + ["2026-11-21"], 1.0)]
    c.pin("summaries", "metrics")
    c._commit(c_plans[0])  # C's summaries
    b.pin("summaries", "metrics")
    real = Transaction._check

    def check(self, plan):  # type: ignore[no-untyped-def]
        real(self, plan)
        if self is b and plan.table == "metrics":
            c._commit(c_plans[1])  # C's metrics land after B's checks

    monkeypatch.setattr(Transaction, "_check", check)
    with pytest.raises(ConcurrentRunError, match=r"of the metrics table .* its summaries commit \(version 2\) is "
                                                 r"undone"):
        b.write_all(_pair(days, 9.0))
    for table in ("summaries", "metrics"):
        assert _owners(store, table) == {d: [c.run_id] for d in days + ["2026-11-21"]}, table
    assert sorted(store.read("summaries", days=days)["value"]) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    store.require_one_run()


def _racer(root: str, jobs, out) -> None:  # a child process: runs each (days, value, delay) it is sent
    import time

    from ctcalc_spark.config import OutputConfig

    for days, value, delay in iter(jobs.get, None):
        tx = OutputStore(OutputConfig(path=root)).transaction("evaluate")
        tx.pin("summaries", "metrics")
        time.sleep(delay)
        try:
            tx.write_all(_pair(days, value))
            out.put((tx.run_id, days, "ok"))
        except ConcurrentRunError:
            out.put((tx.run_id, days, "refused"))
        except BaseException as e:  # noqa: BLE001 - the parent fails on it
            out.put((tx.run_id, days, f"{type(e).__name__}: {e}"))


def test_racing_pairs_of_runs_on_overlapping_days_leave_each_day_to_one_successful_run(tmp_path):
    """20 pairs of runs, each run of a pair in a process of its own, on overlapping days, each pinning then
    committing after a random delay. After each pair: no row of a refused run anywhere, every day's summaries and
    metrics from one run, and a lone winner holds every day it wrote."""
    import multiprocessing
    import random

    ctx = multiprocessing.get_context("spawn")  # deltalake's runtime does not survive a fork
    rng = random.Random(60)
    store = _store(tmp_path)
    root = str(tmp_path / "out")
    base = ["2026-11-18", "2026-11-19", "2026-11-20", "2026-11-21"]
    out, queues = ctx.Queue(), [ctx.Queue(), ctx.Queue()]
    procs = [ctx.Process(target=_racer, args=(root, q, out)) for q in queues]
    for p in procs:
        p.start()
    tally = {"ok": 0, "refused": 0}
    try:
        for i in range(20):
            lo = rng.randrange(2)
            for k, (q, days) in enumerate(zip(queues, [base[lo:lo + 3], base[1:3]])):
                q.put((days, 10.0 * i + k, rng.uniform(0, 0.03)))
            results = [out.get(timeout=120) for _ in queues]
            assert all(how in ("ok", "refused") for _, _, how in results), results
            won = {r for r, _, how in results if how == "ok"}
            for _, _, how in results:
                tally[how] += 1
            assert won, results  # two runs never both lose
            owners = {t: _owners(store, t) for t in ("summaries", "metrics")}
            assert owners["summaries"] == owners["metrics"], (i, results)
            assert all(len(runs) == 1 for runs in owners["metrics"].values()), owners
            for run, days, how in results:
                held = {d for d, runs in owners["metrics"].items() if run in runs}
                if how == "refused":
                    assert not held, (i, results, owners)
                elif len(won) == 1:
                    assert held == set(days), (i, results, owners)
    finally:
        for q in queues:
            q.put(None)
        for p in procs:
            p.join(30)
    print(f"racing pairs: {tally}")


def test_a_table_this_deltalake_cannot_write_is_refused_before_any_commit(tmp_path):
    """A metrics table a platform's Spark gave rowTracking: the run stops before its summaries commit, naming the
    feature and the deltalake version, exit 5; neither table changed."""
    import json

    from deltalake import DeltaTable

    from ctcalc_spark.errors import TableFeatureError

    store = _store(tmp_path)
    first = store.transaction("evaluate")
    first.write_all(_pair(["2026-11-15"], 1.0))
    log_dir = tmp_path / "out" / "metrics" / "_delta_log"
    version = DeltaTable(str(log_dir.parent)).version() + 1
    (log_dir / f"{version:020d}.json").write_text(json.dumps({"protocol": {
        "minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [],
        "writerFeatures": ["rowTracking", "domainMetadata"]}}) + "\n")
    before = DeltaTable(str(tmp_path / "out" / "summaries")).version()
    with pytest.raises(TableFeatureError, match=r"^The metrics table '.*/out/metrics' needs the Delta table "
                                                r"feature\(s\) domainMetadata, rowTracking, which deltalake "
                                                r"1\.\d+\.\d+ \(installed here\) cannot write"):
        store.transaction("evaluate").write_all(_pair(["2026-11-15"], 5.0))
    assert TableFeatureError.exit_code == 5
    assert DeltaTable(str(tmp_path / "out" / "summaries")).version() == before
    assert _owners(store, "summaries") == {"2026-11-15": [first.run_id]}


@pytest.mark.parametrize("feature", ["appendOnly", "changeDataFeed", "deletionVectors", "rowTracking",
                                     "domainMetadata", "identityColumns", "inCommitTimestamp", "clustering",
                                     "typeWidening", "vacuumProtocolCheck"])
def test_the_writable_features_are_the_ones_deltalake_writes(tmp_path, feature):
    """delta_errors.WRITABLE_FEATURES is what the installed deltalake writes: a table needing one of them takes a write,
    one needing another refuses it (so ctcalc's check before the first commit says no more and no less)."""
    import json

    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from ctcalc_spark.delta_errors import WRITABLE_FEATURES

    where = str(tmp_path / "t")
    write_deltalake(where, pa.table({"ds": ["a"], "x": [1]}), partition_by=["ds"])
    readers = [feature] if feature in ("deletionVectors", "typeWidening", "vacuumProtocolCheck") else []
    (tmp_path / "t" / "_delta_log" / f"{1:020d}.json").write_text(json.dumps({"protocol": {
        "minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": readers, "writerFeatures": [feature]}}) + "\n")
    try:
        write_deltalake(DeltaTable(where), pa.table({"ds": ["a"], "x": [2]}), mode="overwrite", predicate="ds = 'a'")
        writes = True
    except Exception:  # noqa: BLE001 - deltalake's refusal
        writes = False
    assert writes == (feature in WRITABLE_FEATURES)


def test_a_delta_table_of_another_tool_is_refused_before_the_scan_and_never_widened(tmp_path):
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    where = tmp_path / "out" / "metrics"
    write_deltalake(str(where), pa.table({"ds": ["2026-11-15"], "user_id": [7], "score": [0.5]}),
                    partition_by=["ds"])
    store = _store(tmp_path)
    message = r"^The folder '.*/out/metrics' holds a Delta table ctcalc did not write \(no 'ctcalc.table' " \
              r"property.*Set output.path to a folder of ctcalc's own"
    with pytest.raises(ConfigError, match=message):
        store.check_before_work("evaluate", ["2026-11-15"])
    with pytest.raises(ConfigError, match=message):
        store.transaction("evaluate").write_all(_pair(["2026-11-15"], 1.0))
    t = DeltaTable(str(where))
    assert t.version() == 0 and [f.name for f in t.schema().fields] == ["ds", "user_id", "score"]
    assert not (tmp_path / "out" / "summaries" / "_delta_log").exists()  # refused before the first commit


def test_a_killed_first_run_is_not_the_earlier_layout_and_its_files_are_never_adopted(tmp_path, capsys, caplog):
    """Data files deltalake names, with no Delta log (a first run stopped before its commit): jobs go on (a
    warning says what they are and that vacuum removes them), convert leaves them, the next run's table holds only
    its own rows, and `ctcalc tables vacuum --apply` removes them."""
    import shutil

    from ctcalc_spark.cli.main import main

    store = _store(tmp_path)
    store.transaction("evaluate").write("metrics", _rows(["2026-11-14"], 50.0), TYPES)
    shutil.rmtree(tmp_path / "out" / "metrics" / "_delta_log")  # what a killed first run leaves: files, no log
    killed = sorted(p.name for p in (tmp_path / "out" / "metrics").rglob("*.parquet"))
    assert killed
    store.check_before_work("evaluate", ["2026-11-15"])
    assert "stopped before its first commit" in caplog.text and "ctcalc tables vacuum --apply" in caplog.text
    argv = ["--set", f"output.path={tmp_path / 'out'}"]
    assert main(["tables", "convert", *argv]) == 0
    assert "nothing to convert" in capsys.readouterr().out
    run = store.transaction("evaluate")
    run.write("metrics", _rows(["2026-11-15"]), TYPES)
    assert _owners(store, "metrics") == {"2026-11-15": [run.run_id]}  # the killed run's 2026-11-14 is not adopted
    assert main(["tables", "vacuum", *argv, "--retention-hours", "0", "--apply"]) == 0
    assert not [p for p in (tmp_path / "out" / "metrics").rglob("*.parquet") if p.name in killed]
    assert _owners(store, "metrics") == {"2026-11-15": [run.run_id]}


def _broken(tmp_path, how):
    import glob
    import json
    import os

    from deltalake import DeltaTable

    store = _store(tmp_path)
    for value in (1.0, 2.0, 3.0):
        store.transaction("evaluate").write_all(_pair(["2026-11-15"], value))
    where = tmp_path / "out" / "metrics"
    log_dir = where / "_delta_log"
    if how == "corrupt commit":
        (log_dir / f"{3:020d}.json").write_text('{"add": {broken')
    elif how == "truncated commit":
        text = (log_dir / f"{3:020d}.json").read_text()
        (log_dir / f"{3:020d}.json").write_text(text[: len(text) // 2])
    elif how == "version gap":
        os.remove(log_dir / f"{2:020d}.json")
    elif how == "corrupt checkpoint":
        DeltaTable(str(where)).create_checkpoint()
        (glob.glob(str(log_dir / "*.checkpoint.parquet")))
        for cp in glob.glob(str(log_dir / "*.checkpoint.parquet")):
            open(cp, "wb").write(b"garbage")
    elif how == "deleted data file":
        for table in ("summaries", "metrics"):
            folder = tmp_path / "out" / table
            live = {a.split("/")[-1] for a in DeltaTable(str(folder)).file_uris()}
            for f in folder.rglob("*.parquet"):
                if f.name in live:
                    f.unlink()
    elif how == "unknown reader feature":
        (log_dir / f"{4:020d}.json").write_text(json.dumps({"protocol": {
            "minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["fooBar"],
            "writerFeatures": ["fooBar"]}}) + "\n")
    return store


@pytest.mark.parametrize("how, code, words", [
    ("corrupt commit", 4, r"A commit file of the metrics table '.*' \(version 3\) is corrupt or truncated"),
    ("truncated commit", 4, r"A commit file of the metrics table '.*' \(version 3\) is corrupt or truncated"),
    ("version gap", 4, r"The Delta log of the metrics table '.*' has a gap in its versions"),
    ("corrupt checkpoint", 4, r"A checkpoint of the metrics table '.*' \(version 3\) is corrupt"),
    ("deleted data file", 4, r"A data file of the (summaries|metrics) table '.*' \(version 3\) is missing"),
    ("unknown reader feature", 5, r"The metrics table '.*' needs the Delta table feature\(s\) fooBar, which "
                                  r"deltalake .* cannot read"),
])
def test_a_broken_table_is_one_line_naming_table_version_and_cause(tmp_path, capsys, how, code, words):
    import re

    from ctcalc_spark.cli.main import main

    _broken(tmp_path, how)
    got = main(["report", "--ds", "2026-11-15", "--set", f"output.path={tmp_path / 'out'}",
                "--out", str(tmp_path / "rep")])
    err = capsys.readouterr().err.strip()
    assert got == code, err
    assert len(err.splitlines()) == 1 and re.search(words, err), err
    assert "bug" not in err and "Traceback" not in err


def test_report_as_of_a_vacuumed_version_and_os_errors_are_one_line(tmp_path, capsys):
    from ctcalc_spark.cli.main import main
    from ctcalc_spark.errors import ConfigError as Config, StorageError
    from ctcalc_spark.delta_errors import delta_failure

    store = _store(tmp_path)
    for value in (1.0, 2.0):
        store.transaction("evaluate").write_all(_pair(["2026-11-15"], value))
    argv = ["--set", f"output.path={tmp_path / 'out'}"]
    assert main(["tables", "vacuum", *argv, "--retention-hours", "0", "--apply"]) == 0
    capsys.readouterr()
    got = main(["report", "--ds", "2026-11-15", "--as-of", "1", *argv, "--out", str(tmp_path / "rep")])
    err = capsys.readouterr().err.strip()
    assert got == 4 and len(err.splitlines()) == 1 and "is missing" in err and "vacuum" in err, err
    colour = OSError("\x1b[31mPermission denied (os error 13)\x1b[0m\n  at _delta_log/00000000000000000003.json\n")
    e = delta_failure("metrics", "/o/metrics", colour, 3, writing=True)
    assert isinstance(e, Config) and "\x1b" not in str(e) and len(str(e).splitlines()) == 1
    assert str(e).startswith("Cannot write the metrics table '/o/metrics' (version 3): permission denied")
    full = delta_failure("metrics", "/o/metrics", OSError(28, "No space left on device"), 3, writing=True)
    assert isinstance(full, StorageError) and full.exit_code == 1 and "the disk is full" in str(full)


def test_two_writers_into_a_new_output_one_creates_the_table_and_overlapping_days_are_refused(tmp_path):
    """Both pinned before any table existed: the first creates and commits; the second finds the table made by
    another run holding its days and writes nothing; a third of other days lands beside them."""
    store = _store(tmp_path)
    first, second, other = (store.transaction("evaluate") for _ in range(3))
    for tx in (first, second, other):
        tx.pin("summaries", "metrics")
    first.write_all(_pair(["2026-11-15"], 1.0))
    with pytest.raises(ConcurrentRunError, match=r"ds=2026-11-15 of the summaries table .* wrote nothing"):
        second.write_all(_pair(["2026-11-15"], 2.0))
    other.write_all(_pair(["2026-11-16"], 3.0))
    for table in ("summaries", "metrics"):
        assert _owners(store, table) == {"2026-11-15": [first.run_id], "2026-11-16": [other.run_id]}


def test_a_reader_meeting_a_day_between_a_live_runs_commits_says_so_with_a_retryable_code(tmp_path, monkeypatch,
                                                                                           capsys):
    """A day whose summaries are newer than its metrics and whose newest commit is recent: a run committing now.
    The reader waits, then says so with exit 1 and advises running itself again, not a second evaluate."""
    import ctcalc_spark.tables as tables
    from ctcalc_spark.errors import RunInProgressError

    monkeypatch.setattr(tables, "MID_WRITE_WAIT_S", 0.4)
    store = _store(tmp_path)
    store.transaction("evaluate").write_all(_pair(["2026-11-15"], 1.0))
    store.transaction("evaluate").write("summaries", _rows(["2026-11-15"], 2.0), TYPES)
    with pytest.raises(RunInProgressError, match=r"a run is committing those days now .* Run this command again "
                                                 r"once that run has ended") as caught:
        store.require_one_run(["2026-11-15"])
    assert caught.value.exit_code == 1 and "ctcalc evaluate" not in str(caught.value)


def test_tables_history_lists_the_commits_of_one_day(tmp_path, capsys):
    from ctcalc_spark.cli.main import main

    store = _store(tmp_path)
    runs = [store.transaction("evaluate") for _ in range(3)]
    runs[0].write_all(_pair(["2026-11-15"], 1.0))
    runs[1].write_all(_pair(["2026-11-16"], 2.0))
    runs[2].write_all(_pair(["2026-11-15"], 3.0))
    capsys.readouterr()
    assert main(["tables", "history", "--table", "metrics", "--ds", "2026-11-15",
                 "--set", f"output.path={tmp_path / 'out'}"]) == 0
    out = capsys.readouterr().out
    assert runs[0].run_id in out and runs[2].run_id in out and runs[1].run_id not in out, out


def test_a_replaced_day_is_restored_from_a_past_version_until_a_vacuum(tmp_path, capsys):
    from ctcalc_spark.cli.main import main

    store = _store(tmp_path)
    first, second = store.transaction("evaluate"), store.transaction("evaluate")
    first.write_all(_pair(["2026-11-15", "2026-11-16"], 1.0))
    second.write_all(_pair(["2026-11-15"], 5.0))
    argv = ["--set", f"output.path={tmp_path / 'out'}"]
    assert main(["tables", "restore", "--ds", "2026-11-15", "--as-of", "1", *argv]) == 0
    assert "restored ds=2026-11-15 as of 1" in capsys.readouterr().out
    for table in ("summaries", "metrics"):
        assert sorted(store.read(table, days=["2026-11-15"])["value"]) == [1.0, 2.0, 3.0, 4.0], table
    assert store.runs("summaries")["2026-11-15"] == store.runs("metrics")["2026-11-15"] != [first.run_id]
    assert store.runs("metrics")["2026-11-16"] == [first.run_id]
    store.require_one_run()
    assert main(["tables", "vacuum", *argv, "--retention-hours", "0", "--apply"]) == 0
    capsys.readouterr()
    assert main(["tables", "restore", "--ds", "2026-11-15", "--as-of", "2", *argv]) == 4
    assert "is missing" in capsys.readouterr().err


_GAP_HOOK = '''
import os
if os.environ.get("CTCALC_TEST_GAP"):
    import time
    from pathlib import Path

    import ctcalc_spark.tables as tables

    real = tables.Transaction._commit

    def _commit(self, plan):
        real(self, plan)
        if plan.table == "summaries":  # hold the run between its summaries and its metrics commits
            gap = Path(os.environ["CTCALC_TEST_GAP"])
            (gap / "in").touch()
            while not (gap / "go").exists():
                time.sleep(0.05)

    tables.Transaction._commit = _commit
'''


@pytest.mark.slow  # two CLI processes
def test_the_straddle_through_the_cli_two_evaluate_processes(tmp_path):
    """`ctcalc evaluate` C of days 19-21 is held between its summaries and metrics commits (a sitecustomize hook in
    its process); `ctcalc evaluate` B of days 19-20 starts then, pins its tables and scans; C then commits its
    metrics and exits 0. B exits 1 having written nothing, and every day's summaries and metrics are C's."""
    import os
    import subprocess
    import sys
    import time

    from ctcalc_spark.demo import generate_demo_eval

    generate_demo_eval(n_examples_per_day=400, n_runs=2, n_days=3, start_ds="2026-11-19").to_parquet(
        tmp_path / "eval", partition_cols=["ds"], index=False)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_GAP_HOOK)
    gap = tmp_path / "gap"
    gap.mkdir()
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), str(repo), os.environ.get("PYTHONPATH", "")])}
    common = ["--set", f"input.path={tmp_path / 'eval'}", "--set", f"output.path={tmp_path / 'out'}",
              "--set", "split.bias_fraction=0.1", "--set", "split.salt=t"]

    def start(days: str, **more: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "ctcalc_spark.cli", "evaluate", "--ds", days, *common],
                                cwd=tmp_path, env={**env, **more}, text=True, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)

    c = start("2026-11-19..2026-11-21", CTCALC_TEST_GAP=str(gap))
    try:
        deadline = time.monotonic() + 600
        while not (gap / "in").exists():
            assert c.poll() is None and time.monotonic() < deadline, c.communicate()
            time.sleep(0.1)
        b = start("2026-11-19..2026-11-20")
        assert b.stderr is not None
        seen = []
        for line in b.stderr:  # B has pinned its tables when it says it scans
            seen.append(line)
            if "scanning" in line:
                break
        assert any("scanning" in line for line in seen), "".join(seen)
    finally:
        (gap / "go").touch()
    c_out, c_err = c.communicate(timeout=600)
    b_out, b_err = b.communicate(timeout=600)
    assert c.returncode == 0, c_err[-3000:]
    b_err = "".join(seen) + b_err
    assert b.returncode == 1, b_err[-3000:]
    assert "Another run committed ds=2026-11-19..2026-11-20 of the metrics table" in b_err, b_err[-3000:]
    store = _store(tmp_path)
    owners = {t: _owners(store, t) for t in ("summaries", "metrics")}
    c_runs = owners["metrics"]["2026-11-21"]
    assert len(c_runs) == 1
    assert owners["summaries"] == owners["metrics"] == {d: c_runs for d in ("2026-11-19", "2026-11-20", "2026-11-21")}
