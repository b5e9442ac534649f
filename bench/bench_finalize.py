"""Benchmark: finalising many binary groups at once vs one group at a time, side by side in one process.

    .venv/bin/python bench/bench_finalize.py [--days 365] [--slice-values 5] [--rows 1000] [--repeats 3]

Builds the summary rows a range job collects (days x 2 models x 2 runs x slice values, ``--rows`` evaluation
rows each, val-bias fraction 0.1) and times, on the same groups (every slice merged, and each slice value):

(a) one group at a time: a BinarySummary per group and split, then :func:`finalize_binary` per group (the
    one-group case of (b));
(b) :func:`finalize_binary_groups`: every group's bins as rows of padded arrays, one lockstep solve;

prints both times, the ratio a/b and the largest relative difference of any metric between them (the bias
relative to 1 + |c|, the calibration gain relative to the loss it is a difference of). No Spark.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ctcalc_spark.core._math import sigmoid  # noqa: E402
from ctcalc_spark.core.batch import finalize_binary_groups  # noqa: E402
from ctcalc_spark.core.finalize import groups  # noqa: E402
from ctcalc_spark.core.state import BINARY  # noqa: E402
from ctcalc_spark.core.summary import BinarySummary, finalize_binary  # noqa: E402

H = 0.05
NAMES = [*BINARY.cell_names, *BINARY.names]


def summary_rows(days: int, slice_values: int, rows: int, seed: int = 0) -> pd.DataFrame:
    """Summary-table rows (split, bin, label, counts, moments) per (ds, model, run, country)."""
    rng = np.random.default_rng(seed)
    frames = []
    for d in range(days):
        for model in ("a", "b"):
            for run in ("0", "1"):
                for s in range(slice_values):
                    z = rng.normal(-2.0 + 0.1 * s, 1.2, rows)
                    y = (rng.random(rows) < sigmoid(z + 0.2)).astype(float)
                    isb = rng.random(rows) < 0.1
                    for split, m in (("bias", isb), ("remain", ~isb)):
                        cols = BinarySummary.from_logits(y[m], z[m], bin_width=H).to_columns()
                        frame = pd.DataFrame(cols)
                        frame["split"], frame["ds"], frame["model"], frame["run"] = split, f"d{d:03d}", model, run
                        frame["country"] = f"c{s}"
                        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def one_at_a_time(columns: dict, idxs: list, is_bias: np.ndarray) -> list:
    def summary(rows: np.ndarray) -> BinarySummary:
        if rows.size == 0:
            return BinarySummary.empty(H)
        return BinarySummary.from_columns(H, columns["bin"][rows], columns["label"][rows],
                                          **{n: columns[n][rows] for n in BINARY.names})
    return [finalize_binary(summary(idx[is_bias[idx]]), summary(idx[~is_bias[idx]])) for idx in idxs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--slice-values", type=int, default=5)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    t = time.perf_counter()
    frame = summary_rows(args.days, args.slice_values, args.rows)
    columns = {n: frame[n].to_numpy() for n in NAMES}
    is_bias = (frame["split"] == "bias").to_numpy()
    idxs = [idx for by in (["ds", "model", "run"], ["ds", "model", "run", "country"])
            for _, idx in groups(frame, by)]
    print(f"data: {len(frame):,} summary rows, {len(idxs):,} groups ({time.perf_counter() - t:.1f} s)")
    load0 = os.getloadavg()
    times: dict[str, list[float]] = {"a": [], "b": []}
    for _ in range(args.repeats):  # interleaved, so that background load falls on both
        t = time.perf_counter()
        ref = one_at_a_time(columns, idxs, is_bias)
        times["a"].append(time.perf_counter() - t)
        t = time.perf_counter()
        got = finalize_binary_groups(columns, idxs, is_bias, bin_width=H, max_abs_logit=50.0)
        times["b"].append(time.perf_counter() - t)
    load1 = os.getloadavg()
    worst, where = 0.0, None
    for r, g in zip(ref, got):
        if r["status"] != g["status"]:
            print(f"FAILED: status {g['status']!r} where one group at a time gives {r['status']!r}")
            return 1
        for key, value in r.items():
            if isinstance(value, float):
                # the bias to the Newton step, the gain (a difference of two losses) to the losses' scale
                scale = {"bias": 1.0 + abs(value), "calibration_gain": abs(r["log_loss_remain"])}.get(key, abs(value))
                rel = abs(g[key] - value) / max(scale, 1e-300)
                if rel > worst:
                    worst, where = rel, (key, value, g[key])
    a, b = statistics.median(times["a"]), statistics.median(times["b"])
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy "
          f"{np.__version__}; load average {load0[0]:.1f} at start, {load1[0]:.1f} at end")
    print(f"(a) one group at a time: {a:6.2f} s  ({a / len(idxs) * 1e3:.3f} ms a group; runs "
          f"{', '.join(f'{x:.2f}' for x in times['a'])})")
    print(f"(b) padded, all at once: {b:6.2f} s  ({b / len(idxs) * 1e3:.3f} ms a group; runs "
          f"{', '.join(f'{x:.2f}' for x in times['b'])})")
    print(f"ratio a/b = {a / b:.1f}; largest relative difference of any metric {worst:.1e} {where}")
    if worst > 1e-12:
        print(f"FAILED: the two paths differ by {worst:.1e} (> 1e-12)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
