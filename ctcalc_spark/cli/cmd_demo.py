"""``ctcalc demo``: generate a CTR-like evaluation table, evaluate every day, print the across-run table."""
from __future__ import annotations

import argparse
import time
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="demo config (default: demo.yaml from `ctcalc where conf`; its relative "
                        "paths put the outputs under ./output/demo)")
    parser.add_argument("--examples-per-day", type=int, default=20_000,
                        help="examples per day (each scored by 3 models x 5 runs)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from ctcalc_spark.cli.common import Progress, config_from_args, session_for
    from ctcalc_spark.errors import ConfigError
    from ctcalc_spark.demo import format_runs_table, runs_table, write_demo_eval
    from ctcalc_spark.core.finalize import metrics_from_summaries
    from ctcalc_spark.jobs.evaluate import evaluate
    from ctcalc_spark.spark.session import check_spark_available
    from ctcalc_spark.tables import OutputStore
    from ctcalc_spark.where import example_config

    if args.config is None:
        args.config = str(example_config("demo.yaml"))
    cfg = config_from_args(args)
    if args.runs < 2:
        raise ConfigError(f"--runs must be >= 2: the demo reports the spread across runs, got {args.runs}.")
    if cfg.input.path is None:
        raise ConfigError("The demo writes its generated table to 'input.path'; set it in the config.")
    check_spark_available(cfg.spark)  # before the generated table is written
    t0 = time.perf_counter()
    step = Progress("ctcalc demo")
    step(f"generating {args.days} days x {args.examples_per_day:,} examples x 3 models x {args.runs} runs")
    df = write_demo_eval(cfg.input.path, n_examples_per_day=args.examples_per_day, n_runs=args.runs,
                         n_days=args.days, seed=args.seed)
    days = sorted(df["ds"].unique())
    print(f"generated {len(df):,} evaluation rows ({df['model'].nunique()} models x {args.runs} runs x "
          f"{len(days)} days) -> {cfg.input.path}")
    step("starting Spark")
    spark = session_for(args, cfg, "ctcalc-demo")
    # the demo's own generated table: a rerun with fewer runs or models replaces the days whole
    res = evaluate(spark, cfg, f"{days[0]}..{days[-1]}", progress=step, replace_runs=True)
    step(f"evaluated: {len(res.metrics)} metrics rows, statuses {res.metrics['status'].value_counts().to_dict()}")
    store = OutputStore(cfg, spark)
    summaries = store.read("summaries", days=days)
    whole = metrics_from_summaries(summaries, cfg.task, keys=["model", "run"], bin_width=cfg.histogram.bin_width)
    daily = store.read("metrics", days=days)
    print(f"\nWhole period {days[0]}..{days[-1]} (daily summaries summed, then finalised), across {args.runs} runs:")
    print(format_runs_table(runs_table(whole)))
    daily["ds"] = daily["ds"].astype(str)
    per_day = [runs_table(g).assign(ds=ds) for ds, g in daily.groupby("ds")]
    red = pd.concat(per_day).groupby("model")["std_reduction_pct"].median()
    print("\nMedian over days of the daily std reduction: "
          + ", ".join(f"{m} {v:.1f}%" for m, v in red.items()))
    print("\nStd reduction = 1 - std(calibrated log loss) / std(log loss) across runs. Paper (Avazu, 60 seeds): "
          "LL std 4.4-7.8e-4 vs CLL std 3.3-5.0e-4, i.e. 15-40% lower; these demo figures are measured on "
          "generated data whose run-to-run bias noise is set by ctcalc_spark/demo.py, not comparable to Avazu.")
    out = Path(cfg.output.path)
    print(f"\noutputs: metrics -> {out / 'metrics'}   summaries -> {out / 'summaries'}   "
          f"(Delta tables, partitioned by ds)\ntotal {time.perf_counter() - t0:.1f} s")
    return 0
