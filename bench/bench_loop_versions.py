"""Benchmark: the per-day loop (evaluate + rolling of one day, day after day) of two checkouts, interleaved.

    .venv/bin/python bench/bench_loop_versions.py OLD_CHECKOUT NEW_CHECKOUT [--days 35] [--rounds 2]

Runs, for each round, OLD then NEW, each in a fresh process with that checkout first on ``sys.path``: 5 warm-up days,
then ``--days`` days of ``evaluate`` + ``rolling`` (week windows) on bench_backfill.py's data
(``bench/out/backfill/eval``; run that script first), into a fresh output. Prints seconds a day and the load average
of each run: how a change of the output layer moves the per-day cost a daily scheduler pays.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
from pathlib import Path

WORKER = """
import datetime as dt, os, shutil, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
from ctcalc_spark.config import config_from_dict, SparkConfig
from ctcalc_spark.spark.session import build_session
from ctcalc_spark.jobs.evaluate import evaluate
from ctcalc_spark.jobs.rolling import run_rolling
spark = build_session(SparkConfig(master="local[2]", shuffle_partitions=4, driver_memory="4g"), app_name="loop")
out = tempfile.mkdtemp()
cfg = config_from_dict({"input": {"path": sys.argv[2]}, "output": {"path": out}, "rolling": {"window": "week"}})
d0 = dt.date(2025, 2, 1)
days = [(d0 + dt.timedelta(days=i)).isoformat() for i in range(5 + int(sys.argv[3]))]
for d in days[:5]:
    evaluate(spark, cfg, d); run_rolling(spark, cfg, d)
t = time.perf_counter()
for d in days[5:]:
    evaluate(spark, cfg, d); run_rolling(spark, cfg, d)
print(f"{(time.perf_counter() - t) / (len(days) - 5):.3f} s a day over {len(days) - 5} days, load {os.getloadavg()[0]:.1f}")
spark.stop(); shutil.rmtree(out, ignore_errors=True)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--days", type=int, default=35)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent / "out" / "backfill" / "eval"))
    args = ap.parse_args()
    for _ in range(args.rounds):
        for name, repo in (("old", args.old), ("new", args.new)):
            env = {**os.environ, "PYTHONPATH": str(Path(repo).resolve())}
            done = subprocess.run([sys.executable, "-c", textwrap.dedent(WORKER), str(Path(repo).resolve()), args.data,
                                   str(args.days)], env=env, capture_output=True, text=True, cwd="/")
            line = done.stdout.strip().splitlines()[-1] if done.returncode == 0 else done.stderr[-500:]
            print(f"{name} ({repo}): {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
