"""A round trip through a real metastore: Spark's built-in Hive catalog with Derby in a temporary folder.

A partitioned input table is read by name, the outputs are catalog tables (metrics, summaries, rolling)
written by Spark's own writer (a dynamic partition overwrite of the Hive table; the catalog registers the
partitions), a rerun of a day replaces exactly that day, and the CLI takes its Spark settings (the Hive catalog,
the warehouse, Derby's home) from the job config. The numbers equal the same job on folders (the session fixture, no catalog) to
1e-12.

Derby allows one JVM at a time, and the test session's Spark has no Hive catalog, so every catalog step runs
in its own process, one after the other.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tests._cli import run_cli
from tests._frames import assert_same_rows
from tests._json import json_differences

pytestmark = pytest.mark.slow

DAYS = ["2026-11-15", "2026-11-16", "2026-11-17"]
KEYS = ["ds", "model", "run", "slice_name", "slice_value"]


def _config(tmp: Path) -> dict:
    return {
        "task": "binary",
        "input": {"table": "ct.eval"},
        "columns": {"slices": ["country"]},
        "split": {"bias_fraction": 0.2, "salt": "cat"},
        "output": {"path": str(tmp / "out"), "database": "ct"},
        "rolling": {"window": "day"},
        "spark": {"master": "local[2]", "shuffle_partitions": 2, "conf": {
            "spark.sql.catalogImplementation": "hive",
            "spark.sql.warehouse.dir": str(tmp / "warehouse"),
            "spark.driver.extraJavaOptions": f"-Dderby.system.home={tmp / 'derby'}",
        }},
    }


def _run(script: str, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli(args, cwd=tmp, command=[sys.executable, "-c", textwrap.dedent(script)])


PREAMBLE = """
import json, sys
import pandas as pd
from ctcalc_spark.config import load_config
from ctcalc_spark.spark.session import build_session
cfg = load_config(sys.argv[1])
spark = build_session(cfg.spark, app_name="catalog-test")
"""


def test_metastore_round_trip_tables_in_and_out(spark, tmp_path):
    from ctcalc_spark.config import config_from_dict
    from ctcalc_spark.demo import generate_demo_eval
    from ctcalc_spark.jobs.evaluate import evaluate
    from ctcalc_spark.jobs.rolling import run_rolling

    rows = generate_demo_eval(n_examples_per_day=1500, n_runs=3, n_days=len(DAYS), seed=3, start_ds=DAYS[0])
    rows["country"] = np.where(rows["example_id"] % 3 == 0, "US", "DE")
    rows.to_parquet(tmp_path / "rows.parquet", index=False)
    conf = tmp_path / "catalog.yaml"
    conf.write_text(yaml.safe_dump(_config(tmp_path)))

    # 1. the input as a partitioned metastore table; 2. evaluate the range and roll, by table names
    _run(PREAMBLE + """
spark.sql("CREATE DATABASE IF NOT EXISTS ct")
(spark.createDataFrame(pd.read_parquet("rows.parquet")).write.partitionBy("ds").format("parquet")
 .saveAsTable("ct.eval"))
from ctcalc_spark.jobs.evaluate import evaluate
from ctcalc_spark.jobs.rolling import run_rolling
first = evaluate(spark, cfg, sys.argv[2])
roll = run_rolling(spark, cfg, sys.argv[2])
print(json.dumps({"evaluate": first.run_id, "rolling": roll.run_id, "paths": first.paths}))
""", tmp_path, str(conf), f"{DAYS[0]}..{DAYS[-1]}")

    # 3. a rerun of one day through the CLI: the Hive catalog comes from the config's spark.conf
    cli = run_cli(["evaluate", "--config", str(conf), "--ds", DAYS[1]], cwd=tmp_path)
    assert "Truncated the string representation of a plan" not in cli.stderr  # spark.sql.debug.maxToStringFields
    # Spark's start-up lines and Hive's notes are quieted (ctcalc_spark/spark/log4j2.properties), and no setting
    # given at launch is reported as not applied (Spark reads the warehouse folder back as a file: URI)
    noise = ["Using Spark's default log4j profile", "NativeCodeLoader", "HiveConf of name", "METASTORE_FILTER_HOOK",
             "was not applied"]
    assert [n for n in noise if n in cli.stderr] == [], cli.stderr

    # 4. read everything back through the metastore
    dump = _run(PREAMBLE + """
out = {}
for t in ("metrics", "summaries", "rolling"):
    name = "ct.ctcalc_" + t
    out[t] = {"partitions": [r[0] for r in spark.sql(f"SHOW PARTITIONS {name}").collect()],
              "provider": {r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}.get("Provider")}
    spark.table(name).toPandas().to_parquet(f"{t}.parquet", index=False)
print(json.dumps(out))
""", tmp_path, str(conf))
    info = json.loads(dump.stdout.strip().splitlines()[-1])
    assert info["metrics"]["partitions"] == [f"ds={d}" for d in DAYS]
    assert info["rolling"]["partitions"] == [f"window_spec=day/ds={d}" for d in DAYS]
    assert info["metrics"]["provider"] == "parquet"

    metrics = pd.read_parquet(tmp_path / "metrics.parquet")
    summaries = pd.read_parquet(tmp_path / "summaries.parquet")
    # the CLI rerun replaced exactly its day: one run id per day, the rerun's on DAYS[1] in both tables
    runs = metrics.groupby("ds")["run_id"].agg(set)
    assert all(len(r) == 1 for r in runs) and runs[DAYS[1]] != runs[DAYS[0]] == runs[DAYS[2]]
    assert summaries.groupby("ds")["run_id"].agg(set).to_dict() == runs.to_dict()
    assert not (tmp_path / "out" / "metrics").exists()  # catalog tables: nothing of them under output.path

    # the same rows through folders (the test session, no catalog): the same numbers
    rows.to_parquet(tmp_path / "eval", partition_cols=["ds"], index=False)
    path_cfg = config_from_dict({**{k: v for k, v in _config(tmp_path).items() if k != "spark"},
                                 "input": {"path": str(tmp_path / "eval")}, "output": {"path": str(tmp_path / "p")}})
    want = evaluate(spark, path_cfg, DAYS).metrics
    assert len(metrics) == len(want) == len(DAYS) * 3 * 3 * 3  # days x models x runs x (all, US, DE)
    assert_same_rows(metrics, want, KEYS)
    want_roll = run_rolling(spark, path_cfg, DAYS, write=False).table
    assert_same_rows(pd.read_parquet(tmp_path / "rolling.parquet"), want_roll, KEYS)
    # 5. compare and the drift report read catalog tables through Spark without being told, and give what they
    # give on the Delta tables of the folders
    path_conf = tmp_path / "folders.yaml"
    path_conf.write_text(yaml.safe_dump({**{k: v for k, v in _config(tmp_path).items() if k != "spark"},
                                         "input": {"path": str(tmp_path / "eval")},
                                         "output": {"path": str(tmp_path / "p")}}))
    pair = ["--a", "baseline", "--b", "dcn", "--ds-from", DAYS[0], "--ds-to", DAYS[-1], "--bootstrap", "200"]
    for name, config in (("catalog", conf), ("folders", path_conf)):
        for argv in (["compare", *pair, "--out", str(tmp_path / f"cmp_{name}")],
                     ["report", "--start", DAYS[0], "--end", DAYS[-1], "--out", str(tmp_path / f"rep_{name}")]):
            run_cli([*argv, "--config", str(config)], cwd=tmp_path)
    cmp = [json.loads((tmp_path / f"cmp_{n}" / "comparison.json").read_text()) for n in ("catalog", "folders")]
    assert json_differences(cmp[0], cmp[1]) == [] and cmp[0]["comparisons"][0]["m_a"] == 3
    rep = [json.loads(next((tmp_path / f"rep_{n}").glob(f"drift_{DAYS[0]}_{DAYS[-1]}_*.json")).read_text())
           for n in ("catalog", "folders")]
    for r in rep:
        r.pop("config")  # the two configs differ in where the tables are
    assert json_differences(rep[0], rep[1]) == [] and len(rep[0]["rows"]) > 0

    leftovers = [p for pattern in (".spark-staging-*", "_temporary") for p in (tmp_path / "warehouse").rglob(pattern)]
    assert leftovers == []  # nothing a killed run would leave

    # 6. a job started in another folder without a fixed metastore read a new, empty catalog of that folder's own
    # and said that the database does not exist (or, in 'default', 'run evaluate first'): a note now says why, and the setting it gives reads the tables
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    plain = _config(tmp_path)
    plain["spark"]["conf"].pop("spark.driver.extraJavaOptions")  # Derby's home: the folder a job starts in
    moved = elsewhere / "catalog.yaml"
    moved.write_text(yaml.safe_dump(plain))
    lost = run_cli(["rolling", "--config", str(moved), "--ds", DAYS[1]], cwd=elsewhere, expect=3)
    assert "The output database(s) ['ct'] do not exist in the session's catalog" in lost.stderr, lost.stderr
    assert (f"note: Spark's Hive catalog made a new metastore for this run in {elsewhere}/metastore_db: without a "
            "hive-site.xml or a metastore URL") in lost.stderr, lost.stderr
    plain["spark"]["conf"]["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
        f"jdbc:derby:;databaseName={tmp_path / 'derby' / 'metastore_db'};create=true")
    moved.write_text(yaml.safe_dump(plain))
    found = run_cli(["rolling", "--config", str(moved), "--ds", DAYS[1]], cwd=elsewhere)
    assert "-> ct.ctcalc_rolling (window_spec=day)" in found.stdout and "note:" not in found.stderr, found.stderr


def test_created_tables_are_external_under_output_location_with_its_properties(tmp_path):
    """output.location makes the tables ctcalc creates external (one folder each under it), and
    output.table_properties become their TBLPROPERTIES; the job's log shows no Hive metastore notes."""
    from ctcalc_spark.demo import write_demo_eval

    write_demo_eval(tmp_path / "eval", n_examples_per_day=500, n_runs=2, n_days=1, start_ds=DAYS[0])
    cfg = {**_config(tmp_path), "input": {"path": str(tmp_path / "eval")}, "columns": {}}
    cfg["output"] = {**cfg["output"], "location": str(tmp_path / "lake"),
                     "table_properties": {"owner.team": "ml-eval", "retention": "90 days, 'then' gone"}}
    conf = tmp_path / "catalog.yaml"
    conf.write_text(yaml.safe_dump(cfg))
    _run(PREAMBLE + "spark.sql('CREATE DATABASE IF NOT EXISTS ct')\n", tmp_path, str(conf))
    cli = run_cli(["evaluate", "--config", str(conf), "--ds", DAYS[0]], cwd=tmp_path)
    assert [line for line in cli.stderr.splitlines() if " WARN " in line and "hive" in line.lower()] == [], cli.stderr
    described = _run(PREAMBLE + """
out = {}
for t in ("metrics", "summaries"):
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED ct.ctcalc_{t}").collect()
    info = {r[0]: r[1] for r in rows}
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES ct.ctcalc_{t}").collect()}
    out[t] = {"type": info.get("Type"), "location": info.get("Location"), "props": props,
              "rows": spark.table(f"ct.ctcalc_{t}").count()}
print(json.dumps(out))
""", tmp_path, str(conf))
    tables = json.loads(described.stdout.strip().splitlines()[-1])
    for t, info in tables.items():
        assert info["type"] == "EXTERNAL" and info["location"] == f"file:{tmp_path}/lake/ctcalc_{t}", info
        assert info["props"]["owner.team"] == "ml-eval" and info["props"]["retention"] == "90 days, 'then' gone"
        assert info["rows"] > 0
    assert (tmp_path / "lake" / "ctcalc_metrics" / f"ds={DAYS[0]}").is_dir()


def test_location_and_properties_need_catalog_mode():
    from ctcalc_spark.config import config_from_dict
    from ctcalc_spark.errors import ConfigError

    with pytest.raises(ConfigError, match="'output.location' and 'output.table_properties' describe the catalog"):
        config_from_dict({"input": {"path": "x"}, "output": {"path": "o", "location": "/lake"}})
    cfg = config_from_dict({"input": {"path": "x"}, "output": {"path": "o", "database": "ct", "location": "/lake",
                                                               "table_properties": {"a.b": "c"}}})
    assert cfg.output.location == "/lake" and dict(cfg.output.table_properties) == {"a.b": "c"}
