"""Benchmark: `ctcalc rolling` of a year of stored daily summaries, as a user runs it (a new process each time).

    .venv/bin/python bench/bench_rolling.py [--days 365] [--rows-per-day 20000] [--repeat 3] [--no-jvm]

Writes ``days`` days of evaluation rows (bench_backfill.py's generator), evaluates them once in one range job,
then times ``python -m ctcalc_spark.cli rolling --ds FIRST..LAST`` (week windows) ``--repeat`` times, each in a new
process: the wall time includes the interpreter's start, imports, reading the summaries, the finalisation and the
write. ``--no-jvm`` runs those processes with no ``java`` reachable (PATH without it, JAVA_HOME unset): a command
that needed a JVM fails there.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_backfill import START, generate  # noqa: E402

from ctcalc_spark.config import SparkConfig, config_from_dict  # noqa: E402
from ctcalc_spark.jobs.evaluate import evaluate  # noqa: E402
from ctcalc_spark.spark.session import build_session  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--rows-per-day", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-jvm", action="store_true", help="run the rolling processes with no java reachable")
    ap.add_argument("--out", default="bench/out/rolling")
    args = ap.parse_args()
    out = Path(args.out)
    d0 = dt.date.fromisoformat(START)
    days = [(d0 + dt.timedelta(days=i)).isoformat() for i in range(args.days)]
    generate(out / "eval", days, args.rows_per_day)
    shutil.rmtree(out / "out", ignore_errors=True)
    cfg = config_from_dict({"input": {"path": str(out / "eval")}, "output": {"path": str(out / "out")}})
    spark = build_session(SparkConfig(master="local[2]", shuffle_partitions=4, driver_memory="4g"), app_name="bench")
    evaluate(spark, cfg, f"{days[0]}..{days[-1]}")
    spark.stop()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    if args.no_jvm:
        env.pop("JAVA_HOME", None)
        env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not (Path(p) / "java").exists())
    cmd = [sys.executable, "-m", "ctcalc_spark.cli", "rolling", "--ds", f"{days[0]}..{days[-1]}", "--set",
           f"input.path={out / 'eval'}", "--set", f"output.path={out / 'out'}", "--set", "rolling.window=week"]
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        if proc.returncode != 0:
            print(proc.stderr[-2000:])
            return 1
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average "
          f"{os.getloadavg()[0]:.1f}; java reachable: {not args.no_jvm}")
    print(proc.stdout.strip().splitlines()[0])
    print(f"ctcalc rolling of {len(days)} days (week windows), a new process each time: "
          f"{', '.join(f'{x:.2f}' for x in times)} s (median {statistics.median(times):.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
