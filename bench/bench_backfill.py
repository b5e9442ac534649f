"""Benchmark: a backfill as one range job vs a per-day loop, in one process and one Spark session.

    .venv/bin/python bench/bench_backfill.py [--days 365] [--rows-per-day 20000] [--loop-days N]

Writes ``days`` days of evaluation rows (2 models x 2 runs x rows_per_day/4 examples a day) as Parquet
partitioned by ds, then times, with the writes of every output partition included:

(a) ``evaluate`` + ``rolling`` called once per day (what a loop over the CLI does, without its Spark start-up),
(b) one ``evaluate`` and one ``rolling`` over the whole range (``ds`` is a group key of the one scan),

checks that both produce the same metrics, summaries and rolling rows (to 1e-12), and prints both times and
the ratio a/b (target >= 30, issue 59). The target is judged on that first range job. It is then run once more into a
fresh output (b2) and printed beside it: the first range job in a process pays JIT compilation of code that the
per-day loop's small days run too rarely to have compiled, and b2 shows how much of (b) that is.
``--loop-days N`` times the loop on the first N days only and scales it to the whole range (printed as such);
the default loops over every day.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ctcalc_spark.config import JobConfig, SparkConfig, config_from_dict  # noqa: E402
from ctcalc_spark.core._math import sigmoid  # noqa: E402
from ctcalc_spark.jobs.evaluate import evaluate  # noqa: E402
from ctcalc_spark.jobs.rolling import run_rolling  # noqa: E402
from ctcalc_spark.spark.session import build_session  # noqa: E402
from ctcalc_spark.tables import OutputStore  # noqa: E402

START = "2025-01-01"


def generate(path: Path, days: list[str], rows_per_day: int, seed: int = 0) -> int:
    """Evaluation rows of every day (2 models x 2 runs), one Parquet file per day; returns the row count."""
    if path.exists():
        shutil.rmtree(path)
    rng = np.random.default_rng(seed)
    n = rows_per_day // 4
    total = 0
    for i, ds in enumerate(days):
        x = rng.normal(-1.8 + 0.3 * np.sin(i / 30), 1.0, n)
        y = (rng.random(n) < sigmoid(x)).astype(np.int32)
        parts = [pa.table({"model": np.full(n, m), "run": np.full(n, r, dtype=np.int32),
                           "example_id": np.arange(i * n, (i + 1) * n, dtype=np.int64), "label": y,
                           "logit": x + rng.normal(0.05 * r, 0.3, n)}) for m in ("a", "b") for r in (0, 1)]
        (path / f"ds={ds}").mkdir(parents=True)
        pq.write_table(pa.concat_tables(parts), path / f"ds={ds}" / "part-0.parquet")
        total += 4 * n
    return total


def _same(a: pd.DataFrame, b: pd.DataFrame, keys: list[str]) -> float:
    a = a.sort_values(keys).reset_index(drop=True)
    b = b.sort_values(keys).reset_index(drop=True)[list(a.columns)]
    assert len(a) == len(b), (len(a), len(b))
    worst = 0.0
    for col in a.columns:
        if pd.api.types.is_float_dtype(a[col]):
            x, y = a[col].to_numpy(float), b[col].to_numpy(float)
            assert (np.isnan(x) == np.isnan(y)).all(), col
            ok = ~np.isnan(x)
            worst = max(worst, float(np.max(np.abs(x[ok] - y[ok]) / np.maximum(1.0, np.abs(y[ok])), initial=0.0)))
        else:
            assert a[col].astype(str).tolist() == b[col].astype(str).tolist(), col
    return worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--rows-per-day", type=int, default=20_000)
    ap.add_argument("--loop-days", type=int, default=None, help="time the loop on the first N days only")
    ap.add_argument("--out", default="bench/out/backfill")
    args = ap.parse_args()
    out = Path(args.out)
    d0 = dt.date.fromisoformat(START)
    days = [(d0 + dt.timedelta(days=i)).isoformat() for i in range(args.days)]
    t = time.perf_counter()
    n_rows = generate(out / "eval", days, args.rows_per_day)
    print(f"data: {n_rows:,} rows, {len(days)} days x {args.rows_per_day:,} rows ({time.perf_counter() - t:.1f} s)")
    load0 = os.getloadavg()
    spark = build_session(SparkConfig(master="local[2]", shuffle_partitions=4, driver_memory="4g"), app_name="bench")

    def cfg(name: str) -> JobConfig:
        shutil.rmtree(out / name, ignore_errors=True)
        return config_from_dict({"input": {"path": str(out / "eval")}, "output": {"path": str(out / name)},
                                 "rolling": {"window": "week"}})

    def range_job(c: JobConfig) -> tuple[float, float]:
        """One evaluate and one rolling over every day: (evaluate seconds, total seconds)."""
        start = time.perf_counter()
        evaluate(spark, c, f"{days[0]}..{days[-1]}")
        evaluated = time.perf_counter() - start
        run_rolling(spark, c, days)
        return evaluated, time.perf_counter() - start

    warm = cfg("warm")  # one small job first, so neither side pays Spark's first-query warm-up
    evaluate(spark, warm, days[0])
    loop_days = days[: args.loop_days] if args.loop_days else days
    loop_cfg, range_cfg = cfg("loop"), cfg("range")
    t = time.perf_counter()
    for ds in loop_days:
        evaluate(spark, loop_cfg, ds)
        run_rolling(spark, loop_cfg, ds)
    loop_s = time.perf_counter() - t

    evaluate_s, range_s = range_job(range_cfg)
    again_cfg = cfg("range_again")
    again_eval_s, again_s = range_job(again_cfg)
    load1 = os.getloadavg()

    worst = 0.0
    for table, keys in (("metrics", ["ds", "model", "run", "slice_name", "slice_value"]),
                        ("summaries", ["ds", "model", "run", "split", "bin", "label"]),
                        ("rolling", ["ds", "window_spec", "model", "run", "slice_name", "slice_value"])):
        per_day = OutputStore(loop_cfg).read(table, days=loop_days)
        for c in (range_cfg, again_cfg):
            worst = max(worst, _same(per_day, OutputStore(c).read(table, days=loop_days), keys))
    scale = len(days) / len(loop_days)
    loop_total = loop_s * scale
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"Spark {spark.version}, local[2]; load average {load0[0]:.1f} at start, {load1[0]:.1f} at end")
    print(f"(a) per-day loop, evaluate + rolling: {loop_s:8.1f} s for {len(loop_days)} days "
          f"({loop_s / len(loop_days):.2f} s a day)" + (f" -> {loop_total:.1f} s for {len(days)} days, scaled"
                                                       if scale != 1 else ""))
    print(f"(b) one range job, evaluate + rolling: {range_s:7.1f} s (evaluate {evaluate_s:.1f} s, rolling "
          f"{range_s - evaluate_s:.1f} s) for {len(days)} days, {n_rows / evaluate_s / 1e6:.2f} M rows/s in evaluate")
    print(f"(b2) the same range job again:   {again_s:7.1f} s (evaluate {again_eval_s:.1f} s, rolling "
          f"{again_s - again_eval_s:.1f} s), ratio a/b2 = {loop_total / again_s:.1f} (not the target's measure)")
    print(f"same rows from a, b and b2: largest relative difference {worst:.1e} over {len(loop_days)} days")
    print(f"ratio a/b = {loop_total / range_s:.1f}  (target >= 30)")
    spark.stop()
    if worst > 1e-12:
        print(f"FAILED: the range job's rows differ from the per-day jobs' by {worst:.1e} (> 1e-12)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
