"""Benchmark: writing many small partitions with and without ctcalc's local file system (``ctcalc_spark.localfs``).

    .venv/bin/python bench/bench_local_writes.py [--partitions 365] [--repeats 4]

Each side runs in a fresh process (the JVM's class path is fixed at launch): a session from ``build_session``
with ``spark.fast_local_files`` on or off writes ``partitions`` one-day Parquet partitions (``partitionBy``,
Spark's writer and commit protocol) ``repeats`` times after one warm-up write; prints each time, the medians
and their ratio. Count the ``chmod`` processes Hadoop starts with
``strace -f -e trace=execve -o trace.txt <this command>`` and ``grep -c '"chmod"' trace.txt``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, shutil, sys, tempfile, time
sys.path.insert(0, {root!r})
import numpy as np, pandas as pd
from ctcalc_spark.config import SparkConfig
from ctcalc_spark.spark.session import build_session
spark = build_session(SparkConfig(master="local[2]", shuffle_partitions=4, fast_local_files={fast}))
n, rows = {partitions}, 60
frame = pd.DataFrame({{"ds": np.repeat([f"d{{i:04d}}" for i in range(n)], rows), "x": np.random.rand(n * rows)}})
df = spark.createDataFrame(frame).cache()
df.count()
out = tempfile.mkdtemp()
times = []
for i in range({repeats} + 1):
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    df.repartition(12, "ds").write.partitionBy("ds").mode("overwrite").parquet(out)
    times.append(time.perf_counter() - t)
shutil.rmtree(out, ignore_errors=True)
print("RESULT " + json.dumps({{"impl": spark.conf.get("spark.hadoop.fs.file.impl", None), "times": times[1:]}}))
"""


def run(fast: bool, partitions: int, repeats: int) -> dict:
    code = CHILD.format(root=str(ROOT), fast=fast, partitions=partitions, repeats=repeats)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=365)
    ap.add_argument("--repeats", type=int, default=4)
    args = ap.parse_args()
    load0 = os.getloadavg()
    on, off = run(True, args.partitions, args.repeats), run(False, args.partitions, args.repeats)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, local[2]; "
          f"load average {load0[0]:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    for name, r in (("Hadoop's local file system", off), ("ctcalc_spark.localfs", on)):
        runs = ", ".join(f"{t:.2f}" for t in r["times"])
        print(f"{name:28s} ({r['impl'] or 'default'}): median {statistics.median(r['times']):.2f} s for "
              f"{args.partitions} partitions (runs: {runs})")
    print(f"ratio = {statistics.median(off['times']) / statistics.median(on['times']):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
