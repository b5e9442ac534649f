"""Fault injection: ``kill -9`` of a whole evaluate process group at random moments while it reruns a day.

A reader polls the output tables the whole time, as any Spark or pyarrow reader of the table roots would.
It must always see exactly the one day's partition under its right name, readable and non-empty, and the
metrics and summaries of that day either come from the same run (the latest committed one), or the storage
layer's check says which run did not finish. After the last kill, one rerun to the end leaves nothing behind.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pyarrow.dataset as pads
import pytest

from ctcalc_spark.spark.storage import STAGING_PREFIX

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
DS = "2026-11-15"

WORKER = """
import sys, time
from ctcalc_spark.config import config_from_dict, SparkConfig
from ctcalc_spark.spark.session import build_session
from ctcalc_spark.jobs.evaluate import evaluate
cfg = config_from_dict({"input": {"path": sys.argv[1]}, "output": {"path": sys.argv[2]},
                        "split": {"bias_fraction": 0.1, "salt": "k"}})
spark = build_session(SparkConfig(master="local[2]", shuffle_partitions=2))
print("ready", flush=True)
while True:
    t = time.perf_counter()
    evaluate(spark, cfg, sys.argv[3])
    print(f"run {time.perf_counter() - t:.3f}", flush=True)
    if len(sys.argv) > 4:
        break
"""


class Reader(threading.Thread):
    """Polls both tables like an outside reader; records every moment the day was missing or misnamed."""

    def __init__(self, out: Path) -> None:
        super().__init__(daemon=True)
        self.out, self.stop, self.reads, self.problems = out, threading.Event(), 0, []

    def run(self) -> None:
        while not self.stop.is_set():
            for table in ("metrics", "summaries"):
                root = self.out / table
                visible = sorted(n for n in os.listdir(root) if not n.startswith((".", "_")))
                if visible != [f"ds={DS}"]:
                    self.problems.append(f"{table}: visible entries {visible}")
                    continue
                try:
                    n = pads.dataset(str(root), format="parquet", partitioning="hive").count_rows()
                except (OSError, ValueError) as e:  # a file vanished between listing and reading: read again
                    if "No such file" not in str(e) and "not found" not in str(e).lower():
                        self.problems.append(f"{table}: unreadable: {e}")
                    continue
                if n == 0:
                    self.problems.append(f"{table}: no rows")
            self.reads += 1
            time.sleep(0.002)


def test_kill_9_at_random_moments_never_shows_a_missing_partition(tmp_path):
    from ctcalc_spark.config import config_from_dict
    from ctcalc_spark.demo import write_demo_eval
    from ctcalc_spark.tables import OutputStore

    data, out = tmp_path / "eval", tmp_path / "out"
    write_demo_eval(data, n_examples_per_day=1500, n_runs=2, n_days=1, seed=2, start_ds=DS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    cmd = [sys.executable, "-c", textwrap.dedent(WORKER), str(data), str(out), DS]
    first = subprocess.run(cmd + ["once"], env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    run_s = float([ln for ln in first.stdout.splitlines() if ln.startswith("run ")][-1].split()[1])
    store = OutputStore(config_from_dict({"input": {"path": str(data)}, "output": {"path": str(out)}}))

    reader = Reader(out)
    reader.start()
    rng = random.Random(9)
    kills = []
    try:
        for _ in range(4):
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                    start_new_session=True)
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            delay = rng.uniform(0.0, 2.0 * run_s)  # anywhere in the first or second rerun: scan, writes, commit
            time.sleep(delay)
            os.killpg(proc.pid, signal.SIGKILL)  # the Python driver and its JVM, as a lost node would
            proc.wait()
            kills.append(round(delay, 2))
            # whatever survived is consistent, or the storage layer says which run did not finish
            frames = {t: store.read(t, days=[DS], with_run_id=True) for t in ("metrics", "summaries")}
            ids = {t: set(f["run_id"]) for t, f in frames.items()}
            assert all(len(v) == 1 for v in ids.values()), ids
            if ids["metrics"] != ids["summaries"]:
                assert store.check_days([DS]), (ids, "a disagreement the check did not report")
    finally:
        reader.stop.set()
        reader.join()
    assert reader.reads > 100 and reader.problems == [], (kills, reader.problems[:5])

    last = subprocess.run(cmd + ["once"], env=env, capture_output=True, text=True, timeout=600)
    assert last.returncode == 0, last.stderr[-3000:]
    assert store.check_days([DS]) == []
    left = [str(p.relative_to(out)) for p in out.rglob("*")
            if p.name.startswith((STAGING_PREFIX, ".spark-staging", "_temporary")) or p.name.endswith(".tmp")]
    assert left == [] and list((out / "_runs").glob("*.json")) == [], left
