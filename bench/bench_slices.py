"""Benchmark: a one-day evaluate with a slice column against a plain aggregation, with two aggregate map sizes.

    .venv/bin/python bench/bench_slices.py [--rows 5000000] [--slice-values 30] [--repeats 7] [--bits 16,20]

Generates N rows of one day (2 models x 2 runs, each row with one of ``slice-values`` countries) as Parquet,
then in one process and one session alternates
(a) a plain native Spark aggregation of vanilla log loss per (model, run, country), and
(b) the evaluate job to the full report (histogram summaries, calibrated metrics per slice value and
    ``__all__``; nothing written), once per size of Spark's first-level aggregate map
    (``spark.sql.codegen.aggregate.fastHashMap.capacityBit``, a runtime setting; 16 is Spark's default and
    what ctcalc sessions use).

The evaluate scan's group keys are one per model, run, slice value, bin, label and split; it prints how many
there are (each task's map holds the keys of its own rows). Keys that do not fit a task's first-level map go
through Spark's slower second map, so a larger map
might pay for sliced scans; this measures whether it does. Prints the median wall-clock and executor CPU
time of each (interleaved runs after one warm-up each), each evaluate's ratio to (a), and each larger map's
time relative to the default one.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_evaluate import ExecutorCpu, free_port, time_interleaved  # noqa: E402

from ctcalc_spark.config import SparkConfig, config_from_dict  # noqa: E402
from ctcalc_spark.core._math import sigmoid  # noqa: E402
from ctcalc_spark.jobs.evaluate import evaluate  # noqa: E402
from ctcalc_spark.spark.session import build_session  # noqa: E402

DS = "2026-11-21"
CAPACITY = "spark.sql.codegen.aggregate.fastHashMap.capacityBit"


def generate(path: Path, rows: int, n_values: int, seed: int = 0) -> None:
    """``rows`` rows of day DS: 2 models x 2 runs x rows/4 examples, each example in one of ``n_values``
    countries; one Parquet file per (model, run)."""
    if path.exists():
        shutil.rmtree(path)
    (path / f"ds={DS}").mkdir(parents=True)
    rng = np.random.default_rng(seed)
    n = rows // 4
    country = np.array([f"c{i:03d}" for i in range(n_values)])[rng.integers(0, n_values, n)]
    z = rng.normal(-2.0, 1.5, n)
    y = (rng.random(n) < sigmoid(z)).astype(np.int32)
    for m in ("a", "b"):
        for r in (0, 1):
            pq.write_table(pa.table({"model": np.full(n, m), "run": np.full(n, r, dtype=np.int32),
                                     "example_id": np.arange(n, dtype=np.int64), "label": y,
                                     "logit": z + rng.normal(0.05 * r, 0.3, n), "country": country}),
                           path / f"ds={DS}" / f"part-{m}{r}.parquet")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--slice-values", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--bits", default="16,20", help="first-level map sizes to compare, as capacityBit values")
    ap.add_argument("--out", default="bench/out/slices")
    args = ap.parse_args()
    bits = [b.strip() for b in args.bits.split(",")]
    out = Path(args.out)
    t = time.perf_counter()
    generate(out / "eval", args.rows, args.slice_values)
    print(f"data: {args.rows:,} rows, {args.slice_values} slice values ({time.perf_counter() - t:.1f} s)")

    port = free_port()
    spark = build_session(SparkConfig(master="local[2]", shuffle_partitions=4, driver_memory="4g",
                                      conf={"spark.ui.enabled": "true", "spark.ui.port": str(port)}), app_name="bench")
    cpu = ExecutorCpu(port)
    from pyspark.sql import functions as F

    cfg = config_from_dict({"input": {"path": str(out / "eval")}, "output": {"path": str(out / "result")},
                            "columns": {"slices": ["country"]}})
    keys = len(evaluate(spark, cfg, DS, write=False).summaries)

    def plain() -> None:
        z, y = F.col("logit"), F.col("label").cast("double")
        loss = F.greatest(z, F.lit(0.0)) + F.log1p(F.exp(-F.abs(z))) - y * z
        (spark.read.parquet(str(out / "eval")).where(F.col("ds") == DS).groupBy("model", "run", "country")
         .agg(F.sum(loss).alias("loss"), F.count(F.lit(1)).alias("n")).collect())

    def full(bit: str):  # noqa: ANN202
        def run() -> None:
            spark.conf.set(CAPACITY, bit)  # read when the query's code is generated, so it applies per query
            evaluate(spark, cfg, DS, write=False)
        return run

    load0 = os.getloadavg()
    times, cpus = time_interleaved([plain, *[full(b) for b in bits]], args.repeats, cpu)
    spark.conf.unset(CAPACITY)
    wall = [statistics.median(x) for x in times]
    cpu_s = [statistics.median(x) for x in cpus]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"Spark {spark.version}, local[2]; load average {load0[0]:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    sizes = ", ".join(f"2^{b} = {1 << int(b):,}" for b in bits)
    print(f"the evaluate scan's group keys: {keys:,} summary rows over all tasks, {keys // 4:,} per model and run "
          f"(a task's map holds the keys of its own rows; each file holds one model and run); maps of {sizes} "
          f"entries; median of {args.repeats} interleaved runs after one warm-up each")
    print(f"(a) plain log loss per (model, run, country): {wall[0]:6.2f} s, executor CPU {cpu_s[0]:6.2f} s "
          f"(runs: {', '.join(f'{x:.2f}' for x in times[0])})")
    for i, b in enumerate(bits, start=1):
        note = " (Spark's default)" if b == "16" else ""
        print(f"(b) evaluate, capacityBit {b:>2}{note:<18}: {wall[i]:6.2f} s, executor CPU {cpu_s[i]:6.2f} s; "
              f"ratio to (a) {wall[i] / wall[0]:.2f} (CPU {cpu_s[i] / cpu_s[0]:.2f}) "
              f"(runs: {', '.join(f'{x:.2f}' for x in times[i])})")
    if "16" in bits:
        d = 1 + bits.index("16")
        for i, b in enumerate(bits, start=1):
            if b != "16":
                print(f"capacityBit {b} / Spark's default: wall-clock {wall[i] / wall[d]:.2f}, "
                      f"executor CPU {cpu_s[i] / cpu_s[d]:.2f}  (below 1: the larger map is faster)")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
