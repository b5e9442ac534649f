"""Benchmark: `ctcalc rolling` and `ctcalc report` of stored daily summaries, as a user runs them (a new process each).

    .venv/bin/python bench/bench_rolling.py --real-size [--model-runs 60] [--days 761] [--repeat 2]
    .venv/bin/python bench/bench_rolling.py [--days 365] [--rows-per-day 20000] [--repeat 3] [--no-jvm]

``--real-size``: the summaries of ``model-runs`` (model, run) pairs over ``days`` days, each day's val-bias and
val-remain histograms of 1,500 rows of logits (about 100 summary rows per model-run and day), written straight to the
summaries table once and cached under the temp folder (``--cache``); then ``ctcalc rolling`` (week windows) of every
day and ``ctcalc report`` (week windows) of the whole period, each in a new process, with their peak memory (the
child's maximum resident set, ``getrusage(RUSAGE_CHILDREN)``), CPU and wall time.

Without it:

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


def write_summaries(out: Path, model_runs: int, days: list[str], rows: int) -> None:
    """The summaries table of ``model_runs`` (model, run) pairs x ``days``: per day one write, every pair's two
    splits binned from ``rows`` logits (10 % val-bias), as the evaluate scan writes them."""
    import numpy as np
    import pandas as pd

    from ctcalc_spark.core.state import BINARY
    from ctcalc_spark.tables import OutputStore

    cfg = config_from_dict({"input": {"path": str(out / "eval")}, "output": {"path": str(out / "out")}})
    store = OutputStore(cfg)
    types = BINARY.arrow_schema(["ds", "model", "run"])
    rng = np.random.default_rng(0)
    h = cfg.histogram.bin_width
    models = [f"m{i // 10}" for i in range(model_runs)]
    runs = [str(i % 10) for i in range(model_runs)]
    for chunk in range(0, len(days), 30):
        frames = []
        for day in days[chunk:chunk + 30]:
            n = model_runs * rows
            group = np.repeat(np.arange(model_runs), rows)
            z = rng.normal(-2.0 + 0.05 * (group % 10), 0.35, n)
            y = (rng.random(n) < 1 / (1 + np.exp(-z - 0.1))).astype(np.int64)
            split = (rng.random(n) < 0.1).astype(np.int64)
            k = np.floor(z / h).astype(np.int64)
            d = z - (k + 0.5) * h
            margin = (1 - 2 * y) * z
            key = pd.DataFrame({"g": group, "s": split, "bin": k, "label": y, "count": 1, "clipped": 0,
                                "weight": 1.0, "m1": d, "m2": d * d, "wmiss": 1 / (1 + np.exp(-margin)),
                                "wloss": np.logaddexp(0.0, margin)})
            cells = key.groupby(["g", "s", "bin", "label"], as_index=False).sum()
            frames.append(pd.DataFrame({
                "ds": day, "model": np.array(models)[cells["g"]], "run": np.array(runs)[cells["g"]],
                "split": np.where(cells["s"] == 1, "bias", "remain"), "bin": cells["bin"], "label": cells["label"],
                **{c: cells[c] for c in BINARY.names}, "bin_width": h}))
        store.transaction("evaluate").write("summaries", pd.concat(frames, ignore_index=True), types)


def _child(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak MB) of one child process: CPU and peak from getrusage(RUSAGE_CHILDREN), taken in a
    process of its own so that each figure is that one child's."""
    probe = ("import resource, subprocess, sys, time, json; t = time.perf_counter(); "
             "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); w = time.perf_counter() - t; "
             "r = resource.getrusage(resource.RUSAGE_CHILDREN); "
             "sys.stderr.write(p.stderr[-3000:] if p.returncode else ''); "
             "print(json.dumps([p.returncode, w, r.ru_utime + r.ru_stime, r.ru_maxrss / 1024]))")
    proc = subprocess.run([sys.executable, "-c", probe, *cmd], env=env, capture_output=True, text=True, cwd=cwd)
    import json

    rc, wall, cpu, peak = json.loads(proc.stdout.strip().splitlines()[-1])
    if rc != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} failed ({rc}): {proc.stderr}")
    return wall, cpu, peak


def real_size(args: argparse.Namespace) -> int:
    import tempfile

    d0 = dt.date.fromisoformat(START)
    days = [(d0 + dt.timedelta(days=i)).isoformat() for i in range(args.days)]
    out = Path(args.cache or Path(tempfile.gettempdir()) / f"ctcalc_bench_rolling_{args.model_runs}x{args.days}")
    if not (out / "out" / "summaries" / "_delta_log").exists():
        shutil.rmtree(out, ignore_errors=True)
        t = time.perf_counter()
        write_summaries(out, args.model_runs, days, 1500)
        print(f"wrote the summaries in {time.perf_counter() - t:.0f} s")
    shutil.rmtree(out / "out" / "rolling", ignore_errors=True)
    size = sum(f.stat().st_size for f in (out / "out" / "summaries").rglob("*.parquet"))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"summaries: {args.model_runs} model-runs x {len(days)} days, {size / 2**20:.1f} MiB on disk ({out})")
    for code in [REPO, *(Path(p) for p in args.compare)]:
        _measure(out, days, code, args.repeat)
    return 0


def _measure(out: Path, days: list[str], code: Path, repeat: int) -> None:
    """Rolling and report of the cached summaries with the package of checkout ``code``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(code), os.environ.get("PYTHONPATH")) if p)}
    common = ["--set", f"input.path={out / 'eval'}", "--set", f"output.path={out / 'out'}"]
    span = f"{days[0]}..{days[-1]}"
    rolling = [sys.executable, "-m", "ctcalc_spark.cli", "rolling", "--ds", span, *common, "--set",
               "rolling.window=week"]
    report = [sys.executable, "-m", "ctcalc_spark.cli", "report", "--ds", span, *common, "--window", "week",
              "--out", str(out / "reports")]
    for name, cmd in (("rolling", rolling), ("report", report)):
        for _ in range(repeat):
            shutil.rmtree(out / "out" / "rolling", ignore_errors=True)
            load = os.getloadavg()[0]
            wall, cpu, peak = _child(cmd, env, code)
            print(f"{code}: ctcalc {name}: peak {peak:,.0f} MB, CPU {cpu:.1f} s, wall {wall:.1f} s "
                  f"(load before {load:.1f})", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real-size", action="store_true", help="rolling and report of summaries written directly")
    ap.add_argument("--model-runs", type=int, default=60)
    ap.add_argument("--compare", nargs="*", default=[], metavar="CHECKOUT",
                    help="--real-size: also measure the package of these checkouts (e.g. the main branch's)")
    ap.add_argument("--cache", default=None, help="folder of the --real-size summaries (kept between runs)")
    ap.add_argument("--days", type=int, default=None, help="days (default 761 with --real-size, else 365)")
    ap.add_argument("--rows-per-day", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=None, help="runs of each command (default 2 / 3)")
    ap.add_argument("--no-jvm", action="store_true", help="run the rolling processes with no java reachable")
    ap.add_argument("--out", default="bench/out/rolling")
    args = ap.parse_args()
    if args.real_size:
        args.days, args.repeat = args.days or 761, args.repeat or 2
        return real_size(args)
    args.days, args.repeat = args.days or 365, args.repeat or 3
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
