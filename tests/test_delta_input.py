"""Delta Lake evaluation tables read by Spark without Delta's Spark reader: the current snapshot's file list
(from deltalake) given to Spark's Parquet reader (ctcalc_spark/spark/delta_input.py)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from ctcalc_spark.jobs.evaluate import evaluate

from tests._rows import binary_eval_rows

DAYS = ["2026-11-20", "2026-11-21"]


def _rows(day: str, n: int, seed: int) -> pa.Table:
    return pa.Table.from_pandas(binary_eval_rows(n, seed, runs=(0,), ds=day), preserve_index=False)


@pytest.fixture()
def delta_eval(tmp_path):
    """A Delta evaluation table of two days, the second replaced once (its first version's file stays in the
    folder until a vacuum): (path, the rows of its current version)."""
    from deltalake import write_deltalake

    path = str(tmp_path / "eval")
    write_deltalake(path, pa.concat_tables([_rows(DAYS[0], 500, 1), _rows(DAYS[1], 700, 2)]), partition_by=["ds"])
    current = _rows(DAYS[1], 300, 3)
    write_deltalake(path, current, mode="overwrite", predicate=f"ds = '{DAYS[1]}'")
    return path, pa.concat_tables([_rows(DAYS[0], 500, 1), current])


@pytest.mark.parametrize("fmt", ["delta", "parquet"])
def test_a_delta_input_reads_the_current_version_only(spark, demo_config, tmp_path, delta_eval, fmt):
    """Spark's Parquet reader on the folder counts the replaced day's old file too (the rows of 700 + 300 ids);
    the snapshot's file list gives the 300 of the current version, with input.format delta or parquet."""
    path, current = delta_eval
    folder = spark.read.parquet(path).where(f"ds = '{DAYS[1]}'").count()
    assert folder == 2 * (700 + 300)  # what reading the folder would count
    cfg = demo_config(input__path=path, input__format=fmt, output__path=str(tmp_path / "out"))
    for day, n in ((DAYS[1], 300), (DAYS[0], 500)):
        metrics = evaluate(spark, cfg, day, write=False).metrics
        assert metrics["n_rows"].tolist() == [n, n]
    want = current.filter(pa.compute.equal(current["ds"], DAYS[1])).to_pandas()
    got = evaluate(spark, cfg, DAYS[1], write=False).metrics.set_index("model")
    for model, rows in want.groupby("model"):
        z, y = rows["logit"].to_numpy(), rows["label"].to_numpy()
        log_loss = np.mean(np.logaddexp(0, z) - y * z)
        assert got.loc[model, "log_loss"] == pytest.approx(log_loss, rel=1e-9)


def test_a_delta_input_after_a_vacuum_and_a_day_without_files(spark, demo_config, tmp_path, delta_eval):
    """After a vacuum the old file is gone and the read is unchanged; a day the table lacks reads no rows."""
    from deltalake import DeltaTable

    path, _ = delta_eval
    DeltaTable(path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    cfg = demo_config(input__path=path, input__format="delta", output__path=str(tmp_path / "out"))
    assert evaluate(spark, cfg, DAYS[1], write=False).metrics["n_rows"].tolist() == [300, 300]
    assert spark.read.parquet(path).where(f"ds = '{DAYS[1]}'").count() == 600
