"""Benchmark: three ways a range job writes its summaries (driver copy, Spark cache, the scan job), one session.

    .venv/bin/python bench/bench_range_summaries.py [--days 365] [--rows-per-day 20000] [--repeats 4]
        [--remote local[2]]

A range evaluate needs its scan's aggregate on the driver, for the metrics, and as the summaries table. The ways
of getting both are timed side by side, alternating, each as the job does it (one storage transaction into an
output of its own), without the job's checks; (a) and (b) collect the aggregate, start the summaries' staged
write and compute the metrics from the driver's copy while it runs, then write the metrics beside it:

(a) the scan's aggregate collected, decoded on the driver and that pandas frame written (sent back to Spark as
    Arrow batches), as a range evaluate does on a classic session;
(b) the aggregate cached, collected and decoded the same way, and the summaries written from the cache
    (``scan.decoded_summaries``), as a range evaluate does on Spark Connect; the cache is freed after;
(c) classic sessions only: the summaries shuffled by day, decoded in Spark and written by the scan's own job, the
    invalid and undated rows observed on the way, and the written files read back with pyarrow for the metrics
    (``Transaction.stage_and_read``), as a range evaluate does on a classic session with a local output since
    2026-11-28 (then the metrics' write alone).

Prints every time, the medians and their ratios to (a), and checks that every table holds the same rows to the last
bit. ``--remote local[2]`` runs (a) and (b) on a Spark Connect session (a local server), where the driver's rows go
over gRPC.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_backfill import START, generate  # noqa: E402

from ctcalc_spark.config import SparkConfig, config_from_dict  # noqa: E402
from ctcalc_spark.core.finalize import KEY_TYPES, METRIC_TYPES, SUMMARY_TYPES, metrics_from_summaries  # noqa: E402
from ctcalc_spark.jobs.evaluate import evaluate  # noqa: E402
from ctcalc_spark.spark.scan import (  # noqa: E402
    decode_aggregate,
    decoded_summaries,
    group_columns,
    observe_uncounted,
    summary_aggregation,
    uncounted_groups,
)
from ctcalc_spark.spark.session import build_session  # noqa: E402
from ctcalc_spark.spark.storage import DS, OutputStore, read_input  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--rows-per-day", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--remote", default=None, help="a Spark Connect remote, e.g. local[2]")
    ap.add_argument("--out", default="bench/out/range_summaries")
    args = ap.parse_args()
    out = Path(args.out)
    d0 = dt.date.fromisoformat(START)
    days = [(d0 + dt.timedelta(days=i)).isoformat() for i in range(args.days)]
    n_rows = generate(out / "eval", days, args.rows_per_day)
    load0 = os.getloadavg()
    spark = build_session(SparkConfig(master="local[2]", shuffle_partitions=4, driver_memory="4g",
                                      remote=args.remote), app_name="bench-range-summaries")

    def cfg(name: str):
        shutil.rmtree(out / name, ignore_errors=True)
        return config_from_dict({"input": {"path": str(out / "eval")}, "output": {"path": str(out / name)}})

    evaluate(spark, cfg("warm"), days[0])  # neither side pays Spark's first-query warm-up
    sides = {"a": cfg("from_driver"), "b": cfg("from_spark")}
    if not args.remote:
        sides["c"] = cfg("in_the_scan")
    types = {"ds": "string", **{k: "string" for k in group_columns(sides["a"])}, **SUMMARY_TYPES["binary"]}
    times: dict[str, list[float]] = {s: [] for s in sides}
    metric_types = {**KEY_TYPES, **METRIC_TYPES["binary"]}

    def once(side: str) -> None:
        c = sides[side]
        start = time.perf_counter()
        aggregated = summary_aggregation(read_input(spark, c, days), c, extra_keys=[DS])
        if side == "c":
            with OutputStore(c, spark).transaction("evaluate", days) as tx:
                observed, observation = observe_uncounted(aggregated, c, DS)
                summaries = tx.stage_and_read("summaries", decoded_summaries(observed, c, DS, by_day=True),
                                              clustered=True)
                assert uncounted_groups(observation, c) is not None
                metrics = metrics_from_summaries(summaries, "binary", keys=["ds", "model", "run"],
                                                 bin_width=c.histogram.bin_width).assign(task="binary")
                tx.write_all([("metrics", metrics, metric_types)])
            times[side].append(time.perf_counter() - start)
            return
        if side == "b":
            aggregated = aggregated.cache()
        agg = aggregated.toPandas().rename(columns={DS: "ds"})
        summaries, _ = decode_aggregate(agg[agg["ds"].notna()], c, extra=["ds"])
        frame = decoded_summaries(aggregated, c, DS) if side == "b" else summaries
        with OutputStore(c, spark).transaction("evaluate", days) as tx:
            tx.stage("summaries", frame, types, same_rows=summaries)  # a write thread; the metrics meanwhile
            metrics = metrics_from_summaries(summaries, "binary", keys=["ds", "model", "run"],
                                             bin_width=c.histogram.bin_width).assign(task="binary")
            tx.write_all([("metrics", metrics, metric_types)])
        if side == "b":
            aggregated.unpersist()
        times[side].append(time.perf_counter() - start)

    order = "".join(sides)
    for i in range(args.repeats):
        for side in (order if i % 2 == 0 else order[::-1]):
            once(side)
    load1 = os.getloadavg()
    keys = ["ds", "model", "run", "split", "bin", "label"]
    a, *others = (OutputStore(sides[s]).read("summaries").astype({"ds": str}).sort_values(keys)
                  .reset_index(drop=True) for s in sides)
    for other in others:
        pd.testing.assert_frame_equal(a, other[list(a.columns)], check_exact=True)
    kind = f"Spark Connect (remote {args.remote})" if args.remote else "classic"
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"Spark {spark.version}, local[2], {kind} session; load average {load0[0]:.1f} at start, "
          f"{load1[0]:.1f} at end")
    print(f"{n_rows:,} rows over {len(days)} days -> {len(a):,} summary rows; each time holds the scan, the "
          "collect or the read back, the metrics and both writes")
    names = {"a": "(a) written from the driver's copy", "b": "(b) written from Spark's cache",
             "c": "(c) written in the scan's job, read back"}
    for side in sides:
        runs = ", ".join(f"{t:.2f}" for t in times[side])
        ratio = "" if side == "a" else (f", ratio a/{side} = "
                                        f"{statistics.median(times['a']) / statistics.median(times[side]):.2f}")
        print(f"{names[side]}: median {statistics.median(times[side]):.2f} s (runs: {runs}){ratio}")
    print(f"same rows in all {len(sides)} tables, bit for bit")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
