"""Benchmark: the evaluate job's scan vs a plain native log-loss aggregation, side by side in one process.

    .venv/bin/python bench/bench_evaluate.py [--rows 20000000] [--repeats 3]

Generates N rows (models x runs x examples of one day) as Parquet, then times
(a) a plain native Spark aggregation of vanilla log loss per (model, run, ds)
and (b) the evaluate job's scan + driver finalisation that yields the full
report (histogram summaries, calibrated log loss, AUC, NE, calibration),
and prints rows/s for each, the scan alone (b without the driver's work), and the ratio b/a (target <= 1.15 on
local[2], and (b)'s executor CPU within 1.2x (a)'s). It also times (f), the floor of any calibrated scan: (a) plus
reading and hashing the example id for the val-bias split and grouping by (bin, label, split), with the one
loss sum of (a) and no checks. It also prints the load average before and after: background load inflates (b)
more than (a). Beside the wall-clock times it prints each query's executor CPU time (summed over its stages by
Spark's status API on the local UI port), which background load disturbs less; the target is on wall-clock time.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ctcalc_spark.core._math import sigmoid  # noqa: E402
from ctcalc_spark.config import SparkConfig, config_from_dict  # noqa: E402
from ctcalc_spark.jobs.evaluate import evaluate  # noqa: E402
from ctcalc_spark.spark.scan import split_expr, summary_aggregation  # noqa: E402
from ctcalc_spark.spark.session import build_session  # noqa: E402
from ctcalc_spark.spark.inputs import DS as INPUT_DS, read_input  # noqa: E402

DS = "2026-11-21"


def generate(path: Path, rows: int, models: int = 4, runs: int = 5, seed: int = 0) -> None:
    """Write `rows` evaluation rows (one day) as Parquet, chunked to bound memory."""
    if path.exists():
        shutil.rmtree(path)
    (path / f"ds={DS}").mkdir(parents=True)
    rng = np.random.default_rng(seed)
    n_examples = rows // (models * runs)
    chunk = 250_000
    part = 0
    for start in range(0, n_examples, chunk):
        n = min(chunk, n_examples - start)
        ids = np.arange(start, start + n, dtype=np.int64)
        t = rng.normal(-1.8, 1.0, n)
        y = (rng.random(n) < sigmoid(t)).astype(np.int32)
        parts = []
        for m in range(models):
            for r in range(runs):
                parts.append(pa.table({
                    "model": pa.array(np.full(n, f"model_{m}")),
                    "run": pa.array(np.full(n, r, dtype=np.int32)),
                    "example_id": ids,
                    "label": y,
                    "logit": t + rng.normal(0.1 * r, 0.3, n),
                }))
        pq.write_table(pa.concat_tables(parts), path / f"ds={DS}" / f"part-{part:05d}.parquet")
        part += 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ExecutorCpu:
    """Executor CPU seconds of all completed stages so far, from Spark's status REST API (no JVM handle)."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}/api/v1/applications"

    def _get(self, url: str):  # type: ignore[no-untyped-def]
        with urllib.request.urlopen(url, timeout=120) as r:  # the UI answers slowly on a busy machine
            return json.load(r)

    def total(self, max_polls: int = 150) -> float:
        """The sum once two readings 0.2 s apart agree: the status store is filled asynchronously after a job
        ends. Raises if it has not settled after ``max_polls`` readings (a job running beside the benchmark)."""
        app = self._get(self.base)[0]["id"]
        last = None
        for _ in range(max_polls):
            stages = self._get(f"{self.base}/{app}/stages?status=complete")
            now = (len(stages), sum(st["executorCpuTime"] for st in stages) / 1e9)
            if now == last:
                return now[1]
            last = now
            time.sleep(0.2)
        raise RuntimeError(f"Spark's executor CPU total did not settle in {max_polls} readings; is another job "
                           "running in this session?")


def time_interleaved(fns: list, repeats: int, cpu: ExecutorCpu) -> tuple[list[list[float]], list[list[float]]]:
    """Run each function once to warm up, then alternate them `repeats` times, so background load hits all alike.
    Returns (wall-clock seconds, executor CPU seconds) per function and run."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    cpus: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            c = cpu.total()
            t = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - t)
            cpus[i].append(cpu.total() - c)
    return times, cpus


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="bench/out")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--keep-data", action="store_true", help="reuse bench/out/eval if it has the right row count")
    args = ap.parse_args()
    out = Path(args.out)
    data = out / "eval"
    t = time.perf_counter()
    if not (args.keep_data and data.exists()):
        generate(data, args.rows)
    print(f"data: {data} ({args.rows:,} rows) ready in {time.perf_counter() - t:.1f} s")

    port = free_port()
    spark = build_session(SparkConfig(master=args.master, shuffle_partitions=4, driver_memory="4g",
                                      conf={"spark.ui.enabled": "true", "spark.ui.port": str(port)}), app_name="bench")
    cpu = ExecutorCpu(port)
    from pyspark.sql import functions as F

    cfg = config_from_dict({"input": {"path": str(data)}, "output": {"path": str(out / "result")}})
    df = spark.read.parquet(str(data))
    n = df.where(F.col("ds") == DS).count()

    def plain() -> None:
        z, y = F.col("logit"), F.col("label").cast("double")
        loss = F.greatest(z, F.lit(0.0)) + F.log1p(F.exp(-F.abs(z))) - y * z
        (spark.read.parquet(str(data)).where(F.col("ds") == DS).groupBy("model", "run", "ds")
         .agg(F.sum(loss).alias("loss"), F.count(F.lit(1)).alias("n")).collect())

    def floor() -> None:  # (a) plus only what any calibrated scan needs: the split hash and the histogram key
        z, y = F.col("logit"), F.col("label").cast("double")
        loss = F.greatest(z, F.lit(0.0)) + F.log1p(F.exp(-F.abs(z))) - y * z
        source = spark.read.parquet(str(data))
        is_bias = F.expr(split_expr(cfg, dict(source.dtypes))).cast("long")
        key = F.floor(z / F.lit(cfg.histogram.bin_width)) * 64 + F.col("label") * 32 + is_bias * 16
        (source.where(F.col("ds") == DS).groupBy("model", "run", "ds", key.alias("k"))
         .agg(F.sum(loss).alias("loss"), F.count(F.lit(1)).alias("n")).collect())

    def full() -> None:
        evaluate(spark, cfg, DS, write=False)

    def scan_only() -> None:  # the same scan, collected, without the driver's decoding and finalisation
        summary_aggregation(read_input(spark, cfg, [DS]), cfg, extra_keys=[INPUT_DS], single={INPUT_DS: DS}).toPandas()

    load0 = os.getloadavg()
    (ta, tf, tb, ts), cpus = time_interleaved([plain, floor, full, scan_only], args.repeats, cpu)
    ma, mf, mb, ms = (statistics.median(x) for x in (ta, tf, tb, ts))
    ca, cf, cb, cs = (statistics.median(x) for x in cpus)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"Spark {spark.version}, master {args.master}")
    print(f"rows scanned per run: {n:,}; median of {args.repeats} interleaved runs after one warm-up each")
    print(f"(a) plain native log-loss aggregation : {ma:7.2f} s  {n / ma / 1e6:6.2f} M rows/s  (runs: {', '.join(f'{x:.2f}' for x in ta)})")
    print(f"(f) floor: (a) + split hash + key     : {mf:7.2f} s  {n / mf / 1e6:6.2f} M rows/s  (ratio to a: {mf / ma:.2f}; "
          "the example id read and hashed for the split, rows keyed by (bin, label, split))")
    print(f"(b) evaluate scan -> full report       : {mb:7.2f} s  {n / mb / 1e6:6.2f} M rows/s  (runs: {', '.join(f'{x:.2f}' for x in tb)})")
    print(f"    of which the scan alone            : {ms:7.2f} s  (ratio to a: {ms / ma:.2f}; the rest is planning, "
          f"decoding and finalising on the driver)")
    print(f"executor CPU time, median: (a) {ca:.2f} s, (f) {cf:.2f} s ({cf / ca:.2f}x), "
          f"(b) {cb:.2f} s ({cb / ca:.2f}x), scan alone {cs:.2f} s ({cs / ca:.2f}x); (b)'s driver work is not in it")
    print(f"ratio b/a = {mb / ma:.2f}  (target <= 1.15), executor CPU b/a = {cb / ca:.2f}  (target <= 1.2); "
          f"load average {load0[0]:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
