"""Benchmark: files per ds partition of the evaluation table, and the evaluate job's time on it, before/after.

    .venv/bin/python bench/bench_score_layout.py [--days 365] [--rows-per-day 300] [--models 12] [--repeats 2]

Scores one multi-day evaluation table (synthetic CTR rows) with M model entries into two layouts:

* before: one file per model per day (what ``write_scores`` wrote before the compact writer: one
  ``pyarrow.dataset.write_dataset`` call per model, partitioned by ds);
* after: ``score_table(..., files_per_partition=1)``, every model of a day in one file.

Then times, on each layout, the evaluate job (``jobs.evaluate.evaluate``, ``write=False``) for a few days
and a whole-table native scan (``groupBy(model, run).count()``), alternating layouts, best of ``--repeats``.
The M entries share one small trained LR model (the file layout, not the logits, is measured).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ctcalc_spark.config import SparkConfig, config_from_dict  # noqa: E402
from ctcalc_spark.jobs.evaluate import evaluate  # noqa: E402
from ctcalc_spark.spark.session import build_session  # noqa: E402
from ctcalc_spark.upstream.data import generate_ctr  # noqa: E402
from ctcalc_spark.upstream.models import ModelSpec  # noqa: E402
from ctcalc_spark.upstream.score import score_frame, score_table  # noqa: E402
from ctcalc_spark.upstream.train import train_model  # noqa: E402


def write_one_file_per_model_per_day(models: dict, eval_df, out: Path) -> None:
    """The previous layout: each model's rows written by its own write_dataset call, partitioned by ds."""
    partitioning = pads.partitioning(pa.schema([("ds", pa.string())]), flavor="hive")
    for k, ((name, run), model) in enumerate(models.items()):
        table = pa.table({"model": pa.array([name] * len(eval_df), pa.string()),
                          "run": pa.array([run] * len(eval_df), pa.int32()),
                          "ds": pa.array(eval_df["ds"].astype(str), pa.string()),
                          "example_id": pa.array(eval_df["example_id"], pa.int64()),
                          "label": pa.array(eval_df["label"], pa.int32()),
                          "logit": pa.array(score_frame(model, eval_df, device="cpu"), pa.float64())})
        pads.write_dataset(table, out, format="parquet", partitioning=partitioning,
                           basename_template=f"part-{k:05d}-{{i}}.parquet",
                           existing_data_behavior="overwrite_or_ignore")


def files_per_partition(root: Path) -> list[int]:
    return sorted({sum(1 for f in p.iterdir() if f.suffix == ".parquet") for p in root.iterdir() if p.is_dir()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--rows-per-day", type=int, default=300)
    parser.add_argument("--models", type=int, default=12)
    parser.add_argument("--eval-days", type=int, default=3, help="days the evaluate job is timed on")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default="bench/out/score_layout")
    args = parser.parse_args()

    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    n = args.days * args.rows_per_day
    eval_df = generate_ctr(n, seed=1, n_days=args.days, start_ds="2025-01-01")
    model, _ = train_model(ModelSpec(arch="lr", batch_size=1024), generate_ctr(5_000, seed=0), seed=0, progress=False)
    models = {(f"m{k % 4}", k // 4): model for k in range(args.models)}

    t = time.perf_counter()
    write_one_file_per_model_per_day(models, eval_df, out / "before")
    write_before = time.perf_counter() - t
    report = score_table(models, eval_df, out / "after", files_per_partition=1)
    layouts = {
        "before": {"write_s": write_before, "files": sum(1 for _ in (out / "before").rglob("*.parquet")),
                   "files_per_partition": files_per_partition(out / "before")},
        "after": {"write_s": report.seconds, "files": sum(1 for _ in (out / "after").rglob("*.parquet")),
                  "files_per_partition": files_per_partition(out / "after")},
    }
    print(f"{n:,} eval rows over {args.days} days x {args.models} model entries = {n * args.models:,} scored rows")
    for name, info in layouts.items():
        print(f"  {name:6s}: {info['files']:,} files, files per partition {info['files_per_partition']}, "
              f"written in {info['write_s']:.1f} s")

    spark = build_session(SparkConfig(master="local[2]", shuffle_partitions=4, driver_memory="2g"),
                          app_name="bench-score-layout")
    days = sorted(eval_df["ds"].unique())
    picked = [days[round(i * (len(days) - 1) / max(args.eval_days - 1, 1))] for i in range(args.eval_days)]
    timings: dict[str, dict[str, list[float]]] = {k: {"evaluate": [], "scan": []} for k in layouts}
    for _ in range(args.repeats):
        for name in layouts:
            cfg = config_from_dict({"task": "binary", "input": {"path": str(out / name)},
                                    "output": {"path": str(out / f"metrics_{name}")}})
            t = time.perf_counter()
            for ds in picked:
                evaluate(spark, cfg, ds, write=False)
            timings[name]["evaluate"].append((time.perf_counter() - t) / len(picked))
            t = time.perf_counter()
            spark.read.parquet(str(out / name)).groupBy("model", "run").count().collect()
            timings[name]["scan"].append(time.perf_counter() - t)
    spark.stop()
    for name in layouts:
        layouts[name]["evaluate_s_per_day"] = min(timings[name]["evaluate"])
        layouts[name]["scan_s"] = min(timings[name]["scan"])
        print(f"  {name:6s}: evaluate {layouts[name]['evaluate_s_per_day']:.2f} s per day ({picked}), "
              f"whole-table scan {layouts[name]['scan_s']:.2f} s  (best of {args.repeats})")
    record = {"args": vars(args), "layouts": layouts, "machine": f"{platform.machine()} {os.cpu_count()} cores",
              "load_avg": os.getloadavg()}
    (out / "result.json").write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
