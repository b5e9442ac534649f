"""Benchmark: how the single-day evaluate job's cost grows with rows (time and driver memory).

    .venv/bin/python bench/bench_scale.py [--sizes 5000000,20000000,80000000]

For each size, a fresh process (so peaks are its own) starts Spark (local[2], driver memory 4g), runs the
evaluate job once to warm up and once timed, writes included, and reports the time, rows/s, the peak resident
memory of the Python driver and of the JVM (which holds the driver and, in local mode, the executors), and
the number of summary rows the driver finalised. Linear time and flat memory are what one scan with
mergeable summaries promises: the driver holds summaries, never rows.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DS = "2026-11-21"


def _jvm_pid() -> int | None:
    me = str(os.getpid())
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if open(f"/proc/{p}/stat").read().split()[3] == me and "java" in open(f"/proc/{p}/cmdline").read():
                    return int(p)
            except OSError:
                continue
    return None


def _hwm_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def child(data: str, out: str) -> None:
    """One size: warm-up run, timed run; prints a JSON line."""
    from ctcalc_spark.config import SparkConfig, config_from_dict
    from ctcalc_spark.jobs.evaluate import evaluate
    from ctcalc_spark.spark.session import build_session

    spark = build_session(SparkConfig(master="local[2]", shuffle_partitions=4, driver_memory="4g"), app_name="scale")
    cfg = config_from_dict({"input": {"path": data}, "output": {"path": out}})
    evaluate(spark, cfg, DS)
    t = time.perf_counter()
    res = evaluate(spark, cfg, DS)
    seconds = time.perf_counter() - t
    pid = _jvm_pid()
    print(json.dumps({"seconds": seconds, "rows": int(res.metrics.loc[res.metrics["slice_name"] == "__all__",
                                                                        "n_rows"].sum()),
                      "summary_rows": len(res.summaries),
                      "python_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "jvm_peak_mib": _hwm_kib(pid) / 1024 if pid else None}))
    spark.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="5000000,20000000,80000000")
    ap.add_argument("--out", default="bench/out/scale")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0
    from bench_evaluate import generate  # noqa: PLC0415 - the same generator as the ratio benchmark

    out = Path(args.out)
    load0 = os.getloadavg()
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        data = out / f"eval_{size}"
        if not (data / f"ds={DS}").exists():
            t = time.perf_counter()
            generate(data, size)
            print(f"generated {size:,} rows in {time.perf_counter() - t:.0f} s", flush=True)
        proc = subprocess.run([sys.executable, __file__, "--child", str(data), str(out / f"result_{size}")],
                              capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
            return 1
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append((size, r))
        print(f"{size:>12,} rows: {r['seconds']:7.1f} s  {r['rows'] / r['seconds'] / 1e6:5.2f} M rows/s  "
              f"Python peak {r['python_peak_mib']:6.0f} MiB  JVM peak {_mib(r['jvm_peak_mib'])}  "
              f"summary rows {r['summary_rows']:,}", flush=True)
    load1 = os.getloadavg()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, local[2], "
          f"driver memory 4g; load average {load0[0]:.1f} at start, {load1[0]:.1f} at end")
    (s0, r0), (s1, r1) = rows[0], rows[-1]
    print(f"{s1 / s0:.0f}x the rows: {r1['seconds'] / r0['seconds']:.1f}x the time, Python peak "
          f"{r1['python_peak_mib'] / r0['python_peak_mib']:.2f}x, JVM peak "
          + (f"{r1['jvm_peak_mib'] / r0['jvm_peak_mib']:.2f}x" if r0["jvm_peak_mib"] and r1["jvm_peak_mib"]
             else "not measured (JVM process not found)"))
    return 0


def _mib(value: float | None) -> str:
    return "   n/a (JVM process not found)" if value is None else f"{value:6.0f} MiB"


if __name__ == "__main__":
    sys.exit(main())
