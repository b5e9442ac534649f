"""Delta Lake's Spark reader (delta-spark, loaded by configuration for input.format delta) on ctcalc's Delta
tables: it returns what deltalake returns after replaced days and a vacuum, by path and as a catalog table. Spark
runs in its own process (the package is a launch setting of the JVM)."""
from __future__ import annotations

import json
import sys

import pyarrow as pa
import pytest

from tests._cli import run_cli

READER = r'''
import json, sys
from ctcalc_spark.config import SparkConfig
from ctcalc_spark.spark.delta_input import session_has_delta
from ctcalc_spark.spark.session import build_session, connector_settings

path, warehouse = sys.argv[1], sys.argv[2]
conf = {"spark.sql.warehouse.dir": warehouse,
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={warehouse}"}
spark = build_session(SparkConfig(master="local[1]", shuffle_partitions=2, conf=conf),
                      connectors=connector_settings([path], "delta"))
assert session_has_delta(spark)
by_path = spark.read.format("delta").load(path)
spark.sql(f"CREATE TABLE scores USING delta LOCATION '{path}'")
by_name = spark.table("scores")
rows = lambda df: sorted(tuple(r) for r in df.select("ds", "model", "example_id", "logit").collect())
print(json.dumps({"path": rows(by_path), "name": rows(by_name)}))
'''


@pytest.mark.slow
def test_spark_delta_reader_equals_deltalake_after_replaced_days_and_a_vacuum(tmp_path):
    from deltalake import DeltaTable, write_deltalake

    path = str(tmp_path / "scores")

    def day(ds: str, n: int, shift: float) -> pa.Table:
        return pa.table({"ds": [ds] * n, "model": ["a"] * n, "example_id": list(range(n)),
                         "logit": [i * 0.01 + shift for i in range(n)]})

    write_deltalake(path, pa.concat_tables([day("2026-11-20", 50, 0.0), day("2026-11-21", 60, 0.0)]),
                    partition_by=["ds"])
    write_deltalake(path, day("2026-11-21", 40, 1.0), mode="overwrite", predicate="ds = '2026-11-21'")
    write_deltalake(path, day("2026-11-20", 30, 2.0), mode="overwrite", predicate="ds = '2026-11-20'")
    table = DeltaTable(path)
    table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    want = sorted((r["ds"], r["model"], r["example_id"], r["logit"]) for r in table.to_pyarrow_table().to_pylist())
    assert len(want) == 70
    (tmp_path / "reader.py").write_text(READER)
    proc = run_cli([str(tmp_path / "reader.py"), path, str(tmp_path / "warehouse")], command=[sys.executable],
                   timeout=900)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [tuple(r) for r in got["path"]] == want
    assert [tuple(r) for r in got["name"]] == want


def test_connector_settings_add_packages_and_never_credentials(monkeypatch):
    """s3a:// paths add hadoop-aws (pyspark's Hadoop) and the endpoint; input.format delta adds delta-spark; the
    config's own packages are kept and its settings win; the secret in the environment is in no setting."""
    from ctcalc_spark.spark.session import DELTA_SPARK, connector_settings, hadoop_aws

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-value")
    got = connector_settings(["s3a://lake/eval", "/local/out"], "delta",
                             {"spark.jars.packages": "org.example:x:1", "spark.sql.extensions": "mine"})
    assert got["spark.jars.packages"] == f"org.example:x:1,{hadoop_aws()},{DELTA_SPARK}"
    assert hadoop_aws() == "org.apache.hadoop:hadoop-aws:3.5.0"
    assert got["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert got["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert "spark.sql.extensions" not in got  # the config's own
    assert not [k for k, v in got.items() if "s3cr3t" in v]
    assert connector_settings(["/local/eval", "s3://lake/out"], "parquet", {}) == {}
